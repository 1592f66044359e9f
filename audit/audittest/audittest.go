// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package audittest has what the tests of an audit trail's users need: a real writer in a
// temporary directory, and a trail that stops answering (a disk or a network file system that
// hangs, which a test cannot make a real kernel do). The broker itself never imports it.
package audittest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// Open opens a real writer in a temporary directory, under new random keys, without fsyncs
// unless opts say otherwise, and closes it when the test ends. It returns the keys that verify
// the trail.
func Open(t testing.TB, opts ...audit.Option) (*audit.Writer, audit.VerifyKeys) {
	t.Helper()
	key := make([]byte, audit.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]audit.Option{audit.WithKey(key), audit.WithCheckpointKey(priv), audit.WithSync(audit.SyncNone)}, opts...)
	w, err := audit.Open(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, audit.VerifyKeys{MAC: [][]byte{key}, Checkpoint: []ed25519.PublicKey{pub}}
}

// Stalled puts a [Stall] in front of sink, released when the test ends, and guards it with
// timeout, logging to the lines it returns.
func Stalled(t testing.TB, sink audit.Sink, timeout time.Duration) (*Stall, *audit.Guarded, *testlog.Lines) {
	stall := NewStall(sink)
	t.Cleanup(stall.Release)
	var log testlog.Lines
	return stall, audit.Guard(stall, timeout, log.Logger()), &log
}

// waitLimit bounds every wait of the package.
const waitLimit = 10 * time.Second

// Stall is an [audit.Sink] that passes every append on to a real sink, except those a test
// holds ([Stall.Hold]): they wait, whatever their context says, until [Stall.Release], and
// are then passed on too. It is safe for concurrent use.
type Stall struct {
	sink audit.Sink

	mu    sync.Mutex
	hold  func(audit.Record) bool // nil: nothing is held
	gate  chan struct{}           // closed by Release
	held  int                     // appends held since the last Hold
	inner sync.WaitGroup          // held appends that have not returned
}

var _ audit.Sink = (*Stall)(nil)

// NewStall returns a Stall in front of sink, holding nothing.
func NewStall(sink audit.Sink) *Stall { return &Stall{sink: sink} }

// Hold makes the appends of the records that match wait until Release.
func (s *Stall) Hold(match func(audit.Record) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.gate, s.held = match, make(chan struct{}), 0
}

// Release lets the held appends go on to the sink, holds nothing more, and returns once every
// held append has returned.
func (s *Stall) Release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
	}
	s.hold, s.gate = nil, nil
	s.mu.Unlock()
	s.inner.Wait()
}

// Held counts the appends held since the last Hold, returned or not.
func (s *Stall) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Append passes rec on to the sink, after Release if it is held.
func (s *Stall) Append(ctx context.Context, rec audit.Record) (uint64, error) {
	s.mu.Lock()
	gate := s.gate
	held := s.hold != nil && s.hold(rec)
	if held {
		s.held++
		s.inner.Add(1)
		defer s.inner.Done()
	}
	s.mu.Unlock()
	if held {
		<-gate
	}
	return s.sink.Append(ctx, rec)
}

// PathDigest is the sink's.
func (s *Stall) PathDigest(path string) string { return s.sink.PathDigest(path) }

// ArgumentsDigest is the sink's, when it digests arguments ([audit.ArgumentsDigester]).
func (s *Stall) ArgumentsDigest(args []byte) (string, error) {
	d, ok := s.sink.(audit.ArgumentsDigester)
	if !ok {
		return "", fmt.Errorf("audittest: the sink %T digests no arguments", s.sink)
	}
	return d.ArgumentsDigest(args)
}

// Kind holds the records of kind k.
func Kind(k audit.Kind) func(audit.Record) bool {
	return func(r audit.Record) bool { return r.Kind == k }
}

// Settled waits until g has seen every append it gave up on return (its Stuck count is 0),
// as it will shortly after [Stall.Release].
func Settled(t testing.TB, g *audit.Guarded) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); g.Stats().Stuck != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the guard still waits for %d appends after %s", g.Stats().Stuck, waitLimit)
		}
	}
}
