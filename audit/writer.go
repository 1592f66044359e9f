// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	"github.com/hashicorp/go-hclog"
)

// ErrUnavailable is returned, wrapped, by Append when the trail cannot be kept: a record, a
// rotation or a checkpoint could not be written or synced. The broker refuses the request.
var ErrUnavailable = errors.New("audit: unavailable")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: writer closed")

// Writer appends records to this process's segments of an audit directory. It is safe for
// concurrent use; the order of seq is the order of the file.
type Writer struct {
	dir       string
	cfg       config
	pid       int
	digestKey atomic.Pointer[[]byte] // a copy of the audit key in use, for PathDigest and ArgumentsDigest

	failures atomic.Uint64
	fsyncs   atomic.Uint64   // background fsyncs, for the benchmarks
	queues   []*witnessQueue // one per witness ([WithWitness])
	done     chan struct{}
	wg       sync.WaitGroup
	// retainKick asks the retention loop for a pass; closing retainStop ends the loop.
	retainKick, retainStop chan struct{}
	retainWG               sync.WaitGroup
	stopOnce               sync.Once
	reopenMu               sync.Mutex // one Reopen at a time, so key files are applied in order

	mu sync.Mutex
	// work wakes the syncer; durable wakes SyncAlways appenders after a sync.
	work, durable *sync.Cond
	keys          keySet
	mac           hash.Hash // under keys.mac
	keyID         string    // of keys.priv
	macKeyID      string    // of keys.mac
	// pending are the keys of the next segment after a key rotation: a key_rotation record
	// naming them is in the current segment, so nothing but checkpoints may follow it there.
	pending    *keySet
	reopen     bool // Reopen asked for a new segment that could not be started yet
	f          *os.File
	lock       *flock.Flock // held on the segment's lock file while it is open
	segID      string
	segStart   time.Time
	segRecords int   // records in the segment other than its header and checkpoints
	off        int64 // bytes of whole records in the segment
	seq        uint64
	lastMAC    string
	lastTime   string
	lastKind   Kind
	line       []byte // the last record's line buffer, reused by the next (see maxKeptLine)
	sinceCkpt  int    // records since the last checkpoint record
	covered    bool   // the last checkpoint record is in the .ckpt file
	broken     error
	dirty      bool // the segment may end in a partial line that could not be cut away
	closed     bool
	written    uint64 // records written, over all segments
	synced     uint64 // records known synced (or given up on, see failedUpTo)
	failedUpTo uint64 // records up to this one were in a failed fsync
}

