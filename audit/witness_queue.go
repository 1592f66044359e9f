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

// Delivery to witnesses.
const (
	// maxWitnessPending is the most statements waiting for one witness; past it the oldest is
	// dropped (and counted as failed). Checkpoints of one segment are coalesced (the newest
	// says all the older ones do), so only a witness that stays down through many rotations
	// or retention passes reaches it.
	maxWitnessPending = 256
	// witnessRetryMin and witnessRetryMax bound the pause after a failed delivery.
	witnessRetryMin = time.Second
	witnessRetryMax = 30 * time.Second
)

// WitnessStats counts the deliveries to one witness.
type WitnessStats struct {
	// Witness names the witness ([Witness.String]).
	Witness string `json:"witness"`
	// Sent counts the statements delivered.
	Sent uint64 `json:"sent"`
	// Failed counts the failed deliveries (errors, timeouts, statements dropped or not
	// delivered before Close); a statement that failed is tried again until a newer one for
	// the same segment replaces it.
	Failed uint64 `json:"failed"`
	// Pending counts the statements waiting.
	Pending int `json:"pending"`
}

// witnessQueue delivers statements to one witness from a goroutine of its own, so that a slow
// or unreachable witness never holds up an append.
type witnessQueue struct {
	wit     Witness
	timeout time.Duration
	log     hclog.Logger

	mu       sync.Mutex
	pending  []WitnessEvent
	inFlight bool // the loop took a statement and has not counted it yet
	closing  bool
	given    int           // statements given up on once closing (their last delivery failed)
	kick     chan struct{} // wakes the loop: a statement arrived
	stop     chan struct{} // closed when closing begins
	done     chan struct{} // closed when the loop has ended

	sent, failed atomic.Uint64
	outage       uint64 // failed deliveries since the last success; loop only
}

// newWitnessQueue starts delivering to wit.
func newWitnessQueue(wit Witness, timeout time.Duration, log hclog.Logger) *witnessQueue {
	q := &witnessQueue{wit: wit, timeout: timeout, log: log,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// push queues ev. A checkpoint replaces a waiting checkpoint of the same segment: it reaches
// further in the same chain.
func (q *witnessQueue) push(ev WitnessEvent) {
	q.mu.Lock()
	i := slices.IndexFunc(q.pending, func(p WitnessEvent) bool {
		return ev.Kind == WitnessCheckpoint && p.Kind == WitnessCheckpoint && p.Segment == ev.Segment
	})
	dropped := false
	switch {
	case i >= 0:
		q.pending[i] = ev
	case len(q.pending) >= maxWitnessPending:
		q.pending = append(q.pending[:0], q.pending[1:]...)
		dropped = true
		fallthrough
	default:
		q.pending = append(q.pending, ev)
	}
	q.mu.Unlock()
	if dropped {
		q.failed.Add(1)
		q.log.Warn("audit witness: too many statements waiting; the oldest was dropped", "witness", q.wit.String(), "failures", q.failed.Load())
	}
	q.wake()
}

// wake wakes the loop.
func (q *witnessQueue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// run delivers the waiting statements in order; after a failure it pauses (1 s, doubling up to
// 30 s) and tries again. Once closing, it makes one attempt at each statement left and ends.
func (q *witnessQueue) run() {
	defer close(q.done)
	pause := witnessRetryMin
	for {
		ev, ok := q.next()
		if !ok {
			return
		}
		err := q.deliver(ev)
		q.result(ev, err)
		if err == nil {
			pause = witnessRetryMin
			continue
		}
		if q.retry(ev) {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-q.stop:
			}
			t.Stop()
			pause = min(2*pause, witnessRetryMax)
		}
	}
}

// next waits for the next statement; false once closing and none is left.
func (q *witnessQueue) next() (WitnessEvent, bool) {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			ev := q.pending[0]
			q.pending = append(q.pending[:0], q.pending[1:]...)
			q.inFlight = true
			q.mu.Unlock()
			return ev, true
		}
		closing := q.closing
		q.mu.Unlock()
		if closing {
			return WitnessEvent{}, false
		}
		select {
		case <-q.kick:
		case <-q.stop:
		}
	}
}

// retry puts a statement whose delivery failed back at the head of the queue, unless a newer
// checkpoint of its segment is waiting or the queue is closing; it reports whether it did.
func (q *witnessQueue) retry(ev WitnessEvent) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		q.given++
		return false
	}
	if len(q.pending) >= maxWitnessPending {
		return false
	}
	if ev.Kind == WitnessCheckpoint && slices.ContainsFunc(q.pending, func(p WitnessEvent) bool {
		return p.Kind == WitnessCheckpoint && p.Segment == ev.Segment
	}) {
		return true // the newer one goes next, after the pause
	}
	q.pending = slices.Insert(q.pending, 0, ev)
	return true
}

// deliver sends ev, waiting at most the timeout. A Send still running then is waited for
// before the next one (one delivery at a time), but the failure is counted and logged first.
func (q *witnessQueue) deliver(ev WitnessEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- q.wit.Send(ctx, ev) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	err := fmt.Errorf("no answer within %s", q.timeout)
	q.result(ev, err)
	<-done
	return errCounted{err}
}

// errCounted is a failure already counted and logged.
type errCounted struct{ error }

// result counts a delivery and logs a change between reachable and unreachable: the first
// failure of an outage as a warning, the recovery with the number of failures it took.
func (q *witnessQueue) result(ev WitnessEvent, err error) {
	if errors.As(err, new(errCounted)) {
		return
	}
	q.mu.Lock()
	q.inFlight = false
	q.mu.Unlock()
	if err == nil {
		q.sent.Add(1)
		if q.outage > 0 {
			q.log.Info("audit witness reachable again", "witness", q.wit.String(), "failed_deliveries", q.outage)
			q.outage = 0
		}
		return
	}
	q.failed.Add(1)
	q.outage++
	if q.outage == 1 {
		q.log.Warn("audit witness unreachable: requests go on, but the trail's checkpoints are not witnessed until it is back",
			"witness", q.wit.String(), "segment", ev.Segment, "seq", ev.Seq, "error", err, "failures", q.failed.Load())
		return
	}
	q.log.Debug("audit witness still unreachable", "witness", q.wit.String(), "error", err, "failures", q.failed.Load())
}

// close lets the loop try each waiting statement once more until deadline, then closes the
// witness. Statements still waiting are counted as failed and logged.
func (q *witnessQueue) close(deadline time.Time) {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	close(q.stop)
	t := time.NewTimer(time.Until(deadline))
	select {
	case <-q.done:
	case <-t.C:
	}
	t.Stop()
	q.mu.Lock()
	lost := len(q.pending)
	if q.inFlight {
		lost++
	}
	failed := lost + q.given
	q.pending, q.inFlight, q.given = nil, false, 0
	q.mu.Unlock()
	q.failed.Add(uint64(lost))
	if failed > 0 {
		q.log.Warn("audit witness: statements not delivered before the trail was closed",
			"witness", q.wit.String(), "statements", failed, "failures", q.failed.Load())
	}
	if err := q.wit.Close(); err != nil {
		q.log.Warn("audit witness: close", "witness", q.wit.String(), "error", err)
	}
}

// stats returns the queue's counts.
func (q *witnessQueue) stats() WitnessStats {
	q.mu.Lock()
	n := len(q.pending)
	q.mu.Unlock()
	return WitnessStats{Witness: q.wit.String(), Sent: q.sent.Load(), Failed: q.failed.Load(), Pending: n}
}
