// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// Protocol 2026-07-28 replaces resources/subscribe with subscriptions/listen
// (basic/patterns/subscriptions): one long-lived request whose params name
// the resources to watch (notifications.resourceSubscriptions), answered by
// notifications/subscriptions/acknowledged and then one
// notifications/resources/updated per change, each tagged with the
// request's id in _meta (io.modelcontextprotocol/subscriptionId), until the
// host cancels the request (notifications/cancelled on stdio, closing the
// POST's stream over HTTP) or the server ends it with a complete result.
// Each resource is watched as resources/subscribe watches it: a corridor
// watch of the host, decided, consented and recorded; the watches end with
// the listen.

// MethodSubscriptionsListen is the request of protocol 2026-07-28 that
// opens a stream of notifications.
const MethodSubscriptionsListen = "subscriptions/listen"

// NotificationSubscriptionsAcknowledged is the first message of a listen's
// stream: what the server agreed to send on it.
const NotificationSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"

// The bounds of subscriptions/listen (docs/serve.md, "Subscriptions on
// 2026-07-28"). Every watch also counts against the session's watch limit
// (--max-watches), which it shares with resources/subscribe.
const (
	// MaxListenResources is the most resources one listen may name.
	MaxListenResources = 64
	// MaxListens is the most listens a session holds open at once (on
	// stdio the session is the process; over HTTP, one session serves
	// every request of the revision). Each open listen is a request in
	// flight, so it also holds one of the connection's --max-in-flight
	// slots.
	MaxListens = 8
)

// listens are a session's open subscriptions/listen requests.
type listens struct {
	mu   sync.Mutex
	open map[*listen]bool
	// reserved counts the open listens and those being set up.
	reserved int
}

// reserve takes a place for a new listen; false at MaxListens.
func (ls *listens) reserve() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.reserved >= MaxListens {
		return false
	}
	ls.reserved++
	return true
}

// add makes l one of the open listens (its place reserved), whose watches
// the corridor's ends are marked in.
func (ls *listens) add(l *listen) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.open == nil {
		ls.open = make(map[*listen]bool)
	}
	ls.open[l] = true
}

// release gives back l's place (nil: a listen that never opened).
func (ls *listens) release(l *listen) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.open, l)
	ls.reserved--
}

// watchesEnded takes the ids of watches the corridor ended (a revocation,
// the roots served): the listens holding them stop announcing their
// resources, and a listen left with none ends.
func (ls *listens) watchesEnded(ids []string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.open {
		l.watchesEnded(ids)
	}
}

// poke wakes every open listen with no change to announce, so that it ends
// the watches outside the roots served now (a config reload changed them)
// and, left with none, ends; it never blocks.
func (ls *listens) poke() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.open {
		l.poke()
	}
}

// listen is one open subscriptions/listen request.
type listen struct {
	// id is the request's id: the subscription's id in every message of
	// its stream.
	id jsonrpc.ID

	// changeQueue holds the changes not yet announced and wakes the
	// listen's loop.
	changeQueue

	mu sync.Mutex
	// watches holds each resource's watch id, by the uri as the host sent
	// it; "" once the corridor ended the watch.
	watches map[string]string
	// settled: every resource is watched (the listen may be over only
	// then).
	settled bool

	over     chan struct{} // closed when every watch has ended
	overOnce sync.Once
}

func newListen(id jsonrpc.ID) *listen {
	return &listen{id: id, changeQueue: changeQueue{wake: make(chan struct{}, 1)}, watches: map[string]string{},
		over: make(chan struct{})}
}

// watchesEnded marks the resources whose watches (by id) the corridor
// ended; once every resource is watched and none is left, the listen is
// over.
func (l *listen) watchesEnded(ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := 0
	for uri, id := range l.watches {
		if id != "" && slices.Contains(ids, id) {
			l.watches[uri] = ""
		}
		if l.watches[uri] != "" {
			live++
		}
	}
	if l.settled && live == 0 && len(l.watches) > 0 {
		l.overOnce.Do(func() { close(l.over) })
	}
}

// settle says every resource is watched: from now on, none left ends the
// listen (and none left now does).
func (l *listen) settle() {
	l.mu.Lock()
	l.settled = true
	l.mu.Unlock()
	l.watchesEnded(nil)
}

// liveChanges takes the pending changes of resources still watched.
func (l *listen) liveChanges() []string {
	pending := l.take()
	l.mu.Lock()
	defer l.mu.Unlock()
	live := pending[:0]
	for _, uri := range pending {
		if l.watches[uri] != "" {
			live = append(live, uri)
		}
	}
	return live
}

