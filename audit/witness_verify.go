// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// maxRefusedExamples is how many refused witness lines a report names.
const maxRefusedExamples = 5

// WitnessLog is what witnesses saw of one trail: the witness lines of the trail whose audit
// keys it was made with, read from syslog files, journal output or witness files ([WitnessLog.Add]).
// Give it to [Verify] with [AgainstWitness].
//
// A line is of the trail when its auditKey is the id of one of the audit keys. Its signature
// must verify under one of the checkpoint keys: a line that does not (or that is malformed) is
// refused, counted and named, never used. So is a line signed with a checkpoint key that was
// not given, unless the trail itself names that key (a segment header or key rotation): then
// the key is missing, and Verify reports it as [ProblemUnknownKey]. Lines of other trails are
// counted and ignored; lines that are not witness lines are skipped.
type WitnessLog struct {
	macIDs map[string]bool
	pubs   map[string]ed25519.PublicKey
	// reach is the furthest checkpoint statement of each segment, retained the retention
	// statement of each segment; both only from lines whose signature verified.
	reach, retained map[string]witnessClaim
	// unknown counts the lines of the trail signed with a checkpoint key not given, by key id.
	unknown map[string]*witnessSighting
	// foreign counts, by audit key id, the lines under an audit key not given whose signature
	// verified under a checkpoint key given: this trail's checkpoint key witnessed them.
	foreign map[string]*witnessSighting
	files   int
	stats   WitnessReport
}

// witnessClaim is a verified statement and where it was read.
type witnessClaim struct {
	ev  WitnessEvent
	loc witnessLoc
}

// witnessLoc is a line of a witness file.
type witnessLoc struct {
	file string
	line int
}

// String returns FILE:LINE.
func (l witnessLoc) String() string { return fmt.Sprintf("%s:%d", l.file, l.line) }

// witnessSighting counts the lines of one unknown checkpoint key and names the first.
type witnessSighting struct {
	n     int
	first witnessLoc
}

// signedBy reports whether e's signature, over the text signed, verifies under pub.
func (e *WitnessEvent) signedBy(pub ed25519.PublicKey, signed []byte) bool {
	sig, _ := hex.DecodeString(e.Signature)
	return ed25519.Verify(pub, signed, sig)
}

// add counts one more line at where, s nil counting as none.
func (s *witnessSighting) add(where witnessLoc) *witnessSighting {
	if s == nil {
		s = &witnessSighting{first: where}
	}
	s.n++
	return s
}

// WitnessReport says what the witness lines given to [Verify] showed.
type WitnessReport struct {
	// Files counts the witness files read.
	Files int `json:"files"`
	// Lines counts the witness lines read, of every trail.
	Lines int `json:"lines"`
	// TrailLines counts the lines of this trail whose signature verified.
	TrailLines int `json:"trailLines"`
	// OtherTrails counts the lines of other trails (under audit keys not given): ignored, unless
	// signed with a checkpoint key given (then an unknown_key problem names their audit key).
	OtherTrails int `json:"otherTrails,omitempty"`
	// Refused counts the lines refused: malformed, badly signed (forged), or signed with a
	// checkpoint key that this trail never used.
	Refused int `json:"refused,omitempty"`
	// RefusedExamples names the first refused lines: "FILE:LINE: reason".
	RefusedExamples []string `json:"refusedExamples,omitempty"`
	// Segments counts the segments of this trail the witness saw.
	Segments int `json:"segments"`
	// Confirmed counts the segments that hold everything the witness saw of them.
	Confirmed int `json:"confirmed"`
	// RetentionRemoved counts the segments the witness saw that retention deleted.
	RetentionRemoved int `json:"retentionRemoved,omitempty"`
}

// NewWitnessLog returns an empty witness log for the trail of keys.
func NewWitnessLog(keys VerifyKeys) *WitnessLog {
	wl := &WitnessLog{
		macIDs:   make(map[string]bool),
		pubs:     make(map[string]ed25519.PublicKey),
		reach:    make(map[string]witnessClaim),
		retained: make(map[string]witnessClaim),
		unknown:  make(map[string]*witnessSighting),
		foreign:  make(map[string]*witnessSighting),
	}
	for _, k := range keys.MAC {
		wl.macIDs[MACKeyID(k)] = true
	}
	for _, k := range keys.Checkpoint {
		wl.pubs[KeyID(k)] = k
	}
	return wl
}

// Add reads the witness lines of r, named name in reports (a file name). Lines without a
// witness statement are skipped, as are lines longer than 1 MiB. The error is a read error.
func (wl *WitnessLog) Add(name string, r io.Reader) error {
	wl.files++
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readWitnessLine(br)
		if len(line) > 0 {
			wl.addLine(witnessLoc{name, n}, line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: witness %s: %w", name, err)
		}
	}
}

