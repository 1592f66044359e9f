// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fuzz targets start from a genuine trail that audit.Writer wrote, committed in
// testdata/fuzz/trail with its keys (keys.json): the keys must be the same in every process of
// a fuzzing run (the coordinator and its workers each load them), and a committed trail, unlike
// one written afresh, is byte for byte the same in all of them. Rewrite it with
//
//	go test ./audit -run TestWriteFuzzTrail -update-fuzz-trail
//
// which draws new keys, so that inputs cached from the old trail cannot verify under them, and
// rewrites the regression seeds of testdata/fuzz/FuzzVerify that need the keys.
//
// Each execution writes and verifies files (about a millisecond), and Go minimizes every input
// it finds interesting by running it up to quadratically often in its length, for up to
// -fuzzminimizetime (default 60s) each: give -fuzzminimizetime 1x (or a few seconds), or a
// short run does little but minimize.

var updateFuzzTrail = flag.Bool("update-fuzz-trail", false, "rewrite testdata/fuzz/trail and the FuzzVerify regression seeds, under new keys")

// fuzzTrailDir holds the genuine trail.
const fuzzTrailDir = "testdata/fuzz/trail"

// fuzzKeys is testdata/fuzz/trail/keys.json.
type fuzzKeys struct {
	// MAC is the audit key, in hex.
	MAC string `json:"mac"`
	// CheckpointSeed is the ed25519 seed of the checkpoint key, in hex.
	CheckpointSeed string `json:"checkpointSeed"`
}

// fuzzTrail is the genuine trail, loaded.
type fuzzTrail struct {
	keys VerifyKeys
	// files are the trail's files by name: segments, checkpoint files, checkpoint.pub and any
	// other file the writer keeps beside them.
	files map[string][]byte
	// segments are the segment ids, sorted.
	segments []string
}

var (
	fuzzTrailOnce sync.Once
	theFuzzTrail  *fuzzTrail
	fuzzTrailErr  error
)

// loadFuzzTrail loads testdata/fuzz/trail once per process.
func loadFuzzTrail(tb testing.TB) *fuzzTrail {
	tb.Helper()
	fuzzTrailOnce.Do(func() { theFuzzTrail, fuzzTrailErr = readFuzzTrail() })
	if fuzzTrailErr != nil {
		tb.Fatalf("%v (rewrite it: go test ./audit -run TestWriteFuzzTrail -update-fuzz-trail)", fuzzTrailErr)
	}
	return theFuzzTrail
}

func readFuzzTrail() (*fuzzTrail, error) {
	b, err := os.ReadFile(filepath.Join(fuzzTrailDir, "keys.json"))
	if err != nil {
		return nil, err
	}
	var k fuzzKeys
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("keys.json: %w", err)
	}
	mac, err := hex.DecodeString(k.MAC)
	if err != nil || len(mac) != KeySize {
		return nil, fmt.Errorf("keys.json: mac: want %d bytes of hex", KeySize)
	}
	seed, err := hex.DecodeString(k.CheckpointSeed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("keys.json: checkpointSeed: want %d bytes of hex", ed25519.SeedSize)
	}
	tr := &fuzzTrail{
		keys: VerifyKeys{
			MAC:        [][]byte{mac},
			Checkpoint: []ed25519.PublicKey{ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)},
		},
		files: make(map[string][]byte),
	}
	ents, err := os.ReadDir(fuzzTrailDir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || name == "keys.json" {
			continue
		}
		if tr.files[name], err = os.ReadFile(filepath.Join(fuzzTrailDir, name)); err != nil {
			return nil, err
		}
		if id, ok := strings.CutSuffix(name, segmentExt); ok {
			tr.segments = append(tr.segments, id)
		}
	}
	slices.Sort(tr.segments)
	if len(tr.segments) < 3 {
		return nil, fmt.Errorf("%s holds %d segments, want a writer's rotations and a second writer", fuzzTrailDir, len(tr.segments))
	}
	return tr, nil
}

// segment returns the genuine segment id's bytes, and its checkpoint file's (nil if none).
func (tr *fuzzTrail) segment(id string) (seg, ckpt []byte, ok bool) {
	seg, ok = tr.files[id+segmentExt]
	return seg, tr.files[id+segmentExt+checkpointExt], ok
}

