package audit

import (
	"context"
	"errors"
	"fmt"
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
// in its context too.
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

// pendingAppend is one append running on the sink.
type pendingAppend struct {
	rec   Record
	seq   uint64
	err   error
	done  chan struct{}
	state atomic.Int32 // appendRunning, then one of the others, set once
}

// The states of a pendingAppend. Whoever moves it from appendRunning settles it: the sink's
// goroutine when the append returned in time, the caller when it did not.
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
	actx, cancel := context.WithTimeoutCause(ctx, g.timeout, ErrTimeout)
	defer cancel()
	p := &pendingAppend{rec: rec, done: make(chan struct{})}
	go g.appendIn(actx, p)
	select {
	case <-p.done:
		return p.seq, g.settle(ctx, rec.Kind, p.err, false)
	case <-actx.Done():
	}
	cause := context.Cause(actx)
	if !errors.Is(cause, ErrTimeout) { // the caller's context ended
		if !p.state.CompareAndSwap(appendRunning, appendLeft) {
			<-p.done // it returned meanwhile
			return p.seq, g.settle(ctx, rec.Kind, p.err, false)
		}
		return 0, g.settle(ctx, rec.Kind, fmt.Errorf("%w: append: %w", ErrUnavailable, cause), false)
	}
	g.stuck.Add(1) // before the state changes, so that the sink's goroutine undoes it after
	if !p.state.CompareAndSwap(appendRunning, appendTimedOut) {
		g.stuck.Add(-1)
		<-p.done // it returned as the deadline passed
		return p.seq, g.settle(ctx, rec.Kind, p.err, true)
	}
	return 0, g.settle(ctx, rec.Kind, fmt.Errorf("%w (%w): no answer within %s", ErrUnavailable, ErrTimeout, g.timeout), true)
}

// appendIn runs p on the sink under ctx, in a goroutine of its own. A sink that panics fails
// the append, as a handler that panics fails its request, instead of ending the process.
func (g *Guarded) appendIn(ctx context.Context, p *pendingAppend) {
	defer func() {
		if r := recover(); r != nil {
			p.seq, p.err = 0, fmt.Errorf("%w: the sink panicked: %v", ErrUnavailable, r)
		}
		close(p.done)
		if !p.state.CompareAndSwap(appendRunning, appendReturned) && p.state.Load() == appendTimedOut {
			g.stuck.Add(-1) // it came back after all
		}
	}()
	p.seq, p.err = g.sink.Append(ctx, p.rec)
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
