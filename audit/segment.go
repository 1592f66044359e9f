// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/gofrs/flock"
)

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
)

// segmentTimeLayout is the layout of the start time that begins a segment's id.
const segmentTimeLayout = "20060102T150405.000000000Z"

// segmentIDPattern matches the id of a segment a Writer names: <startTime>-<pid>-<random>.
// Retention touches no other file.
var segmentIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9]+-[0-9a-f]{8}$`)

// segPath returns the path of segment id.
func (w *Writer) segPath(id string) string { return filepath.Join(w.dir, id+segmentExt) }

// Segment returns the path of the segment being written.
func (w *Writer) Segment() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segPath(w.segID)
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
