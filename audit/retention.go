// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// maxRemovedPerRecord is the most segments one retention record names.
const maxRemovedPerRecord = 200

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
		if err := w.replaceSidecar(s.path+prevNoteExt, append(data, '\n')); err != nil {
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