// readWitnessLine reads one line without its line end; a line longer than maxLine is returned
// empty.
func readWitnessLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !long && len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			long, line = true, nil
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// addLine takes one line read at where.
func (wl *WitnessLog) addLine(where witnessLoc, line []byte) {
	ev, signed, err := parseWitnessLine(line)
	if errors.Is(err, errNoWitnessLine) {
		return
	}
	wl.stats.Lines++
	if err != nil {
		wl.refuse(where, "not a witness statement: "+err.Error())
		return
	}
	pub := wl.pubs[ev.KeyID]
	if !wl.macIDs[ev.AuditKeyID] {
		wl.stats.OtherTrails++
		if pub != nil && ev.signedBy(pub, signed) {
			// Signed with this trail's checkpoint key: a trail under an audit key not given
			// (rotated, or replaced after the trail was deleted).
			wl.foreign[ev.AuditKeyID] = wl.foreign[ev.AuditKeyID].add(where)
		}
		return
	}
	if pub == nil {
		wl.unknown[ev.KeyID] = wl.unknown[ev.KeyID].add(where)
		return
	}
	if !ev.signedBy(pub, signed) {
		wl.refuse(where, fmt.Sprintf("forged: the signature does not verify under checkpoint key %s", ev.KeyID))
		return
	}
	wl.stats.TrailLines++
	claims := wl.reach
	if ev.Kind == WitnessRetention {
		claims = wl.retained
	}
	if c, ok := claims[ev.Segment]; !ok || ev.Seq > c.ev.Seq {
		claims[ev.Segment] = witnessClaim{ev: ev, loc: where}
	}
}

// refuse counts a refused line and keeps the first few reasons.
func (wl *WitnessLog) refuse(where witnessLoc, reason string) {
	wl.stats.refuse(1, where, reason)
}

// refuse counts n refused lines, the first at where, and keeps the first few reasons.
func (r *WitnessReport) refuse(n int, where witnessLoc, reason string) {
	r.Refused += n
	if len(r.RefusedExamples) < maxRefusedExamples {
		r.RefusedExamples = append(r.RefusedExamples, where.String()+": "+reason)
	}
}

// reachOf returns the furthest statement the witness verified for segment id.
func (wl *WitnessLog) reachOf(id string) (witnessClaim, bool) {
	if wl == nil {
		return witnessClaim{}, false
	}
	c, ok := wl.reach[id]
	return c, ok
}

