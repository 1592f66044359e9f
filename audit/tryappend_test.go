// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A Guarded writer appends on the caller's goroutine only what needs no
// waiting; every append that would wait (the writer's lock held, an fsync,
// a rotation, a checkpoint) declines the fast way and is bounded by the
// guard's timeout. The records written either way form one chain that
// verifies.
func TestWriterTryAppendDeclinesWhatWouldWait(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir(), WithSync(SyncBatch), WithCheckpointEvery(1000))
	if _, err := w.Append(t.Context(), sampleRecord(KindSessionStart, 1)); err != nil {
		t.Fatal(err)
	}
	seq, done, err := w.TryAppend(sampleRecord(KindDecision, 2))
	if !done || err != nil || seq == 0 {
		t.Fatalf("TryAppend on an idle writer = %d, %v, %v; want a record written", seq, done, err)
	}

	declines := []struct {
		name  string
		setup func() (undo func())
		kind  Kind
	}{
		{"the lock is held", func() func() { w.mu.Lock(); return w.mu.Unlock }, KindDecision},
		{"a checkpoint is due", func() func() {
			w.mu.Lock()
			before := w.sinceCkpt
			w.sinceCkpt = w.cfg.ckptEvery
			w.mu.Unlock()
			return func() { w.mu.Lock(); w.sinceCkpt = before; w.mu.Unlock() }
		}, KindDecision},
		{"a rotation is due", func() func() {
			w.mu.Lock()
			w.reopen = true
			w.mu.Unlock()
			return func() { w.mu.Lock(); w.reopen = false; w.mu.Unlock() }
		}, KindDecision},
		{"the end of a session is checkpointed", func() func() { return func() {} }, KindSessionEnd},
	}
	for _, c := range declines {
		undo := c.setup()
		type result struct {
			seq  uint64
			done bool
			err  error
		}
		got := make(chan result, 1)
		go func() {
			seq, done, err := w.TryAppend(sampleRecord(c.kind, 3))
			got <- result{seq, done, err}
		}()
		select {
		case r := <-got:
			if r.done || r.err != nil || r.seq != 0 {
				t.Errorf("%s: TryAppend = %d, %v, %v; want declined", c.name, r.seq, r.done, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: TryAppend waited", c.name)
		}
		undo()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, done, err := w.TryAppend(sampleRecord(KindDecision, 4)); !done || !errors.Is(err, ErrClosed) {
		t.Errorf("TryAppend after Close = %v, %v; want ErrClosed", done, err)
	}
	if rep, err := Verify(w.Dir(), keys.verifyKeys()); err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep.Problem)
	}

	always := keys.open(t, t.TempDir(), WithSync(SyncAlways))
	defer always.Close()
	if _, done, _ := always.TryAppend(sampleRecord(KindSessionStart, 5)); done {
		t.Error("TryAppend in SyncAlways mode wrote a record without waiting for its fsync")
	}
}

// An append behind a writer whose lock another append holds (a write stuck
// in the kernel) is not taken the fast way: it times out with ErrTimeout
// after the guard's timeout, and the guard recovers when the lock is freed.
func TestGuardedWriterBoundsAnAppendBehindAStuckOne(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir(), WithSync(SyncNone))
	defer w.Close()
	g := Guard(w, 100*time.Millisecond, hclog.NewNullLogger())
	if _, err := g.Append(t.Context(), sampleRecord(KindSessionStart, 1)); err != nil {
		t.Fatal(err)
	}

	w.mu.Lock() // the append that holds the writer
	var unlock sync.Once
	defer unlock.Do(w.mu.Unlock)
	done := make(chan error, 1)
	go func() {
		_, err := g.Append(context.Background(), sampleRecord(KindDecision, 2))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("append behind a held writer: %v, want ErrTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an append behind a held writer did not return: the fast way waited for the lock")
	}
	if s := g.Stats(); s.Timeouts != 1 || s.Stuck != 1 {
		t.Fatalf("stats %+v, want one timeout, one stuck", s)
	}
	unlock.Do(w.mu.Unlock)
	for deadline := time.Now().Add(10 * time.Second); g.Stats().Stuck != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stuck append never returned after the lock was freed")
		}
	}
	if _, err := g.Append(t.Context(), sampleRecord(KindDecision, 3)); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
}

// keepingSink is a Writer with an Append of its own, as a host's sink that
// embeds one has.
type keepingSink struct {
	*Writer
	kept int
}

func (s *keepingSink) Append(ctx context.Context, rec Record) (uint64, error) {
	s.kept++
	return s.Writer.Append(ctx, rec)
}

// The guard takes the fast way only for a Writer itself: a sink that embeds
// one gets every append through its own Append.
func TestGuardedCallsTheAppendOfASinkEmbeddingAWriter(t *testing.T) {
	keys := newTestKeys(t)
	s := &keepingSink{Writer: keys.open(t, t.TempDir(), WithSync(SyncNone))}
	defer s.Close()
	g := Guard(s, time.Second, hclog.NewNullLogger())
	for i := range 3 {
		if _, err := g.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.kept != 3 {
		t.Fatalf("the sink's own Append saw %d of 3 appends", s.kept)
	}
}
