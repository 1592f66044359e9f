// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package console

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/audit"
)

// verifyMaxAge is how old a verification the trail view shows before it
// verifies again.
const verifyMaxAge = 30 * time.Second

// trailView is the trail view's search and verification.
type trailView struct {
	Searched bool
	Problem  string
	Rows     []row
	Matched  int
	Shown    int
	Verify   verification
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

// verify verifies the trail now (one verification at a time), as fsbroker
// audit verify does, against the keys Config.Keys gives, and keeps the
// outcome.
func (s *Server) verify() verification {
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
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
	s.verifiedMu.Lock()
	s.verified = &v
	s.verifiedMu.Unlock()
	return v
}

// lastVerification is the kept verification, made again when older than
// verifyMaxAge.
func (s *Server) lastVerification() verification {
	s.verifiedMu.Lock()
	v := s.verified
	s.verifiedMu.Unlock()
	if v == nil || time.Since(v.At) > verifyMaxAge {
		return s.verify()
	}
	return *v
}

// search runs the trail view's search: the last searchRows records that
// match, oldest first.
func (s *Server) search(ctx context.Context, form filterForm) trailView {
	var v trailView
	v.Searched = true
	f, err := s.filterOf(form)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	r, err := audit.NewReader(s.cfg.AuditDir, f)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	last := make([]record, 0, searchRows)
	for e, err := range r.Entries(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			continue // a line that is not a record: verification says so
		}
		v.Matched++
		if len(last) == searchRows {
			copy(last, last[1:])
			last = last[:searchRows-1]
		}
		last = append(last, record{index: uint64(v.Matched), rec: e.Record, segment: e.Segment})
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
	p.Trail.Verify = s.lastVerification()
	s.render(w, p)
}

// verifyNow verifies the trail again.
func (s *Server) verifyNow(w http.ResponseWriter, r *http.Request) {
	s.verify()
	back(w, r, "/trail", url.Values{"done": {"verified"}})
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