// genuinePrefix reports whether seg is a genuine segment, or one cut at a line boundary: all
// that a verifier may accept, since nobody without the key can make another line verify.
func (tr *fuzzTrail) genuinePrefix(seg []byte) bool {
	if len(seg) == 0 || seg[len(seg)-1] != '\n' {
		return false
	}
	for _, id := range tr.segments {
		if g, _, _ := tr.segment(id); bytes.HasPrefix(g, seg) {
			return true
		}
	}
	return false
}

// headerSegment returns the segment id that seg's first line names, if it is usable as a file
// name; "" if not.
func headerSegment(seg []byte) string {
	first, _, _ := bytes.Cut(seg, []byte("\n"))
	var h struct {
		Segment string `json:"segment"`
	}
	if json.Unmarshal(first, &h) != nil {
		return ""
	}
	id := h.Segment
	if id == "" || len(id) > 128 || id != filepath.Base(id) || id == "." || id == ".." || strings.HasPrefix(id, ".") ||
		strings.ContainsAny(id, "/\\\x00") {
		return ""
	}
	return id
}

// FuzzVerify feeds Verify a segment and its checkpoint file (none when empty), in place of the
// genuine segment its header names (or beside them), verified alone and with the rest of the
// genuine trail. Invariants: Verify never panics and never fails to read the trail; its report
// is consistent (OK exactly when there is no problem, the first problem a sign of tampering
// when any is, every problem in a file of the trail at a line it has, a torn tail only where
// the file does not end in a newline); the genuine trail verifies; and whatever verifies is the
// genuine segment or one cut at a line boundary: nothing else can be made to verify without the
// audit key, so anything else that does is a forgery the verifier let through.
func FuzzVerify(f *testing.F) {
	tr := loadFuzzTrail(f)
	for _, id := range tr.segments {
		seg, ckpt, _ := tr.segment(id)
		f.Add(seg, ckpt)
		f.Add(seg, []byte(nil))
		lines := bytes.SplitAfter(seg, []byte("\n"))
		f.Add(bytes.Join(lines[:len(lines)/2], nil), ckpt)                     // cut at a line boundary
		f.Add(seg[:len(seg)-7], ckpt)                                          // torn
		f.Add(bytes.ReplaceAll(seg, []byte("\n"), []byte("\r\n")), ckpt)       // CRLF
		f.Add(append(slices.Clone(lines[0]), bytes.Join(lines, nil)...), ckpt) // header twice
	}
	f.Add([]byte(nil), []byte(nil))
	f.Add([]byte("\n\n\n"), []byte("{}"))
	f.Add([]byte(`{"v":1,"seq":0,"kind":"segment_start","segment":"x","prev":"","mac":"00"}`+"\n"), []byte("not json"))

	// The genuine trail is written once; each input replaces one of its segments (or joins
	// them) and is undone after, which keeps an execution to a few small writes.
	dir := writeFuzzTrail(f, tr)
	f.Fuzz(func(t *testing.T, seg, ckpt []byte) { checkVerify(t, tr, dir, seg, ckpt) })
}

