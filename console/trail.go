// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/audit"
)

// Bounds of the trail view's work.
const (
	// verifyMaxAge is how old a verification the trail view shows before
	// it starts another.
	verifyMaxAge = 30 * time.Second
	// verifyWait is how long a request waits for a verification running:
	// past it, the page says the verification runs, and shows the last
	// one. A verification never runs in a request handler.
	verifyWait = 2 * time.Second
	// searchReadLimit is how many records one trail search reads at most,
	// and searchTimeout how long it reads: past either it stops, and says
	// so (narrow it by time).
	searchReadLimit = 2_000_000
	searchTimeout   = 10 * time.Second
)

// trailView is the trail view's search and verification.
type trailView struct {
	Searched bool
	Problem  string
	// Stopped says why the search stopped before the trail's end ("": it
	// read it all).
	Stopped string
	Rows    []row
	// Read counts the records read, Matched those that matched, Shown
	// those shown.
	Read    int
	Matched int
	Shown   int
	// Verify is the last verification finished (nil: none yet).
	Verify *verification
	// Verifying says a verification runs, started at VerifyingSince.
	Verifying      bool
	VerifyingSince time.Time
}

// verification is the outcome of one audit.Verify of the trail.
type verification struct {
	At       time.Time
	Problem  string // the trail could not be verified at all (no key, ...)
	Report   audit.Report
	Segments []segmentStatus
}

// segmentStatus is one segment file and what verifying it found.
type segmentStatus struct {
	Name    string
	Size    int64
	Open    bool // its broker still writes it (its .lock is there)
	Status  string
	Problem string
	Bad     bool // tampering, or damage that cannot be told from it
	Torn    bool // a killed writer's unfinished last line: not tampering
}

// verify verifies the trail, as fsbroker audit verify does, against the
// keys Config.Keys gives. The verifier runs it, one at a time.
func (s *Server) verify() verification {
	v := verification{At: time.Now()}
	files, _ := filepath.Glob(filepath.Join(s.cfg.AuditDir, "*.jsonl"))
	slices.Sort(files)
	keys, err := s.cfg.Keys()
	switch {
	case err != nil:
		v.Problem = "cannot verify: " + err.Error()
	case len(files) == 0:
		v.Problem = "no segment files in " + s.cfg.AuditDir + ": nothing to verify yet"
	default:
		v.Report, err = audit.Verify(s.cfg.AuditDir, keys)
		if err != nil {
			v.Problem = "cannot verify: " + err.Error()
		}
	}
	problems := map[string]audit.Problem{}
	for _, p := range v.Report.Problems {
		if _, seen := problems[p.File]; !seen {
			problems[p.File] = p
		}
	}
	for _, f := range files {
		st := segmentStatus{Name: filepath.Base(f), Status: "intact"}
		if fi, err := os.Stat(f); err == nil {
			st.Size = fi.Size()
		}
		if _, err := os.Stat(f + ".lock"); err == nil {
			st.Open = true
		}
		if p, ok := problems[f]; ok {
			st.Problem = p.String()
			st.Status = string(p.Kind)
			st.Torn = !p.Kind.Tampering()
			st.Bad = p.Kind.Tampering()
		} else if v.Problem != "" {
			st.Status = "not verified"
		}
		v.Segments = append(v.Segments, st)
	}
	return v
}

// verifier runs the trail's verifications, one at a time, off the request
// handlers, and keeps the last outcome.
type verifier struct {
	mu      sync.Mutex
	last    *verification
	running chan struct{} // closed when the verification running ends; nil: none runs
	since   time.Time     // when it started
}

