// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Sink is where the broker writes its trail: what a session needs of an audit writer, and
// nothing more. [Writer] is the sink of the fsbroker command; the host that gives a session a
// sink owns it and closes it.
type Sink interface {
	// Append writes rec and returns its seq, or an error: the request it records is then
	// refused (an allowed request is refused with "audit unavailable").
	Append(ctx context.Context, rec Record) (uint64, error)
	// PathDigest is what a record holds in place of path when paths are redacted.
	PathDigest(path string) string
}

var (
	_ Sink              = (*Writer)(nil)
	_ Sink              = (*Guarded)(nil)
	_ ArgumentsDigester = (*Writer)(nil)
	_ ArgumentsDigester = (*Guarded)(nil)
)

// DefaultAppendTimeout is how long [Guarded] waits for one append: longer than a healthy
// [Writer] ever takes (a rotation is five fsyncs in a row, a [SyncAlways] append one group
// fsync), as long as Vault's audit broker gives its devices, and well inside the 60 s
// deadline of a request, so that a trail on a disk or a file system that stopped answering
// refuses requests with "audit unavailable" instead of holding them (and the session's
// in-flight slots) until the request's deadline or, for an outcome record, for ever.
const DefaultAppendTimeout = 10 * time.Second

// ErrTimeout is returned, wrapped with [ErrUnavailable], by a [Guarded] append that did not
// finish within the guard's timeout, or that was not started because an earlier one that
// timed out has not returned yet.
var ErrTimeout = errors.New("audit: append timed out")

// Guarded is a [Sink] that gives every append its own deadline, counts the appends that fail,
// and logs a run of failures once, when it starts, and again when it ends. It is safe for
// concurrent use; share one between sessions to count their failures together.
//
// An append that does not return within the timeout fails with [ErrTimeout] (and so fails its
// request closed) while the sink's Append goes on in the background; until it returns, the
// following appends fail at once instead of piling up behind it. The sink sees the deadline
// in its context too, and the caller's values and deadline; the context is the sink's only
// until its Append returns (it must not keep it).
//
// A sink that can append without waiting (a [Writer] whose record needs one write to the
// kernel, no fsync, rotation or checkpoint, and whose lock is free: TryAppend) is called on
// the caller's goroutine first: most appends then cost no hand-off between goroutines, which
// on a busy machine costs more than the append itself. Such an append is bounded by that one
// write, not by the timeout; everything that can wait (a lock held by another append, an
// fsync, a rotation, a checkpoint, a witness) goes the guarded way below.
//
// The sink's Append runs on a worker goroutine the guard keeps while appends keep coming
// (one per append in flight, each waiting up to a second for the next), so that an append
// costs no goroutine, context, timer or channel of its own.
type Guarded struct {
	sink    Sink
	timeout time.Duration
	log     hclog.Logger

	appends, failures, timeouts atomic.Uint64
	// stuck counts the appends that timed out and have not returned yet.
	stuck atomic.Int64

	failing atomic.Bool // a run of failures is on; mu orders its changes and their log lines
	mu      sync.Mutex
	run     uint64    // failures in the current run, under mu
	since   time.Time // the first failure of the current run, under mu

	idleMu sync.Mutex
	idle   []*appendWorker // workers waiting for an append, the last to finish last, under idleMu
}

// GuardStats counts the appends a [Guarded] sink saw.
type GuardStats struct {
	// Appends counts the appends that were tried, failed or not, except those whose caller's
	// context had ended before or while they ran.
	Appends uint64
	// Failures counts the appends that returned an error, timeouts included.
	Failures uint64
	// Timeouts counts the failures that were a timeout ([ErrTimeout]).
	Timeouts uint64
	// Stuck counts the appends that timed out and have not returned yet; while there is one,
	// appends fail at once.
	Stuck int64
}