// Open starts a writer on dir (created if needed): it loads or creates the keys, publishes
// <dir>/checkpoint.pub and starts this process's first segment.
func Open(dir string, opts ...Option) (*Writer, error) {
	cfg := config{
		sync:         SyncBatch,
		maxBytes:     DefaultMaxSegmentBytes,
		ckptEvery:    DefaultCheckpointEvery,
		ckptInterval: DefaultCheckpointInterval,
		maxAge:       DefaultMaxSegmentAge,
		witnessWait:  DefaultWitnessTimeout,
		log:          hclog.NewNullLogger(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	return open(dir, cfg)
}

// open is Open once the options are applied. If it fails, it closes the witnesses.
func open(dir string, cfg config) (_ *Writer, err error) {
	var queues []*witnessQueue
	defer func() {
		switch {
		case err == nil:
		case queues != nil:
			deadline := time.Now()
			for _, q := range queues {
				q.close(deadline)
			}
		default:
			for _, wit := range cfg.witnesses {
				wit.Close()
			}
		}
	}()
	if cfg.sync < SyncBatch || cfg.sync > SyncNone {
		return nil, fmt.Errorf("audit: invalid sync mode %d", int(cfg.sync))
	}
	if cfg.maxBytes <= 0 || cfg.maxAge <= 0 || cfg.ckptEvery <= 0 || cfg.ckptInterval <= 0 || cfg.witnessWait <= 0 {
		return nil, errors.New("audit: segment size and age, checkpoint count and interval, witness timeout must be positive")
	}
	if cfg.keepAge < 0 || cfg.keepBytes < 0 {
		return nil, errors.New("audit: retention limits must not be negative")
	}
	key, priv, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit: create log directory: %w", err)
	}
	if err := publishKey(dir, priv.Public().(ed25519.PublicKey), nil); err != nil {
		return nil, err
	}
	w := &Writer{
		dir:        dir,
		cfg:        cfg,
		pid:        os.Getpid(),
		done:       make(chan struct{}),
		retainKick: make(chan struct{}, 1),
		retainStop: make(chan struct{}),
	}
	w.setKeys(keySet{mac: key, priv: priv})
	w.work = sync.NewCond(&w.mu)
	w.durable = sync.NewCond(&w.mu)
	for _, wit := range cfg.witnesses {
		queues = append(queues, newWitnessQueue(wit, cfg.witnessWait, cfg.log))
	}
	w.queues = queues
	w.mu.Lock()
	err = w.rotate()
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if cfg.sync != SyncNone {
		w.wg.Add(1)
		go w.syncLoop()
	}
	w.wg.Add(1)
	go w.checkpointLoop()
	if cfg.keepAge > 0 || cfg.keepBytes > 0 {
		w.retainWG.Add(1)
		go w.retentionLoop() // the first rotation asked for a pass
	}
	return w, nil
}

// Dir returns the log directory.
func (w *Writer) Dir() string { return w.dir }

// PathDigest is [PathDigest] under the writer's audit key: what a record holds in place of a
// path when paths are redacted. After a key rotation ([Writer.Reopen]) the same path has
// another digest.
func (w *Writer) PathDigest(path string) string { return PathDigest(*w.digestKey.Load(), path) }

// ArgumentsDigest is [ArgumentsDigest] under the writer's audit key: what a forward record
// holds in place of a request's arguments. After a key rotation ([Writer.Reopen]) the same
// arguments have another digest.
func (w *Writer) ArgumentsDigest(args []byte) (string, error) {
	return ArgumentsDigest(*w.digestKey.Load(), args)
}

// KeyID returns the id of the checkpoint public key in use ([KeyID]).
func (w *Writer) KeyID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keyID
}

// Failures counts the appends refused because the trail could not be kept, and background
// fsyncs and checkpoints that failed.
func (w *Writer) Failures() uint64 { return w.failures.Load() }

// Append writes rec to the trail and returns its seq within the current segment. It sets V,
// Seq, Time, Prev and Mac; the caller sets Kind (one of the caller kinds) and that kind's
// members. The record is written to the kernel before Append returns; with [SyncAlways] it is
// also fsynced. Errors wrap [ErrUnavailable] (the trail cannot be kept: refuse the request),
// [ErrInvalidRecord], [ErrClosed], or ctx's error. In SyncAlways mode an fsync failure or an
// expired ctx can come after the record was written; the seq is then returned with the error.
func (w *Writer) Append(ctx context.Context, rec Record) (uint64, error) {
	if err := rec.check(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("audit: append: %w", err)
	}
	w.mu.Lock()
	seq, gen, err := w.appendLocked(&rec)
	if err != nil || w.cfg.sync != SyncAlways {
		w.mu.Unlock()
		return seq, err
	}
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.durable.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	for {
		switch {
		case w.failedUpTo >= gen:
			w.mu.Unlock()
			return seq, w.unavailable(errors.New("fsync failed"))
		case w.synced >= gen:
			w.mu.Unlock()
			return seq, nil
		case ctx.Err() != nil:
			err := ctx.Err()
			w.mu.Unlock()
			return seq, w.unavailable(fmt.Errorf("waiting for fsync: %w", err))
		}
		w.durable.Wait()
	}
}

