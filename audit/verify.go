// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ProblemKind names what is wrong with a trail.
type ProblemKind string

// The kinds of problems [Verify] reports. All but ProblemTorn are signs of tampering (or of
// damage that cannot be told apart from it).
const (
	// ProblemEdited: a record's MAC does not match its bytes (or the line is not a record).
	ProblemEdited ProblemKind = "edited"
	// ProblemRemoved: seq skips records that appear nowhere later, or a segment (or a
	// segment's header) the chain names is missing and no retention record or note accounts
	// for it.
	ProblemRemoved ProblemKind = "removed"
	// ProblemReordered: seq jumps ahead to a record whose predecessors come later in the file.
	ProblemReordered ProblemKind = "reordered"
	// ProblemInserted: a line that is not part of the chain: a forged record that the next
	// record skips over, a repeated seq, a genuine record from elsewhere, a second segment
	// claiming to follow the same one, or a segment that follows another under other keys than
	// a key_rotation record at the end of that one names.
	ProblemInserted ProblemKind = "inserted"
	// ProblemTruncated: the segment ends before the record its checkpoint (or the segment
	// after it) names, or a segment deleted by retention had been cut before it was deleted
	// (its successor links to another record than the retention record says it ended with).
	ProblemTruncated ProblemKind = "truncated"
	// ProblemTorn: the last line of a segment is an unfinished write, as a killed writer
	// leaves it. Not tampering: the records before it verify.
	ProblemTorn ProblemKind = "torn"
	// ProblemCheckpoint: a checkpoint file is missing, unreadable, badly signed, names
	// another segment, or is older than a checkpoint record followed by more records.
	ProblemCheckpoint ProblemKind = "checkpoint"
	// ProblemUnknownKey: a segment or checkpoint is under a key that was not given.
	ProblemUnknownKey ProblemKind = "unknown_key"
)

// Tampering reports whether the problem is a sign of tampering: every kind but ProblemTorn.
func (k ProblemKind) Tampering() bool { return k != ProblemTorn }

// Problem is the first bad record of a segment.
type Problem struct {
	// Kind is what is wrong.
	Kind ProblemKind `json:"kind"`
	// File is the segment (or checkpoint) file.
	File string `json:"file"`
	// Line is the 1-based line of the bad record; for a truncated segment, the line after its
	// last; 0 for a problem with a checkpoint file as a whole.
	Line int `json:"line"`
	// Seq is the bad record's seq: the seq it claims, or for a removed record the first
	// missing one, or for a truncated segment the first one past its end.
	Seq uint64 `json:"seq"`
	// Detail explains the problem in English.
	Detail string `json:"detail"`
	// Hint, when there is one, says what would let the trail verify, for example which key
	// to give after a key rotation.
	Hint string `json:"hint,omitempty"`
	// Witness, for a problem found by comparing the trail with a witness ([AgainstWitness]), is
	// the witness line that shows it: FILE:LINE.
	Witness string `json:"witness,omitempty"`
	// Missing, when known, is the least number of records missing: those the witness saw
	// beyond the end of the segment (for a missing segment, its header included).
	Missing uint64 `json:"missing,omitempty"`
	// MACKeyID, for a segment under an audit key that was not given
	// ([ProblemUnknownKey] on its header), is the id of the key the segment names.
	MACKeyID string `json:"macKeyId,omitempty"`
}

// String formats the problem as "file:line: seq N: kind: detail", followed by " (hint: ...)"
// when there is a hint.
func (p Problem) String() string {
	s := fmt.Sprintf("%s:%d: seq %d: %s: %s", p.File, p.Line, p.Seq, p.Kind, p.Detail)
	if p.Hint != "" {
		s += " (hint: " + p.Hint + ")"
	}
	return s
}

// Report is the result of [Verify].
type Report struct {
	// OK is true only when every segment and checkpoint is intact.
	OK bool `json:"ok"`
	// Segments counts the segment files checked.
	Segments int `json:"segments"`
	// Records counts the records that verified (headers and checkpoint records included).
	Records uint64 `json:"records"`
	// Checkpoints counts the checkpoint files that verified.
	Checkpoints int `json:"checkpoints"`
	// RetentionRemoved counts the segments the chain names that are missing because
	// retention deleted them, as a retention record or note under a given key says: not a
	// problem.
	RetentionRemoved int `json:"retentionRemoved,omitempty"`
	// Problem is the first problem: the first sign of tampering in file order, else the first
	// torn segment; nil when OK.
	Problem *Problem `json:"problem,omitempty"`
	// Problems lists the first problem of every segment that has one, in file order, then
	// the problems found against the witness that are not in a segment file (a missing
	// segment, lines under a checkpoint key not given).
	Problems []Problem `json:"problems,omitempty"`
	// Witness says what the witness lines showed; nil without [AgainstWitness].
	Witness *WitnessReport `json:"witness,omitempty"`
}