// watched returns those of uris whose watch is still held, in order.
func (l *listen) watched(uris []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var live []string
	for _, uri := range uris {
		if l.watches[uri] != "" {
			live = append(live, uri)
		}
	}
	return live
}

// watchIDs are the ids of the watches still held.
func (l *listen) watchIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, id := range l.watches {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// listenParams are the params of subscriptions/listen the session reads.
type listenParams struct {
	Notifications *struct {
		ToolsListChanged      *bool    `json:"toolsListChanged"`
		PromptsListChanged    *bool    `json:"promptsListChanged"`
		ResourcesListChanged  *bool    `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// decodeListenParams reads the params of subscriptions/listen: an object
// whose notifications (required) is a filter object, with
// resourceSubscriptions an array of non-empty strings. It returns the uris
// named, each once, in order: past MaxListenResources distinct ones, only
// the first MaxListenResources+1 (the caller refuses the listen), so that
// the cost stays linear in the array however long. A failure is
// INVALID_PARAMS with data.errors.
func decodeListenParams(params json.RawMessage) ([]string, error) {
	var p listenParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParam("/notifications", "notifications must be an object of booleans and an array of resource uris")
	}
	if p.Notifications == nil {
		return nil, invalidParam("/notifications", "notifications is required, an object")
	}
	var uris []string
	for i, uri := range p.Notifications.ResourceSubscriptions {
		if uri == "" {
			return nil, invalidParam(fmt.Sprintf("/notifications/resourceSubscriptions/%d", i), "a resource uri must be a non-empty string")
		}
		if len(uris) <= MaxListenResources && !slices.Contains(uris, uri) {
			uris = append(uris, uri)
		}
	}
	return uris, nil
}

// modernListen answers subscriptions/listen of protocol 2026-07-28. Of the
// notifications the filter may ask for, fsbroker sends
// notifications/resources/updated only (its tools never change, and it
// watches no root for new files), so the acknowledgment names the
// resourceSubscriptions alone. Each resource is watched for the host as
// resources/subscribe watches it (the corridor decides, records and
// consents; the host cannot be asked, so the operator's provider answers,
// as for resources/list), in order; the first refused ends the listen with
// resources/subscribe's error for it (-32002 as -32602), and the watches
// made before it end. A host that declares roots is refused: the listen
// cannot ask for them, and nothing is accessible until they are known.
// Once acknowledged, the listen runs until the host cancels it (no reply),
// or the session ends it with a complete result: every watch ended
// (revoked, outside the roots served), or the session's input ended (over
// HTTP, the server shutting down; on stdio the host is leaving, and nothing
// is sent).
func (s *Session) modernListen(ctx context.Context, rq modernRequest, req *jsonrpc.Message) (any, error) {
	caller := rq.caller
	caller.Tool = MethodSubscriptionsListen
	uris, err := decodeListenParams(req.Params)
	if err != nil {
		return nil, modernError(s.refuseResource(ctx, caller, "", err))
	}
	switch {
	case len(uris) > MaxListenResources:
		return nil, modernError(s.refuseResource(ctx, caller, "", errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("the listen names more than %d distinct resources, over the limit", MaxListenResources))))
	case len(uris) > 0 && !s.cfg.Corridor.Watches():
		return nil, modernError(s.refuseResource(ctx, caller, uris[0], errcode.New(errcode.IOError, "this session watches no files")))
	case len(uris) > 0 && rq.declaresRoots:
		return nil, s.refuseListenOfRootsHost(ctx, caller, uris)
	}
	if !s.resources.listens.reserve() {
		return nil, modernError(s.refuseResource(ctx, caller, "", errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("the session holds %d open listens, the limit", MaxListens))))
	}
	l := newListen(req.ID)
	s.resources.listens.add(l) // from now on, an ended watch is marked in it
	defer func() {
		s.resources.listens.release(l)
		for _, id := range l.watchIDs() {
			if err := s.cfg.Corridor.Unwatch(id); err != nil {
				s.log.Debug("a listen's watch had ended", "error", err)
			}
		}
	}()
	if err := s.watchListened(ctx, caller, l, uris, withoutRetryMembers(req.Params)); err != nil {
		return nil, err
	}
	l.settle()
	// The acknowledgment names what the listen watches now: a watch the
	// corridor ended while the others were being made (a revocation) is
	// not agreed to.
	filter := map[string]any{}
	if watched := l.watched(uris); len(watched) > 0 {
		filter["resourceSubscriptions"] = watched
	}
	ack := map[string]any{"_meta": s.subscriptionMeta(l.id, false), "notifications": filter}
	if err := s.conn.NotifyWithin(ctx, NotificationSubscriptionsAcknowledged, ack); err != nil {
		return nil, fmt.Errorf("serve: acknowledge a listen: %w", err)
	}
	if len(uris) == 0 {
		return s.listenEnded(l), nil // nothing to send: ended at once
	}
	s.log.Debug("a listen is open", "resources", len(uris), "host", caller.Name)
	for {
		select {
		case <-ctx.Done(): // the host cancelled it: no reply is sent
			return s.listenEnded(l), nil
		case <-s.conn.Draining():
			if s.cfg.Transport == "stdio" {
				// The host's input ended (or the process is stopping): it
				// is leaving, and its end of the pipe may be closed.
				s.conn.CancelRequest(l.id)
			}
			return s.listenEnded(l), nil
		case <-l.over:
			s.log.Info("a listen ended: none of its resources is watched any more")
			if s.cfg.Transport == "stdio" {
				// On stdio the server tears a listen down with
				// notifications/cancelled naming it (the revision's
				// basic/patterns/cancellation), and the complete result
				// says it ended gracefully (basic/patterns/subscriptions).
				_ = s.conn.NotifyWithin(ctx, "notifications/cancelled", map[string]any{"requestId": json.RawMessage(l.id),
					"reason": "fsbroker: none of the listen's resources is watched any more (consent revoked, or outside the roots)"})
			}
			return s.listenEnded(l), nil
		case <-l.wake:
		}
		s.endLapsedWatches()
		for _, uri := range l.liveChanges() {
			params := map[string]any{"_meta": s.subscriptionMeta(l.id, false), "uri": uri}
			if err := s.conn.NotifyWithin(ctx, NotificationResourceUpdated, params); err != nil {
				s.log.Debug("cannot send a resource update", "error", err)
			}
		}
	}
}

// watchListened watches each of uris for caller, into l, in order: a uri
// that names no file of this machine is refused before the corridor
// (recorded), the others go through the corridor as watches of the host
// (consent from the operator's provider only: the host cannot be asked).
// The first refusal is returned (as protocol 2026-07-28 sends it); the
// watches made before it are l's, for the caller to end.
func (s *Session) watchListened(ctx context.Context, caller corridor.Caller, l *listen, uris []string, params []byte) error {
	s.awaitHostRoots(ctx)
	ctx = consent.WithElicitor(ctx, cannotAsk{})
	for _, uri := range uris {
		filePath, err := resourceFilePath(uri)
		if err != nil {
			return modernError(s.refuseResource(ctx, caller, uri, err))
		}
		// As for resources/subscribe, the subscriptions' mu is held from
		// the watch until l holds its id, so that an end of it by a
		// revocation (subscriptionsEnded) finds it there.
		watch := func() (string, error) {
			ss := &s.resources.subs
			ss.mu.Lock()
			defer ss.mu.Unlock()
			id, err := s.cfg.Corridor.Watch(ctx, caller, corridor.WatchRequest{Path: filePath, Params: params},
				func(corridor.Change) { l.changed(uri) })
			if err == nil {
				l.mu.Lock()
				l.watches[uri] = id
				l.mu.Unlock()
			}
			return id, err
		}
		if _, err := consented(ctx, s, caller, "read", []string{filePath}, watch); err != nil {
			return modernError(resourceError(err, uri))
		}
	}
	return nil
}

// refuseListenOfRootsHost refuses the listen of a host that declares
// roots: each resource is recorded refused, and the first refusal is
// returned.
func (s *Session) refuseListenOfRootsHost(ctx context.Context, caller corridor.Caller, uris []string) error {
	var first error
	for _, uri := range uris {
		err := s.refuseResource(ctx, caller, uri, errcode.New(errcode.PermissionDenied,
			"protocol "+modern.Version+" cannot ask a host for its roots in "+MethodSubscriptionsListen+
				", and nothing is accessible to a host that declares roots until they are known"))
		if first == nil {
			first = modernError(err)
		}
	}
	return first
}

// listenEnded is the complete result that ends a listen: no members but
// resultType and _meta, which names the subscription.
func (s *Session) listenEnded(l *listen) json.RawMessage {
	return mustJSON(map[string]any{"resultType": modern.ResultTypeComplete, "_meta": s.subscriptionMeta(l.id, true)})
}

// subscriptionMeta is the _meta of a message of the listen id's stream:
// the subscription's id, and fsbroker's serverInfo in a result.
func (s *Session) subscriptionMeta(id jsonrpc.ID, result bool) map[string]any {
	meta := map[string]any{modern.MetaSubscriptionID: json.RawMessage(id)}
	if result {
		meta[modern.MetaServerInfo] = map[string]string{"name": "fsbroker", "version": s.cfg.Version}
	}
	return meta
}
