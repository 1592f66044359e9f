// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestDeferredRecordsShareTheNextWrite: outcomes deferred (TryDefer) between
// appended decisions, as sequential requests make them, reach the segment in
// the writes of the decisions that follow them, in chain order, across
// checkpoints and rotations; the trail verifies, and holds every record.
func TestDeferredRecordsShareTheNextWrite(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithSync(SyncBatch), WithCheckpointEvery(50), WithMaxSegmentBytes(64<<10))
	const n = 2000
	deferred := 0
	for i := range n {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
		if _, done, err := w.TryDefer(sampleRecord(KindOutcome, i)); err != nil {
			t.Fatal(err)
		} else if done {
			deferred++
		} else if _, err := w.Append(t.Context(), sampleRecord(KindOutcome, i)); err != nil {
			t.Fatal(err)
		}
	}
	writes := w.writes.Load()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	outcomes, decisions := 0, 0
	for _, seg := range segments(t, dir) {
		for _, line := range readLines(t, seg) {
			switch parsed(t, line).Kind {
			case KindOutcome:
				outcomes++
			case KindDecision:
				decisions++
			}
		}
	}
	if outcomes != n || decisions != n {
		t.Fatalf("the trail holds %d decisions and %d outcomes, want %d of each", decisions, outcomes, n)
	}
	// Each deferred outcome rides on a later write, but for those the syncer
	// wrote alone (at most one per 10 ms) and those before a checkpoint.
	t.Logf("%d records, %d deferred, %d writes", 2*n, deferred, writes)
	if deferred < n/2 || writes > 2*n-uint64(deferred)/2 {
		t.Fatalf("%d outcomes deferred, %d writes for %d records: deferred records did not share writes", deferred, writes, 2*n)
	}
}

// TestDeferredRecordIsWrittenWithoutAnotherAppend: a deferred record with no
// record after it reaches the segment by the syncer, before its fsync,
// without waiting for another append or for Close.
func TestDeferredRecordIsWrittenWithoutAnotherAppend(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir(), WithSync(SyncBatch))
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); err != nil {
		t.Fatal(err)
	}
	rec := sampleRecord(KindOutcome, 1)
	rec.Detail = "the deferred one"
	if _, done, err := w.TryDefer(rec); !done || err != nil {
		t.Fatalf("TryDefer on an idle writer = %v, %v", done, err)
	}
	path := w.Segment()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "the deferred one") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deferred record is not in the segment 10 s later")
		}
		time.Sleep(2 * time.Millisecond)
	}
	w.mu.Lock()
	written, unwritten := w.written, w.unwrittenN
	w.mu.Unlock()
	if unwritten != 0 || written < 3 { // segment start, decision, outcome
		t.Fatalf("written %d, %d still unwritten", written, unwritten)
	}
}

// TestFailedWriteOfADeferredRecord: the write that carries a deferred record
// fails (the segment's handle swapped for a read-only one, as a disk error
// would): the record is lost and counted, the chain is set back to the last
// record written, so that the next segment continues from it and the trail
// verifies, with no gap and without the lost record.
func TestFailedWriteOfADeferredRecord(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithSync(SyncBatch))
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	orig := w.f
	ro, err := os.Open(orig.Name())
	if err != nil {
		w.mu.Unlock()
		t.Fatal(err)
	}
	w.f = ro
	w.mu.Unlock()
	defer orig.Close()
	lost := sampleRecord(KindOutcome, 1)
	lost.Detail = "the lost one"
	if _, done, err := w.TryDefer(lost); !done || err != nil {
		t.Fatalf("TryDefer = %v, %v", done, err)
	}
	// Its write fails, with this append's (which is refused) or alone, by
	// the syncer (and this append then starts a new segment).
	_, _ = w.Append(t.Context(), sampleRecord(KindDecision, 2))
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 3)); err != nil {
		t.Fatalf("the append after the failure: %v", err)
	}
	if w.Failures() == 0 {
		t.Fatal("the lost record was not counted as a failure")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	for _, seg := range segments(t, dir) {
		for _, line := range readLines(t, seg) {
			if strings.Contains(string(line), "the lost one") {
				t.Fatalf("the record whose write failed is in %s", seg)
			}
		}
	}
}

// TestTryDeferOnlyInBatchMode: TryDefer declines in the modes where a record
// must be written (none) or synced (always) before Append returns, so the
// caller appends it.
func TestTryDeferOnlyInBatchMode(t *testing.T) {
	keys := newTestKeys(t)
	for _, mode := range []SyncMode{SyncNone, SyncAlways} {
		w := keys.open(t, t.TempDir(), WithSync(mode))
		if _, done, err := w.TryDefer(sampleRecord(KindOutcome, 1)); done || err != nil {
			t.Errorf("%s: TryDefer = %v, %v; want declined", mode, done, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
