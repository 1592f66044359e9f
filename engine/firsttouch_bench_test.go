// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/policies"
)

// firstTouchGrants are the grants of a server holding n of them, the covering one (a read grant
// on proj/src) last, so that a rule that walks the grants walks them all.
func firstTouchGrants(n int) []decision.InputGrant {
	gs := make([]decision.InputGrant, 0, n)
	for i := range n - 1 {
		gs = append(gs, decision.InputGrant{Access: "read", Path: fmt.Sprintf("other%d/dir", i), Granted: "2026-01-02T03:04:05Z"})
	}
	return append(gs, decision.InputGrant{Access: "read", Path: "proj/src", Granted: "2026-01-02T03:04:05Z"})
}

// setFirstTouchInput makes in the policy input of the broker's files/read of the i-th file of a
// writable root "proj" (at /home/u/proj), proj/src/pkgK/fileI.go, a path no other i names; the
// rest of in (server, session, grants, time) is left as it is.
func setFirstTouchInput(in *decision.Input, i int) {
	rel := "src/pkg" + strconv.Itoa(i%50) + "/file" + strconv.Itoa(i) + ".go"
	in.Version, in.Method, in.Operation, in.Bytes = 1, "files/read", decision.OpRead, 1<<20
	in.Path = &decision.InputPath{Requested: "proj/" + rel, Canonical: "/home/u/proj/" + rel, Root: "/home/u/proj",
		Mount: "proj", Relative: rel, MountPath: "proj/" + rel, Writable: true, Exists: true,
		Type: "file", Size: 1024, Nlink: 1}
	in.Params = json.RawMessage(`{"path":"proj/` + rel + `"}`)
}

// BenchmarkDecideFirstTouch is the decision a first touch costs the broker: engine.Decider's
// Decide (the broker's decision stage: the input encoded to JSON, the decision cache asked,
// the policy evaluated, the decision kept) with the built-in set and 20 grants (2 in the
// -2grants case), each iteration a read of a path no earlier iteration named. The decision
// cache stays on, as in the broker, and can answer none of them: its key is the whole input but
// its time, path included. So every iteration pays the cache's miss and insert too, as a first
// touch does; the benchmark fails if the cache does not end up holding a decision per path
// (up to its bound), which a hit would not add. Reports the p50 and p99 of the wall time and
// of the thread's CPU time (percentiles).
func BenchmarkDecideFirstTouch(b *testing.B) {
	ctx := context.Background()
	for _, grants := range []int{20, 2} {
		name := "default"
		if grants != 20 {
			name = fmt.Sprintf("default-%dgrants", grants)
		}
		b.Run(name, func(b *testing.B) {
			e, err := New(ctx, Source{FS: policies.FS}, WithRunTests(false))
			if err != nil {
				b.Fatal(err)
			}
			if e.current().cache == nil {
				b.Fatal("the built-in set is not cacheable: this benchmark would not show what the cache misses")
			}
			d := Decider{Engine: e}
			in := decision.Input{
				Server:  decision.InputServer{ID: "example", Name: "example", Version: "1.0.0"},
				Session: decision.InputSession{ID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"},
				Grants:  firstTouchGrants(grants),
				Time:    decision.NewInputTime(time.Now()),
			}
			percentilesPrepared(b, func(i int) { setFirstTouchInput(&in, i) }, func() {
				if v := d.Decide(ctx, &in); !v.Allow {
					b.Fatalf("decision on %s: %+v, want an allow", in.Path.MountPath, v)
				}
			})
			cache := e.current().cache
			cache.mu.Lock()
			kept := len(cache.m)
			cache.mu.Unlock()
			if want := min(b.N, decisionCacheSize); kept != want {
				b.Fatalf("the cache holds %d decisions after %d first touches, want %d", kept, b.N, want)
			}
		})
	}
}
