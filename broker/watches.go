package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
)

// DefaultMaxWatches is the per-server watch limit (docs/protocol.md section 6).
const DefaultMaxWatches = 64

// WithWatchHub enables files/watch and files/unwatch, backed by hub (one per
// process), with at most maxWatches watches per session (0: the default).
func WithWatchHub(hub *watch.Hub, maxWatches int) Option {
	return func(s *Session) {
		s.hub = hub
		s.watches.max = DefaultMaxWatches
		if maxWatches > 0 {
			s.watches.max = maxWatches
		}
	}
}

// watchTable holds a session's watches by id.
type watchTable struct {
	max     int
	mu      sync.Mutex
	subs    map[string]*watch.Subscription
	targets map[string]executor.Target // what each watch watches, for revocation
	closed  bool
}

func (wt *watchTable) count() int {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return len(wt.subs)
}

// closeAll ends every watch; later files/watch requests are refused.
func (wt *watchTable) closeAll() {
	wt.mu.Lock()
	subs := wt.subs
	wt.subs, wt.targets, wt.closed = nil, nil, true
	wt.mu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
}

type watchParams struct {
	Path      string   `json:"path"`
	Recursive bool     `json:"recursive"`
	Events    []string `json:"events"`
}

// changedParams is notifications/files/changed.
type changedParams struct {
	WatchID   string `json:"watchId"`
	Path      string `json:"path"`
	Event     string `json:"event"`
	Timestamp string `json:"timestamp"`
}

func (s *Session) filesWatch(ctx context.Context, params json.RawMessage) (any, error) {
	var p watchParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, p.Path, true)
	if err != nil {
		return nil, err
	}
	// Decided before existence is told, so that a denied path's existence
	// does not leak.
	if err := s.decide(ctx, Request{Method: "files/watch", Operation: OpWatch, Path: t, Requested: p.Path, Params: params}); err != nil {
		return nil, err
	}
	if !t.Exists {
		return nil, errcode.New(errcode.FileNotFound, "the path to watch does not exist")
	}
	id, err := newWatchID()
	if err != nil {
		return nil, err
	}
	kinds := make([]watch.Kind, 0, len(p.Events))
	for _, e := range p.Events {
		kinds = append(kinds, watch.Kind(e))
	}

	s.watches.mu.Lock()
	if s.watches.closed {
		s.watches.mu.Unlock()
		return nil, errcode.New(errcode.IOError, "the session is ending")
	}
	if len(s.watches.subs) >= s.watches.max {
		s.watches.mu.Unlock()
		return nil, errcode.New(errcode.QuotaExceeded, fmt.Sprintf("the server already holds %d watches, the limit", s.watches.max))
	}
	if s.watches.subs == nil {
		s.watches.subs = make(map[string]*watch.Subscription)
	}
	// The slot is taken before subscribing, so that concurrent requests
	// cannot pass the limit together.
	s.watches.subs[id] = nil
	s.watches.mu.Unlock()

	sub, err := s.hub.Subscribe(t.Path, p.Recursive, kinds, func(ev watch.Event) { s.deliverChange(id, ev) })
	s.watches.mu.Lock()
	defer s.watches.mu.Unlock()
	if err != nil || s.watches.closed {
		delete(s.watches.subs, id)
		if sub != nil {
			sub.Close()
		}
		if err == nil {
			err = errcode.New(errcode.IOError, "the session is ending")
		}
		return nil, err
	}
	s.watches.subs[id] = sub
	if s.watches.targets == nil {
		s.watches.targets = make(map[string]executor.Target)
	}
	s.watches.targets[id] = t
	return map[string]string{"watchId": id}, nil
}

// deliverChange decides on one event and sends it: no event names a path the
// server could not list. As in a listing (Session.reportable), an event is
// dropped when an operator's block covers its path and no grant does, when
// its path cannot be named back, or lies inside a root nested
// in the watched one (its changes are reported only to watches of that root),
// and an event on a nested root's own directory is sent only when the server
// could list that root itself.
func (s *Session) deliverChange(id string, ev watch.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), s.limits.OperationTimeout)
	defer cancel()
	entry := executor.Entry{Path: ev.Path, Name: path.Base(ev.Path.MountPath())}
	req := Request{Method: "files/watch", Operation: OpWatch, Path: executor.Target{Path: ev.Path},
		Requested: ev.Path.MountPath()}
	if len(s.reportable(ctx, req, []executor.Entry{entry})) == 0 {
		s.log.Debug("a change event was left out: its path is blocked, in a nested root, or cannot be named back", "watchId", id)
		return
	}
	vis := s.visible(ctx, req, []executor.Entry{entry})
	if !vis[ev.Path.MountPath()] {
		s.log.Debug("a change event was withheld by the policy", "watchId", id)
		return
	}
	err := s.conn.Notify("notifications/files/changed", changedParams{
		WatchID: id, Path: ev.Path.MountPath(), Event: string(ev.Kind), Timestamp: ev.Time.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		s.log.Debug("cannot send a change event", "error", err)
	}
}

type unwatchParams struct {
	WatchID string `json:"watchId"`
}

func (s *Session) filesUnwatch(_ context.Context, params json.RawMessage) (any, error) {
	var p unwatchParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	s.watches.mu.Lock()
	sub, ok := s.watches.subs[p.WatchID]
	if ok && sub != nil {
		delete(s.watches.subs, p.WatchID)
		delete(s.watches.targets, p.WatchID)
	}
	s.watches.mu.Unlock()
	if !ok || sub == nil {
		return nil, errcode.New(errcode.InvalidParams, "no watch has this id").
			With("errors", []map[string]string{{"pointer": "/watchId", "message": "no watch has this id"}})
	}
	sub.Close()
	return struct{}{}, nil
}

func newWatchID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("watch id: %w", err)
	}
	return "w-" + hex.EncodeToString(b[:]), nil
}