// check compares the trail with what the witness saw, once every segment is verified: each
// segment the witness saw must hold the furthest record the witness saw, with the same MAC, or
// (in a directory) have been deleted by retention after that record. Problems of present
// segments go to their segment; the rest are returned. For a single segment file (dir ""),
// only that segment is checked.
func (wl *WitnessLog) check(dir string, segs []*segment, byID map[string]*segment, keys VerifyKeys) (WitnessReport, []Problem) {
	rep := wl.stats
	rep.Files = wl.files
	var problems []Problem
	ids := make([]string, 0, len(wl.reach))
	for id := range wl.reach {
		if dir != "" || byID[id] != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	rep.Segments = len(ids)
	for _, id := range ids {
		c := wl.reach[id]
		s := byID[id]
		if s == nil {
			p, retired := wl.checkMissing(dir, c, segs, keys)
			switch {
			case p != nil:
				problems = append(problems, *p)
			case retired:
				rep.RetentionRemoved++
			}
			continue
		}
		if !s.walked {
			continue // the segment's own problem comes first
		}
		if checkReach(s, c) {
			rep.Confirmed++
		}
	}
	problems = append(problems, wl.unknownKeys(segs, &rep)...)
	if dir != "" {
		problems = append(problems, wl.foreignTrails()...)
	}
	return rep, problems
}

// foreignTrails reports the lines under an audit key not given that a checkpoint key given
// signed: a trail of these brokers that cannot be checked. An audit key rotated without
// giving the old one looks like this, and so does a trail deleted whole and started afresh
// under a new audit key (the broker creates one when it finds none).
func (wl *WitnessLog) foreignTrails() []Problem {
	var problems []Problem
	for _, id := range slices.Sorted(maps.Keys(wl.foreign)) {
		f := wl.foreign[id]
		problems = append(problems, Problem{Kind: ProblemUnknownKey, File: f.first.file, Line: f.first.line, MACKeyID: id,
			Witness: f.first.String(), Detail: fmt.Sprintf(
				"%d witness line(s) signed with this trail's checkpoint key are of segments under audit key %s, which was not given: what they saw cannot be checked (a trail deleted and started again under a new audit key looks like this)",
				f.n, id),
			Hint: fmt.Sprintf("give audit key %s (--old-key) to check its segments against the witness", id)})
	}
	return problems
}

// checkReach checks that s holds the record c names; it reports a problem to s otherwise.
func checkReach(s *segment, c witnessClaim) bool {
	n := c.ev.Seq
	last := s.last.rec.Seq
	switch {
	case n > last:
		s.report(Problem{Kind: ProblemTruncated, File: s.path, Line: s.last.line + 1, Seq: last + 1,
			Witness: c.loc.String(), Missing: n - last, Detail: fmt.Sprintf(
				"the segment ends at seq %d, but the witness saw it hold seq %d (%s, %s): at least %d records are missing",
				last, n, c.ev.Time, c.loc, n-last)})
		return false
	case s.witnessMAC != c.ev.MAC:
		s.report(Problem{Kind: ProblemEdited, File: s.path, Line: s.witnessLine, Seq: n, Witness: c.loc.String(), Detail: fmt.Sprintf(
			"record %d is not the one the witness saw (%s): its chain hash differs, so the segment was rewritten up to it", n, c.loc)})
		return false
	}
	return true
}

// checkMissing decides on a segment the witness saw that is not in the trail: deleted by
// retention after the last record the witness saw (retired), or a problem.
func (wl *WitnessLog) checkMissing(dir string, c witnessClaim, segs []*segment, keys VerifyKeys) (p *Problem, retired bool) {
	id := c.ev.Segment
	n := c.ev.Seq
	path := filepath.Join(dir, id+segmentExt)
	// What says that retention deleted it, and what it ended with then.
	type account struct {
		lastSeq      uint64
		lastMAC, src string
	}
	var accounts []account
	if r, ok := wl.retained[id]; ok {
		accounts = append(accounts, account{r.ev.Seq, r.ev.MAC, "the witness, " + r.loc.String()})
	}
	for _, s := range segs {
		for _, r := range s.removals {
			if r.Segment == id {
				accounts = append(accounts, account{r.LastSeq, r.LastMAC, fmt.Sprintf("%s:%d", filepath.Base(r.file), r.line)})
			}
		}
		if s.header != nil && s.header.rec.PrevSegment == id {
			if note, err := readPrevNote(s, keys); err == nil && note != nil {
				accounts = append(accounts, account{note.LastSeq, note.LastMAC, filepath.Base(s.path + prevNoteExt)})
			}
		}
	}
	for _, a := range accounts {
		if n < a.lastSeq || n == a.lastSeq && c.ev.MAC == a.lastMAC {
			return nil, true
		}
	}
	if len(accounts) > 0 {
		a := accounts[0]
		return &Problem{Kind: ProblemTruncated, File: path, Seq: a.lastSeq + 1, Witness: c.loc.String(), Missing: n - min(n, a.lastSeq),
			Detail: fmt.Sprintf("segment %s (%s) was deleted by retention when it ended at seq %d (%s), but the witness saw it hold seq %d (%s, %s): it had been cut before it was deleted",
				id, describeSegment(id), a.lastSeq, a.src, n, c.ev.Time, c.loc)}, false
	}
	return &Problem{Kind: ProblemRemoved, File: path, Seq: 0, Witness: c.loc.String(), Missing: n + 1,
		Detail: fmt.Sprintf("segment %s (%s) is missing, and no retention record accounts for it: the witness saw it hold seq %d (%s, %s): at least %d records are missing",
			id, describeSegment(id), n, c.ev.Time, c.loc, n+1)}, false
}

// unknownKeys reports the lines of the trail signed with a checkpoint key that was not given:
// a problem when the trail names the key (its brokers used it), else refused lines.
func (wl *WitnessLog) unknownKeys(segs []*segment, rep *WitnessReport) []Problem {
	named := make(map[string]bool)
	for _, s := range segs {
		if s.header != nil {
			named[s.header.rec.KeyID] = true
		}
		for _, id := range s.rotatedTo {
			named[id] = true
		}
	}
	var problems []Problem
	for _, id := range slices.Sorted(maps.Keys(wl.unknown)) {
		u := wl.unknown[id]
		if !named[id] {
			rep.refuse(u.n, u.first, fmt.Sprintf("signed with checkpoint key %s, which no broker of this trail used (%d such line(s))", id, u.n))
			continue
		}
		problems = append(problems, Problem{Kind: ProblemUnknownKey, File: u.first.file, Line: u.first.line, Witness: u.first.String(), Detail: fmt.Sprintf(
			"%d witness line(s) of this trail are signed with checkpoint key %s, which was not given: what they saw cannot be checked", u.n, id),
			Hint: fmt.Sprintf("give the checkpoint public key %s; a key rotation keeps it beside the log as %s.%s", id, PublicKeyFile, id)})
	}
	return problems
}

// describeSegment names the broker process that wrote a segment, from its id
// (<start time>-<pid>-<random>).
func describeSegment(id string) string {
	parts := strings.Split(id, "-")
	if len(parts) != 3 {
		return "unknown broker process"
	}
	start := parts[0]
	if t, err := time.Parse(segmentTimeLayout, start); err == nil {
		start = t.Format(time.RFC3339)
	}
	return fmt.Sprintf("broker process %s started %s", parts[1], start)
}