// VerifyKeys are the keys a trail is verified with. A segment names the keys it was written
// with, so keys from before a rotation can be given alongside the current ones.
type VerifyKeys struct {
	// MAC are the audit (HMAC) keys.
	MAC [][]byte
	// Checkpoint are the trusted checkpoint public keys. Take them from a trusted copy: the
	// checkpoint.pub beside the log is only as safe as the log directory.
	Checkpoint []ed25519.PublicKey
}

// VerifyOption configures [Verify].
type VerifyOption func(*verifyConfig)

// verifyConfig is what the verify options set.
type verifyConfig struct {
	witness *WitnessLog
}

// AgainstWitness also checks the trail against what its witnesses saw ([WitnessLog]): every
// segment the witness saw must hold the furthest record the witness saw, with the same MAC, or
// have been deleted by retention (as a witness line, a retention record or a note says) after
// that record. A missing segment is [ProblemRemoved], a segment that ends before that record
// [ProblemTruncated], another record there [ProblemEdited]; the problem names the witness line
// and how many records are missing at least. For a single segment file, only that segment is
// checked. The report's Witness member says what the witness lines showed.
func AgainstWitness(wl *WitnessLog) VerifyOption { return func(c *verifyConfig) { c.witness = wl } }

// Verify checks a segment file, or every segment (*.jsonl) of a directory, against keys, and
// reports the first bad record. For a directory it also checks that every segment a header
// names as its predecessor is present (or was deleted by retention, as a retention record or a
// note beside the successor says), ends with the record the header links to, and has no other
// successor, and that a writer's chain changes keys only where a key_rotation record at the end
// of a segment names the new ones. The error is for a trail that cannot be read at all;
// problems with its content are in the Report. A segment deleted while Verify runs (by
// retention) is left out.
func Verify(path string, keys VerifyKeys, opts ...VerifyOption) (Report, error) {
	var cfg verifyConfig
	for _, o := range opts {
		o(&cfg)
	}
	if len(keys.MAC) == 0 {
		return Report{}, errors.New("audit: verify: no audit key")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	files := []string{path}
	if fi.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "*"+segmentExt))
		if err != nil {
			return Report{}, fmt.Errorf("audit: verify: %w", err)
		}
		slices.Sort(files)
	}
	var (
		rep  Report
		segs = make([]*segment, 0, len(files))
		byID = make(map[string]*segment, len(files))
	)
	for _, f := range files {
		s, err := verifySegment(f, keys, cfg.witness)
		if err != nil {
			return Report{}, err
		}
		if s == nil {
			continue // deleted since it was listed
		}
		segs = append(segs, s)
		byID[s.id] = s
		rep.Records += uint64(s.records)
		if s.ckptOK {
			rep.Checkpoints++
		}
	}
	rep.Segments = len(segs)
	if fi.IsDir() {
		rep.RetentionRemoved = linkSegments(segs, byID, keys)
	}
	var more []Problem
	if cfg.witness != nil {
		dir := ""
		if fi.IsDir() {
			dir = path
		}
		wrep, problems := cfg.witness.check(dir, segs, byID, keys)
		rep.Witness, more = &wrep, problems
	}
	for _, s := range segs {
		if s.problem != nil {
			rep.Problems = append(rep.Problems, *s.problem)
		}
	}
	rep.Problems = append(rep.Problems, more...)
	first := -1
	for i, p := range rep.Problems {
		if first < 0 || (!rep.Problems[first].Kind.Tampering() && p.Kind.Tampering()) {
			first = i
		}
	}
	if first >= 0 {
		p := rep.Problems[first]
		rep.Problem = &p
	}
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// maxLine is the longest line Verify reads as a record; a longer one is not a record.
const maxLine = 1 << 20

