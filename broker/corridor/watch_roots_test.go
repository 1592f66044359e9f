// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestWatchesFollowTheRootsServed (review 19 finding 4): once the roots
// served change under a session's watches (a config reload drops a root, a
// host's roots scope a root to a subtree), a change outside the roots
// served now is never delivered, even before the watch ends (a change
// inside, made after it, is); RootsChanged then ends exactly the watches
// whose targets are outside, and returns their ids.
func TestWatchesFollowTheRootsServed(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{filepath.Join(f.rw, "sub", "in.txt"), filepath.Join(f.rw, "out.txt")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hub, err := watch.NewHub(watch.WithCoalesce(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	var served atomic.Pointer[roots.Set]
	served.Store(f.set)
	c := New(WithRoots(served.Load), WithExecutor(f.exec), WithWatchHub(hub), WithDecider(defaultDecider(t)), WithoutAuditTrail())
	t.Cleanup(c.Close)
	changes := make(chan string, 16)
	notify := func(ch Change) { changes <- ch.Path }
	ids := map[string]string{}
	for _, p := range []string{"ro/a.txt", "rw/out.txt", "rw/sub/in.txt"} {
		id, err := c.Watch(context.Background(), f.caller, WatchRequest{Path: p}, notify)
		if err != nil {
			t.Fatalf("watch %s: %v", p, err)
		}
		ids[p] = id
	}
	write := func(rel string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(filepath.Dir(f.rw), rel), []byte("changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case p := <-changes:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("no change delivered")
			return ""
		}
	}
	write("ro/a.txt")
	if p := next(); p != "ro/a.txt" {
		t.Fatalf("change %q, want ro/a.txt", p)
	}

	// A config reload drops ro; a host's roots scope rw to rw/sub.
	reloaded, err := roots.New([]roots.Spec{{Path: f.rw, Mount: "rw", Writable: true, Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := roots.ParseHostRoots([]byte(`{"roots":[{"uri":"` + roots.FileURI(filepath.Join(f.rw, "sub")) + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	served.Store(roots.Intersect(reloaded, host))
	write("ro/a.txt")
	write("rw/out.txt")
	write("rw/sub/in.txt")
	if p := next(); p != "rw/sub/in.txt" {
		t.Fatalf("change %q delivered outside the roots served, before the one inside", p)
	}

	ended := c.RootsChanged()
	slices.Sort(ended)
	want := []string{ids["ro/a.txt"], ids["rw/out.txt"]}
	slices.Sort(want)
	if !slices.Equal(ended, want) || c.Stats().Watches != 1 {
		t.Fatalf("RootsChanged ended %q (%d watches left), want %q", ended, c.Stats().Watches, want)
	}
	if again := c.RootsChanged(); len(again) != 0 {
		t.Errorf("RootsChanged again ended %q", again)
	}
}
