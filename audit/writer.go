package audit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// The files of a log directory.
const (
	// segmentExt ends a segment's name: <id>.jsonl.
	segmentExt = ".jsonl"
	// checkpointExt ends the checkpoint file beside a segment: <id>.jsonl.ckpt.
	checkpointExt = ".ckpt"
	// lockExt ends the lock file beside a live segment: <id>.jsonl.lock. The writer creates it
	// and holds an flock on it before the segment exists, and removes it when it closes the
	// segment; retention deletes no segment whose lock is held.
	lockExt = ".lock"
	// prevNoteExt ends the note retention leaves beside a segment whose predecessor it deleted:
	// <id>.jsonl.prev, a [prevNote].
	prevNoteExt = ".prev"
	// retentionLockFile serializes the retention passes of every writer of a directory; it is
	// never deleted.
	retentionLockFile = "retention.lock"
	// maxRemovedPerRecord is the most segments one retention record names.
	maxRemovedPerRecord = 200
	// maxAgeCheck is the longest time between two checks for an idle segment's age.
	maxAgeCheck = time.Minute
)

// segmentTimeLayout is the layout of the start time that begins a segment's id.
const segmentTimeLayout = "20060102T150405.000000000Z"

// segmentIDPattern matches the id of a segment a Writer names: <startTime>-<pid>-<random>.
// Retention touches no other file.
var segmentIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9]+-[0-9a-f]{8}$`)

// checkpointFile is the content of <segment>.ckpt.
type checkpointFile struct {
	Segment string `json:"segment"`
	Seq     uint64 `json:"seq"`
	MAC     string `json:"mac"`
	Time    string `json:"time"`
	KeyID   string `json:"keyId"`
	// Signature is the hex ed25519 signature of checkpointMessage.
	Signature string `json:"signature"`
}

// checkpointMessage is what a checkpoint signs: "<seq>|<mac>|<time>".
func checkpointMessage(seq uint64, mac, t string) []byte {
	return []byte(strconv.FormatUint(seq, 10) + "|" + mac + "|" + t)
}

// prevNote is the content of <segment>.jsonl.prev: retention deleted the segment's
// predecessor, which ended with the record LastSeq, LastMAC. It is MACed under the audit key
// MACKeyID, so it cannot be forged without the key, and names both segments, so it cannot be
// moved beside another. It lives as long as the segment it describes, so a deleted
// predecessor stays accounted for after the retention record that named it is gone too.
type prevNote struct {
	Segment     string `json:"segment"`
	PrevSegment string `json:"prevSegment"`
	LastSeq     uint64 `json:"lastSeq"`
	LastMAC     string `json:"lastMac"`
	Time        string `json:"time"`
	MACKeyID    string `json:"macKeyId"`
	MAC         string `json:"mac"`
}

// sum returns the note's hex MAC under key.
func (n *prevNote) sum(key []byte) string {
	h := newMAC(key)
	h.Write([]byte("fsbroker audit removed predecessor v1|" + n.Segment + "|" + n.PrevSegment + "|" +
		strconv.FormatUint(n.LastSeq, 10) + "|" + n.LastMAC + "|" + n.Time + "|" + n.MACKeyID))
	return hex.EncodeToString(h.Sum(nil))
}

// keySet is the audit key and the checkpoint key a segment is written with.
type keySet struct {
	mac  []byte
	priv ed25519.PrivateKey
}

// Writer appends records to this process's segments of an audit directory. It is safe for
// concurrent use; the order of seq is the order of the file.
type Writer struct {
	dir    string
	cfg    config
	pid    int
	digest atomic.Pointer[func(string) string] // PathDigest under the audit key in use

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

// setKeys makes ks the keys in use, with w.mu held (or before the writer is shared).
func (w *Writer) setKeys(ks keySet) {
	w.keys = ks
	w.mac = newMAC(ks.mac)
	w.keyID = KeyID(ks.priv.Public().(ed25519.PublicKey))
	w.macKeyID = MACKeyID(ks.mac)
	d := pathDigester(ks.mac)
	w.digest.Store(&d)
}

// keys resolves the audit key and the checkpoint key from the options.
func (c *config) keys() ([]byte, ed25519.PrivateKey, error) {
	key, priv := c.key, c.ckptKey
	var err error
	switch {
	case key != nil:
		if len(key) != KeySize {
			return nil, nil, fmt.Errorf("audit: key of %d bytes, want %d", len(key), KeySize)
		}
	case c.keyPath() != "":
		if key, err = LoadOrCreateKey(c.keyPath()); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errors.New("audit: no audit key: give WithKey, WithKeyFile or WithStateDir")
	}
	switch {
	case priv != nil:
		if len(priv) != ed25519.PrivateKeySize {
			return nil, nil, errors.New("audit: invalid ed25519 checkpoint key")
		}
	case c.checkpointKeyPath() != "":
		if priv, err = LoadOrCreateCheckpointKey(c.checkpointKeyPath()); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errors.New("audit: no checkpoint key: give WithCheckpointKey, WithCheckpointKeyFile or WithStateDir")
	}
	return key, priv, nil
}

// fileKeys reads the key files again, for Reopen: exactly the keys named by files, nil for a
// key given directly. A key file that is missing or cannot be read is an error.
func (c *config) fileKeys() (keySet, error) {
	var (
		ks  keySet
		err error
	)
	if p := c.keyPath(); p != "" {
		if ks.mac, err = LoadKey(p); err != nil {
			return keySet{}, err
		}
	}
	if p := c.checkpointKeyPath(); p != "" {
		if ks.priv, err = LoadCheckpointKey(p); err != nil {
			return keySet{}, err
		}
	}
	return ks, nil
}

// writeAtomic replaces path with data through a temporary file in the same directory and a
// rename, fsyncing the temporary file first when sync is set.
func writeAtomic(path string, data []byte, mode os.FileMode, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", filepath.Base(path), err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("audit: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Dir returns the log directory.
func (w *Writer) Dir() string { return w.dir }

// Segment returns the path of the segment being written.
func (w *Writer) Segment() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segPath(w.segID)
}

// PathDigest is [PathDigest] under the writer's audit key: what a record holds in place of a
// path when paths are redacted. After a key rotation ([Writer.Reopen]) the same path has
// another digest.
func (w *Writer) PathDigest(path string) string { return (*w.digest.Load())(path) }

// KeyID returns the id of the checkpoint public key in use ([KeyID]).
func (w *Writer) KeyID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keyID
}

// Failures counts the appends refused because the trail could not be kept, and background
// fsyncs and checkpoints that failed.
func (w *Writer) Failures() uint64 { return w.failures.Load() }

// WitnessStats counts the deliveries to each witness, in the order they were given.
func (w *Writer) WitnessStats() []WitnessStats {
	stats := make([]WitnessStats, len(w.queues))
	for i, q := range w.queues {
		stats[i] = q.stats()
	}
	return stats
}

// announce signs ev under the keys in use and queues it for every witness, with w.mu held.
func (w *Writer) announce(ev WitnessEvent) {
	if len(w.queues) == 0 {
		return
	}
	ev.AuditKeyID = w.macKeyID
	ev.sign(w.keys.priv)
	for _, q := range w.queues {
		q.push(ev)
	}
}

// announceLast tells the witnesses that the segment holds its last record, with w.mu held.
func (w *Writer) announceLast() {
	w.announce(WitnessEvent{Kind: WitnessCheckpoint, Segment: w.segID, Seq: w.seq, MAC: w.lastMAC, Time: w.lastTime})
}

// closeWitnesses waits, up to the witness timeout, for the statements still waiting to be
// delivered, and closes the witnesses.
func (w *Writer) closeWitnesses() {
	deadline := time.Now().Add(w.cfg.witnessWait)
	var wg sync.WaitGroup
	for _, q := range w.queues {
		wg.Go(func() { q.close(deadline) })
	}
	wg.Wait()
}

// segPath returns the path of segment id.
func (w *Writer) segPath(id string) string { return filepath.Join(w.dir, id+segmentExt) }

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
	rec.Segment, rec.PrevSegment, rec.KeyID, rec.MACKeyID, rec.Removed = "", "", "", "", nil
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, ErrClosed
	}
	if err := w.ready(); err != nil {
		w.mu.Unlock()
		return 0, w.unavailable(err)
	}
	if err := w.write(&rec); err != nil {
		w.mu.Unlock()
		if errors.Is(err, ErrInvalidRecord) {
			return 0, err
		}
		return 0, w.unavailable(err)
	}
	seq, gen := w.seq, w.written
	if rec.Kind == KindSessionEnd {
		// The end of a session is checkpointed (and witnessed) at once: a broker serving
		// one session may not get another chance before it is stopped.
		if err := w.checkpoint(); err != nil {
			w.failures.Add(1)
		}
	}
	w.work.Signal()
	if w.cfg.sync != SyncAlways {
		w.mu.Unlock()
		return seq, nil
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
	full = full && (w.off >= w.cfg.maxBytes || time.Since(w.segStart) >= w.cfg.maxAge)
	if w.broken != nil || w.pending != nil || w.reopen || full {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if w.sinceCkpt >= w.cfg.ckptEvery {
		return w.checkpoint()
	}
	return nil
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
	if len(line) > maxLine {
		// Verify reads no line longer than this; such a record would pass for an edit.
		return fmt.Errorf("%w: a line of %d bytes (at most %d)", ErrInvalidRecord, len(line), maxLine)
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

// checkpoint appends a checkpoint record unless the last record is one, and stores it, signed,
// in <segment>.ckpt, with w.mu held.
func (w *Writer) checkpoint() error {
	if w.lastKind != KindCheckpoint {
		if err := w.write(&Record{Kind: KindCheckpoint, KeyID: w.keyID}); err != nil {
			return err
		}
	}
	if w.covered {
		return nil
	}
	// The checkpointed record must be on disk before the signed .ckpt that
	// names it: else a power failure could leave a .ckpt naming a record the
	// segment lost, which verify would take for truncation.
	if w.cfg.sync != SyncNone {
		if err := w.f.Sync(); err != nil {
			w.broken = fmt.Errorf("fsync %s: %w", filepath.Base(w.f.Name()), err)
			return w.broken
		}
	}
	sig := ed25519.Sign(w.keys.priv, checkpointMessage(w.seq, w.lastMAC, w.lastTime))
	data, err := json.Marshal(checkpointFile{
		Segment: w.segID, Seq: w.seq, MAC: w.lastMAC, Time: w.lastTime, KeyID: w.keyID,
		Signature: hex.EncodeToString(sig),
	})
	if err != nil {
		return fmt.Errorf("audit: encode checkpoint: %w", err)
	}
	if err := writeAtomic(w.segPath(w.segID)+checkpointExt, append(data, '\n'), 0o644, w.cfg.sync != SyncNone); err != nil {
		w.broken = err
		return err
	}
	w.covered = true
	w.announceLast()
	return nil
}

// rotate starts a new segment, with w.mu held: it takes the new segment's lock, creates the
// file, closes the current segment with a final checkpoint and fsync, and writes the new
// segment's header, whose prev continues the chain, under the pending keys of a key rotation if
// there are any. If the writer is broken, the old segment is abandoned as it is. On failure the
// current segment stays in place.
func (w *Writer) rotate() error {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("audit: segment name: %w", err)
	}
	now := time.Now()
	id := fmt.Sprintf("%s-%d-%s", now.UTC().Format(segmentTimeLayout), w.pid, hex.EncodeToString(rnd[:]))
	path := w.segPath(id)
	lock, err := lockSegment(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		unlockSegment(lock, path)
		return fmt.Errorf("audit: create segment: %w", err)
	}
	abort := func(err error) error {
		f.Close()
		os.Remove(path)
		unlockSegment(lock, path)
		return err
	}
	old, oldID, wasBroken := w.f, w.segID, w.broken != nil
	if old != nil {
		if !wasBroken {
			if err := w.checkpoint(); err != nil {
				return abort(err)
			}
		} else if !w.dirty {
			// Best effort: the segment ends in whole records; checkpoint them if the disk lets us.
			w.broken = nil
			if w.checkpoint() != nil {
				w.broken = errors.New("abandoned")
			}
		}
		if w.cfg.sync != SyncNone {
			if err := old.Sync(); err != nil {
				if !wasBroken {
					w.broken = fmt.Errorf("fsync %s: %w", filepath.Base(old.Name()), err)
					return abort(w.broken)
				}
				// Appenders still waiting for these records must not be told they are durable.
				w.failedUpTo = w.written
			}
		}
	}
	oldWritten, oldOff, oldDirty, oldBroken, oldKeys := w.written, w.off, w.dirty, w.broken, w.keys
	if w.pending != nil {
		w.setKeys(*w.pending)
	}
	w.f, w.segID, w.off = f, id, 0
	if err := w.write(&Record{
		Kind: KindSegmentStart, Segment: id, PrevSegment: oldID, KeyID: w.keyID, MACKeyID: w.macKeyID,
	}); err != nil {
		// Stay in the old segment, under its keys; the next append tries again.
		w.f, w.segID, w.off, w.dirty = old, oldID, oldOff, oldDirty
		w.broken = cmp.Or(oldBroken, w.broken)
		if w.pending != nil {
			w.setKeys(oldKeys)
		}
		return abort(err)
	}
	w.pending, w.reopen = nil, false
	w.broken, w.dirty = nil, false
	w.sinceCkpt, w.covered = 0, false
	w.segStart, w.segRecords = now, 0
	oldLock := w.lock
	w.lock = lock
	if old != nil {
		// Everything of the old segment is synced (or failed, see failedUpTo); the header is not.
		w.synced = max(w.synced, oldWritten)
		old.Close()
		unlockSegment(oldLock, w.segPath(oldID))
	}
	w.work.Signal()
	select {
	case w.retainKick <- struct{}{}:
	default: // a pass is asked for already
	}
	if w.cfg.sync != SyncNone {
		if len(w.queues) > 0 {
			// The header is on disk before a witness hears of it.
			if err := f.Sync(); err != nil {
				w.broken = fmt.Errorf("fsync %s: %w", filepath.Base(f.Name()), err)
				return w.broken
			}
		}
		if err := syncDir(w.dir); err != nil {
			// The segment's name may not survive a power failure: start over on the next append.
			w.broken = err
			return err
		}
	}
	w.announceLast()
	return nil
}

// lockSegment creates the lock file of a segment about to be created and takes an flock on it:
// while a writer holds it, no retention pass of any process deletes the segment. The lock
// exists before the segment does, so there is no moment when a new segment looks closed.
func lockSegment(seg string) (*flock.Flock, error) {
	l := flock.New(seg+lockExt, flock.SetPermissions(0o640))
	ok, err := l.TryLock()
	if err == nil && !ok {
		err = errors.New("held by another writer")
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("audit: lock segment: %w", err)
	}
	return l, nil
}

// unlockSegment releases a segment's lock and removes its lock file: the segment is closed.
func unlockSegment(l *flock.Flock, seg string) {
	if l == nil {
		return
	}
	l.Unlock()
	os.Remove(seg + lockExt)
}

// lockClosed takes the lock of a segment that no live writer holds, for deleting it. live is
// true when a writer holds the lock, or when the lock cannot be tried (say, another user's
// file): only a segment known to be closed is deleted. A segment without a lock file is closed:
// its writer removed it when closing it (or it never had one).
func lockClosed(seg string) (l *flock.Flock, live bool) {
	l = flock.New(seg+lockExt, flock.SetFlag(os.O_RDONLY))
	ok, err := l.TryLock()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false
	case err != nil || !ok:
		return nil, true
	}
	return l, false
}

// Reopen closes the current segment as a rotation does (a final checkpoint, then fsync) and
// starts a new one in the log directory that continues the chain: after logrotate or a log
// shipper moved the segment away, the writer goes on in a fresh file. The broker calls it on
// SIGHUP. It is safe to call concurrently with Append; each call starts a new segment.
//
// Reopen also reads the key files again (those of [WithKeyFile], [WithCheckpointKeyFile] or
// [WithStateDir]; keys given directly do not change). A changed key is a key rotation: a
// key_rotation record naming the new key's id is appended to the current segment under the old
// keys, and the new segment is chained (and its checkpoints signed) under the new ones. A new
// checkpoint key is published as checkpoint.pub, the old public key kept beside it as
// checkpoint.pub.<keyid> so that earlier checkpoints still verify ([LoadPublishedKeys]). A key
// file that cannot be read, or a checkpoint key that cannot be published, leaves the keys in
// use as they were (the error says why); the segment is reopened all the same.
//
// If the new segment cannot be started, the error wraps [ErrUnavailable], and Append fails
// closed until it can be.
func (w *Writer) Reopen() error {
	w.reopenMu.Lock()
	defer w.reopenMu.Unlock()
	next, kerr := w.cfg.fileKeys() // file reads outside w.mu
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	var errs []error
	if kerr != nil {
		errs = append(errs, fmt.Errorf("audit: reopen: keys not reloaded: %w", kerr))
	} else if err := w.rotateKeys(next); err != nil {
		errs = append(errs, err)
	}
	w.reopen = true
	if err := w.rotate(); err != nil {
		w.failures.Add(1)
		errs = append(errs, fmt.Errorf("%w: reopen: %w", ErrUnavailable, err))
	}
	return errors.Join(errs...)
}

// rotateKeys starts a rotation to the keys next read from files, with w.mu held: for each key
// that changed, it appends a key_rotation record naming the new key's id and makes the keys
// pending, for the next segment.
func (w *Writer) rotateKeys(next keySet) error {
	cur := w.keys
	if w.pending != nil {
		cur = *w.pending
	}
	to := cur
	rec := Record{Kind: KindKeyRotation}
	var changed []string
	var perr error
	if next.mac != nil && !hmac.Equal(next.mac, cur.mac) {
		to.mac, rec.MACKeyID = next.mac, MACKeyID(next.mac)
		changed = append(changed, "audit key "+MACKeyID(cur.mac)+" to "+rec.MACKeyID)
	}
	if next.priv != nil && !next.priv.Equal(cur.priv) {
		pub, old := next.priv.Public().(ed25519.PublicKey), cur.priv.Public().(ed25519.PublicKey)
		if err := publishKey(w.dir, pub, old); err != nil {
			perr = fmt.Errorf("audit: reopen: checkpoint key not rotated: %w", err)
		} else {
			to.priv, rec.KeyID = next.priv, KeyID(pub)
			changed = append(changed, "checkpoint key "+KeyID(old)+" to "+rec.KeyID)
		}
	}
	if len(changed) == 0 {
		return perr
	}
	rec.Detail = "rotated on reopen: " + strings.Join(changed, ", ")
	if err := w.ready(); err != nil {
		w.failures.Add(1)
		return errors.Join(perr, fmt.Errorf("%w: reopen: key rotation not recorded: %w", ErrUnavailable, err))
	}
	if err := w.write(&rec); err != nil {
		w.failures.Add(1)
		return errors.Join(perr, fmt.Errorf("%w: reopen: key rotation not recorded: %w", ErrUnavailable, err))
	}
	w.pending = &to
	return perr
}

// syncDir fsyncs a directory so that a new file's name is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
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

// checkpointLoop writes a checkpoint every interval while records arrive, and rotates a
// segment that holds records and grew older than the maximum age while no append came.
func (w *Writer) checkpointLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.ckptInterval)
	defer t.Stop()
	age := time.NewTicker(min(w.cfg.maxAge, maxAgeCheck))
	defer age.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.mu.Lock()
			if !w.closed && w.broken == nil && w.sinceCkpt > 0 {
				if err := w.checkpoint(); err != nil {
					w.failures.Add(1)
				}
			}
			w.mu.Unlock()
		case <-age.C:
			w.mu.Lock()
			if !w.closed && w.broken == nil && w.segRecords > 0 && time.Since(w.segStart) >= w.cfg.maxAge {
				if err := w.rotate(); err != nil {
					w.failures.Add(1)
				}
			}
			w.mu.Unlock()
		}
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

// pathDigester returns [PathDigest] under a copy of key.
func pathDigester(key []byte) func(string) string {
	k := slices.Clone(key)
	return func(p string) string { return PathDigest(k, p) }
}

// retentionLoop runs a retention pass whenever a rotation asks for one, and a pass asked for
// when the writer is closed.
func (w *Writer) retentionLoop() {
	defer w.retainWG.Done()
	for {
		select {
		case <-w.retainKick:
			if err := w.retain(); err != nil {
				w.failures.Add(1)
			}
		case <-w.retainStop:
			select {
			case <-w.retainKick:
				if err := w.retain(); err != nil {
					w.failures.Add(1)
				}
			default:
			}
			return
		}
	}
}

// segFile is a segment of the log directory as a retention pass sees it.
type segFile struct {
	id, path string
	size     int64 // the segment and its checkpoint and note
	mtime    time.Time
	lock     *flock.Flock // held while it is being deleted
	last     RemovedSegment
}

// retain applies the retention limits to the log directory. Under the directory's retention
// lock (one pass at a time, over all writers), it picks the oldest segments, by name, that are
// over a limit and closed (no writer holds their lock); leaves a note beside each successor of
// one of them that stays ([prevNote]); appends a retention record naming them with their last
// MACs and waits until it is durable; and only then deletes them, with their checkpoint files,
// notes and lock files. If anything before the deletion fails, nothing is deleted.
func (w *Writer) retain() error {
	if w.cfg.keepAge <= 0 && w.cfg.keepBytes <= 0 {
		return nil
	}
	rl := flock.New(filepath.Join(w.dir, retentionLockFile), flock.SetPermissions(0o640))
	if err := rl.Lock(); err != nil {
		return fmt.Errorf("audit: retention: lock: %w", err)
	}
	defer rl.Unlock()
	w.mu.Lock()
	own, key, closed := w.segID, w.keys.mac, w.closed
	w.mu.Unlock()
	if closed {
		return ErrClosed
	}
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	var total int64
	for _, s := range segs {
		total += s.size
	}
	cutoff := time.Now().Add(-w.cfg.keepAge)
	var victims []*segFile
	defer func() {
		for _, v := range victims {
			if v.lock != nil {
				v.lock.Unlock()
			}
		}
	}()
	for _, s := range segs {
		expired := w.cfg.keepAge > 0 && s.mtime.Before(cutoff)
		over := w.cfg.keepBytes > 0 && total > w.cfg.keepBytes
		if s.id == own || !expired && !over {
			continue
		}
		l, live := lockClosed(s.path)
		if live {
			continue
		}
		s.lock = l
		victims = append(victims, s)
		total -= s.size
	}
	if len(victims) == 0 {
		return nil
	}
	gone := make(map[string]bool, len(victims))
	for _, v := range victims {
		gone[v.id] = true
		if v.last, err = lastRecord(v.path); err != nil {
			return err
		}
		v.last.Segment = v.id
	}
	// Successors that stay get a note: they will outlive the retention record.
	now := formatTime(time.Now())
	byID := make(map[string]*segFile, len(victims))
	for _, v := range victims {
		byID[v.id] = v
	}
	for _, s := range segs {
		if gone[s.id] {
			continue
		}
		h, ok := readHeader(s.path)
		if !ok || h.PrevSegment == "" || byID[h.PrevSegment] == nil {
			continue
		}
		v := byID[h.PrevSegment]
		n := prevNote{Segment: s.id, PrevSegment: v.id, LastSeq: v.last.LastSeq, LastMAC: v.last.LastMAC,
			Time: now, MACKeyID: MACKeyID(key)}
		n.MAC = n.sum(key)
		data, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("audit: retention: %w", err)
		}
		if err := writeAtomic(s.path+prevNoteExt, append(data, '\n'), 0o644, w.cfg.sync != SyncNone); err != nil {
			return fmt.Errorf("audit: retention: %w", err)
		}
	}
	// The record, durable before anything is deleted.
	for chunk := range slices.Chunk(victims, maxRemovedPerRecord) {
		rec := Record{Kind: KindRetention, Detail: fmt.Sprintf("retention: max age %s, max bytes %d (0: no limit)", w.cfg.keepAge, w.cfg.keepBytes)}
		for _, v := range chunk {
			rec.Removed = append(rec.Removed, v.last)
		}
		if err := w.appendDurable(&rec); err != nil {
			return fmt.Errorf("audit: retention: %w", err)
		}
	}
	w.mu.Lock()
	for _, v := range victims {
		w.announce(WitnessEvent{Kind: WitnessRetention, Segment: v.id, Seq: v.last.LastSeq, MAC: v.last.LastMAC,
			Time: now, By: w.segID})
	}
	w.mu.Unlock()
	var errs []error
	for _, v := range victims {
		for _, p := range []string{v.path, v.path + checkpointExt, v.path + prevNoteExt, v.path + lockExt} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("audit: retention: %w", err))
			}
		}
	}
	if w.cfg.sync != SyncNone {
		if err := syncDir(w.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// listSegments lists the segments of dir that a Writer named, oldest first.
func listSegments(dir string) ([]*segFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	sidecars := make(map[string]int64)
	var segs []*segFile
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if base, ok := strings.CutSuffix(name, checkpointExt); ok {
			name = base
		} else if base, ok := strings.CutSuffix(name, prevNoteExt); ok {
			name = base
		}
		id, ok := strings.CutSuffix(name, segmentExt)
		if !ok || !segmentIDPattern.MatchString(id) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		if name != e.Name() {
			sidecars[id] += fi.Size()
			continue
		}
		segs = append(segs, &segFile{id: id, path: filepath.Join(dir, name), size: fi.Size(), mtime: fi.ModTime()})
	}
	for _, s := range segs {
		s.size += sidecars[s.id]
	}
	slices.SortFunc(segs, func(a, b *segFile) int { return strings.Compare(a.id, b.id) })
	return segs, nil
}

// lastRecord returns the seq and the claimed MAC of the last whole line of a segment, zero when
// it holds none that is a record. The MAC is not checked: the retention record states what the
// segment ended with when it was deleted, and Verify compares it with what its successor links to.
func lastRecord(path string) (RemovedSegment, error) {
	f, err := os.Open(path)
	if err != nil {
		return RemovedSegment{}, fmt.Errorf("audit: retention: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return RemovedSegment{}, fmt.Errorf("audit: retention: %w", err)
	}
	size := fi.Size()
	for n := int64(64 << 10); n <= 4*maxLine; n *= 2 {
		start := max(0, size-n)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return RemovedSegment{}, fmt.Errorf("audit: retention: %w", err)
		}
		end := bytes.LastIndexByte(buf, '\n')
		begin := bytes.LastIndexByte(buf[:max(end, 0)], '\n') + 1
		switch {
		case end < 0 && start == 0:
			return RemovedSegment{}, nil
		case end < 0, begin == 0 && start > 0:
			continue // the line starts before the window
		}
		e := parseEntry(0, buf[begin:end])
		if !e.parsed {
			return RemovedSegment{}, nil
		}
		return RemovedSegment{LastSeq: e.rec.Seq, LastMAC: e.mac}, nil
	}
	return RemovedSegment{}, nil
}

// readHeader returns the header of a segment as it reads, unverified.
func readHeader(path string) (Record, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Record{}, false
	}
	defer f.Close()
	e := newLineReader(f, 0, 0).next()
	if e == nil || !e.parsed || e.rec.Kind != KindSegmentStart {
		return Record{}, false
	}
	return e.rec, true
}
