// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// guardTimeout is the guard's timeout in these tests: far longer than a healthy append to a
// temporary directory takes, short enough for the tests that wait it out.
const guardTimeout = time.Second

// decision is a decision record with id.
func decision(id string) audit.Record {
	return audit.Record{Kind: audit.KindDecision, DecisionID: id, Method: "files/read", Allow: audit.Bool(true)}
}

// inTrail reports whether the segment being written holds a record of decision id.
func inTrail(t *testing.T, w *audit.Writer, id string) bool {
	t.Helper()
	b, err := os.ReadFile(w.Segment())
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(`"decisionId":"`+id+`"`))
}

// TestGuardedTimesOutAStalledSink: an append the sink does not answer fails within the guard's
// timeout with ErrTimeout (an ErrUnavailable: the request is refused) while the sink still
// holds it; the next append fails at once, never reaching the sink; one log line tells of the
// run of failures and one of its end; the counts say what happened.
func TestGuardedTimesOutAStalledSink(t *testing.T) {
	w, keys := audittest.Open(t)
	stall, g, log := audittest.Stalled(t, w, guardTimeout)
	ctx := context.Background()

	if _, err := g.Append(ctx, decision("healthy")); err != nil {
		t.Fatal(err)
	}
	stall.Hold(audittest.Kind(audit.KindDecision))
	_, err := g.Append(ctx, decision("stalled"))
	if !errors.Is(err, audit.ErrTimeout) || !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("stalled append: %v, want ErrTimeout and ErrUnavailable", err)
	}
	if stall.Held() != 1 {
		t.Fatalf("the sink held %d appends, want the stalled one", stall.Held())
	}
	// The sink still holds it (nothing is released yet): the next append fails at once, and
	// is not even tried (an outcome is not held, it would reach the trail).
	next := audit.Record{Kind: audit.KindOutcome, DecisionID: "after", Method: "files/read", Outcome: "ok"}
	if _, err := g.Append(ctx, next); !errors.Is(err, audit.ErrTimeout) || !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("append behind a stalled one: %v, want ErrTimeout and ErrUnavailable", err)
	}
	if inTrail(t, w, "after") {
		t.Fatal("an append was passed on to a sink that had not answered the one before")
	}
	if got, want := g.Stats(), (audit.GuardStats{Appends: 3, Failures: 2, Timeouts: 2, Stuck: 1}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if g.Failures() != 2 {
		t.Fatalf("Failures = %d, want 2", g.Failures())
	}
	if n := log.Count("[ERROR]", "cannot write the audit record", "kind=decision", "timeouts=1"); n != 1 {
		t.Fatalf("%d error lines for the run of failures, want 1:\n%s", n, log.String())
	}

	stall.Release()
	audittest.Settled(t, g)
	if _, err := g.Append(ctx, decision("recovered")); err != nil {
		t.Fatal(err)
	}
	if n := log.Count("[INFO]", "audit trail written again", "failed_appends=2"); n != 1 {
		t.Fatalf("%d lines for the end of the run, want 1:\n%s", n, log.String())
	}
	if n := log.Count("cannot write the audit record"); n != 1 {
		t.Fatalf("%d error lines, want 1:\n%s", n, log.String())
	}
	if got, want := g.Stats(), (audit.GuardStats{Appends: 4, Failures: 2, Timeouts: 2}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(w.Dir(), keys); err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// TestGuardedCountsFailures: appends that fail are counted, and a run of them is logged once,
// with the sink's own count of failures.
func TestGuardedCountsFailures(t *testing.T) {
	w, _ := audittest.Open(t)
	var log testlog.Lines
	g := audit.Guard(w, 0, log.Logger())
	if g.Timeout() != audit.DefaultAppendTimeout {
		t.Errorf("Timeout = %s, want the default %s", g.Timeout(), audit.DefaultAppendTimeout)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := g.Append(context.Background(), decision("refused")); !errors.Is(err, audit.ErrClosed) {
			t.Fatalf("append %d to a closed writer: %v, want ErrClosed", i, err)
		}
	}
	if got, want := g.Stats(), (audit.GuardStats{Appends: 3, Failures: 3}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if n := log.Count("[ERROR]", "cannot write the audit record", "failures=1", "sink_failures="); n != 1 {
		t.Fatalf("%d error lines for three failures, want 1:\n%s", n, log.String())
	}
}

// TestGuardedCallerCancelIsNotCounted: a caller that cancels its request while the append
// runs gets its error at once; the trail did not fail, so nothing is counted or logged, and the
// next append is tried.
func TestGuardedCallerCancelIsNotCounted(t *testing.T) {
	w, _ := audittest.Open(t)
	stall, g, log := audittest.Stalled(t, w, guardTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	// The request is cancelled while its append is held by the sink.
	stall.Hold(func(audit.Record) bool { cancel(); return true })
	if _, err := g.Append(ctx, decision("cancelled")); !errors.Is(err, context.Canceled) {
		t.Fatalf("append of a cancelled request: %v, want context.Canceled", err)
	}
	if _, err := g.Append(ctx, decision("late")); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled context: %v, want context.Canceled", err)
	}
	stall.Release()
	if _, err := g.Append(context.Background(), decision("next")); err != nil {
		t.Fatalf("the append after a cancelled one: %v", err)
	}
	if got, want := g.Stats(), (audit.GuardStats{Appends: 1}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if log.Count("[ERROR]") != 0 {
		t.Fatalf("a cancelled request was logged as an audit failure:\n%s", log.String())
	}
}

// TestGuardedSinkPanicFailsClosed: a sink that panics (here in front of a nil writer) fails
// the append with ErrUnavailable, counted, as a failing sink does, instead of ending the
// process from the guard's goroutine.
func TestGuardedSinkPanicFailsClosed(t *testing.T) {
	var none *audit.Writer
	g := audit.Guard(audittest.NewStall(none), guardTimeout, nil)
	if _, err := g.Append(context.Background(), decision("x")); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("append to a sink that panics: %v, want ErrUnavailable", err)
	}
	if got, want := g.Stats(), (audit.GuardStats{Appends: 1, Failures: 1}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}
