// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gofrs/flock"

	"github.com/fsbroker/fsbroker/audit"
)

// The files of an audit directory that the uploader reads (see package audit).
const (
	segmentExt = ".jsonl"
	lockExt    = ".lock" // <segment>.jsonl.lock, flocked by the live writer of the segment
)

// segment is a segment file of the trail, as its header names it.
type segment struct {
	id   string
	prev string // the segment of the same writer it follows, "" for a writer's first
	path string
}

// index is what the uploader knows of the segments of the audit directory: their headers,
// which never change, read once.
type index struct {
	dir string

	mu   sync.Mutex
	segs map[string]*segment
	next map[string]string // a segment's id -> the id of the segment that follows it
}

// newIndex returns an empty index of dir.
func newIndex(dir string) *index {
	return &index{dir: dir, segs: make(map[string]*segment), next: make(map[string]string)}
}

// refresh lists the directory again: it reads the header of each new segment (one whose
// header is not written yet is left for the next time) and forgets the segments that are gone.
func (x *index) refresh() error {
	ents, err := os.ReadDir(x.dir)
	if err != nil {
		return err
	}
	present := make(map[string]bool, len(ents))
	var fresh []*segment
	x.mu.Lock()
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), segmentExt)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		present[id] = true
		if x.segs[id] == nil {
			fresh = append(fresh, &segment{id: id, path: filepath.Join(x.dir, e.Name())})
		}
	}
	for id := range x.segs {
		if !present[id] {
			delete(x.segs, id) // its successor keeps naming it as prev
		}
	}
	x.mu.Unlock()
	for _, s := range fresh {
		h, ok := readHeader(s.path)
		if !ok || h.Segment != s.id {
			continue
		}
		s.prev = h.PrevSegment
		x.mu.Lock()
		x.segs[s.id] = s
		if s.prev != "" {
			x.next[s.prev] = s.id
		}
		x.mu.Unlock()
	}
	return nil
}

// readHeader reads the header of the segment at path, unverified.
func readHeader(path string) (audit.Record, bool) {
	r, err := audit.NewReader(path, audit.Filter{Kind: audit.KindSegmentStart})
	if err != nil {
		return audit.Record{}, false
	}
	for e, err := range r.Entries(context.Background()) {
		if err == nil && e.Line == 1 {
			return e.Record, true
		}
		break
	}
	return audit.Record{}, false
}

// get returns the segment id, if it is in the directory.
func (x *index) get(id string) (*segment, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.segs[id]
	return s, ok
}

// successor returns the id of the segment that follows id, or "".
func (x *index) successor(id string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.next[id]
}

// ids lists the segments in the directory, oldest first (ids start with their start time).
func (x *index) ids() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.segs))
	for id := range x.segs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// chain lists id and the segments that follow it, in order.
func (x *index) chain(id string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := []string{id}
	for next := x.next[id]; next != "" && x.segs[next] != nil && !slices.Contains(out, next); next = x.next[next] {
		out = append(out, next)
	}
	return out
}

// segmentPath is the path of segment id in the audit directory.
func (x *index) segmentPath(id string) string { return filepath.Join(x.dir, id+segmentExt) }

// live reports whether a writer still holds the segment at path open: it holds an flock on
// <path>.lock from before the segment exists until it closes it (then the lock file is
// removed). A lock that cannot be tried counts as live.
func live(path string) bool {
	l := flock.New(path+lockExt, flock.SetFlag(os.O_RDONLY))
	ok, err := l.TryLock()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil || !ok:
		return true
	}
	l.Unlock()
	return false
}

// outcomeWindow is how much later an outcome may come and still be joined to its decision:
// the window of audit.OPAEvents, in trail time, and in wall-clock time once the trail has
// nothing newer.
const outcomeWindow = audit.DefaultOutcomeWindow

// maxWaiting bounds the decisions that wait for their outcome, as audit.OPAEvents does: past it
// the oldest goes out without one.
const maxWaiting = 10000

// joiner turns the records of one writer's chain, in order, into events in the same order:
// an allowed decision waits for its outcome record (joined into custom.outcome), at most
// outcomeWindow; a denied decision (which never has an outcome) and a consent record are ready
// at once. Markers queued between them keep their place.
type joiner struct {
	u       *Uploader
	writer  string
	queue   []*pending
	waiting map[string]*pending // allowed decisions by decision id
	last    string              // the time of the newest record taken
}

// pending is an event, or a marker, waiting for its turn.
type pending struct {
	entry    audit.Entry
	out      *audit.Record
	deadline string // in audit.TimeLayout: past it, the outcome is not waited for
	waits    bool
	marker   *item
}

// add takes the next record of the chain.
func (j *joiner) add(e audit.Entry) {
	r := &e.Record
	j.last = r.Time
	switch r.Kind {
	case audit.KindDecision, audit.KindConsent:
		e.Raw, e.Writer = nil, j.writer
		p := &pending{entry: e, deadline: r.Time}
		if t, err := timeOf(r.Time); err == nil {
			p.deadline = t.Add(outcomeWindow).Format(audit.TimeLayout)
		}
		if r.Kind == audit.KindDecision && r.Allow != nil && *r.Allow {
			p.waits = true
			j.waiting[r.DecisionID] = p
		}
		j.queue = append(j.queue, p)
	case audit.KindOutcome:
		if p := j.waiting[r.DecisionID]; p != nil {
			out := *r
			p.out, p.waits = &out, false
			delete(j.waiting, r.DecisionID)
		}
	}
}

// mark queues a marker behind the events queued so far.
func (j *joiner) mark(it item) { j.queue = append(j.queue, &pending{marker: &it}) }

// ready takes the events and markers at the head of the queue that need not wait: every one
// when all, else up to the first decision that waits for its outcome while now (a time in
// audit.TimeLayout) is before its deadline and fewer than maxWaiting wait.
func (j *joiner) ready(now string, all bool) []item {
	var out []item
	for len(j.queue) > 0 {
		p := j.queue[0]
		if !all && p.waits && now < p.deadline && len(j.queue) <= maxWaiting {
			break
		}
		j.queue = j.queue[1:]
		if p.marker != nil {
			out = append(out, *p.marker)
			continue
		}
		if p.waits {
			delete(j.waiting, p.entry.Record.DecisionID)
		}
		if it, ok := j.u.encode(&p.entry, p.out); ok {
			out = append(out, it)
		}
	}
	return out
}