// Guard returns sink guarded with timeout ([DefaultAppendTimeout] if it is not positive);
// failures are logged to log (nothing is logged if it is nil).
func Guard(sink Sink, timeout time.Duration, log hclog.Logger) *Guarded {
	if timeout <= 0 {
		timeout = DefaultAppendTimeout
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Guarded{sink: sink, timeout: timeout, log: log}
}

// Timeout returns the deadline the guard gives every append.
func (g *Guarded) Timeout() time.Duration { return g.timeout }

// Stats returns the counts so far.
func (g *Guarded) Stats() GuardStats {
	return GuardStats{Appends: g.appends.Load(), Failures: g.failures.Load(), Timeouts: g.timeouts.Load(),
		Stuck: g.stuck.Load()}
}

// Failures counts the appends that failed, timeouts included.
func (g *Guarded) Failures() uint64 { return g.failures.Load() }

// PathDigest is the sink's PathDigest.
func (g *Guarded) PathDigest(path string) string { return g.sink.PathDigest(path) }

// ArgumentsDigester is a [Sink] that can digest a forwarded request's arguments under its
// audit key ([ArgumentsDigest]), as [Writer] does.
type ArgumentsDigester interface {
	ArgumentsDigest(args []byte) (string, error)
}

// ArgumentsDigest is the sink's ArgumentsDigest; it fails when the sink has none.
func (g *Guarded) ArgumentsDigest(args []byte) (string, error) {
	d, ok := g.sink.(ArgumentsDigester)
	if !ok {
		return "", fmt.Errorf("audit: the sink %T digests no arguments", g.sink)
	}
	return d.ArgumentsDigest(args)
}

// The states of an append handed to a worker. Whoever moves it from appendRunning settles
// it: the worker when the append returned in time, the caller when it did not.
const (
	appendRunning  int32 = iota
	appendReturned       // the append returned before its deadline
	appendTimedOut       // the guard's deadline passed: counted in stuck until it returns
	appendLeft           // the caller's context ended first: the caller is answered, nothing waits
)

// Append appends rec to the sink within the guard's timeout. A caller's context that has
// ended already fails it uncounted; one the caller cancels while it runs fails it uncounted
// too, and its deadline passing first fails it counted.
func (g *Guarded) Append(ctx context.Context, rec Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("audit: append: %w", err)
	}
	if g.stuck.Load() > 0 {
		err := fmt.Errorf("%w (%w): an earlier append has not returned", ErrUnavailable, ErrTimeout)
		g.failed(rec.Kind, err, true)
		return 0, err
	}
	// Only a Writer itself: a sink that embeds one has an Append of its own,
	// which the Writer's promoted TryAppend would go round.
	if w, ok := g.sink.(*Writer); ok {
		if seq, done, err := w.TryAppend(rec); done {
			return seq, g.settle(ctx, rec.Kind, err, false)
		}
	}
	w := g.worker()
	w.state.Store(appendRunning)
	w.rec, w.ctx.caller, w.ctx.deadline = rec, ctx, time.Now().Add(g.timeout)
	w.deadline.Reset(g.timeout)
	w.start <- struct{}{}
	select {
	case <-w.done:
		w.deadline.Stop()
		return g.finish(ctx, w, false)
	case <-ctx.Done(): // the caller's context ended
		w.deadline.Stop()
		cause := context.Cause(ctx)
		if !w.state.CompareAndSwap(appendRunning, appendLeft) {
			<-w.done // it returned meanwhile
			return g.finish(ctx, w, false)
		}
		w.ctx.end(ctx.Err(), cause)
		return 0, g.settle(ctx, rec.Kind, fmt.Errorf("%w: append: %w", ErrUnavailable, cause), false)
	case <-w.deadline.C:
	}
	g.stuck.Add(1) // before the state changes, so that the worker undoes it after
	if !w.state.CompareAndSwap(appendRunning, appendTimedOut) {
		g.stuck.Add(-1)
		<-w.done // it returned as the deadline passed
		return g.finish(ctx, w, true)
	}
	w.ctx.end(context.DeadlineExceeded, ErrTimeout)
	return 0, g.settle(ctx, rec.Kind, fmt.Errorf("%w (%w): no answer within %s", ErrUnavailable, ErrTimeout, g.timeout), true)
}

// finish settles an append that returned in time on w, and puts w back among the idle
// workers.
func (g *Guarded) finish(ctx context.Context, w *appendWorker, timedOut bool) (uint64, error) {
	seq, err, kind := w.seq, w.err, w.rec.Kind
	w.rec, w.seq, w.err, w.ctx.caller = Record{}, 0, nil, context.Background()
	g.idleMu.Lock()
	g.idle = append(g.idle, w)
	g.idleMu.Unlock()
	return seq, g.settle(ctx, kind, err, timedOut)
}

// workerIdle is how long a worker waits for the next append before it ends.
const workerIdle = time.Second

// appendWorker runs the sink's appends, one at a time, on a goroutine of its own: the
// caller hands it a record (start) and waits for it (done) at most until its deadline timer
// fires. It is reused until an append ends early (past its deadline, or its caller gone):
// its context has then ended, and it ends once that append returns.
type appendWorker struct {
	g        *Guarded
	start    chan struct{} // an append was handed over (buffered: 1)
	done     chan struct{} // the append returned (buffered: 1)
	deadline *time.Timer   // the caller's wait
	idle     *time.Timer   // the worker's wait for the next append
	ctx      appendContext // the context of every append it runs

	// The append handed over, and its result: written by the caller before start and by the
	// worker before done.
	rec   Record
	seq   uint64
	err   error
	state atomic.Int32
}

// worker returns an idle worker, or a new one.
func (g *Guarded) worker() *appendWorker {
	g.idleMu.Lock()
	if n := len(g.idle); n > 0 {
		w := g.idle[n-1]
		g.idle[n-1] = nil
		g.idle = g.idle[:n-1]
		g.idleMu.Unlock()
		return w
	}
	g.idleMu.Unlock()
	w := &appendWorker{g: g, start: make(chan struct{}, 1), done: make(chan struct{}, 1),
		deadline: time.NewTimer(g.timeout), idle: time.NewTimer(workerIdle)}
	w.ctx.Context, w.ctx.cancel = context.WithCancelCause(context.Background())
	go w.work()
	return w
}

