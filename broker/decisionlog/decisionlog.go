// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package decisionlog uploads the decisions of fsbroker's audit trail to an OPA decision-log
// service, so that a SIEM fed by decision logs sees every decision the trail records: policy
// decisions, requests refused before the policy (a path that escapes, a bad offset, an unknown
// mount, no consent grant, the rate limit) and consent rounds.
//
// The trail is the spool. An [Uploader] reads the segments of the audit directory (with
// audit.Reader) and converts their decision and consent records with audit.OPAEventOf, the
// mapping of `fsbroker audit export --format opa`; an allowed decision waits for its outcome
// record (joined into custom.outcome) for at most ten minutes. Events are posted in batches,
// gzip-compressed JSON arrays as OPA's decision-log plugin posts them, through OPA's REST
// client for the configured service (its URL, TLS and credentials). What the service accepted
// is recorded in <state-dir>/decisionlog as a cursor per segment, written after each accepted
// batch: nothing is lost when the service is down or the broker stops, and what was not
// accepted is sent by the next broker process on the state directory.
//
// Several brokers may share a state directory, each writing its own segments. A broker
// delivers its own writer's segments while it runs; a chain of segments whose writer has
// stopped is delivered by whichever broker claims it first (an flock per segment in the state
// directory, held until all of the segment's events are accepted), so an event is never sent
// by two brokers. An event is sent twice only when the service accepted a batch but the broker
// did not learn it (the response was lost, or the broker was killed before it recorded the
// cursor); the copy has the same decision_id.
//
// Failures are logged through the broker's logger: the first failed upload of a run at error
// level, the others at debug level, the recovery at info level with the count; [Uploader.Stats]
// counts them and keeps the last error. After a failure the next upload waits 1 s x 1.6^n
// (20% jitter), at most the configured max_delay_seconds (and at least 1 s). Memory is
// bounded: at most the configured buffer_size_limit_events (10,000 by default) events wait to
// be sent (past that the trail is read later), and at most 10,000 decisions of a chain wait
// for their outcome (past that the oldest goes out without it, as export does).
package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
)

// Defaults of [Options].
const (
	DefaultPollInterval = 200 * time.Millisecond
	DefaultScanInterval = time.Second
)

// countBudget is how long Close goes on reading the trail, after the flush ran out of time, to
// count the events that are left for the next start.
const countBudget = 2 * time.Second

// Options configure an [Uploader].
type Options struct {
	// Config is an OPA configuration (JSON): its services, keys, labels and decision_logs
	// members are read. Without decision_logs, [New] returns nil.
	Config []byte
	// Trail is this process's audit writer: its segments are delivered while it writes them.
	// Nil for an uploader that only delivers what stopped brokers left.
	Trail *audit.Writer
	// AuditDir is the audit directory; empty means Trail's.
	AuditDir string
	// StateDir is the broker's state directory; the delivery state is kept in its
	// decisionlog directory ([DirName]).
	StateDir string
	// Version is labels.version of every event: the broker's version.
	Version string
	// Logger receives the uploader's log lines (default: none).
	Logger hclog.Logger
	// PollInterval is how often a segment being written is read for new records
	// (default [DefaultPollInterval]); ScanInterval how often the directory is listed for
	// segments to deliver (default [DefaultScanInterval]).
	PollInterval, ScanInterval time.Duration
}

// Stats is what an uploader reports of its work.
type Stats struct {
	// Delivered counts the events the service accepted.
	Delivered uint64
	// Failures counts the upload requests that failed (an error or a status other than 2xx).
	Failures uint64
	// LastError is the latest failure, "" when none; LastErrorTime is when it happened.
	LastError     string
	LastErrorTime time.Time
	// Queued counts the events read from the trail and not yet accepted.
	Queued int
}

// Uploader delivers the audit trail's decisions to an OPA decision-log service. Create it with
// [New] and stop it with [Uploader.Close].
type Uploader struct {
	cfg      *config
	log      hclog.Logger
	version  string
	trail    *audit.Writer
	index    *index
	state    *state
	poll     time.Duration
	scanTick time.Duration

	items     chan item     // events and markers, from the chain workers to the sender
	drain     chan struct{} // closed by Close: deliver what is there, then stop
	closeCtx  context.Context
	closeOnce sync.Once
	ctx       context.Context // ended when the uploader stops for good
	cancel    context.CancelFunc
	workers   sync.WaitGroup
	foreign   atomic.Int32 // workers on chains of stopped writers
	scanDone  chan struct{}
	sendDone  chan struct{}
	remaining int  // events not delivered when the sender stopped
	atLeast   bool // remaining is a lower bound: counting ran out of time

	delivered, failures atomic.Uint64
	queued              atomic.Int64
	errMu               sync.Mutex
	lastErr             string
	lastErrAt           time.Time
}

