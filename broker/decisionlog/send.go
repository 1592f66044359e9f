// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/open-policy-agent/opa/v1/util"
)

// failureBackoffBase is the wait after the first failed upload; each further failure in a row
// multiplies it by 1.6 (OPA's util.DefaultBackoff, with 20% jitter), up to max_delay_seconds.
const failureBackoffBase = time.Second

// item is what a chain worker hands the sender: an event, or a marker that keeps its place
// among the events.
type item struct {
	segment string
	seq     uint64
	event   []byte   // the event's JSON; nil for a marker
	done    *claim   // marker: every event of the claim's segment is before it
	release []*claim // marker: let these claims go once what is before is accepted
}

// outbox is the sender's queue: the items taken from the workers and not yet accepted.
type outbox struct {
	items  []item
	events int   // events among them
	bytes  int64 // their encoded size
}

// push appends an item.
func (o *outbox) push(it item) {
	o.items = append(o.items, it)
	if it.event != nil {
		o.events++
		o.bytes += int64(len(it.event))
	}
}

// full reports whether the outbox holds as many events as the configuration lets it.
func (o *outbox) full(cfg *config) bool {
	return o.events >= cfg.maxEvents || (cfg.maxBytes > 0 && o.bytes >= cfg.maxBytes)
}

// sendLoop takes items from the workers and uploads them: every reporting delay
// (min_delay_seconds to max_delay_seconds, at random), at once with trigger immediate, when
// the outbox is full, and while Close flushes; after a failure, not before the backoff.
func (u *Uploader) sendLoop() {
	defer close(u.sendDone)
	var (
		box         outbox
		due         = time.Now().Add(u.reportDelay())
		failing     int // failed uploads in a row
		failSince   time.Time
		drain       = u.drain
		workersDone chan struct{}   // closed once every worker returned (after Close)
		workersWait <-chan struct{} // workersDone until seen closed
		finished    bool            // every worker returned
		flushEnd    <-chan struct{} // Close's context
		flushCtx    = u.ctx
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		u.settle(&box)
		u.queued.Store(int64(box.events))
		draining := drain == nil
		now := time.Now()
		if box.events > 0 && (!now.Before(due) || failing == 0 && (u.cfg.immediate || draining || box.full(u.cfg))) {
			err := u.upload(flushCtx, &box)
			switch {
			case err == nil && failing > 0:
				u.log.Info("decision-log upload recovered", "failed_attempts", failing,
					"failing_for", time.Since(failSince).Round(time.Millisecond))
				failing = 0
				fallthrough
			case err == nil:
				if box.events == 0 {
					due = time.Now().Add(u.reportDelay())
				}
			default:
				if draining && flushCtx.Err() != nil {
					u.countLeft(&box, workersDone)
					return
				}
				failing++
				if failing == 1 {
					failSince = now
				}
				backoff := util.DefaultBackoff(float64(failureBackoffBase), float64(max(u.cfg.maxDelay, failureBackoffBase)), failing)
				due = time.Now().Add(backoff)
				u.failed(err, failing, box.events, backoff)
			}
			continue
		}
		if finished && box.events == 0 && len(box.items) == 0 && len(u.items) == 0 {
			return
		}
		var in chan item
		if !box.full(u.cfg) {
			in = u.items
		}
		var wake <-chan time.Time
		if box.events > 0 {
			timer.Reset(time.Until(due))
			wake = timer.C
		}
		select {
		case it := <-in:
			box.push(it)
		case <-wake:
		case <-drain:
			drain = nil
			flushCtx = u.closeCtx
			flushEnd = flushCtx.Done()
			workersDone = make(chan struct{})
			workersWait = workersDone
			go func(done chan struct{}) {
				<-u.scanDone
				u.workers.Wait()
				close(done)
			}(workersDone)
		case <-workersWait:
			workersWait, finished = nil, true
		case <-flushEnd:
			u.countLeft(&box, workersDone)
			return
		}
		timer.Stop()
	}
}

// reportDelay is the wait before the next periodic upload: at random between
// min_delay_seconds and max_delay_seconds, as OPA's plugin waits.
func (u *Uploader) reportDelay() time.Duration {
	spread := u.cfg.maxDelay - u.cfg.minDelay
	if spread <= 0 {
		return u.cfg.minDelay
	}
	return u.cfg.minDelay + rand.N(spread)
}

// failed logs and counts a failed upload: the first of a run at error level, the others at
// debug level.
func (u *Uploader) failed(err error, attempt, queued int, retryIn time.Duration) {
	u.failures.Add(1)
	u.errMu.Lock()
	u.lastErr, u.lastErrAt = err.Error(), time.Now()
	u.errMu.Unlock()
	args := []any{"error", err, "queued", queued, "retry_in", retryIn.Round(time.Millisecond)}
	if attempt == 1 {
		u.log.Error("decision-log upload failed; the events stay in the audit trail and are sent when the service answers", args...)
		return
	}
	u.log.Debug("decision-log upload failed again", append(args, "failed_attempts", attempt)...)
}