// appendLocked is Append up to the wait for an fsync, with w.mu held and rec checked: it
// readies the segment, writes rec, checkpoints the end of a session and wakes the syncer. It
// returns rec's seq and the count of records written with it.
func (w *Writer) appendLocked(rec *Record) (seq, gen uint64, err error) {
	if w.closed {
		return 0, 0, ErrClosed
	}
	rec.Segment, rec.PrevSegment, rec.KeyID, rec.MACKeyID, rec.Removed = "", "", "", "", nil
	if err := w.ready(); err != nil {
		return 0, 0, w.unavailable(err)
	}
	if err := w.write(rec); err != nil {
		if errors.Is(err, ErrInvalidRecord) {
			return 0, 0, err
		}
		return 0, 0, w.unavailable(err)
	}
	seq, gen = w.seq, w.written
	if rec.Kind == KindSessionEnd {
		// The end of a session is checkpointed (and witnessed) at once: a broker serving
		// one session may not get another chance before it is stopped.
		if err := w.checkpoint(); err != nil {
			w.failures.Add(1)
		}
	}
	w.work.Signal()
	return seq, gen, nil
}

// TryAppend is Append when it can be done without waiting: no other append holds the
// writer, the record needs no fsync before it returns (not [SyncAlways]), and no rotation or
// checkpoint is due, so that all it does is one write of the record to the kernel. Otherwise
// it appends nothing and returns done false, for the caller to Append. [Guarded] calls it on
// the caller's goroutine before it hands an append to a worker.
func (w *Writer) TryAppend(rec Record) (seq uint64, done bool, err error) {
	if w.cfg.sync == SyncAlways {
		return 0, false, nil
	}
	if err := rec.check(); err != nil {
		return 0, true, err
	}
	if !w.mu.TryLock() {
		return 0, false, nil
	}
	defer w.mu.Unlock()
	if !w.closed && (rec.Kind == KindSessionEnd || w.rotationDue(true) || w.sinceCkpt >= w.cfg.ckptEvery) {
		return 0, false, nil
	}
	seq, _, err = w.appendLocked(&rec)
	return seq, true, err
}