// New starts an uploader, or returns nil, nil when the configuration has no decision_logs.
// Errors are configuration errors (an unknown service, an unsupported option) or a state
// directory that cannot be used.
func New(opts Options) (*Uploader, error) {
	cfg, err := parseConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("opa configuration: %w", err)
	}
	if cfg == nil {
		return nil, nil
	}
	dir := opts.AuditDir
	if dir == "" && opts.Trail != nil {
		dir = opts.Trail.Dir()
	}
	if dir == "" || opts.StateDir == "" {
		return nil, errors.New("decision log: no audit directory or no state directory")
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	st, err := openState(opts.StateDir, log)
	if err != nil {
		return nil, fmt.Errorf("decision log state in %s: %w", opts.StateDir, err)
	}
	u := &Uploader{
		cfg:      cfg,
		log:      log,
		version:  opts.Version,
		trail:    opts.Trail,
		index:    newIndex(dir),
		state:    st,
		poll:     opts.PollInterval,
		scanTick: opts.ScanInterval,
		items:    make(chan item, 64),
		drain:    make(chan struct{}),
		scanDone: make(chan struct{}),
		sendDone: make(chan struct{}),
	}
	if u.poll <= 0 {
		u.poll = DefaultPollInterval
	}
	if u.scanTick <= 0 {
		u.scanTick = DefaultScanInterval
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	log.Info("uploading decision logs", "service", cfg.service, "to", cfg.target(),
		"delivered_since", st.since.Format(time.RFC3339), "state", filepath.Join(opts.StateDir, DirName))
	go u.scanLoop()
	go u.sendLoop()
	return u, nil
}

// Stats reports the uploader's counts so far.
func (u *Uploader) Stats() Stats {
	u.errMu.Lock()
	defer u.errMu.Unlock()
	return Stats{
		Delivered:     u.delivered.Load(),
		Failures:      u.failures.Load(),
		LastError:     u.lastErr,
		LastErrorTime: u.lastErrAt,
		Queued:        int(u.queued.Load()),
	}
}

// Close stops the uploader. Close the audit writer first: then every event of this process's
// segments can be sent. Close delivers what it can until ctx ends, records what was
// delivered, logs how many events are left in the trail for the next start, and returns.
func (u *Uploader) Close(ctx context.Context) {
	if u == nil {
		return
	}
	u.closeOnce.Do(func() {
		u.closeCtx = ctx
		close(u.drain)
		<-u.sendDone
		u.cancel()
		u.workers.Wait()
		<-u.scanDone
		u.state.close()
		switch {
		case u.remaining > 0:
			more := ""
			if u.atLeast {
				more = "at least "
			}
			u.log.Warn(fmt.Sprintf("decision log: %s%d events not delivered; they stay in the audit trail and are sent on the next start", more, u.remaining),
				"delivered", u.delivered.Load(), "failures", u.failures.Load(), "last_error", u.lastError())
		default:
			u.log.Debug("decision log flushed", "delivered", u.delivered.Load())
		}
	})
}

// lastError is the latest failure's message.
func (u *Uploader) lastError() string {
	u.errMu.Lock()
	defer u.errMu.Unlock()
	return u.lastErr
}

// scanLoop lists the audit directory now and then, and starts a worker on each chain of
// segments this process should deliver, until Close.
func (u *Uploader) scanLoop() {
	defer close(u.scanDone)
	t := time.NewTicker(u.scanTick)
	defer t.Stop()
	for n := 0; ; n++ {
		u.scan(n%60 == 0, false) // forget the cursors of removed segments about once a minute
		select {
		case <-t.C:
		case <-u.drain:
			u.scan(false, true) // this process's own segments, if no worker has them yet
			return
		}
	}
}

// scan starts workers on the chains to deliver: this process's own, and (unless ownOnly)
// those whose writer is gone, one of those at a time. With gc it also forgets the cursors of
// removed segments.
func (u *Uploader) scan(gc, ownOnly bool) {
	own := ""
	if u.trail != nil {
		own = trimSegment(u.trail.Segment()) // its header is written: listed below
	}
	if err := u.index.refresh(); err != nil {
		u.log.Warn("cannot list the audit directory for the decision log", "error", err)
		return
	}
	if gc {
		u.forgetRemoved()
	}
	for _, id := range u.index.ids() {
		if u.state.held(id) || u.state.isDone(id) || !u.isFront(id) {
			continue
		}
		chain := u.index.chain(id)
		mine := own != "" && slices.Contains(chain, own)
		if ownOnly && !mine {
			continue
		}
		if !mine {
			newest := chain[len(chain)-1]
			if u.foreign.Load() > 0 || live(u.index.segmentPath(newest)) {
				continue
			}
			// Its writer may have just rotated: the new segment is listed by now.
			if u.index.refresh() == nil && u.index.successor(newest) != "" {
				continue
			}
		}
		c := u.state.claim(id, u.writerOf(id))
		if c == nil {
			continue
		}
		if c.Done {
			u.state.release(c)
			continue
		}
		u.checkRemovedBefore(id)
		if !mine {
			u.foreign.Add(1)
		}
		u.workers.Add(1)
		go u.follow(c, mine)
	}
}

// checkRemovedBefore reports at error level when the segment before id (in its writer's chain)
// was removed from the audit directory before its events were all delivered: its cursor says
// so, or it has none although it was started after delivery began on the state directory.
func (u *Uploader) checkRemovedBefore(id string) {
	s, ok := u.index.get(id)
	if !ok || s.prev == "" {
		return
	}
	if _, there := u.index.get(s.prev); there {
		return
	}
	c, ok, _ := u.state.load(s.prev)
	switch {
	case ok && !c.Done:
		u.lostSegment(s.prev, c.Seq)
	case !ok:
		if started, err := time.Parse(segmentTimeLayout, strings.SplitN(s.prev, "-", 2)[0]); err == nil && !started.Before(u.state.since) {
			u.lostSegment(s.prev, 0)
		}
	}
}

// segmentTimeLayout is the layout of the start time that begins a segment's id.
const segmentTimeLayout = "20060102T150405.000000000Z"

// isFront reports whether id is where delivery of its chain resumes: the segment before it is
// delivered, gone, or there is none.
func (u *Uploader) isFront(id string) bool {
	s, ok := u.index.get(id)
	if !ok {
		return false
	}
	if s.prev == "" {
		return true
	}
	if _, ok := u.index.get(s.prev); !ok {
		return true
	}
	return u.state.isDone(s.prev)
}

// writerOf is the id of the writer of segment id, as labels.id names it: the first segment of
// its chain, found through the headers (and the cursors of segments gone since), or the
// predecessor named by the first one still there, as audit.Reader names writers.
func (u *Uploader) writerOf(id string) string {
	for range 1 << 16 {
		s, ok := u.index.get(id)
		if !ok || s.prev == "" {
			return id
		}
		if c, ok, _ := u.state.load(s.prev); ok && c.Writer != "" {
			return c.Writer
		}
		if _, ok := u.index.get(s.prev); !ok {
			return s.prev
		}
		id = s.prev
	}
	return id
}

// forgetRemoved removes the cursors of segments no longer in the audit directory, and says so
// at error level for one whose events were not all delivered (retention deleted it first).
func (u *Uploader) forgetRemoved() {
	segs, err := u.state.cursors()
	if err != nil {
		u.log.Warn("cannot list the decision-log state", "error", err)
		return
	}
	named := make(map[string]bool) // segments some segment in the directory follows
	for _, id := range u.index.ids() {
		if s, ok := u.index.get(id); ok && s.prev != "" {
			named[s.prev] = true
		}
	}
	for _, seg := range segs {
		if u.state.held(seg) || named[seg] {
			continue // a cursor is kept while a successor names its segment (see checkRemovedBefore)
		}
		if _, err := os.Stat(u.index.segmentPath(seg)); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if c, ok := u.state.forget(seg); ok && !c.Done {
			u.lostSegment(seg, c.Seq)
		}
	}
}

// lostSegment reports a segment removed before its events were all delivered.
func (u *Uploader) lostSegment(seg string, seq uint64) {
	u.log.Error("an audit segment was removed (by retention?) before its decisions were all uploaded; those after its seq are lost to the decision log",
		"segment", seg, "seq", seq)
}

// trimSegment is the id of the segment file at path.
func trimSegment(path string) string {
	return strings.TrimSuffix(filepath.Base(path), segmentExt)
}

// encode converts a record (with its outcome) into an event item.
func (u *Uploader) encode(e *audit.Entry, out *audit.Record) (item, bool) {
	ev, ok := audit.OPAEventOf(e, out, u.version)
	if !ok {
		return item{}, false
	}
	for k, v := range u.cfg.labels {
		if _, set := ev.Labels[k]; !set {
			ev.Labels[k] = v
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		u.log.Error("cannot encode a decision-log event", "segment", e.Segment, "seq", e.Record.Seq, "error", err)
		return item{}, false
	}
	return item{segment: e.Segment, seq: e.Record.Seq, event: b}, true
}

// timeOf parses a record's time.
func timeOf(s string) (time.Time, error) { return time.Parse(audit.TimeLayout, s) }

// follow delivers the chain of segments that starts with c (claimed), in order, until the
// chain ends (its writer closed its last segment), or Close, or (a chain of another writer)
// the chain turns out to be written to.
func (u *Uploader) follow(c *claim, own bool) {
	defer u.workers.Done()
	if !own {
		defer u.foreign.Add(-1)
	}
	j := &joiner{u: u, writer: c.Writer, waiting: make(map[string]*pending)}
	// Every claim taken, let go by the sender once its segment's events are all accepted
	// (its done marker), or when the worker stops (a release marker, after what was sent).
	held := []*claim{c}
	for {
		next, ended, ok := u.readSegment(j, c, own)
		if !ok {
			u.send(item{release: held}) // what was not sent stays in the trail
			return
		}
		j.mark(item{segment: c.Segment, done: c})
		if ended {
			u.send(j.ready("", true)...)
			return
		}
		// The next segment is claimed before this one's done marker can be sent: a scan
		// never takes it for the start of a chain nobody delivers.
		nc := u.claimNext(next, c.Writer)
		if nc == nil {
			u.send(item{release: held})
			return
		}
		c = nc
		held = append(held, c)
		if !u.send(j.ready(j.last, false)...) {
			return
		}
	}
}

// claimNext claims segment id, the one after a segment just read, waiting while another
// process holds it; nil on Close.
func (u *Uploader) claimNext(id, writer string) *claim {
	for {
		if c := u.state.claim(id, writer); c != nil {
			return c
		}
		select {
		case <-time.After(u.poll):
		case <-u.drain:
			return nil
		}
	}
}

// readSegment reads c's segment into j and sends what is ready, until the segment is complete:
// next is the segment after it ("" when ended: the writer closed it and wrote no other). ok is
// false when reading stopped first: Close, or a segment of another writer being written.
func (u *Uploader) readSegment(j *joiner, c *claim, own bool) (next string, ended, ok bool) {
	path := u.index.segmentPath(c.Segment)
	r, err := audit.NewReader(path, audit.Filter{Since: u.state.since})
	if err != nil {
		u.lostSegment(c.Segment, c.skip)
		_ = u.index.refresh()
		next = u.index.successor(c.Segment)
		return next, next == "", true
	}
	for {
		// Whether the segment is complete is known before it is read: what is read after
		// holds all of it. A writer writes the header of the segment that follows before it
		// lets go of this one, so the listing after the check shows it.
		closed := !live(path)
		var statErr error
		if closed {
			_ = u.index.refresh()
			next = u.index.successor(c.Segment)
			_, statErr = os.Stat(path)
		}
		for e, err := range r.Entries(u.ctx) {
			if err != nil {
				if u.ctx.Err() != nil {
					return "", false, false
				}
				u.log.Warn("the decision log skips a line of the audit trail", "error", err)
				continue
			}
			if e.Record.Seq <= c.skip {
				continue
			}
			j.add(e)
			if !u.send(j.ready(e.Record.Time, false)...) {
				return "", false, false
			}
		}
		if errors.Is(statErr, os.ErrNotExist) {
			u.lostSegment(c.Segment, c.skip)
			closed = true
		}
		if closed {
			return next, next == "", true
		}
		if !own {
			return "", false, false // another writer's segment, being written: its writer delivers it
		}
		if !u.send(j.ready(time.Now().UTC().Format(audit.TimeLayout), false)...) {
			return "", false, false
		}
		select {
		case <-time.After(u.poll):
		case <-u.drain:
			// One more round: the writer is closed by now, or was left open.
			if live(path) {
				return "", false, false
			}
		case <-u.ctx.Done():
			return "", false, false
		}
	}
}

// send hands items to the sender; false when the uploader stopped.
func (u *Uploader) send(items ...item) bool {
	for _, it := range items {
		select {
		case u.items <- it:
		case <-u.ctx.Done():
			return false
		}
	}
	return true
}
