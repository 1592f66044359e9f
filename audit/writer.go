package audit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrUnavailable is returned, wrapped, by Append when the trail cannot be kept: a record, a
// rotation or a checkpoint could not be written or synced. The broker refuses the request.
var ErrUnavailable = errors.New("audit: unavailable")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: writer closed")

// segmentExt and checkpointExt end the names of segment and checkpoint files.
const (
	segmentExt    = ".jsonl"
	checkpointExt = ".ckpt"
)

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

// Writer appends records to this process's segments of an audit directory. It is safe for
// concurrent use; the order of seq is the order of the file.
type Writer struct {
	dir      string
	cfg      config
	priv     ed25519.PrivateKey
	keyID    string
	macKeyID string
	digestFn func(string) string // PathDigest under the audit key
	pid      int

	failures atomic.Uint64
	fsyncs   atomic.Uint64 // background fsyncs, for the benchmarks
	done     chan struct{}
	wg       sync.WaitGroup

	mu sync.Mutex
	// work wakes the syncer; durable wakes SyncAlways appenders after a sync.
	work, durable *sync.Cond
	mac           hash.Hash // under the audit key
	f             *os.File
	segID         string
	off           int64 // bytes of whole records in the segment
	seq           uint64
	lastMAC       string
	lastTime      string
	lastKind      Kind
	sinceCkpt     int  // records since the last checkpoint record
	covered       bool // the last checkpoint record is in the .ckpt file
	broken        error
	dirty         bool // the segment may end in a partial line that could not be cut away
	closed        bool
	written       uint64 // records written, over all segments
	synced        uint64 // records known synced (or given up on, see failedUpTo)
	failedUpTo    uint64 // records up to this one were in a failed fsync
}

// Open starts a writer on dir (created if needed): it loads or creates the keys, publishes
// <dir>/checkpoint.pub and starts this process's first segment.
func Open(dir string, opts ...Option) (*Writer, error) {
	cfg := config{
		sync:         SyncBatch,
		maxBytes:     DefaultMaxSegmentBytes,
		ckptEvery:    DefaultCheckpointEvery,
		ckptInterval: DefaultCheckpointInterval,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.sync < SyncBatch || cfg.sync > SyncNone {
		return nil, fmt.Errorf("audit: invalid sync mode %d", int(cfg.sync))
	}
	if cfg.maxBytes <= 0 || cfg.ckptEvery <= 0 || cfg.ckptInterval <= 0 {
		return nil, errors.New("audit: segment size, checkpoint count and interval must be positive")
	}
	key, priv, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit: create log directory: %w", err)
	}
	if err := publishKey(dir, priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	w := &Writer{
		dir:      dir,
		cfg:      cfg,
		priv:     priv,
		keyID:    KeyID(priv.Public().(ed25519.PublicKey)),
		macKeyID: MACKeyID(key),
		digestFn: pathDigester(key),
		pid:      os.Getpid(),
		done:     make(chan struct{}),
		mac:      newMAC(key),
	}
	w.work = sync.NewCond(&w.mu)
	w.durable = sync.NewCond(&w.mu)
	w.mu.Lock()
	err = w.rotate()
	w.mu.Unlock()
	if err != nil {
		if w.f != nil {
			w.f.Close()
		}
		return nil, err
	}
	if cfg.sync != SyncNone {
		w.wg.Add(1)
		go w.syncLoop()
	}
	w.wg.Add(1)
	go w.checkpointLoop()
	return w, nil
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
	case c.keyFile != "" || c.stateDir != "":
		p := c.keyFile
		if p == "" {
			p = filepath.Join(c.stateDir, DefaultKeyFile)
		}
		if key, err = LoadOrCreateKey(p); err != nil {
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
	case c.ckptKeyFile != "" || c.stateDir != "":
		p := c.ckptKeyFile
		if p == "" {
			p = filepath.Join(c.stateDir, DefaultCheckpointKeyFile)
		}
		if priv, err = LoadOrCreateCheckpointKey(p); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errors.New("audit: no checkpoint key: give WithCheckpointKey, WithCheckpointKeyFile or WithStateDir")
	}
	return key, priv, nil
}

// publishKey writes <dir>/checkpoint.pub unless it already holds pub; a different key there is
// an error (rotating the checkpoint key is a separate step).
func publishKey(dir string, pub ed25519.PublicKey) error {
	data, err := encodePublicKey(pub)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, PublicKeyFile)
	old, err := os.ReadFile(p)
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err == nil:
		return fmt.Errorf("audit: %s holds another checkpoint key", p)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("audit: read public key: %w", err)
	}
	return writeAtomic(p, data, 0o644, true)
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
// path when paths are redacted.
func (w *Writer) PathDigest(path string) string { return w.digestFn(path) }

