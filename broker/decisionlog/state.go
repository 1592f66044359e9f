// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/internal/keyfile"
	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// DirName is the directory of the state directory where the delivery state is kept.
const DirName = "decisionlog"

// sinceFile holds the time decision logging was first enabled on the state directory: records
// older than that are not uploaded.
const sinceFile = "since"

// claimWait is how long claiming a segment waits for another process to let go of it.
const claimWait = 10 * time.Millisecond

// cursor is what the state directory records of the delivery of one segment's events.
type cursor struct {
	// Segment is the segment's id.
	Segment string `json:"segment"`
	// Writer is the id its events carry in labels.id: the first segment of its writer's chain.
	Writer string `json:"writer"`
	// Seq is the seq of the last record whose event the service accepted (0: none yet). Every
	// event of a record before it was accepted too: events go out in the order of the trail.
	Seq uint64 `json:"seq"`
	// Done says every event of the segment was accepted, and the segment is closed.
	Done bool `json:"done"`
}

// claim is a segment this process delivers: it holds the segment's lock in the state directory
// until every event of the segment is accepted or it stops, so that no other process sends them
// too.
type claim struct {
	cursor // as last written, guarded by state.mu once shared
	skip   uint64
	unlock func()
}

// state is the delivery state in <state-dir>/decisionlog: a cursor file per segment, written
// atomically under the segment's flock, which every broker process on the state directory
// shares.
type state struct {
	dir   *keyfile.Dir
	since time.Time
	log   hclog.Logger

	mu     sync.Mutex
	claims map[string]*claim // held by this process, by segment
	done   map[string]bool   // segments known to be done
}

// openState opens the delivery state of stateDir. The first time, it records now as the time
// from which records are delivered.
func openState(stateDir string, log hclog.Logger) (*state, error) {
	path := filepath.Join(stateDir, DirName)
	d, err := keyfile.Open(path, "decision-log", claimWait, log)
	if err != nil {
		return nil, err
	}
	s := &state{dir: d, log: log, claims: make(map[string]*claim), done: make(map[string]bool)}
	if s.since, err = readOrCreateSince(filepath.Join(path, sinceFile), log); err != nil {
		d.Close()
		return nil, err
	}
	return s, nil
}

