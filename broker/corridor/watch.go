// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"sync"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
)

// watchTable holds a session's watches by id.
type watchTable struct {
	max     int
	mu      sync.Mutex
	subs    map[string]*watch.Subscription
	targets map[string]watched // what each watch watches and for whom, for revocation
	closed  bool
}

// watched is what a watch watches, and the caller it watches for.
type watched struct {
	target executor.Target
	caller Caller
}

func (wt *watchTable) count() int {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return len(wt.subs)
}

// closeAll ends every watch; later watches are refused.
func (wt *watchTable) closeAll() {
	wt.mu.Lock()
	subs := wt.subs
	wt.subs, wt.targets, wt.closed = nil, nil, true
	wt.mu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
}

// Watch watches a path for caller, and returns the watch's id. Each change
// the caller may see (deliver) is given to notify, on the hub's goroutine.
func (c *Corridor) Watch(ctx context.Context, caller Caller, r WatchRequest, notify func(Change)) (string, error) {
	return run(ctx, c, caller, &watchOp, watchQuery{WatchRequest: r, notify: notify})
}

// watchQuery is a watch request with where its changes go.
type watchQuery struct {
	WatchRequest
	notify func(Change)
}

// watchOp is files/watch.
var watchOp = operation[watchQuery, string]{
	method: "files/watch",
	named:  func(q watchQuery) [2]string { return [2]string{q.Path, ""} },
	canonicalize: func(ctx context.Context, c *Corridor, q watchQuery) (requests, error) {
		return c.resolveOne(ctx, "files/watch", decision.OpWatch, q.Path, true, 0, q.Params)
	},
	execute: func(_ context.Context, c *Corridor, cl *call, q watchQuery, reqs requests) (string, error) {
		// Decided before existence is told, so that a denied path's
		// existence does not leak.
		t := reqs.all[0].path
		if !t.Exists {
			return "", errcode.New(errcode.FileNotFound, "the path to watch does not exist")
		}
		return c.subscribe(cl.caller, t, q.WatchRequest, q.notify)
	},
}

// subscribe takes a place in the watch table (QUOTA_EXCEEDED past the
// limit) and subscribes to the hub.
func (c *Corridor) subscribe(caller Caller, t executor.Target, r WatchRequest, notify func(Change)) (string, error) {
	id, err := newWatchID()
	if err != nil {
		return "", err
	}
	kinds := make([]watch.Kind, 0, len(r.Events))
	for _, e := range r.Events {
		kinds = append(kinds, watch.Kind(e))
	}

	wt := &c.watches
	wt.mu.Lock()
	if wt.closed {
		wt.mu.Unlock()
		return "", errcode.New(errcode.IOError, "the session is ending")
	}
	if len(wt.subs) >= wt.max {
		wt.mu.Unlock()
		return "", errcode.New(errcode.QuotaExceeded, fmt.Sprintf("the server already holds %d watches, the limit", wt.max))
	}
	if wt.subs == nil {
		wt.subs = make(map[string]*watch.Subscription)
	}
	// The slot is taken before subscribing, so that concurrent requests
	// cannot pass the limit together.
	wt.subs[id] = nil
	wt.mu.Unlock()

	sub, err := c.hub.Subscribe(t.Path, r.Recursive, kinds, func(ev watch.Event) { c.deliver(caller, id, ev, notify) })
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if err != nil || wt.closed {
		delete(wt.subs, id)
		if sub != nil {
			sub.Close()
		}
		if err == nil {
			err = errcode.New(errcode.IOError, "the session is ending")
		}
		return "", err
	}
	wt.subs[id] = sub
	if wt.targets == nil {
		wt.targets = make(map[string]watched)
	}
	wt.targets[id] = watched{target: t, caller: caller}
	return id, nil
}

// deliver decides on one event and gives it to notify: no event names a path
// the caller could not list. An event is dropped when its path is not in
// the roots served now (a config reload removed its root, or a host's roots
// no longer hold it: RootsChanged ends such watches, this keeps them silent
// until then). As in a listing (reportable), an event is also dropped when
// an operator's block covers its path and no grant does, when its path
// cannot be named back, or lies inside a root nested in the watched one
// (its changes are reported only to watches of that root), and an event on
// a nested root's own directory is sent only when the caller could list
// that root itself.
func (c *Corridor) deliver(caller Caller, id string, ev watch.Event, notify func(Change)) {
	if !c.roots().Allows(ev.Path.Root, ev.Path.Rel) {
		c.log.Debug("a change event was left out: its path is outside the roots served now", "watchId", id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.limits.OperationTimeout)
	defer cancel()
	entry := executor.Entry{Path: ev.Path, Name: path.Base(ev.Path.MountPath())}
	req := request{method: "files/watch", operation: decision.OpWatch, path: executor.Target{Path: ev.Path},
		requested: ev.Path.MountPath()}
	entries := []executor.Entry{entry}
	if len(c.reportable(ctx, caller, req, entries)) == 0 {
		c.log.Debug("a change event was left out: its path is blocked, in a nested root, or cannot be named back", "watchId", id)
		return
	}
	if !c.visible(ctx, caller, req, entryInputPaths(entries))[ev.Path.MountPath()] {
		c.log.Debug("a change event was withheld by the policy", "watchId", id)
		return
	}
	notify(Change{WatchID: id, Path: ev.Path.MountPath(), Event: string(ev.Kind), Time: ev.Time})
}

// RootsChanged takes a change of the roots served (a host's roots narrowed
// them, a config reload changed the operator's): the watches whose target
// the roots served now do not hold (its root is gone, or lies outside the
// subtrees a host's roots scope it to) end, and their ids are returned.
// It must not be called from a watch's notify.
func (c *Corridor) RootsChanged() (ended []string) {
	set := c.roots()
	return c.endWatches(func(w watched) bool { return set.Allows(w.target.Path.Root, w.target.Path.Rel) })
}

// endWatches ends the watches keep refuses, and returns their ids.
func (c *Corridor) endWatches(keep func(watched) bool) (ended []string) {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	for id, sub := range c.watches.subs {
		w, ok := c.watches.targets[id]
		if sub == nil || !ok || keep(w) {
			continue
		}
		sub.Close()
		delete(c.watches.subs, id)
		delete(c.watches.targets, id)
		ended = append(ended, id)
	}
	return ended
}

// Unwatch ends a watch; an id of no watch is INVALID_PARAMS.
func (c *Corridor) Unwatch(id string) error {
	wt := &c.watches
	wt.mu.Lock()
	sub, ok := wt.subs[id]
	if ok && sub != nil {
		delete(wt.subs, id)
		delete(wt.targets, id)
	}
	wt.mu.Unlock()
	if !ok || sub == nil {
		return errcode.New(errcode.InvalidParams, "no watch has this id").
			With("errors", []map[string]string{{"pointer": "/watchId", "message": "no watch has this id"}})
	}
	sub.Close()
	return nil
}

func newWatchID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("watch id: %w", err)
	}
	return "w-" + hex.EncodeToString(b[:]), nil
}