// KeyID returns the id of the checkpoint public key ([KeyID]).
func (w *Writer) KeyID() string { return w.keyID }

// Failures counts the appends refused because the trail could not be kept, and background
// fsyncs and checkpoints that failed.
func (w *Writer) Failures() uint64 { return w.failures.Load() }

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
	rec.Segment, rec.PrevSegment, rec.KeyID, rec.MACKeyID = "", "", "", ""
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
		return 0, w.unavailable(err)
	}
	seq, gen := w.seq, w.written
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
// in a fresh segment, rotates a full segment and writes a checkpoint that is due.
func (w *Writer) ready() error {
	if w.broken != nil || w.off >= w.cfg.maxBytes {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if w.sinceCkpt >= w.cfg.ckptEvery {
		return w.checkpoint()
	}
	return nil
}

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
	line, mac, err := encodeLine(rec, w.mac)
	if err != nil {
		return err
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
	sig := ed25519.Sign(w.priv, checkpointMessage(w.seq, w.lastMAC, w.lastTime))
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
	return nil
}

// rotate starts a new segment, with w.mu held: it creates the file, closes the current segment
// with a final checkpoint and fsync, and writes the new segment's header, whose prev continues
// the chain. If the writer is broken, the old segment is abandoned as it is. On failure the
// current segment stays in place.
func (w *Writer) rotate() error {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("audit: segment name: %w", err)
	}
	id := fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102T150405.000000000Z"), w.pid, hex.EncodeToString(rnd[:]))
	path := w.segPath(id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("audit: create segment: %w", err)
	}
	abort := func(err error) error {
		f.Close()
		os.Remove(path)
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
	oldWritten, oldOff, oldDirty, oldBroken := w.written, w.off, w.dirty, w.broken
	w.f, w.segID, w.off = f, id, 0
	if err := w.write(&Record{
		Kind: KindSegmentStart, Segment: id, PrevSegment: oldID, KeyID: w.keyID, MACKeyID: w.macKeyID,
	}); err != nil {
		// Stay in the old segment; the next append tries again.
		w.f, w.segID, w.off, w.dirty = old, oldID, oldOff, oldDirty
		w.broken = cmp.Or(oldBroken, w.broken)
		return abort(err)
	}
	w.broken, w.dirty = nil, false
	w.sinceCkpt, w.covered = 0, false
	if old != nil {
		// Everything of the old segment is synced (or failed, see failedUpTo); the header is not.
		w.synced = max(w.synced, oldWritten)
		old.Close()
	}
	w.work.Signal()
	if w.cfg.sync != SyncNone {
		if err := syncDir(w.dir); err != nil {
			// The segment's name may not survive a power failure: start over on the next append.
			w.broken = err
			return err
		}
	}
	return nil
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

// checkpointLoop writes a checkpoint every interval while records arrive.
func (w *Writer) checkpointLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.ckptInterval)
	defer t.Stop()
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
		}
	}
}

// Close writes a final checkpoint, fsyncs (unless [SyncNone]) and closes the segment. Appends
// after Close fail with [ErrClosed].
func (w *Writer) Close() error {
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
	w.synced = w.written
	w.closed = true
	w.work.Broadcast()
	w.durable.Broadcast()
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()
	return err
}

// pathDigester returns [PathDigest] under a copy of key.
func pathDigester(key []byte) func(string) string {
	k := slices.Clone(key)
	return func(p string) string { return PathDigest(k, p) }
}