// segment is what verifying one segment file found. Verification streams: it keeps the last
// intact record and the checkpoint records, not the file.
type segment struct {
	path      string
	id        string
	claimed   *Record // the header as it reads, verified or not: only for hints
	header    *entry  // nil unless the header verified
	last      *entry  // the last intact record
	lastOther *entry  // the last intact record that is neither the header nor a checkpoint
	records   int     // intact records, the header included
	ckpts     []*entry
	removals  []removal // what the segment's intact retention records announce
	mustCover uint64    // the last checkpoint record followed by another kind of record
	problem   *Problem
	ckptOK    bool
	walked    bool     // the chain was followed to the end of the file (a torn last line aside)
	rotatedTo []string // the checkpoint key ids its intact key_rotation records name
	// witnessSeq is the furthest record a witness saw (wantWitness); witnessMAC and witnessLine
	// are that record's MAC and line in the segment, once the walk reached it.
	wantWitness bool
	witnessSeq  uint64
	witnessMAC  string
	witnessLine int
}

// sawRecord notes e's MAC if it is the record a witness saw.
func (s *segment) sawRecord(e *entry) {
	if s.wantWitness && e.rec.Seq == s.witnessSeq {
		s.witnessMAC, s.witnessLine = e.mac, e.line
	}
}

// removal is a segment a retention record announces as deleted, and where the record is.
type removal struct {
	RemovedSegment
	file string
	line int
}

// entry is one line of a segment.
type entry struct {
	line    int
	end     int64 // offset just past the line
	rec     Record
	parsed  bool
	partial bool   // the line does not end in a newline: it is the file's last
	mac     string // the MAC the line claims
	body    []byte // what the MAC covers
	macOK   bool
}

// lastMAC returns the MAC of the last intact record, "" if none.
func (s *segment) lastMAC() string {
	if s.last == nil {
		return ""
	}
	return s.last.mac
}

// report records p unless the segment has an earlier problem: a sign of tampering comes before
// a torn tail, and a named line before a problem with the checkpoint file as a whole.
func (s *segment) report(p Problem) {
	old := s.problem
	switch {
	case old == nil,
		old.Kind == ProblemTorn && p.Kind.Tampering(),
		old.Kind.Tampering() == p.Kind.Tampering() && p.Line > 0 && (old.Line == 0 || p.Line < old.Line):
		s.problem = &p
	}
}

// lineReader reads a segment's entries, one ahead.
type lineReader struct {
	br     *bufio.Reader
	line   int
	off    int64
	mac    hash.Hash // nil until the key is known
	peeked *entry
	err    error
}

// newLineReader reads r, whose first line is line+1 and starts at offset off.
func newLineReader(r io.Reader, line int, off int64) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), line: line, off: off}
}

// peek returns the next entry without consuming it; nil at the end or on a read error.
func (r *lineReader) peek() *entry {
	if r.peeked == nil && r.err == nil {
		r.peeked = r.read()
	}
	return r.peeked
}

// next returns the next entry; nil at the end or on a read error (see r.err).
func (r *lineReader) next() *entry {
	e := r.peek()
	r.peeked = nil
	return e
}