// unavailable counts a failure and wraps err in ErrUnavailable.
func (w *Writer) unavailable(err error) error {
	w.failures.Add(1)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// ready prepares the writer for a record, with w.mu held: it recovers from an earlier failure
// in a fresh segment, rotates a full or old segment (or one that Reopen or a key rotation
// asked to close) and writes a checkpoint that is due.
func (w *Writer) ready() error { return w.prepare(true) }

// prepare is ready; without full, a full or old segment is not rotated: a retention record
// goes into the current segment, so that it does not ask for another rotation, and so another
// retention pass, without end.
func (w *Writer) prepare(full bool) error {
	if w.rotationDue(full) {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if w.sinceCkpt >= w.cfg.ckptEvery {
		return w.checkpoint()
	}
	return nil
}

// rotationDue reports whether the next record goes into a fresh segment, with w.mu held:
// after a failure, a key rotation or Reopen, or (when full is set) when the segment is full
// or old.
func (w *Writer) rotationDue(full bool) bool {
	full = full && (w.off >= w.cfg.maxBytes || time.Since(w.segStart) >= w.cfg.maxAge)
	return w.broken != nil || w.pending != nil || w.reopen || full
}

// maxKeptLine is the largest line buffer write keeps for the next record.
const maxKeptLine = 16 << 10

// write appends rec as the next record of the segment, with w.mu held. On failure the writer
// is broken until a rotation succeeds.
func (w *Writer) write(rec *Record) error {
	rec.V = Version
	rec.Seq = w.seq + 1
	if rec.Kind == KindSegmentStart {
		rec.Seq = 0
	}
	rec.Time = formatTime(time.Now())
	rec.Prev = w.lastMAC
	rec.Mac = ""
	line, mac := appendLine(w.line[:0], rec, w.mac)
	if cap(line) <= maxKeptLine {
		w.line = line // reused by the next record (w.mu is held)
	}
	if len(line)-1 > maxLine { // the line without its newline, as Verify reads it
		// Verify reads no line longer than this; such a record would pass for an edit.
		return fmt.Errorf("%w: a line of %d bytes (at most %d)", ErrInvalidRecord, len(line)-1, maxLine)
	}
	if _, err := w.f.Write(line); err != nil {
		w.broken = fmt.Errorf("write %s: %w", filepath.Base(w.f.Name()), err)
		if terr := w.f.Truncate(w.off); terr != nil {
			w.dirty = true
		}
		return w.broken
	}
	w.off += int64(len(line))
	w.seq = rec.Seq
	w.lastMAC, w.lastTime, w.lastKind = mac, rec.Time, rec.Kind
	w.written++
	if rec.Kind == KindCheckpoint {
		w.sinceCkpt, w.covered = 0, false
	} else {
		w.sinceCkpt++
	}
	if rec.Kind != KindCheckpoint && rec.Kind != KindSegmentStart {
		w.segRecords++
	}
	return nil
}

// appendDurable appends one of the writer's own records and waits until it is fsynced (unless
// [SyncNone]).
func (w *Writer) appendDurable(rec *Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if err := w.prepare(false); err != nil {
		return err
	}
	if err := w.write(rec); err != nil {
		return err
	}
	gen := w.written
	w.work.Signal()
	if w.cfg.sync == SyncNone {
		return nil
	}
	for w.synced < gen && w.failedUpTo < gen {
		w.durable.Wait()
	}
	if w.failedUpTo >= gen {
		return errors.New("fsync failed")
	}
	return nil
}

// syncLoop fsyncs the segment whenever records were written since the last fsync: group
// commit, one fsync for every record written before it started. In SyncBatch mode two fsyncs
// are at least batchSyncInterval apart.
func (w *Writer) syncLoop() {
	defer w.wg.Done()
	var last time.Time
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for w.written == w.synced && !w.closed {
			w.work.Wait()
		}
		if w.closed {
			return
		}
		if w.cfg.sync == SyncBatch {
			if d := batchSyncInterval - time.Since(last); d > 0 {
				w.mu.Unlock()
				time.Sleep(d)
				w.mu.Lock()
				continue
			}
		}
		if w.cfg.sync == SyncAlways {
			// Let the appenders woken by the last fsync join this group commit.
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
			if w.closed {
				return
			}
		}
		target, f := w.written, w.f
		w.mu.Unlock()
		last = time.Now()
		err := f.Sync()
		w.fsyncs.Add(1)
		w.mu.Lock()
		if target > w.synced { // else a rotation synced it already
			if err != nil {
				w.failedUpTo = target
				if w.broken == nil {
					w.broken = fmt.Errorf("fsync %s: %w", filepath.Base(f.Name()), err)
				}
				w.failures.Add(1)
			}
			w.synced = target
		}
		w.durable.Broadcast()
	}
}

// Close finishes a retention pass under way, writes a final checkpoint, fsyncs (unless
// [SyncNone]) and closes the segment. Appends after Close fail with [ErrClosed].
func (w *Writer) Close() error {
	// A retention pass that is running or was asked for finishes first: it appends a record.
	w.stopOnce.Do(func() { close(w.retainStop) })
	w.retainWG.Wait()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	var err error
	if w.broken == nil {
		err = w.checkpoint()
	}
	if w.cfg.sync != SyncNone {
		if serr := w.f.Sync(); serr != nil {
			// SyncAlways appenders still waiting must not be told their records are durable.
			w.failedUpTo = w.written
			if err == nil {
				err = fmt.Errorf("audit: fsync: %w", serr)
			}
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("audit: close segment: %w", cerr)
	}
	unlockSegment(w.lock, w.segPath(w.segID))
	w.lock = nil
	w.synced = w.written
	w.closed = true
	w.work.Broadcast()
	w.durable.Broadcast()
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()
	w.closeWitnesses()
	return err
}