// readOrCreateSince reads the time in file, creating the file with the time now if it is not
// there yet. The file is written whole before it gets its name (atomicfile.Create), so that a
// broker starting at the same moment reads either nothing or the whole time.
func readOrCreateSince(file string, log hclog.Logger) (time.Time, error) {
	now := time.Now().UTC()
	err := atomicfile.Create(file, []byte(now.Format(time.RFC3339Nano)+"\n"), 0o600)
	if errors.Is(err, atomicfile.ErrNotDurable) {
		// In place: only a power loss before the directory's next sync forgets it.
		log.Warn("cannot sync the decision-log directory", "error", err)
		err = nil
	}
	switch {
	case err == nil:
		return now, nil
	case !errors.Is(err, fs.ErrExist):
		return time.Time{}, err // atomicfile's error names the file
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// close releases every claim, writing its cursor first, and closes the directory.
func (s *state) close() {
	s.mu.Lock()
	claims := slices.Collect(maps.Values(s.claims))
	s.mu.Unlock()
	for _, c := range claims {
		s.release(c)
	}
	s.dir.Close()
}

// load reads the cursor of segment, without its lock (a cursor file is replaced atomically);
// ok is false when there is none.
func (s *state) load(segment string) (c cursor, ok bool, err error) {
	b, err := os.ReadFile(s.dir.DataPath(keyfile.Name(segment)))
	if errors.Is(err, fs.ErrNotExist) {
		return cursor{Segment: segment}, false, nil
	}
	if err != nil {
		return cursor{Segment: segment}, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Segment != segment {
		return cursor{Segment: segment}, false, fmt.Errorf("cursor of segment %s: not a cursor", segment)
	}
	return c, true, nil
}

// isDone reports whether every event of segment is known to be delivered.
func (s *state) isDone(segment string) bool {
	s.mu.Lock()
	done := s.done[segment]
	s.mu.Unlock()
	if done {
		return true
	}
	c, _, err := s.load(segment)
	if err != nil {
		s.log.Warn("cannot read a decision-log cursor", "segment", segment, "error", err)
	}
	if c.Done {
		s.mu.Lock()
		s.done[segment] = true
		s.mu.Unlock()
	}
	return c.Done
}

// held reports whether this process holds segment's claim.
func (s *state) held(segment string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[segment] != nil
}

// claim takes segment's lock and reads its cursor, with writer as its writer when the cursor
// names none yet; nil when another process (or this one) holds it.
func (s *state) claim(segment, writer string) *claim {
	s.mu.Lock()
	if s.claims[segment] != nil {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	unlock, err := s.dir.Lock(keyfile.Name(segment), true)
	if err != nil {
		s.log.Debug("segment not claimed", "segment", segment, "error", err)
		return nil
	}
	cur, _, err := s.load(segment)
	if err != nil {
		// Delivered again from the start rather than never: the service sees the
		// same decision ids twice.
		s.log.Warn("a decision-log cursor does not read; delivering the segment from its start", "segment", segment, "error", err)
	}
	if cur.Writer == "" {
		cur.Writer = writer
	}
	c := &claim{cursor: cur, skip: cur.Seq, unlock: unlock}
	s.mu.Lock()
	s.claims[segment] = c
	if cur.Done {
		s.done[segment] = true
	}
	s.mu.Unlock()
	return c
}

// save writes c's cursor. It reports a failure: the events it covers may then be sent again.
func (s *state) save(c *claim) error {
	s.mu.Lock()
	b, err := json.Marshal(c.cursor)
	done := c.Done
	s.mu.Unlock()
	if err == nil {
		_, err = s.dir.Replace(keyfile.Name(c.Segment), append(b, '\n'))
	}
	if err != nil {
		return fmt.Errorf("record the delivery of segment %s: %w", c.Segment, err)
	}
	if done {
		s.mu.Lock()
		s.done[c.Segment] = true
		s.mu.Unlock()
	}
	return nil
}

// release writes c's cursor and lets go of its lock.
func (s *state) release(c *claim) {
	s.mu.Lock()
	if s.claims[c.Segment] != c {
		s.mu.Unlock()
		return
	}
	delete(s.claims, c.Segment)
	s.mu.Unlock()
	if err := s.save(c); err != nil {
		s.log.Error("cannot record the decision-log delivery; its events may be sent again", "error", err)
	}
	c.unlock()
}

// forget removes the cursor of a segment that is no longer in the trail, with its lock file,
// and returns the cursor it had.
func (s *state) forget(segment string) (cursor, bool) {
	name := keyfile.Name(segment)
	unlock, err := s.dir.Lock(name, true)
	if err != nil {
		return cursor{}, false
	}
	defer unlock()
	c, ok, _ := s.load(segment)
	if err := s.dir.Remove(name); err != nil {
		s.log.Warn("cannot remove a decision-log cursor", "segment", segment, "error", err)
		return c, false
	}
	// Nobody locks this name again: the segment is gone, and a scan claims listed segments only.
	os.Remove(s.dir.LockPath(name))
	s.mu.Lock()
	delete(s.done, segment)
	s.mu.Unlock()
	return c, ok
}

// cursors lists the segments that have a cursor file.
func (s *state) cursors() ([]string, error) {
	ents, err := os.ReadDir(s.dir.Path())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), keyfile.DataExt)
		if !ok || !keyfile.IsName(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir.Path(), e.Name()))
		if err != nil {
			continue
		}
		var c cursor
		if json.Unmarshal(b, &c) == nil && c.Segment != "" && keyfile.Name(c.Segment) == name {
			out = append(out, c.Segment)
		}
	}
	return out, nil
}
