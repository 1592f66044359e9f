// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// loadSpec is how long and how hard one run drives its target.
type loadSpec struct {
	inflight int           // requests outstanding at once (1: sequential)
	warmup   time.Duration // requests sent before this are not measured
	duration time.Duration // how long the measured part sends requests
	max      int           // measured requests at most (0: no limit)
	// once, when not 0, is how many requests the run sends at most, warm-up
	// included: the op's requests 0 to once-1, each once (the serve
	// workloads, whose every request names a path not requested before).
	// The warm-up then ends after warmup or once/onceWarmupShare requests,
	// whichever comes first.
	once int
	// onMeasure, when set, is called once, as the measured part starts.
	onMeasure func()
}

// runStats is what one run measured.
type runStats struct {
	lat      []time.Duration // of each measured, successful request
	elapsed  time.Duration   // from the measured part's start to its last reply
	errors   int             // failed requests, warm-up included
	firstErr string
	// first is the latency of a paged run's first page, warm-up or not: the
	// child's first listing of the directory, which it has no snapshot of
	// (0: not a paged run, or the page failed), and the child's CPU time
	// over it (0: not known).
	first, firstCPU time.Duration
}

// fail counts a failed request.
func (s *runStats) fail(err error) {
	if s.errors == 0 {
		s.firstErr = err.Error()
	}
	s.errors++
}

// rps is the measured, successful requests per second.
func (s *runStats) rps() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lat)) / s.elapsed.Seconds()
}

// percentile returns the p-th percentile (nearest rank) of d, sorting it.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

// checkReply checks one reply: an error, or a result that passes check.
func checkReply(check func([]byte, bool) error, result, rpcErr []byte, full bool) error {
	if rpcErr != nil {
		return fmt.Errorf("error reply: %.300s", rpcErr)
	}
	if result == nil {
		return errors.New("reply without a result")
	}
	return check(result, full)
}

// phase tracks a run's warm-up and measured part.
type phase struct {
	spec      loadSpec
	begin     time.Time
	measuring bool
	start     time.Time // of the measured part
}

// onceWarmupShare is the most of a run's paths (loadSpec.once) its warm-up
// uses: a target fast enough to use more in -warmup starts its measured part
// sooner, so that most of them are measured.
const onceWarmupShare = 4 // a quarter

// next reports whether another request may be sent, now that total requests
// were, sent measured ones among them; it starts the measured part once the
// warm-up is over.
func (p *phase) next(total, sent int) bool {
	now := time.Now()
	if !p.measuring && (now.Sub(p.begin) >= p.spec.warmup || p.spec.once > 0 && total >= p.spec.once/onceWarmupShare) {
		if p.spec.onMeasure != nil {
			p.spec.onMeasure()
		}
		p.measuring, p.start = true, time.Now()
	}
	return !p.measuring || now.Sub(p.start) < p.spec.duration && (p.spec.max <= 0 || sent < p.spec.max)
}

// awaitReply reads the child's stdout up to the reply to id; requests and
// notifications from the child are skipped.
func awaitReply(c *child, id int64) (result, rpcErr []byte, at time.Time, err error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, nil, time.Time{}, err
		}
		at := time.Now()
		got, result, rpcErr, reply, err := envelope(line)
		if err != nil {
			return nil, nil, at, err
		}
		if !reply {
			continue
		}
		if got != id {
			return nil, nil, at, fmt.Errorf("a reply to id %d while waiting for %d", got, id)
		}
		return result, rpcErr, at, nil
	}
}

// runLoad sends o's requests to c as spec says and measures each one's
// latency, from just before its line is written to just after its reply is
// read. A first reply that fails its check ends the run.
func runLoad(c *child, o op, spec loadSpec) (*runStats, error) {
	if spec.inflight <= 1 {
		return runSequential(c, o, spec)
	}
	return runPipelined(c, o, spec)
}

func runSequential(c *child, o op, spec loadSpec) (*runStats, error) {
	st := &runStats{}
	ph := &phase{spec: spec, begin: time.Now()}
	var buf []byte
	for i := 0; (spec.once == 0 || i < spec.once) && ph.next(i, len(st.lat)); i++ {
		id := int64(i + 1)
		buf = o.req(buf[:0], id, i)
		t0 := time.Now()
		if err := c.send(buf); err != nil {
			return nil, err
		}
		result, rpcErr, at, err := awaitReply(c, id)
		if err != nil {
			return nil, err
		}
		if err := checkReply(o.check, result, rpcErr, i == 0); err != nil {
			st.fail(err)
			if i == 0 {
				return st, nil
			}
			continue
		}
		if ph.measuring {
			st.lat = append(st.lat, at.Sub(t0))
			st.elapsed = at.Sub(ph.start)
		}
	}
	return st, nil
}

// reply is a reply as the reader goroutine of a pipelined run saw it.
type reply struct {
	id    int64
	at    time.Time
	err   error // the reply failed its check
	fatal error // the stream failed: the run ends
}