// writeFuzzTrail writes the genuine trail into a temporary directory.
func writeFuzzTrail(tb testing.TB, tr *fuzzTrail) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, data := range tr.files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// checkVerify puts seg and its checkpoint file ckpt (none when empty) into the genuine trail
// at dir, in place of the segment seg's header names (or beside the others), checks the
// invariants of FuzzVerify, and puts the genuine files back.
func checkVerify(t *testing.T, tr *fuzzTrail, dir string, seg, ckpt []byte) {
	t.Helper()
	id := headerSegment(seg)
	if id == "" {
		id = "fuzzed"
	}
	path := filepath.Join(dir, id+segmentExt)
	ckPath := path + checkpointExt
	defer restore(t, tr, path, ckPath)
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ckPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(ckpt) > 0 {
		if err := os.WriteFile(ckPath, ckpt, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gseg, gckpt, known := tr.segment(id)
	genuine := known && bytes.Equal(seg, gseg) && bytes.Equal(ckpt, gckpt)

	targets := []string{path}
	if id != "fuzzed" {
		// With the rest of the trail: the links between segments. (Among the others, an input
		// without a usable header shows nothing that verifying it alone does not.)
		targets = append(targets, dir)
	}
	for _, target := range targets {
		rep, err := Verify(target, tr.keys)
		if err != nil {
			t.Fatalf("Verify(%s): %v", target, err)
		}
		checkReport(t, target, rep)
		switch {
		case rep.OK && !tr.genuinePrefix(seg):
			t.Fatalf("Verify(%s) accepts a segment that is not a genuine one cut at a line boundary: a forgery got through\n%+v", target, rep)
		case genuine && !rep.OK:
			t.Fatalf("Verify(%s) rejects the genuine trail: %v", target, rep.Problem)
		}
	}
}

// hugeInputs are inputs too big to fuzz from (the fuzzer minimizes every input it finds
// interesting by running it over and over) that the verifier and the reader must still get
// through in one pass.
func hugeInputs(tr *fuzzTrail) map[string][]byte {
	seg, _, _ := tr.segment(tr.segments[0])
	header, _, _ := bytes.Cut(seg, []byte("\n"))
	return map[string][]byte{
		"one line of 2 MiB, no newline":       bytes.Repeat([]byte("x"), 2*maxLine+3),
		"a line just over maxLine, then more": append(append(bytes.Repeat([]byte("y"), maxLine+1), "\n"...), seg...),
		"a header, then a line of maxLine":    append(append(slices.Clone(header), '\n'), append(bytes.Repeat([]byte("z"), maxLine), '\n')...),
		"64 Ki empty lines":                   bytes.Repeat([]byte("\n"), 1<<16),
		"64 Ki deep nesting":                  append(bytes.Repeat([]byte("{"), 1<<16), '\n'),
		"a genuine segment 200 times":         bytes.Repeat(seg, 200),
	}
}

// TestVerifyHugeInput runs FuzzVerify's checks on inputs too big to fuzz from.
func TestVerifyHugeInput(t *testing.T) {
	tr := loadFuzzTrail(t)
	dir := writeFuzzTrail(t, tr)
	for name, seg := range hugeInputs(tr) {
		t.Run(name, func(t *testing.T) { checkVerify(t, tr, dir, seg, nil) })
	}
}

// restore puts back the genuine files at paths (or removes them where the trail has none).
func restore(t *testing.T, tr *fuzzTrail, paths ...string) {
	t.Helper()
	for _, p := range paths {
		var err error
		if data, ok := tr.files[filepath.Base(p)]; ok {
			err = os.WriteFile(p, data, 0o644)
		} else if err = os.Remove(p); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err != nil {
			t.Errorf("the genuine trail cannot be put back: %v", err)
		}
	}
}

// checkReport checks that a report is consistent with itself and with the files at target.
func checkReport(t *testing.T, target string, rep Report) {
	t.Helper()
	dir := target
	if fi, err := os.Stat(target); err == nil && !fi.IsDir() {
		dir = filepath.Dir(target)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	want := len(segs)
	if dir != target {
		want = 1
	}
	if rep.Segments != want {
		t.Errorf("Segments = %d, want %d", rep.Segments, want)
	}
	if rep.OK != (rep.Problem == nil) || rep.OK != (len(rep.Problems) == 0) {
		t.Fatalf("OK = %v with problem %v and %d problems", rep.OK, rep.Problem, len(rep.Problems))
	}
	if rep.OK {
		return
	}
	if !slices.Contains(rep.Problems, *rep.Problem) {
		t.Errorf("the first problem %v is not among the problems %v", rep.Problem, rep.Problems)
	}
	if slices.ContainsFunc(rep.Problems, func(p Problem) bool { return p.Kind.Tampering() }) && !rep.Problem.Kind.Tampering() {
		t.Errorf("the first problem is %s although others are tampering: %v", rep.Problem.Kind, rep.Problems)
	}
	for _, p := range rep.Problems {
		switch p.Kind {
		case ProblemEdited, ProblemRemoved, ProblemReordered, ProblemInserted, ProblemTruncated, ProblemTorn,
			ProblemCheckpoint, ProblemUnknownKey:
		default:
			t.Errorf("unknown problem kind %q", p.Kind)
		}
		if filepath.Dir(p.File) != dir || p.Detail == "" {
			t.Errorf("problem %v: not in a file of %s, or without a detail", p, dir)
		}
		if strings.HasSuffix(p.File, checkpointExt) {
			if p.Line != 0 {
				t.Errorf("problem %v: a line of a checkpoint file", p)
			}
			continue
		}
		data, err := os.ReadFile(p.File)
		if err != nil {
			t.Errorf("problem %v: %v", p, err)
			continue
		}
		n := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			n++
		}
		if p.Line < 1 || p.Line > n+1 {
			t.Errorf("problem %v: line %d of a file of %d lines", p, p.Line, n)
		}
		if p.Kind == ProblemTorn && len(data) > 0 && data[len(data)-1] == '\n' {
			t.Errorf("problem %v: torn, but the file ends in a newline", p)
		}
	}
}

// FuzzReader reads arbitrary bytes as a segment, all at once and in two steps (the file grows
// between two calls of Entries, cut at any byte). Invariants: no panic; every error is a
// *ReadError naming a line of the file; every entry is a whole line of the file, at the line
// it names, that parses to the entry's record; and reading in two steps yields exactly what
// reading at once does.
func FuzzReader(f *testing.F) {
	tr := loadFuzzTrail(f)
	for _, id := range tr.segments {
		seg, _, _ := tr.segment(id)
		f.Add(seg, uint32(0))
		f.Add(seg, uint32(len(seg)/2))
		f.Add(seg, uint32(len(seg)-3))
	}
	f.Add([]byte("garbage\n{}\n{\"time\":1}\n"), uint32(3))

	f.Fuzz(checkRead)
}

// checkRead checks the invariants of FuzzReader on data, written up to cut (modulo its length
// plus one) for the first read.
func checkRead(t *testing.T, data []byte, cut uint32) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "s"+segmentExt)
	at := int(cut % uint32(len(data)+1))
	if err := os.WriteFile(path, data[:at], 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	steps := readItems(t, r)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(data[at:]); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	steps = append(steps, readItems(t, r)...)
	if again := readItems(t, r); len(again) != 0 {
		t.Errorf("a third read of an unchanged file yields %d items", len(again))
	}

	r, err = NewReader(path, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	once := readItems(t, r)
	if !reflect.DeepEqual(steps, once) {
		t.Fatalf("reading in two steps (cut at %d) differs from reading at once:\n%v\n%v", at, steps, once)
	}

	lines := bytes.SplitAfter(data, []byte("\n"))
	for _, it := range once {
		if it.err != "" {
			continue
		}
		e := it.entry
		if e.Line < 1 || e.Line > len(lines) || !bytes.HasSuffix(lines[e.Line-1], []byte("\n")) ||
			!bytes.Equal(lines[e.Line-1][:len(lines[e.Line-1])-1], e.Raw) {
			t.Fatalf("entry at line %d is not that whole line: %q", e.Line, e.Raw)
		}
		p := parseEntry(e.Line, e.Raw)
		if !p.parsed || p.rec.Seq != e.Record.Seq || p.rec.Kind != e.Record.Kind || p.mac != e.Record.Mac {
			t.Fatalf("entry at line %d does not parse to its record: %+v", e.Line, e.Record)
		}
	}
}

// TestReadHugeInput runs FuzzReader's checks on inputs too big to fuzz from.
func TestReadHugeInput(t *testing.T) {
	tr := loadFuzzTrail(t)
	for name, data := range hugeInputs(tr) {
		t.Run(name, func(t *testing.T) {
			for _, cut := range []uint32{0, maxLine / 2, maxLine, maxLine + 1, uint32(len(data)) - 1} {
				checkRead(t, data, cut)
			}
		})
	}
}

// readItem is one item an Entries call yields: an entry, or an error's text.
type readItem struct {
	entry Entry
	err   string
}

// readItems returns what one call of r.Entries yields, checking that every error is a
// *ReadError.
func readItems(t *testing.T, r *Reader) []readItem {
	t.Helper()
	var out []readItem
	for e, err := range r.Entries(context.Background()) {
		if err != nil {
			var rerr *ReadError
			if !errors.As(err, &rerr) || rerr.Line < 0 {
				t.Fatalf("Entries yields %T %v, want a *ReadError", err, err)
			}
			out = append(out, readItem{err: err.Error()})
			continue
		}
		out = append(out, readItem{entry: e})
	}
	return out
}

// TestFuzzTrailVerifies checks the committed trail the fuzz targets start from: it verifies
// (the writer still writes this format), and it holds records of every kind, a writer's
// rotation and a second writer caught running.
func TestFuzzTrailVerifies(t *testing.T) {
	tr := loadFuzzTrail(t)
	rep, err := Verify(fuzzTrailDir, tr.keys)
	if err != nil || !rep.OK || rep.Checkpoints < 3 {
		t.Fatalf("the committed trail does not verify (rewrite it: go test ./audit -run TestWriteFuzzTrail -update-fuzz-trail): %+v, %v", rep, err)
	}
	kinds := map[Kind]bool{}
	prevs := 0
	for e, err := range mustReader(t, fuzzTrailDir, Filter{}).Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		kinds[e.Record.Kind] = true
	}
	for rec, err := range Records(context.Background(), fuzzTrailDir, Filter{Kind: KindSegmentStart}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.PrevSegment != "" {
			prevs++
		}
	}
	for _, k := range callerKinds {
		if !kinds[k] {
			t.Errorf("the committed trail has no %s record", k)
		}
	}
	if prevs == 0 || len(tr.segments)-prevs < 2 {
		t.Errorf("%d segments, %d of them after a rotation: want a writer's rotations and a second writer", len(tr.segments), prevs)
	}
}

// mustReader returns a reader of path.
func mustReader(t *testing.T, path string, f Filter) *Reader {
	t.Helper()
	r, err := NewReader(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWriteFuzzTrail rewrites testdata/fuzz/trail under new keys with the real writer, and the
// regression seeds of testdata/fuzz/FuzzVerify that need those keys. It runs only with
// -update-fuzz-trail.
func TestWriteFuzzTrail(t *testing.T) {
	if !*updateFuzzTrail {
		t.Skip("rewrites testdata/fuzz/trail; run with -update-fuzz-trail")
	}
	keys := newTestKeys(t)
	ctx := context.Background()
	add := func(w *Writer, recs ...Record) {
		t.Helper()
		for _, r := range recs {
			if _, err := w.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := func(sid string, n int, method, op string, allow bool, paths ...string) Record {
		r := Record{Kind: KindDecision, Server: "notes", SessionID: sid, DecisionID: fmt.Sprintf("%s-%d", sid, n),
			Method: method, Operation: op, Paths: paths, Allow: Bool(allow), PolicyRevision: "rev-1", LatencyUs: int64(10 + n)}
		if !allow {
			r.Code, r.Reasons = "PERMISSION_DENIED", []string{"no rule allows this request", `readonly: the root of path ("ro") is read-only`}
		}
		return r
	}
	o := func(sid string, n int, method, outcome string, bytes int64) Record {
		return Record{Kind: KindOutcome, Server: "notes", SessionID: sid, DecisionID: fmt.Sprintf("%s-%d", sid, n),
			Method: method, Outcome: outcome, Bytes: bytes, DurationUs: 40}
	}

	// Writer A rotates once (small segments, a checkpoint every 2 records) and is closed
	// cleanly. The trail is kept small: every input the fuzzer finds interesting is minimized
	// by running it again and again, and each run writes and verifies files.
	dirA := t.TempDir()
	a := keys.open(t, dirA, WithMaxSegmentBytes(1200), WithCheckpointEvery(2))
	add(a,
		Record{Kind: KindSessionStart, Server: "notes", SessionID: "sa", ProtocolVersion: "2025-11-25", Transport: "stdio"},
		d("sa", 1, "files/read", "read", true, "/work/ro/a.txt"), o("sa", 1, "files/read", "ok", 8),
		d("sa", 2, "files/write", "write", false, "/work/ro/a.txt"),
		Record{Kind: KindConsent, Server: "notes", SessionID: "sa", Paths: []string{"/work/rw"}, Detail: "granted for the session"},
		Record{Kind: KindSessionEnd, Server: "notes", SessionID: "sa", Detail: "ended"},
	)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Writer B is caught running, as a crash leaves it: its checkpoint file copied first, then
	// its segment, which goes on after its last checkpoint record.
	dirB := t.TempDir()
	b := keys.open(t, dirB, WithCheckpointEvery(3))
	add(b,
		Record{Kind: KindPolicyReload, PolicyRevision: "rev-2"},
		Record{Kind: KindPolicyReloadFailed, Code: "POLICY_ERROR", Detail: "authz.rego:3: unexpected }\n\x1b[31m"},
		Record{Kind: KindKeyRotation, Detail: "checkpoint key rotated"},
		Record{Kind: KindGrant, Server: "notes", SessionID: "sb", Paths: []string{"/work/rw"}, Detail: "revoked"},
		d("sb", 1, "files/rename", "rename", true, "/work/rw/na\u00efve \"q\"\t.txt", PathDigest(keys.mac, "/secret/plan.md")),
		Record{Kind: KindOutcome, Server: "notes", SessionID: "sb", DecisionID: "sb-1", Method: "files/rename",
			Outcome: "NOT_FOUND", Errno: 2, Detail: "no such file"},
		Record{Kind: KindForward, Server: "notes", SessionID: "sb", Transport: "wrap", DecisionID: "fwd-sb-1",
			Method: "tools/call", Tool: "write_file", ArgsDigest: must(ArgumentsDigest(keys.mac, []byte(`{"path":"/w/a"}`)))},
	)
	running := t.TempDir()
	segB := filepath.Base(b.Segment())
	ents, err := os.ReadDir(dirB)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, segB) && n != segB {
			names = append(names, n) // the checkpoint file, and any other file beside the segment
		}
	}
	for _, name := range append(names, segB) {
		data, err := os.ReadFile(filepath.Join(dirB, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(running, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(fuzzTrailDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(fuzzTrailDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{dirA, running} {
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				data, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(fuzzTrailDir, e.Name()), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	kb, err := json.MarshalIndent(fuzzKeys{MAC: hex.EncodeToString(keys.mac), CheckpointSeed: hex.EncodeToString(keys.priv.Seed())}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fuzzTrailDir, "keys.json"), append(kb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}

	writeMaxLineSeed(t, keys)
}

// writeMaxLineSeed writes the FuzzVerify seed max_line_with_bytes_appended: a genuine segment
// with a record line of exactly maxLine bytes, to which bytes are then appended (before its
// newline). Verify must not accept it: the line as a whole is not the record the writer wrote.
func writeMaxLineSeed(t *testing.T, keys testKeys) {
	t.Helper()
	dir := t.TempDir()
	w := keys.open(t, dir)
	base := Record{Kind: KindDecision, Server: "notes", SessionID: "sm", DecisionID: "sm-1", Method: "files/read",
		Operation: "read", Allow: Bool(true)}
	// Every member but the path has the same length in the probe as in the record written:
	// seq 1, a time of fixed width, prev of 64 hex digits.
	probe := base
	probe.V, probe.Seq, probe.Time, probe.Prev = Version, 1, formatTime(time.Now()), strings.Repeat("0", 64)
	probe.Paths = []string{"/"}
	line, _ := encodeLine(&probe, newMAC(keys.mac))
	rec := base
	rec.Paths = []string{"/" + strings.Repeat("a", maxLine-(len(line)-1))}
	if _, err := w.Append(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	seg := w.Segment()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := os.ReadFile(seg + checkpointExt)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[1]) != maxLine+1 {
		t.Fatalf("the long record's line has %d bytes, want %d", len(lines[1])-1, maxLine)
	}
	lines[1] = append(lines[1][:maxLine:maxLine], ` appended after the MAC`+"\n"...)
	writeCorpusFile(t, "FuzzVerify", "max_line_with_bytes_appended", bytes.Join(lines, nil), ckpt)
}

// writeCorpusFile writes a seed of a fuzz target with []byte arguments in Go's corpus format.
func writeCorpusFile(t *testing.T, target, name string, args ...[]byte) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		fmt.Fprintf(&b, "[]byte(%q)\n", a)
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// must returns v, panicking on err: for values the test builds from constants.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