// read reads one line. A line longer than maxLine is not a record: only its first maxLine
// bytes are kept, and they must not be taken for the whole line (a genuine record of maxLine
// bytes with more appended would verify).
func (r *lineReader) read() *entry {
	var raw []byte
	n, partial := 0, false
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		if len(raw) < maxLine {
			raw = append(raw, chunk[:min(len(chunk), maxLine-len(raw))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			r.err = err
			return nil
		}
		partial = err == io.EOF
		break
	}
	if n == 0 {
		return nil
	}
	r.line++
	r.off += int64(n)
	length := n
	if !partial {
		length-- // the newline
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	e := &entry{line: r.line}
	if length <= maxLine {
		e = parseEntry(r.line, raw)
	}
	e.end, e.partial = r.off, partial
	r.check(e)
	return e
}

// check computes whether e's MAC matches, once the key is known.
func (r *lineReader) check(e *entry) {
	if r.mac == nil {
		return
	}
	if e.parsed {
		r.mac.Reset()
		r.mac.Write(e.body)
		e.macOK = macEqual(hex.EncodeToString(r.mac.Sum(nil)), e.mac)
	}
	e.body = nil
}

// verifySegment checks one segment file and its checkpoint, noting the MAC of the record the
// witness saw furthest, if any.
func verifySegment(path string, keys VerifyKeys, wl *WitnessLog) (*segment, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	defer f.Close()
	s := &segment{path: path, id: strings.TrimSuffix(filepath.Base(path), segmentExt)}
	if c, ok := wl.reachOf(s.id); ok {
		s.wantWitness, s.witnessSeq = true, c.ev.Seq
	}
	problem := func(kind ProblemKind, line int, seq uint64, format string, args ...any) {
		s.report(Problem{Kind: kind, File: path, Line: line, Seq: seq, Detail: fmt.Sprintf(format, args...)})
	}
	r := newLineReader(f, 0, 0)
	h := r.next()
	if r.err != nil {
		return nil, fmt.Errorf("audit: verify: %w", r.err)
	}

	// The header names the audit key.
	switch {
	case h == nil:
		problem(ProblemTorn, 1, 0, "empty segment: the writer stopped before its header")
		return s, nil
	case h.partial && !h.parsed:
		problem(ProblemTorn, 1, 0, "the header is an unfinished write")
		return s, nil
	case !h.parsed:
		problem(ProblemEdited, 1, 0, "the header is not a record")
		return s, nil
	case h.rec.Kind != KindSegmentStart:
		problem(ProblemRemoved, 1, 0, "the segment header is missing (first record is seq %d, %s)", h.rec.Seq, h.rec.Kind)
		return s, nil
	}
	s.claimed = &h.rec
	var key []byte
	for _, k := range keys.MAC {
		if MACKeyID(k) == h.rec.MACKeyID {
			key = k
			break
		}
	}
	if key == nil {
		given := make([]string, len(keys.MAC))
		for i, k := range keys.MAC {
			given[i] = MACKeyID(k)
		}
		s.report(Problem{Kind: ProblemUnknownKey, File: path, Line: 1, MACKeyID: h.rec.MACKeyID,
			Detail: fmt.Sprintf("the segment is under audit key %.16q, and no key with that id was given (given: %s)",
				h.rec.MACKeyID, strings.Join(given, ", "))})
		return s, nil
	}
	r.mac = newMAC(key)
	r.check(h)
	switch {
	case !h.macOK:
		problem(ProblemEdited, 1, 0, "the header's MAC does not match")
		return s, nil
	case h.rec.Seq != 0:
		problem(ProblemEdited, 1, h.rec.Seq, "the header has seq %d", h.rec.Seq)
		return s, nil
	case h.rec.Segment != s.id:
		problem(ProblemEdited, 1, 0, "the file was renamed: its header names segment %s", h.rec.Segment)
		return s, nil
	}
	s.header, s.last, s.records = h, h, 1
	s.sawRecord(h)

	ok, err := walk(s, r, key, problem)
	if err != nil || !ok {
		return s, err
	}
	s.walked = true
	checkCheckpoint(s, keys, problem)
	return s, nil
}

// walk follows the chain from the header, and reports the first bad line; it returns false on
// a sign of tampering.
func walk(s *segment, r *lineReader, key []byte, problem func(ProblemKind, int, uint64, string, ...any)) (bool, error) {
	for {
		e := r.next()
		if r.err != nil {
			return false, fmt.Errorf("audit: verify: %w", r.err)
		}
		if e == nil {
			return true, nil
		}
		prev := s.last
		want := prev.rec.Seq + 1
		switch {
		case e.partial && !e.parsed:
			problem(ProblemTorn, e.line, want, "the last line is an unfinished write; the %d records before it verify", s.records)
			return true, nil
		case !e.parsed:
			problem(ProblemEdited, e.line, want, "the line is not a record")
			return false, nil
		case !e.macOK:
			if next := r.peek(); next != nil && next.parsed && next.macOK && next.rec.Prev == prev.mac {
				problem(ProblemInserted, e.line, e.rec.Seq, "a record with a bad MAC that the chain skips over")
			} else {
				problem(ProblemEdited, e.line, e.rec.Seq, "the record's MAC does not match its content")
			}
			return false, nil
		case e.rec.Seq == want && e.rec.Prev == prev.mac:
			if prev.rec.Kind == KindCheckpoint && e.rec.Kind != KindCheckpoint {
				s.mustCover = prev.rec.Seq
			}
			switch e.rec.Kind {
			case KindCheckpoint:
				s.ckpts = append(s.ckpts, e)
			case KindRetention:
				for _, r := range e.rec.Removed {
					s.removals = append(s.removals, removal{RemovedSegment: r, file: s.path, line: e.line})
				}
			case KindKeyRotation:
				if e.rec.KeyID != "" {
					s.rotatedTo = append(s.rotatedTo, e.rec.KeyID)
				}
			}
			s.sawRecord(e)
			if e.rec.Kind != KindCheckpoint {
				s.lastOther = e
			}
			s.last = e
			s.records++
		case e.rec.Seq == want:
			problem(ProblemInserted, e.line, e.rec.Seq, "a genuine record from another place in the trail (its prev does not link)")
			return false, nil
		case e.rec.Seq < want:
			problem(ProblemInserted, e.line, e.rec.Seq, "seq %d repeats an earlier record (expected %d)", e.rec.Seq, want)
			return false, nil
		default:
			later, err := findSeq(s.path, e, want, key)
			if err != nil {
				return false, err
			}
			if later > 0 {
				problem(ProblemReordered, e.line, e.rec.Seq, "seq %d comes before seq %d (line %d)", e.rec.Seq, want, later)
			} else {
				problem(ProblemRemoved, e.line, want, "records %d to %d are missing (the next is seq %d)", want, e.rec.Seq-1, e.rec.Seq)
			}
			return false, nil
		}
	}
}

// findSeq returns the line of the first genuine record with seq want after entry from, 0 if
// there is none.
func findSeq(path string, from *entry, want uint64, key []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("audit: verify: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from.end, io.SeekStart); err != nil {
		return 0, fmt.Errorf("audit: verify: %w", err)
	}
	r := newLineReader(f, from.line, from.end)
	r.mac = newMAC(key)
	for e := r.next(); e != nil; e = r.next() {
		if e.parsed && e.macOK && e.rec.Seq == want {
			return e.line, nil
		}
	}
	if r.err != nil {
		return 0, fmt.Errorf("audit: verify: %w", r.err)
	}
	return 0, nil
}

// checkCheckpoint checks the segment's checkpoint file against its intact records. A
// checkpoint record followed by another kind of record must be covered by the checkpoint file:
// the writer stores the file before it appends anything else.
func checkCheckpoint(s *segment, keys VerifyKeys, problem func(ProblemKind, int, uint64, string, ...any)) {
	ckPath := s.path + checkpointExt
	ckProblem := func(format string, args ...any) {
		s.report(Problem{Kind: ProblemCheckpoint, File: ckPath, Seq: s.mustCover, Detail: fmt.Sprintf(format, args...)})
	}
	data, err := os.ReadFile(ckPath)
	if errors.Is(err, fs.ErrNotExist) {
		if s.mustCover > 0 {
			ckProblem("the checkpoint file is missing, but the segment has checkpoint record %d", s.mustCover)
		}
		return
	}
	if err != nil {
		ckProblem("unreadable: %v", err)
		return
	}
	var ck checkpointFile
	if err := json.Unmarshal(data, &ck); err != nil {
		ckProblem("not a checkpoint: %v", err)
		return
	}
	var pub ed25519.PublicKey
	for _, k := range keys.Checkpoint {
		if KeyID(k) == ck.KeyID {
			pub = k
			break
		}
	}
	sig, _ := hex.DecodeString(ck.Signature)
	last := s.last
	i, found := slices.BinarySearchFunc(s.ckpts, ck.Seq, func(e *entry, seq uint64) int { return cmp.Compare(e.rec.Seq, seq) })
	switch {
	case pub == nil:
		s.report(Problem{Kind: ProblemUnknownKey, File: ckPath, Seq: ck.Seq,
			Detail: fmt.Sprintf("no checkpoint public key with id %.16q was given", ck.KeyID),
			Hint:   fmt.Sprintf("give the checkpoint public key %.16s; a key rotation keeps the old one beside the log as %s.%.16s", ck.KeyID, PublicKeyFile, ck.KeyID)})
		return
	case !ed25519.Verify(pub, checkpointMessage(ck.Seq, ck.MAC, ck.Time), sig):
		ckProblem("the signature does not verify")
		return
	case ck.Segment != s.id:
		ckProblem("the checkpoint is for segment %.64s", ck.Segment)
		return
	case ck.Seq > last.rec.Seq:
		problem(ProblemTruncated, last.line+1, last.rec.Seq+1,
			"the segment ends at seq %d, before checkpointed seq %d", last.rec.Seq, ck.Seq)
		return
	case !found || s.ckpts[i].mac != ck.MAC:
		ckProblem("seq %d with the checkpoint's MAC is not a checkpoint record of the segment", ck.Seq)
		return
	case ck.Seq < s.mustCover:
		ckProblem("the checkpoint (seq %d) is older than checkpoint record %d", ck.Seq, s.mustCover)
		return
	}
	s.ckptOK = true
}

// linkSegments checks the links between the segments of a directory, and returns how many
// missing predecessors retention accounts for.
func linkSegments(segs []*segment, byID map[string]*segment, keys VerifyKeys) (retired int) {
	removed := make(map[string][]removal)
	for _, s := range segs {
		for _, r := range s.removals {
			removed[r.Segment] = append(removed[r.Segment], r)
		}
	}
	successor := make(map[string]*segment)
	for _, s := range segs {
		if s.header == nil || s.header.rec.PrevSegment == "" {
			continue
		}
		h := s.header
		if other, dup := successor[h.rec.PrevSegment]; dup {
			s.report(Problem{Kind: ProblemInserted, File: s.path, Line: 1, Detail: fmt.Sprintf(
				"a second segment following %s (the first is %s)", h.rec.PrevSegment, other.id)})
			continue
		}
		successor[h.rec.PrevSegment] = s
		p, ok := byID[h.rec.PrevSegment]
		if !ok {
			if removedPrev(s, removed[h.rec.PrevSegment], keys) {
				retired++
			}
			continue
		}
		if !p.walked {
			continue
		}
		checkKeyChange(s, p)
		if p.lastMAC() == h.rec.Prev {
			continue
		}
		// A rotation links to the final checkpoint record of the previous segment.
		for _, e := range p.ckpts {
			if e.mac == h.rec.Prev {
				p.report(Problem{Kind: ProblemInserted, File: p.path, Line: e.line + 1, Seq: e.rec.Seq + 1, Detail: fmt.Sprintf(
					"records after seq %d, where segment %s continues the chain", e.rec.Seq, s.id)})
				break
			}
		}
		p.report(Problem{Kind: ProblemTruncated, File: p.path, Line: p.last.line + 1, Seq: p.last.rec.Seq + 1, Detail: fmt.Sprintf(
			"the segment ends at seq %d, before the record segment %s continues from", p.last.rec.Seq, s.id)})
	}
	keyHints(segs, byID)
	return retired
}

// checkKeyChange checks that s, which follows p, is under p's keys, or under the keys a
// key_rotation record at the end of p names (the writer appends nothing but checkpoints after
// it).
func checkKeyChange(s, p *segment) {
	h, ph := &s.header.rec, &p.header.rec
	r := p.lastOther
	if r != nil && r.rec.Kind == KindKeyRotation && (r.rec.MACKeyID != "" || r.rec.KeyID != "") {
		wantMAC, wantKey := cmp.Or(r.rec.MACKeyID, ph.MACKeyID), cmp.Or(r.rec.KeyID, ph.KeyID)
		if h.MACKeyID != wantMAC || h.KeyID != wantKey {
			s.report(Problem{Kind: ProblemInserted, File: s.path, Line: 1, Detail: fmt.Sprintf(
				"after the key rotation at %s:%d the chain continues under audit key %s and checkpoint key %s, but this segment is under %.16s and %.16s",
				filepath.Base(p.path), r.line, wantMAC, wantKey, h.MACKeyID, h.KeyID)})
		}
		return
	}
	if h.MACKeyID != ph.MACKeyID || h.KeyID != ph.KeyID {
		s.report(Problem{Kind: ProblemInserted, File: s.path, Line: 1, Detail: fmt.Sprintf(
			"the segment follows %s under other keys (audit key %.16s, checkpoint key %.16s, not %s and %s) without a key_rotation record at its end naming them",
			p.id, h.MACKeyID, h.KeyID, ph.MACKeyID, ph.KeyID)})
	}
}

// removedPrev decides on the missing predecessor of s: deleted by retention if a retention
// record (anns) or the note beside s names it with the record s links to. A cut that is not
// announced that way is reported as removed.
func removedPrev(s *segment, anns []removal, keys VerifyKeys) bool {
	h := &s.header.rec
	for _, a := range anns {
		if a.LastMAC == h.Prev {
			return true
		}
	}
	note, noteErr := readPrevNote(s, keys)
	if note != nil && note.LastMAC == h.Prev {
		return true
	}
	p := Problem{Kind: ProblemRemoved, File: s.path, Line: 1}
	switch {
	case len(anns) > 0:
		a := anns[0]
		p.Kind = ProblemTruncated
		p.Detail = fmt.Sprintf("the previous segment %s was deleted by retention (%s:%d) when it ended at seq %d, but this segment continues from another record: it had been cut before it was deleted",
			h.PrevSegment, filepath.Base(a.file), a.line, a.LastSeq)
	case note != nil:
		p.Kind = ProblemTruncated
		p.Detail = fmt.Sprintf("the previous segment %s was deleted by retention (%s) when it ended at seq %d, but this segment continues from another record: it had been cut before it was deleted",
			h.PrevSegment, filepath.Base(s.path+prevNoteExt), note.LastSeq)
	case noteErr != nil:
		p.Detail = fmt.Sprintf("the previous segment %s is missing, and the retention note beside this segment does not account for it: %v", h.PrevSegment, noteErr)
		var uk unknownNoteKey
		if errors.As(noteErr, &uk) {
			p.Hint = fmt.Sprintf("the note is under audit key %s: give that key", string(uk))
		}
	default:
		p.Detail = fmt.Sprintf("the previous segment %s is missing, and no retention record or note accounts for it", h.PrevSegment)
	}
	s.report(p)
	return false
}

// unknownNoteKey is the id of the audit key of a retention note that was not given.
type unknownNoteKey string

func (k unknownNoteKey) Error() string {
	return fmt.Sprintf("it is under audit key %.16q, which was not given", string(k))
}

// readPrevNote reads the retention note beside s: nil, nil when there is none.
func readPrevNote(s *segment, keys VerifyKeys) (*prevNote, error) {
	data, err := os.ReadFile(s.path + prevNoteExt)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n prevNote
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("not a retention note: %w", err)
	}
	var key []byte
	for _, k := range keys.MAC {
		if MACKeyID(k) == n.MACKeyID {
			key = k
			break
		}
	}
	switch {
	case key == nil:
		return nil, unknownNoteKey(n.MACKeyID)
	case !macEqual(n.sum(key), n.MAC):
		return nil, errors.New("its MAC does not match")
	case n.Segment != s.id || n.PrevSegment != s.header.rec.PrevSegment:
		return nil, fmt.Errorf("it is the note of segment %.64s", n.Segment)
	}
	return &n, nil
}

// keyHints explains a segment under an audit key that was not given, when the chain shows a
// key rotation there: the new key is missing (the segment before ends with a key_rotation
// record naming it) or the old one is (the segment after is under another key).
func keyHints(segs []*segment, byID map[string]*segment) {
	next := make(map[string]*segment)
	for _, s := range segs {
		if s.claimed != nil && s.claimed.PrevSegment != "" {
			next[s.claimed.PrevSegment] = s
		}
	}
	for _, s := range segs {
		if s.problem == nil || s.problem.Kind != ProblemUnknownKey || s.problem.Line != 1 || s.claimed == nil {
			continue
		}
		id := s.claimed.MACKeyID
		if p := byID[s.claimed.PrevSegment]; p != nil && p.lastOther != nil &&
			p.lastOther.rec.Kind == KindKeyRotation && p.lastOther.rec.MACKeyID == id {
			s.problem.Hint = fmt.Sprintf("the audit key was rotated to %s at %s:%d (a key_rotation record): give the new key as well",
				id, filepath.Base(p.path), p.lastOther.line)
			continue
		}
		if n := next[s.id]; n != nil && n.header != nil && n.header.rec.MACKeyID != id {
			s.problem.Hint = fmt.Sprintf("the chain continues in %s under audit key %s after a key rotation: give the key in use before the rotation (%.16s) as well",
				n.id, n.header.rec.MACKeyID, id)
		}
	}
}

// parseEntry parses one line (without its newline).
func parseEntry(line int, raw []byte) *entry {
	e := &entry{line: line}
	body, mac, ok := splitLine(raw)
	if !ok {
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e.rec); err != nil || e.rec.Mac != "" {
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return e
	}
	e.parsed, e.mac, e.body = true, mac, body
	return e
}
