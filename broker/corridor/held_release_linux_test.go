// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package corridor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
)

// panicOnDecision is an observer whose DecisionTook panics, as a bug in a
// metrics or notification hook would; it hears everything else quietly.
type panicOnDecision struct{}

func (panicOnDecision) RequestStarted()                         {}
func (panicOnDecision) RequestEnded()                           {}
func (panicOnDecision) Decided(bool, string)                    {}
func (panicOnDecision) DecisionTook(time.Duration)              { panic("observer bug") }
func (panicOnDecision) AuditAppended(time.Duration, error)      {}
func (panicOnDecision) ConsentAnswered(string, int, int, error) {}
func (panicOnDecision) FilesUsed(Caller, string, string)        {}
func (panicOnDecision) ConsentWaiting(string, consent.Request) func(bool) {
	return func(bool) {}
}

// openDescriptorsOf counts this process's descriptors open on path.
func openDescriptorsOf(t *testing.T, path string) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range names {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestReadHoldsNoDescriptorAfterAPanic attacks the descriptor a read keeps
// from its resolution through its decision (executor.ResolveRead): a panic
// on the way (here the observer's, told of the decision while the file is
// held), which the JSON-RPC layer recovers so the broker goes on, must not
// leave it open. Repeated, a leaked descriptor per request would exhaust the
// broker's descriptors.
func TestReadHoldsNoDescriptorAfterAPanic(t *testing.T) {
	f := newFixture(t)
	c := f.corridor(t, WithDecider(defaultDecider(t)), WithoutAuditTrail(), WithObserver(panicOnDecision{}))
	file := filepath.Join(f.ro, "a.txt")
	before := openDescriptorsOf(t, file)
	const reads = 20
	for range reads {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the read did not panic: the observer was not told of its decision")
				}
			}()
			_, _ = c.Read(context.Background(), f.caller, ReadRequest{Path: "ro/a.txt", Length: -1})
		}()
	}
	if n := openDescriptorsOf(t, file) - before; n != 0 {
		t.Fatalf("after %d reads that panicked, %d descriptors on %s are still open", reads, n, file)
	}
}
