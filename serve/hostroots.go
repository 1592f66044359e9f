// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// DefaultHostRootsTimeout bounds the wait for the host's answer to
// roots/list, and how long a tool call waits for the first answer before
// it goes on without (and is refused: nothing is accessible until the host
// says what is).
const DefaultHostRootsTimeout = 10 * time.Second

// hostRoots is what the session knows of the host's roots
// (docs/protocol.md section 8): when the host declared the roots
// capability, the session serves the intersection of the operator's roots
// and the host's (roots.Intersect), and nothing until the host's first
// answer.
type hostRoots struct {
	// served is the set served for the operator's set of the moment: the
	// host's roots (nil when the host did not declare the capability:
	// nothing narrowed; empty until its first answer and after an answer
	// that cannot be used: nothing accessible) and their intersection with
	// that operator set, computed when an answer applies and once more
	// when the operator's set changes (a config reload), never by each
	// request. Nil until the first request.
	served atomic.Pointer[rootsView]
	// viewMu serializes the computations of served, so that concurrent
	// requests compute a view once.
	viewMu sync.Mutex
	// ready is closed once the first answer applied, or at initialize when
	// the host declared no roots.
	ready     chan struct{}
	readyOnce sync.Once

	mu       sync.Mutex
	declared bool // the host's initialize declared roots
	started  bool // the first roots/list was sent
	asking   bool // a roots/list awaits its answer (at most one does)
	again    bool // a list_changed came meanwhile: ask once more after it
}

// rootsView is the set served for one operator set and one host set.
type rootsView struct {
	operator *roots.Set
	host     *roots.HostRoots
	view     *roots.Set
}

// markReady closes ready, once.
func (h *hostRoots) markReady() { h.readyOnce.Do(func() { close(h.ready) }) }

// narrowRoots is the set the session serves for the operator's set op: op
// itself when the host declared no roots, else its intersection with the
// host's, as computed when the host's answer applied. A set op the view was
// not computed for (the operator's roots changed since) gets its view
// computed once (viewFor).
func (s *Session) narrowRoots(op *roots.Set) *roots.Set {
	if v := s.host.served.Load(); v != nil && v.operator == op {
		return v.view
	}
	return s.viewFor(op)
}

// viewFor computes the view of the host's roots for the operator set op,
// once: it is stored when op is the operator's set now (a config reload
// changed it), and the subscriptions and listens are asked to end the
// watches the new view leaves out (their poke). A request that read the set before
// a reload gets its view without storing it.
func (s *Session) viewFor(op *roots.Set) *roots.Set {
	s.host.viewMu.Lock()
	defer s.host.viewMu.Unlock()
	var host *roots.HostRoots
	if v := s.host.served.Load(); v != nil {
		if v.operator == op {
			return v.view
		}
		host = v.host
	}
	view := roots.Intersect(op, host)
	if op == s.cfg.Roots() {
		s.host.served.Store(&rootsView{operator: op, host: host, view: view})
		s.resources.subs.poke()
		s.resources.listens.poke()
	}
	return view
}

// applyHostRoots makes h the host's roots, with their view of the
// operator's roots now.
func (s *Session) applyHostRoots(h *roots.HostRoots) {
	s.host.viewMu.Lock()
	defer s.host.viewMu.Unlock()
	op := s.cfg.Roots()
	s.host.served.Store(&rootsView{operator: op, host: h, view: roots.Intersect(op, h)})
}

// roots returns the roots the session serves now.
func (s *Session) roots() *roots.Set { return s.narrowRoots(s.cfg.Roots()) }

// startHostRoots takes the roots capability of the host's first
// initialize: declared, nothing is accessible until the host's roots are
// known; not declared, the operator's roots are served as they are.
func (s *Session) startHostRoots(declared bool) {
	if !declared {
		s.host.markReady()
		return
	}
	s.host.mu.Lock()
	s.host.declared = true
	s.host.mu.Unlock()
	s.applyHostRoots(&roots.HostRoots{})
}

