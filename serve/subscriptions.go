// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// subscriptions are a session's resources/subscribe subscriptions, one
// corridor watch each, by the uri the host subscribed with, and the
// notifications they owe the host.
//
// The corridor decides on every change before it reaches changed (no event
// names a path the host could not list, nor one outside the roots served
// now); the sender then sends notifications/resources/updated from its own
// goroutine, never from the watch hub's, after asking the corridor to end
// the watches the host's grants no longer cover (Corridor.GrantsChanged, as
// a revocation does in the client role) and those outside the roots served
// now (Corridor.RootsChanged): a change under a revoked grant, or outside
// the roots, is never announced. A new answer of the host's to roots/list
// ends the watches it leaves out at once (endWatchesOutsideRoots); a config
// reload does when the session first sees the new set (poke).
type subscriptions struct {
	// mu serializes subscribing, unsubscribing and the sender's revocation
	// check, and guards watches.
	mu sync.Mutex
	// watches holds the watch id of each subscribed uri; "" once a
	// revocation ended the watch (the host may still unsubscribe).
	watches map[string]string

	// changeQueue holds the changes not yet announced and wakes the sender
	// (its wake is made with the session); poke wakes it with no change to
	// announce, so that it ends the watches outside the roots served now.
	changeQueue

	senderOnce sync.Once
}

// changeQueue holds the uris with a change not yet announced, in order,
// each once, and wakes the goroutine that announces them.
type changeQueue struct {
	// pendingMu guards pending; the hub's goroutine takes it in changed.
	pendingMu sync.Mutex
	pending   []string
	// wake wakes the announcing goroutine (one token buffered).
	wake chan struct{}
}

// poke wakes the announcing goroutine; it never blocks.
func (q *changeQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// changed notes a change of the resource uri (from the watch hub's
// goroutine: it never blocks) and wakes the announcing goroutine.
func (q *changeQueue) changed(uri string) {
	q.pendingMu.Lock()
	if !slices.Contains(q.pending, uri) {
		q.pending = append(q.pending, uri)
	}
	q.pendingMu.Unlock()
	q.poke()
}

// take returns the pending changes and forgets them.
func (q *changeQueue) take() []string {
	q.pendingMu.Lock()
	defer q.pendingMu.Unlock()
	pending := q.pending
	q.pending = nil
	return pending
}

// startSender starts the session's sender once: it runs until the
// connection ends.
func (s *Session) startSender() {
	ss := &s.resources.subs
	ss.senderOnce.Do(func() { go s.sendResourceUpdates(ss.wake) })
}

// sendResourceUpdates announces the changes of live subscriptions, until
// the connection ends.
func (s *Session) sendResourceUpdates(wake <-chan struct{}) {
	for {
		select {
		case <-s.conn.Done():
			return
		case <-wake:
		}
		for _, uri := range s.liveChanges() {
			if err := s.conn.Notify(NotificationResourceUpdated, map[string]string{"uri": uri}); err != nil {
				s.log.Debug("cannot send a resource update", "error", err)
			}
		}
	}
}

// liveChanges takes the pending changes and returns the uris of those whose
// subscription is live once the watches the host's grants no longer cover,
// and those outside the roots served now, have ended.
func (s *Session) liveChanges() []string {
	ss := &s.resources.subs
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.endLapsedWatchesLocked()
	pending := ss.take()
	live := pending[:0]
	for _, uri := range pending {
		if ss.watches[uri] != "" {
			live = append(live, uri)
		}
	}
	return live
}

// endLapsedWatches ends the watches (of resources/subscribe and of
// subscriptions/listen) that the grants of the host each was made for no
// longer cover, and those outside the roots served now.
func (s *Session) endLapsedWatches() {
	ss := &s.resources.subs
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.endLapsedWatchesLocked()
}

// endLapsedWatchesLocked is endLapsedWatches with the subscriptions' mu
// held.
func (s *Session) endLapsedWatchesLocked() {
	s.subscriptionsEnded(s.cfg.Corridor.GrantsChanged(grants.AnyServer), consentRevoked)
	s.subscriptionsEnded(s.cfg.Corridor.RootsChanged(), rootsLeftOut)
}

// consentRevoked is the log line of subscriptions ended because the
// host's grants no longer cover their files.
const consentRevoked = "consent revoked: resource subscriptions ended"

// rootsLeftOut is the log line of subscriptions ended because the roots
// served no longer hold their files.
const rootsLeftOut = "outside the roots served now: resource subscriptions ended"

// subscriptionsEnded marks the subscriptions (of resources/subscribe and
// of subscriptions/listen) whose watches (by id) the corridor ended, and
// logs why; the subscriptions' mu is held.
func (s *Session) subscriptionsEnded(ids []string, why string) {
	if len(ids) == 0 {
		return
	}
	ss := &s.resources.subs
	for uri, id := range ss.watches {
		if slices.Contains(ids, id) {
			ss.watches[uri] = ""
		}
	}
	s.resources.listens.watchesEnded(ids)
	s.log.Info(why, "watches", strings.Join(ids, ","))
}

// endWatchesOutsideRoots ends the subscriptions whose files the roots
// served now do not hold (after the host's roots changed).
func (s *Session) endWatchesOutsideRoots() {
	ss := &s.resources.subs
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.subscriptionsEnded(s.cfg.Corridor.RootsChanged(), rootsLeftOut)
}

// subscribeResource answers resources/subscribe for uri (filePath, as the
// corridor reads it): a corridor watch of the file, decided, consented and
// recorded like a read (a path no grant covers asks the consent provider),
// counted against the session's watch limit (QUOTA_EXCEEDED past it). A
// second subscription to the same uri holds the first one's watch.
func (s *Session) subscribeResource(ctx context.Context, caller corridor.Caller, uri, filePath string, params []byte) (any, error) {
	if !s.cfg.Corridor.Watches() {
		return nil, s.refuseResource(ctx, caller, uri, errcode.New(errcode.IOError, "this session watches no files"))
	}
	s.startSender()
	ss := &s.resources.subs
	watch := func() (string, error) {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if id := ss.watches[uri]; id != "" {
			return id, nil
		}
		id, err := s.cfg.Corridor.Watch(ctx, caller, corridor.WatchRequest{Path: filePath, Params: params},
			func(corridor.Change) { ss.changed(uri) })
		if err != nil {
			return "", err
		}
		if ss.watches == nil {
			ss.watches = make(map[string]string)
		}
		ss.watches[uri] = id
		return id, nil
	}
	if _, err := consented(ctx, s, caller, "read", []string{filePath}, watch); err != nil {
		return nil, resourceError(err, uri)
	}
	return struct{}{}, nil
}

// unsubscribeResource answers resources/unsubscribe: the subscription to
// uri ends (its watch, unless a revocation ended it already); a uri with no
// subscription is INVALID_PARAMS.
func (s *Session) unsubscribeResource(ctx context.Context, caller corridor.Caller, uri string) (any, error) {
	ss := &s.resources.subs
	ss.mu.Lock()
	id, ok := ss.watches[uri]
	delete(ss.watches, uri)
	if ok && id != "" {
		if err := s.cfg.Corridor.Unwatch(id); err != nil {
			s.log.Debug("the subscription's watch had ended", "error", err)
		}
	}
	ss.mu.Unlock()
	if !ok {
		return nil, s.refuseResource(ctx, caller, uri, invalidParam("/uri", "no subscription to this uri"))
	}
	return struct{}{}, nil
}
