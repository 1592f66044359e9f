// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/policies"
)

// setFirstListingEntries makes entries the 1,000 entries of the i-th directory of a listing
// benchmark, proj/dI (a directory no other i names): as listingPage's, one in fifty a dot file
// (shown: the built-in set leaves those to includeHidden) and one in fifty a *.pem (hidden).
func setFirstListingEntries(entries []decision.InputPath, i int) {
	dir := "d" + strconv.Itoa(i) + "/"
	for j := range entries {
		name := "file" + strconv.Itoa(j) + ".go"
		switch j % 50 {
		case 0:
			name = ".hidden" + strconv.Itoa(j)
		case 1:
			name = "key" + strconv.Itoa(j) + ".pem"
		}
		rel := dir + name
		entries[j] = decision.InputPath{Requested: "proj/" + rel, Canonical: "/home/u/proj/" + rel, Root: "/home/u/proj",
			Mount: "proj", Relative: rel, MountPath: "proj/" + rel, Writable: true, Exists: true, Type: "file", Size: 1024,
			Hidden: j%50 == 0}
	}
}

// listingDecider is the broker's decision stage with the built-in set, and the input of a
// files/list by a server holding 20 grants.
func listingDecider(b *testing.B) (Decider, decision.Input) {
	e, err := New(context.Background(), Source{FS: policies.FS}, WithRunTests(false))
	if err != nil {
		b.Fatal(err)
	}
	return Decider{Engine: e}, decision.Input{Version: 1, Method: "files/list", Operation: decision.OpList,
		Server:  decision.InputServer{ID: "example", Name: "example", Version: "1.0.0"},
		Session: decision.InputSession{ID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"},
		Grants:  firstTouchGrants(20),
		Time:    decision.NewInputTime(time.Now())}
}

// BenchmarkVisibleFirstListing is the visibility decision of a first listing of a 1,000-entry
// directory (and of a 100-entry one, as in fsbroker serve's end-to-end benchmark) as the broker
// makes it: engine.Decider's Visible (the batch's input built, the batch cache asked, the
// built-in set evaluated, the result kept), each iteration a directory no earlier one listed, so
// the batch cache (on, as in the broker) answers none. Reports the p50 and p99 of the wall time
// and of the thread's CPU time (percentiles).
func BenchmarkVisibleFirstListing(b *testing.B) {
	for _, n := range []int{1000, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			d, in := listingDecider(b)
			entries := make([]decision.InputPath, n)
			percentilesPrepared(b, func(i int) { setFirstListingEntries(entries, i) }, func() {
				if vis, err := d.Visible(ctx, &in, entries); err != nil || len(vis) != n-n/50 {
					b.Fatalf("Visible: %d visible, %v; want %d", len(vis), err, n-n/50)
				}
			})
		})
	}
}

// BenchmarkVisibleRepeatedListing is BenchmarkVisibleFirstListing's listing of one directory
// over and over, as a client that lists it again does: the batch cache answers every iteration
// but the first, so this is the cost of its key and its lookup.
func BenchmarkVisibleRepeatedListing(b *testing.B) {
	ctx := context.Background()
	d, in := listingDecider(b)
	entries := make([]decision.InputPath, 1000)
	setFirstListingEntries(entries, 0)
	percentilesPrepared(b, func(int) { in.Time = decision.NewInputTime(time.Now()) }, func() {
		if vis, err := d.Visible(ctx, &in, entries); err != nil || len(vis) != 980 {
			b.Fatalf("Visible: %d visible, %v; want 980", len(vis), err)
		}
	})
}