// askHostRoots sends roots/list to the host, when it declared roots: after
// its notifications/initialized (once), and on each
// notifications/roots/list_changed. At most one roots/list awaits its
// answer: a list_changed that comes meanwhile is noted, and the host is
// asked once more when that answer (or its time limit) came, however many
// came, so that the answer applied last is to a question asked after the
// last change. The answers are awaited on a goroutine of their own (the
// read loop must go on to read them).
func (s *Session) askHostRoots(method string) {
	s.host.mu.Lock()
	if !s.host.declared || method == "notifications/initialized" && s.host.started {
		s.host.mu.Unlock()
		if method == "notifications/roots/list_changed" {
			s.log.Debug("ignoring the host's roots list_changed: it declared no roots capability")
		}
		return
	}
	s.host.started = true
	if s.host.asking {
		s.host.again = true
		s.host.mu.Unlock()
		return
	}
	s.host.asking = true
	s.host.mu.Unlock()
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		for {
			s.fetchHostRoots()
			s.host.mu.Lock()
			again := s.host.again && s.ctx.Err() == nil
			s.host.again, s.host.asking = false, again
			s.host.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// fetchHostRoots asks the host for its roots (roots/list) and applies its
// answer, then ends the subscriptions' watches outside the roots it leaves.
// An error answer, one that cannot be read, none within the time limit, or
// an empty or disjoint list leaves nothing accessible.
func (s *Session) fetchHostRoots() {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.HostRootsTimeout)
	defer cancel()
	next := &roots.HostRoots{}
	var result json.RawMessage
	if err := s.conn.Call(ctx, "roots/list", nil, &result); err != nil {
		s.log.Warn("the host did not answer roots/list; no root is accessible until it does", "error", err)
	} else {
		next = s.hostRootsOf(result)
	}
	s.applyHostRoots(next)
	s.host.markReady()
	s.endWatchesOutsideRoots()
	dirs := s.roots().Dirs()
	s.log.Info("the host's roots apply", "hostRoots", next.Len(), "accessible", len(dirs))
	if len(dirs) == 0 {
		s.log.Warn("no root is accessible: the host's roots and the operator's have nothing in common")
	}
}

// hostRootsOf reads the host's answer to roots/list (a ListRootsResult):
// an answer that cannot be read is no root (nothing accessible); the roots
// it skips (not local file:// URIs) are logged.
func (s *Session) hostRootsOf(result json.RawMessage) *roots.HostRoots {
	h, skipped, err := roots.ParseHostRoots(result)
	if err != nil {
		s.log.Warn("the host's roots cannot be read; no root is accessible", "error", err)
		return &roots.HostRoots{}
	}
	for _, sk := range skipped {
		s.log.Info("ignoring a root of the host's", "root", sk)
	}
	return h
}

// capabilityDeclared reports whether a client declares a capability whose
// member in its capabilities is raw: present, and neither null nor false.
// Roots declared in any other form narrow: narrowing is the safe reading of
// a capability written oddly.
func capabilityDeclared(raw json.RawMessage) bool {
	c := string(raw)
	return c != "" && c != "null" && c != "false"
}

// requestNarrowing is the narrowing of one request of protocol 2026-07-28
// whose host answered roots/list with host (corridor.WithRequestRoots):
// the intersection of the roots served otherwise and the host's
// (roots.Intersect), computed once per set.
func requestNarrowing(host *roots.HostRoots) func(*roots.Set) *roots.Set {
	var (
		mu   sync.Mutex
		last *rootsView
	)
	return func(op *roots.Set) *roots.Set {
		mu.Lock()
		defer mu.Unlock()
		if last == nil || last.operator != op {
			last = &rootsView{operator: op, host: host, view: roots.Intersect(op, host)}
		}
		return last.view
	}
}

// servedRoots returns the roots a request run under ctx is served under:
// the session's, narrowed by the request's own host roots (protocol
// 2026-07-28) when it carries them.
func (s *Session) servedRoots(ctx context.Context) *roots.Set {
	return corridor.RequestRoots(ctx, s.roots())
}

// awaitHostRoots waits, up to the time limit, until the host's first
// answer to roots/list applied (at once when the host declared no roots in
// its initialize, or sent none: a host of protocol 2026-07-28 gives its
// roots with each request). A call that gives up goes on under the roots
// known, which are none.
func (s *Session) awaitHostRoots(ctx context.Context) {
	if !s.isInitialized() {
		return
	}
	select {
	case <-s.host.ready:
		return
	default:
	}
	t := time.NewTimer(s.cfg.HostRootsTimeout)
	defer t.Stop()
	select {
	case <-s.host.ready:
	case <-t.C:
		s.log.Warn("the host's roots are not known yet: the call is refused", "waited", s.cfg.HostRootsTimeout)
	case <-ctx.Done():
	}
}