// countLeft counts the events left when the flush ran out of time: those in the outbox and
// those the workers still read from the trail, for at most countBudget.
func (u *Uploader) countLeft(box *outbox, workersDone chan struct{}) {
	u.remaining = box.events
	budget := time.NewTimer(countBudget)
	defer budget.Stop()
	for {
		select {
		case it := <-u.items:
			if it.event != nil {
				u.remaining++
			}
			continue
		case <-workersDone:
		case <-budget.C:
			u.atLeast = true
		}
		// What the workers sent before they returned (or before the budget ran out) is
		// still in the channel.
		for {
			select {
			case it := <-u.items:
				if it.event != nil {
					u.remaining++
				}
			default:
				return
			}
		}
	}
}

// settle applies the markers at the head of the outbox: everything before them is accepted.
func (u *Uploader) settle(box *outbox) {
	for len(box.items) > 0 && box.items[0].event == nil {
		u.accepted(box.items[:1])
		box.items = box.items[1:]
	}
}

// upload posts one batch from the head of the outbox and, when the service accepts it, records
// the delivery and applies the markers it covers.
func (u *Uploader) upload(ctx context.Context, box *outbox) error {
	n, payload, err := u.batch(box.items)
	if err != nil {
		return err
	}
	if err := u.post(ctx, payload); err != nil {
		return err
	}
	u.accepted(box.items[:n])
	for _, it := range box.items[:n] {
		if it.event != nil {
			box.events--
			box.bytes -= int64(len(it.event))
		}
	}
	box.items = box.items[n:]
	return nil
}

// accepted records that the service accepted items (events and markers, in order): each
// claim's cursor advances to its last event, a done marker marks its segment done and lets the
// claim go, a release marker lets its claims go.
func (u *Uploader) accepted(items []item) {
	var touched []*claim
	for _, it := range items {
		switch {
		case it.event != nil:
			u.delivered.Add(1)
			u.state.mu.Lock()
			c := u.state.claims[it.segment]
			if c != nil && it.seq > c.Seq {
				c.Seq = it.seq
			}
			u.state.mu.Unlock()
			if c != nil && (len(touched) == 0 || touched[len(touched)-1] != c) {
				touched = append(touched, c)
			}
		case it.done != nil:
			u.state.mu.Lock()
			it.done.Done = true
			u.state.mu.Unlock()
			u.state.release(it.done)
		default:
			for _, c := range it.release {
				u.state.release(c)
			}
		}
	}
	for _, c := range touched {
		if !u.state.held(c.Segment) {
			continue // released above, its cursor written then
		}
		if err := u.state.save(c); err != nil {
			u.log.Error("cannot record the decision-log delivery; its events may be sent again", "error", err)
		}
	}
}

// batch encodes the longest run of events at the head of items (markers included) whose
// gzip-compressed JSON array fits upload_size_limit_bytes, and returns how many items it
// covers. An event larger than the limit by itself goes alone.
func (u *Uploader) batch(items []item) (n int, payload []byte, err error) {
	limit := u.cfg.uploadLimit
	budget := max(16*limit, 1<<20) // compressed JSON is a fraction of its size
	var size int64
	count := 0
	for n < len(items) {
		it := items[n]
		if it.event != nil {
			if count > 0 && size+int64(len(it.event)) > budget {
				break
			}
			size += int64(len(it.event)) + 1
			count++
		}
		n++
	}
	for {
		payload, err = gzipEvents(items[:n])
		if err != nil || int64(len(payload)) <= limit || count == 1 {
			return n, payload, err
		}
		// Too large: keep the share that should fit, with a margin, and encode again.
		keep := max(1, int(int64(count)*limit*9/10/int64(len(payload))))
		n, count = cut(items, keep), keep
	}
}

// cut returns how many items hold the first k events.
func cut(items []item, k int) int {
	for i, it := range items {
		if it.event != nil {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return len(items)
}

// gzipEvents is the gzip-compressed JSON array of the events among items.
func gzipEvents(items []item) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte{'['})
	first := true
	for _, it := range items {
		if it.event == nil {
			continue
		}
		if !first {
			zw.Write([]byte{','})
		}
		first = false
		zw.Write(it.event)
	}
	zw.Write([]byte{']'})
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress decision-log events: %w", err)
	}
	return buf.Bytes(), nil
}

// post uploads one batch as OPA's decision-log plugin does: POST to the resource, JSON
// encoded with gzip; any status but 2xx is a failure.
func (u *Uploader) post(ctx context.Context, payload []byte) error {
	resp, err := u.cfg.client.
		WithHeader("Content-Type", "application/json").
		WithHeader("Content-Encoding", "gzip").
		WithBytes(payload).
		Do(ctx, "POST", u.cfg.resource)
	if err != nil {
		return fmt.Errorf("upload to %s: %w", u.cfg.target(), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("upload to %s: %s", u.cfg.target(), resp.Status)
	}
	return nil
}
