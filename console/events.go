// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/metrics"
)

// The views a page's event stream is for ("view" in its query).
const (
	viewAll      = ""
	viewConsent  = "consent"
	viewActivity = "activity"
	viewGrants   = "grants"
	viewTrail    = "trail"
)

// Limits of the event streams.
const (
	// followInterval is how often the trail is read for new records, as
	// fsbroker audit tail -f reads it.
	followInterval = 200 * time.Millisecond
	// feedSize is how many of the latest records the console keeps.
	feedSize = 2000
	// subscriberQueue is how many events may wait for a slow page; past
	// that its stream is ended, and the browser opens it again.
	subscriberQueue = 256
	// heartbeat keeps an idle stream open through proxies, and finds
	// pages that went away.
	heartbeat = 15 * time.Second
	// maxStreams bounds the event streams open at once; past it a stream
	// gets 503 (the browser's EventSource tries again).
	maxStreams = 32
	// streamWriteTimeout bounds each write to a stream: a page that stops
	// reading loses its stream instead of holding its writer.
	streamWriteTimeout = 10 * time.Second
)

// event is one Server-Sent Event.
type event struct {
	name string
	data string
	id   string // for the activity stream: the record's index
}

// subscriber is one page's event stream.
type subscriber struct {
	view   string
	filter audit.Filter // the activity view's
	ch     chan event
	mu     sync.Mutex
	closed bool
}

// send queues ev for the page, or ends the stream of a page that does not
// keep up.
func (s *subscriber) send(ev event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.closed = true
		close(s.ch)
	}
}

// hub sends the consent and grants views' events to the pages open.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (h *hub) add(s *subscriber) {
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// publish sends ev to the pages of view (every page for viewAll).
func (h *hub) publish(view string, ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if view == viewAll || s.view == view {
			s.send(ev)
		}
	}
}

// record is a record of the trail as the console keeps it.
type record struct {
	index   uint64
	rec     audit.Record
	segment string
}

// feed keeps the latest records of the trail and sends each new one to the
// activity pages whose filter it matches.
type feed struct {
	mu   sync.Mutex
	ring []record // the latest feedSize, oldest first
	next uint64   // the index of the next record (the first is 1)
	subs map[*subscriber]struct{}
	// row renders a record as the activity view's table row.
	row func(record) string
}

func newFeed() *feed { return &feed{next: 1, subs: map[*subscriber]struct{}{}} }

// add keeps e and sends it to the activity pages it matches.
func (f *feed) add(e *audit.Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := record{index: f.next, rec: e.Record, segment: e.Segment}
	f.next++
	if len(f.ring) == feedSize {
		copy(f.ring, f.ring[1:])
		f.ring = f.ring[:feedSize-1]
	}
	f.ring = append(f.ring, r)
	var row string
	for s := range f.subs {
		if s.filter.Match(&r.rec) {
			if row == "" {
				row = f.row(r)
			}
			s.send(event{name: "activity", data: row, id: strconv.FormatUint(r.index, 10)})
		}
	}
}

// subscribe adds an activity page, first sending it the records kept after
// the index after that its filter matches.
func (f *feed) subscribe(s *subscriber, after uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.ring {
		if r.index > after && s.filter.Match(&r.rec) {
			s.send(event{name: "activity", data: f.row(r), id: strconv.FormatUint(r.index, 10)})
		}
	}
	f.subs[s] = struct{}{}
}

func (f *feed) unsubscribe(s *subscriber) {
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}

// latest returns the last n records kept that match filter, newest first,
// and the index of the last record kept.
func (f *feed) latest(filter *audit.Filter, n int) ([]record, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []record
	for i := len(f.ring) - 1; i >= 0 && len(out) < n; i-- {
		if filter.Match(&f.ring[i].rec) {
			out = append(out, f.ring[i])
		}
	}
	return out, f.next - 1
}

// follow reads the trail in dir as fsbroker audit tail -f does (an
// audit.Reader, whose Entries yields what was appended since its last call,
// new segments included, every followInterval) and keeps each record, until
// ctx ends; m (when not nil) counts each decision record. A trail directory
// that does not exist yet is waited for.
func (f *feed) follow(ctx context.Context, dir string, log hclog.Logger, m *metrics.Metrics) {
	var (
		r      *audit.Reader
		warned = map[string]bool{}
	)
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		if r == nil {
			r, _ = audit.NewReader(dir, audit.Filter{})
		}
		if r != nil {
			for e, err := range r.Entries(ctx) {
				if err != nil {
					var rerr *audit.ReadError
					if errors.As(err, &rerr) && !warned[rerr.Error()] {
						warned[rerr.Error()] = true
						log.Warn("a line of the audit trail is not a record (run fsbroker audit verify)", "error", err)
					}
					continue
				}
				if e.Record.Kind == audit.KindDecision {
					m.Decided(e.Record.Allow != nil && *e.Record.Allow, e.Record.Code)
				}
				f.add(&e)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// events serves a page's event stream: the count of waiting consent
// requests on every page, and its view's own events: the consent list, the
// grants tables, or the activity rows that match its filter (after those it
// has: "after" in the query, or Last-Event-ID when the browser reconnects).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("503: %d event streams are open already; close a console tab", maxStreams), http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	q := r.URL.Query()
	sub := &subscriber{view: q.Get("view"), ch: make(chan event, subscriberQueue)}
	var after uint64
	if sub.view == viewActivity {
		form := filterFormOf(q)
		filter, err := s.filterOf(form)
		if err != nil {
			http.Error(w, "400: "+err.Error(), http.StatusBadRequest)
			return
		}
		sub.filter = filter
		after, _ = strconv.ParseUint(q.Get("after"), 10, 64)
		if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > after {
			after = id
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return // no streaming here
	}

	// Registered first, then the current state: nothing falls in between.
	s.hub.add(sub)
	defer s.hub.remove(sub)
	list, _ := s.pendingList()
	sub.send(event{name: "pending", data: strconv.Itoa(len(list.Requests))})
	switch sub.view {
	case viewConsent:
		sub.send(s.renderEvent("consent", "consent-list", list))
	case viewGrants:
		sub.send(s.grantsEvent())
	case viewActivity:
		s.feed.subscribe(sub, after)
		defer s.feed.unsubscribe(sub)
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-sub.ch:
			if !ok {
				return // too slow: the browser reconnects
			}
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if writeEvent(w, ev) != nil || rc.Flush() != nil {
				return
			}
		case <-tick.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, err := w.Write([]byte(": still here\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// writeEvent writes ev in the event-stream format: each line of its data
// on a data: line of its own.
func writeEvent(w http.ResponseWriter, ev event) error {
	var b strings.Builder
	if ev.id != "" {
		b.WriteString("id: " + ev.id + "\n")
	}
	b.WriteString("event: " + ev.name + "\n")
	for _, line := range strings.Split(strings.ReplaceAll(ev.data, "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, err := w.Write([]byte(b.String()))
	return err
}