// retire takes w out of the idle workers, and reports whether it was there (it was not if a
// caller took it meanwhile, or if its last caller has not put it back yet).
func (g *Guarded) retire(w *appendWorker) bool {
	g.idleMu.Lock()
	defer g.idleMu.Unlock()
	i := slices.Index(g.idle, w)
	if i < 0 {
		return false
	}
	g.idle = slices.Delete(g.idle, i, i+1)
	return true
}

// work runs the appends handed to w until it has waited workerIdle for one, or one ended
// early.
func (w *appendWorker) work() {
	for {
		select {
		case <-w.start:
		case <-w.idle.C:
			if w.g.retire(w) {
				return
			}
			w.idle.Reset(workerIdle)
			continue
		}
		w.append()
		if w.state.CompareAndSwap(appendRunning, appendReturned) {
			w.idle.Reset(workerIdle)
			w.done <- struct{}{}
			continue
		}
		if w.state.Load() == appendTimedOut {
			w.g.stuck.Add(-1) // it came back after all
		}
		w.idle.Stop()
		return
	}
}

// append runs the record handed to w on the sink. A sink that panics fails the append, as a
// handler that panics fails its request, instead of ending the process from the worker.
func (w *appendWorker) append() {
	defer func() {
		if r := recover(); r != nil {
			w.seq, w.err = 0, fmt.Errorf("%w: the sink panicked: %v", ErrUnavailable, r)
		}
	}()
	w.seq, w.err = w.g.sink.Append(&w.ctx, w.rec)
}

// appendContext is the context a worker's appends run under: the caller's values, and the
// earlier of the caller's deadline and the guard's. It ends when the caller's context ends or
// the guard's deadline passes (end, by the caller), with the error and cause the context of
// context.WithDeadlineCause(ctx, deadline, ErrTimeout) would have. Done and the cause are
// those of the worker's own cancelable context, embedded, so that context.AfterFunc and
// contexts derived from it by the sink are registered with it as with any context of the
// standard library, with no goroutine of their own.
type appendContext struct {
	context.Context // the worker's: context.WithCancelCause(context.Background())
	cancel          context.CancelCauseFunc
	caller          context.Context // the caller's
	deadline        time.Time       // the guard's
	err             error           // Err once the context ended; set before cancel
}

// end ends the context with err and cause.
func (c *appendContext) end(err, cause error) {
	c.err = err
	c.cancel(cause)
}

// Deadline is the earlier of the caller's deadline and the guard's.
func (c *appendContext) Deadline() (time.Time, bool) {
	if d, ok := c.caller.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Err is the caller's context's error if that ended first, else context.DeadlineExceeded
// once the guard's deadline passed.
func (c *appendContext) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return c.err
}

// Value is the worker context's own value (what context.Cause and context.AfterFunc look
// for), else the caller's.
func (c *appendContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.caller.Value(key)
}

// settle counts the result of an append for the caller's ctx and returns err; timedOut says
// that the guard's deadline had passed.
func (g *Guarded) settle(ctx context.Context, kind Kind, err error, timedOut bool) error {
	switch {
	case err == nil:
		g.appends.Add(1)
		if g.failing.Load() {
			g.recovered()
		}
	case errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (the request was cancelled): not the trail's failure.
	default:
		g.failed(kind, err, timedOut)
	}
	return err
}

// failed counts a failed append and logs it if it starts a run of failures.
func (g *Guarded) failed(kind Kind, err error, timedOut bool) {
	g.appends.Add(1)
	g.failures.Add(1)
	if timedOut {
		g.timeouts.Add(1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.run++
	if g.failing.Load() {
		g.log.Debug("audit record still not written", "kind", kind, "error", err, "failures", g.failures.Load())
		return
	}
	g.failing.Store(true)
	g.since = time.Now()
	args := []any{"kind", kind, "error", err, "timeout", g.timeout, "failures", g.failures.Load(), "timeouts", g.timeouts.Load()}
	if c, ok := g.sink.(interface{ Failures() uint64 }); ok {
		args = append(args, "sink_failures", c.Failures())
	}
	g.log.Error("cannot write the audit record: requests are refused until the audit trail can be written again", args...)
}

// recovered ends a run of failures and logs how long it lasted.
func (g *Guarded) recovered() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.failing.Load() {
		return
	}
	g.failing.Store(false)
	g.log.Info("audit trail written again", "failed_appends", g.run, "after", time.Since(g.since).Round(time.Millisecond),
		"failures", g.failures.Load(), "timeouts", g.timeouts.Load())
	g.run = 0
}
