// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package decisionlogtest is a real OPA decision-log service for tests: an HTTP server that
// takes the batches OPA's decision-log plugin posts (gzip-compressed JSON arrays of events,
// POSTed to /logs), or answers 503 while it is down. The broker itself never imports it.
package decisionlogtest

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Service is a decision-log service listening on URL until the test ends.
type Service struct {
	*httptest.Server
	mu       sync.Mutex
	down     bool
	requests int
	events   []json.RawMessage
	problems []string
}

// New starts a service; it is closed when t ends.
func New(t testing.TB) *Service {
	t.Helper()
	s := &Service{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// serve takes one upload.
func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" ||
		r.Header.Get("Content-Type") != "application/json" {
		s.problems = append(s.problems, fmt.Sprintf("%s %s %v", r.Method, r.URL.Path, r.Header))
		http.Error(w, "not an OPA decision-log upload", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		s.problems = append(s.problems, "not gzip: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var batch []json.RawMessage
	if err := json.NewDecoder(zr).Decode(&batch); err != nil {
		s.problems = append(s.problems, "not a JSON array: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.events = append(s.events, batch...)
}

// SetDown makes the service answer 503 (down) or take uploads.
func (s *Service) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Requests is how many requests the service answered.
func (s *Service) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Event is one event the service took.
type Event struct {
	// Raw is the event's JSON.
	Raw json.RawMessage
	// Fields is the event decoded.
	Fields map[string]any
}

// ID is the event's decision_id.
func (e Event) ID() string { s, _ := e.Fields["decision_id"].(string); return s }

// Member is a member of an object member of the event, or of the event itself when object is
// "": Member("result", "allow").
func (e Event) Member(object, name string) any {
	if object == "" {
		return e.Fields[name]
	}
	m, _ := e.Fields[object].(map[string]any)
	return m[name]
}

// Events returns the events taken so far, in order. The test fails if an upload was not in
// the form OPA's plugin posts.
func (s *Service) Events(t testing.TB) []Event {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) > 0 {
		t.Fatalf("uploads not in the form of OPA's decision-log plugin: %q", s.problems)
	}
	out := make([]Event, 0, len(s.events))
	for _, raw := range s.events {
		ev := Event{Raw: raw}
		if err := json.Unmarshal(raw, &ev.Fields); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// ByID indexes events by decision id; the test fails on one taken twice.
func ByID(t testing.TB, events []Event) map[string]Event {
	t.Helper()
	out := make(map[string]Event, len(events))
	for _, e := range events {
		if _, dup := out[e.ID()]; dup {
			t.Errorf("decision %s uploaded twice", e.ID())
		}
		out[e.ID()] = e
	}
	return out
}

// Await waits (up to 20 s) until every one of ids has an event, and returns the events by id
// (the last of each id: check duplicates with ByID).
func (s *Service) Await(t testing.TB, ids ...string) map[string]Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := make(map[string]Event)
		for _, e := range s.Events(t) {
			got[e.ID()] = e
		}
		missing := 0
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the decisions %q never reached the decision-log service; it has %d events", missing, ids, len(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