func runPipelined(c *child, o op, spec loadSpec) (*runStats, error) {
	replies := make(chan reply, spec.inflight+1)
	stop := make(chan struct{})
	defer close(stop)
	done := make(chan struct{})
	c.mu.Lock()
	c.readerDone = done
	c.mu.Unlock()
	// The reader parses and checks replies as they come; once the run is
	// over it keeps reading (and dropping) until the child's stdout ends, so
	// that the child never blocks on a full pipe.
	go func() {
		defer close(done)
		deliver := func(r reply) {
			select {
			case replies <- r:
			case <-stop:
			}
		}
		full := true
		for {
			line, err := c.readLine()
			if err != nil {
				deliver(reply{fatal: err})
				return
			}
			at := time.Now()
			id, result, rpcErr, isReply, err := envelope(line)
			if err != nil {
				deliver(reply{fatal: err})
				continue
			}
			if !isReply {
				continue
			}
			deliver(reply{id: id, at: at, err: checkReply(o.check, result, rpcErr, full)})
			full = false
		}
	}()

	ring := int64(max(1024, 2*spec.inflight))
	starts := make([]time.Time, ring)
	st := &runStats{}
	ph := &phase{spec: spec, begin: time.Now()}
	var buf []byte
	var sent, recv int64                  // ids are 1..sent
	firstMeasured := int64(math.MaxInt64) // the first id sent in the measured part
	sending := true
	for {
		for sending && sent-recv < int64(spec.inflight) {
			if spec.once > 0 && sent >= int64(spec.once) {
				sending = false
				break
			}
			measured := 0
			if ph.measuring {
				measured = int(sent + 1 - firstMeasured)
			}
			if !ph.next(int(sent), measured) {
				sending = false
				break
			}
			if ph.measuring && firstMeasured == math.MaxInt64 {
				firstMeasured = sent + 1
			}
			sent++
			buf = o.req(buf[:0], sent, int(sent-1))
			starts[sent%ring] = time.Now()
			if err := c.send(buf); err != nil {
				return nil, err
			}
		}
		if recv == sent {
			return st, nil
		}
		r := <-replies
		if r.fatal != nil {
			return nil, r.fatal
		}
		if r.id < 1 || r.id > sent || r.id <= sent-ring {
			return nil, fmt.Errorf("a reply to id %d, which is not outstanding", r.id)
		}
		recv++
		if r.err != nil {
			st.fail(r.err)
			if recv == 1 {
				sending = false // the first reply failed its check: drain and stop
			}
			continue
		}
		if r.id >= firstMeasured {
			st.lat = append(st.lat, r.at.Sub(starts[r.id%ring]))
			st.elapsed = max(st.elapsed, r.at.Sub(ph.start))
		}
	}
}

// runPages lists a directory of total entries page by page, over and over,
// and measures each page. Every pass is checked to list every entry once.
// The first page, the child's first listing of the directory (a fresh child
// has kept nothing of it), is also measured on its own, warm-up or not; warm,
// when given, is a listing of another (small) directory sent before it,
// unmeasured, so that the first page does not also pay for the child's
// first request. The first page waits until the child is idle (see settle).
func runPages(c *child, p, warm *pageOp, total, limit int, spec loadSpec) (*runStats, error) {
	st := &runStats{}
	if warm != nil {
		const id = 1 << 40 // not one of the pages'
		if err := c.send(warm.req(nil, id, "")); err != nil {
			return nil, err
		}
		result, rpcErr, _, err := awaitReply(c, id)
		if err != nil {
			return nil, err
		}
		if err := checkReply(func(res []byte, _ bool) error { _, _, err := warm.parse(res); return err }, result, rpcErr, false); err != nil {
			st.fail(fmt.Errorf("the listing before the pages: %w", err))
			return st, nil
		}
	}
	settle(c, settleLimit)
	ph := &phase{spec: spec, begin: time.Now()}
	var buf []byte
	cursor, seen := "", 0
	for i := 0; ph.next(i, len(st.lat)); i++ {
		id := int64(i + 1)
		buf = p.req(buf[:0], id, cursor)
		cpu0 := time.Duration(-1)
		if i == 0 {
			cpu0 = c.threadsCPUTime()
		}
		t0 := time.Now()
		if err := c.send(buf); err != nil {
			return nil, err
		}
		result, rpcErr, at, err := awaitReply(c, id)
		if err != nil {
			return nil, err
		}
		if cpu0 >= 0 {
			if cpu1 := c.threadsCPUTime(); cpu1 >= cpu0 {
				st.firstCPU = cpu1 - cpu0
			}
		}
		err = checkReply(func(res []byte, _ bool) error {
			n, next, err := p.parse(res)
			switch {
			case err != nil:
				return err
			case next != "" && n != limit:
				return fmt.Errorf("files/list page of %d entries with a next cursor, want %d", n, limit)
			}
			seen += n
			cursor = next
			if next == "" {
				if seen != total {
					return fmt.Errorf("files/list: %d entries over all pages, want %d", seen, total)
				}
				seen = 0
			}
			return nil
		}, result, rpcErr, false)
		if err != nil {
			st.fail(err)
			return st, nil
		}
		if i == 0 {
			st.first = at.Sub(t0)
		}
		if ph.measuring {
			st.lat = append(st.lat, at.Sub(t0))
			st.elapsed = at.Sub(ph.start)
		}
	}
	return st, nil
}

// settleLimit is how long settle waits at most.
const settleLimit = 3 * time.Second

// settle waits, up to limit, until the child has used less than a
// millisecond of CPU in 25 ms: until the work it does in the background
// after its start is done (fsbroker walks its roots for stale temporary
// files, which reads the paged run's large directory whole), so that the
// first page is measured alone. It returns at once where the child's CPU
// time is not known.
func settle(c *child, limit time.Duration) {
	prev := c.threadsCPUTime()
	for deadline := time.Now().Add(limit); prev >= 0 && time.Now().Before(deadline); {
		time.Sleep(25 * time.Millisecond)
		cur := c.threadsCPUTime()
		if cur < 0 || cur-prev < time.Millisecond {
			return
		}
		prev = cur
	}
}