// verification returns the trail's verification for a page: it starts one
// when none runs and the last is older than verifyMaxAge (or again is
// set), waits for the one running at most verifyWait (and ctx), and returns
// the last finished (nil if none) and whether one still runs, since when.
func (s *Server) verification(ctx context.Context, again bool) (last *verification, running bool, since time.Time) {
	vf := &s.verifier
	vf.mu.Lock()
	if vf.running == nil && (again || vf.last == nil || time.Since(vf.last.At) > verifyMaxAge) {
		done := make(chan struct{})
		vf.running, vf.since = done, time.Now()
		go func() {
			v := s.verify()
			vf.mu.Lock()
			vf.last, vf.running = &v, nil
			vf.mu.Unlock()
			close(done)
		}()
	}
	done := vf.running
	vf.mu.Unlock()
	if done != nil {
		t := time.NewTimer(verifyWait)
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	vf.mu.Lock()
	defer vf.mu.Unlock()
	return vf.last, vf.running != nil, vf.since
}

// search runs the trail view's search: the last searchRows records that
// match, oldest first. Searches run one at a time (another waits for the
// one running as long as its request does); each reads at most
// searchBudget records, for at most searchTimeout.
func (s *Server) search(ctx context.Context, form filterForm) trailView {
	var v trailView
	v.Searched = true
	f, err := s.filterOf(form)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	select {
	case s.searching <- struct{}{}:
		defer func() { <-s.searching }()
	case <-ctx.Done():
		v.Problem = "another search was still running; try again"
		return v
	}
	r, err := audit.NewReader(s.cfg.AuditDir, audit.Filter{})
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	readCtx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	last := make([]record, 0, searchRows)
	for e, err := range r.Entries(readCtx) {
		if err != nil {
			if readCtx.Err() != nil {
				break
			}
			continue // a line that is not a record: verification says so
		}
		if v.Read == s.searchBudget {
			v.Stopped = fmt.Sprintf("the search stopped after reading %d records", v.Read)
			break
		}
		v.Read++
		if !f.Match(&e.Record) {
			continue
		}
		v.Matched++
		if len(last) == searchRows {
			copy(last, last[1:])
			last = last[:searchRows-1]
		}
		last = append(last, record{index: uint64(v.Matched), rec: e.Record, segment: e.Segment})
	}
	if v.Stopped == "" && readCtx.Err() != nil && ctx.Err() == nil {
		v.Stopped = fmt.Sprintf("the search stopped after %s, having read %d records", searchTimeout, v.Read)
	}
	for _, rec := range last {
		v.Rows = append(v.Rows, rowOf(rec))
	}
	v.Shown = len(v.Rows)
	return v
}

func (s *Server) trailPage(w http.ResponseWriter, r *http.Request) {
	p := s.newPage(r, viewTrail, "Trail")
	q := r.URL.Query()
	p.Filter = filterFormOf(q)
	if q.Has("search") {
		p.Trail = s.search(r.Context(), p.Filter)
	}
	p.Trail.Verify, p.Trail.Verifying, p.Trail.VerifyingSince = s.verification(r.Context(), false)
	s.render(w, p)
}

// verifyNow starts a verification of the trail (unless one runs), and
// waits for it at most verifyWait.
func (s *Server) verifyNow(w http.ResponseWriter, r *http.Request) {
	done := "verified"
	if _, running, _ := s.verification(r.Context(), true); running {
		done = "verifying"
	}
	s.back(w, r, "/trail", url.Values{"done": {done}})
}

// Summary says, in a line, what the verification found.
func (v verification) Summary() string {
	switch {
	case v.Problem != "":
		return v.Problem
	case v.Report.OK:
		return "intact"
	}
	tampered := slices.ContainsFunc(v.Report.Problems, func(p audit.Problem) bool { return p.Kind.Tampering() })
	if tampered {
		return "NOT INTACT: signs of tampering (or damage that cannot be told apart from it)"
	}
	return "torn tail: a broker was killed mid-write; not tampering"
}

// Bad says the trail shows signs of tampering or could not be verified.
func (v verification) Bad() bool {
	return v.Problem != "" || !v.Report.OK && !strings.HasPrefix(v.Summary(), "torn")
}
