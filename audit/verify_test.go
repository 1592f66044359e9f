// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// trail is a segment written by 8 goroutines: 1,000 records with a checkpoint every 100, copied
// while the writer was still running (as a crash would leave it: the last 100 records after the
// last checkpoint), and the same trail after Close.
type trail struct {
	keys    testKeys
	running string // directory copied before Close
	closed  string // the writer's directory after Close
}

var (
	trailOnce sync.Once
	theTrail  trail
	trailErr  error
)

// sharedTrail writes the trail once for all tamper tests; each test tampers with its own copy.
func sharedTrail(t *testing.T) trail {
	t.Helper()
	trailOnce.Do(func() {
		dir, err := os.MkdirTemp("", "audit-trail-")
		if err != nil {
			trailErr = err
			return
		}
		keys := newTestKeys(t)
		w := keys.open(t, filepath.Join(dir, "log"), WithCheckpointEvery(100))
		appendConcurrently(t, w, 1000, 8)
		running := filepath.Join(dir, "running")
		if err := os.Mkdir(running, 0o755); err != nil {
			trailErr = err
			return
		}
		for _, name := range []string{"", checkpointExt} {
			data, err := os.ReadFile(w.Segment() + name)
			if err != nil {
				trailErr = err
				return
			}
			if err := os.WriteFile(filepath.Join(running, filepath.Base(w.Segment())+name), data, 0o644); err != nil {
				trailErr = err
				return
			}
		}
		if err := w.Close(); err != nil {
			trailErr = err
			return
		}
		theTrail = trail{keys: keys, running: running, closed: w.Dir()}
	})
	if trailErr != nil {
		t.Fatal(trailErr)
	}
	if theTrail.running == "" {
		t.Fatal("the shared trail was not written")
	}
	return theTrail
}

func TestMain(m *testing.M) {
	code := helperproc.Run(m, helperproc.Roles{"writer": writerRole}) // a writer process for TestKilledWriter
	if theTrail.running != "" {
		os.RemoveAll(filepath.Dir(theTrail.running))
	}
	os.Exit(code)
}

func TestConcurrentAppendVerifies(t *testing.T) {
	tr := sharedTrail(t)
	for _, dir := range []string{tr.running, tr.closed} {
		rep, err := Verify(dir, tr.keys.verifyKeys())
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.Problem != nil {
			t.Fatalf("%s: not OK: %+v", dir, rep.Problem)
		}
		segs := segments(t, dir)
		if len(segs) != 1 || rep.Segments != 1 || rep.Checkpoints != 1 {
			t.Fatalf("segments %d, report %+v", len(segs), rep)
		}
		lines := readLines(t, segs[0])
		if rep.Records != uint64(len(lines)) {
			t.Errorf("Records = %d, want every line (%d)", rep.Records, len(lines))
		}
		// File order is seq order; there are 1,000 caller records, 9 checkpoints while running.
		var kinds = map[Kind]int{}
		for i, l := range lines {
			r := parsed(t, l)
			if r.Seq != uint64(i) {
				t.Fatalf("line %d has seq %d", i+1, r.Seq)
			}
			kinds[r.Kind]++
		}
		if kinds[KindDecision]+kinds[KindOutcome] != 1000 || kinds[KindSegmentStart] != 1 {
			t.Errorf("kinds = %v", kinds)
		}
	}
}

func TestAppendSeqsAreUniqueAndOrdered(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir(), WithCheckpointEvery(50), WithSync(SyncNone))
	seqs := appendConcurrently(t, w, 400, 8)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(seqs)
	if len(slices.Compact(slices.Clone(seqs))) != 400 {
		t.Fatal("Append gave out a seq twice")
	}
	// Every seq Append returned is the line of a caller record with that seq.
	lines := readLines(t, segments(t, w.Dir())[0])
	for _, s := range seqs {
		if r := parsed(t, lines[s]); r.Seq != s || (r.Kind != KindDecision && r.Kind != KindOutcome) {
			t.Fatalf("seq %d: line holds %+v", s, r)
		}
	}
}

// tamper is one way of damaging a copy of the trail.
type tamper struct {
	name string
	// edit changes the segment's lines and may touch other files of the directory; it returns
	// the line number and seq Verify must name (0 for "any").
	edit     func(t *testing.T, seg string, lines [][]byte) (line int, seq uint64)
	from     func(trail) string // which directory to copy (default: running)
	want     ProblemKind
	tampered bool
}

// lineSeq returns the seq of a line.
func lineSeq(t *testing.T, lines [][]byte, line int) uint64 {
	return parsed(t, lines[line-1]).Seq
}

// lastCheckpointLine returns the 1-based line of the last checkpoint record.
func lastCheckpointLine(t *testing.T, lines [][]byte) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if parsed(t, lines[i]).Kind == KindCheckpoint {
			return i + 1
		}
	}
	t.Fatal("no checkpoint record")
	return 0
}

func TestVerifyCatchesTampering(t *testing.T) {
	wrong := newTestKeys(t)
	tests := []tamper{{
		name: "flip a byte",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			seq := lineSeq(t, lines, 500)
			l := lines[499]
			i := bytes.Index(l, []byte(`"time":"`)) + len(`"time":"2026-01-01T00:00:0`)
			l[i] ^= 1 // a digit stays a digit: still valid JSON, a different second
			writeLines(t, seg, lines)
			return 500, seq
		},
		want: ProblemEdited, tampered: true,
	}, {
		name: "flip a byte of the mac",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			seq := lineSeq(t, lines, 300)
			l := lines[299]
			if l[len(l)-5] == '0' { // stay a hex digit
				l[len(l)-5] = '1'
			} else {
				l[len(l)-5] = '0'
			}
			writeLines(t, seg, lines)
			return 300, seq
		},
		want: ProblemEdited, tampered: true,
	}, {
		name: "flip a byte of the header",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			i := bytes.Index(lines[0], []byte(`"time":"`)) + len(`"time":"2`)
			lines[0][i] ^= 1
			writeLines(t, seg, lines)
			return 1, 0
		},
		want: ProblemEdited, tampered: true,
	}, {
		name: "replace a line with a huge one",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			seq := lineSeq(t, lines, 500)
			lines[499] = bytes.Repeat([]byte("x"), 3*maxLine)
			writeLines(t, seg, lines)
			return 500, seq
		},
		want: ProblemEdited, tampered: true,
	}, {
		name: "delete a line",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			seq := lineSeq(t, lines, 500)
			writeLines(t, seg, slices.Delete(lines, 499, 500))
			return 500, seq
		},
		want: ProblemRemoved, tampered: true,
	}, {
		name: "delete the header",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			writeLines(t, seg, lines[1:])
			return 1, 0
		},
		want: ProblemRemoved, tampered: true,
	}, {
		name: "swap two lines",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			lines[499], lines[500] = lines[500], lines[499]
			writeLines(t, seg, lines)
			return 500, lineSeq(t, lines, 500)
		},
		want: ProblemReordered, tampered: true,
	}, {
		name: "move a line back",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			moved := lines[199]
			lines = slices.Delete(lines, 199, 200)
			lines = slices.Insert(lines, 700, moved)
			writeLines(t, seg, lines)
			return 200, lineSeq(t, lines, 200)
		},
		want: ProblemReordered, tampered: true,
	}, {
		name: "insert a forged line",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			before := parsed(t, lines[499])
			forged := sampleRecord(KindDecision, 9999)
			forged.V, forged.Seq, forged.Time, forged.Prev = Version, before.Seq+1, before.Time, before.Mac
			line, _ := encodeLine(&forged, newMAC(wrong.mac))
			writeLines(t, seg, slices.Insert(lines, 500, bytes.TrimSuffix(line, []byte("\n"))))
			return 501, before.Seq + 1
		},
		want: ProblemInserted, tampered: true,
	}, {
		name: "replay a genuine line",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			seq := lineSeq(t, lines, 100)
			writeLines(t, seg, slices.Insert(lines, 500, slices.Clone(lines[99])))
			return 501, seq
		},
		want: ProblemInserted, tampered: true,
	}, {
		name: "truncate before the last checkpoint",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			n := lastCheckpointLine(t, lines) - 20
			writeLines(t, seg, lines[:n])
			return n + 1, lineSeq(t, lines, n) + 1
		},
		want: ProblemTruncated, tampered: true,
	}, {
		name: "truncate a closed segment by one line",
		from: func(tr trail) string { return tr.closed },
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			n := len(lines) - 1
			writeLines(t, seg, lines[:n])
			return n + 1, lineSeq(t, lines, n) + 1
		},
		want: ProblemTruncated, tampered: true,
	}, {
		name: "cut the last line in half",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			last := lines[len(lines)-1]
			writeLines(t, seg, lines[:len(lines)-1])
			f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(last[:len(last)/2]); err != nil {
				t.Fatal(err)
			}
			return len(lines), lineSeq(t, lines, len(lines))
		},
		want: ProblemTorn, tampered: false,
	}, {
		name: "cut the checkpointed line in half",
		from: func(tr trail) string { return tr.closed },
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			last := lines[len(lines)-1]
			lines[len(lines)-1] = last[:len(last)/2]
			writeLines(t, seg, lines)
			os.Truncate(seg, int64(len(bytes.Join(lines, []byte("\n")))))
			return len(lines), lineSeq(t, lines, len(lines)-1) + 1
		},
		want: ProblemTruncated, tampered: true,
	}, {
		name: "forge the checkpoint's seq",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			var ck checkpointFile
			data, _ := os.ReadFile(seg + checkpointExt)
			if err := json.Unmarshal(data, &ck); err != nil {
				t.Fatal(err)
			}
			ck.Seq = 5
			data, _ = json.Marshal(ck)
			os.WriteFile(seg+checkpointExt, data, 0o644)
			return 0, 0
		},
		want: ProblemCheckpoint, tampered: true,
	}, {
		name: "delete the checkpoint and truncate",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			os.Remove(seg + checkpointExt)
			writeLines(t, seg, lines[:lastCheckpointLine(t, lines)+10])
			return 0, 0
		},
		want: ProblemCheckpoint, tampered: true,
	}, {
		name: "rename a segment",
		edit: func(t *testing.T, seg string, lines [][]byte) (int, uint64) {
			// A file renamed into the trail: its header names another segment.
			os.Rename(seg, filepath.Join(filepath.Dir(seg), "20990101T000000.000000000Z-1-00000000.jsonl"))
			return 1, 0
		},
		want: ProblemEdited, tampered: true,
	}}
	tr := sharedTrail(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tr.running
			if tc.from != nil {
				src = tc.from(tr)
			}
			dir := copyDir(t, src)
			seg := segments(t, dir)[0]
			lines := readLines(t, seg)
			wantLine, wantSeq := tc.edit(t, seg, lines)
			for _, path := range []string{dir, segments(t, dir)[0]} {
				rep, err := Verify(path, tr.keys.verifyKeys())
				if err != nil {
					t.Fatal(err)
				}
				p := rep.Problem
				if rep.OK || p == nil {
					t.Fatalf("Verify(%s) found nothing: %+v", filepath.Base(path), rep)
				}
				if p.Kind != tc.want || p.Kind.Tampering() != tc.tampered {
					t.Fatalf("problem %s, want %s", p, tc.want)
				}
				if wantLine != 0 && (p.Line != wantLine || p.Seq != wantSeq) {
					t.Fatalf("problem %s, want line %d seq %d", p, wantLine, wantSeq)
				}
				if p.File == "" || p.Detail == "" {
					t.Fatalf("problem without file or detail: %+v", p)
				}
				if p.Kind == ProblemTorn && rep.Records != uint64(wantLine-1) {
					t.Fatalf("torn: %d records verified, want the %d before the torn line", rep.Records, wantLine-1)
				}
			}
		})
	}
}

// TestVerifyLimits pins down what Verify cannot see: a cut at a line boundary after the last
// checkpoint looks like a writer that stopped there.
func TestVerifyLimits(t *testing.T) {
	tr := sharedTrail(t)
	dir := copyDir(t, tr.running)
	seg := segments(t, dir)[0]
	lines := readLines(t, seg)
	writeLines(t, seg, lines[:len(lines)-10])
	rep, err := Verify(dir, tr.keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("a cut after the last checkpoint is not detectable, yet Verify said %s", rep.Problem)
	}
}

func TestVerifyWrongKeys(t *testing.T) {
	tr := sharedTrail(t)
	other := newTestKeys(t)
	for name, keys := range map[string]VerifyKeys{
		"mac":        {MAC: other.verifyKeys().MAC, Checkpoint: tr.keys.verifyKeys().Checkpoint},
		"checkpoint": {MAC: tr.keys.verifyKeys().MAC, Checkpoint: other.verifyKeys().Checkpoint},
	} {
		rep, err := Verify(tr.closed, keys)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Problem.Kind != ProblemUnknownKey {
			t.Errorf("%s: %+v", name, rep.Problem)
		}
	}
	// A key given alongside others (a rotated one) is found by its id.
	keys := tr.keys.verifyKeys()
	keys.MAC = append([][]byte{other.mac}, keys.MAC...)
	if rep, err := Verify(tr.closed, keys); err != nil || !rep.OK {
		t.Fatalf("with an extra key: %v %+v", err, rep.Problem)
	}
	if _, err := Verify(tr.closed, VerifyKeys{}); err == nil {
		t.Fatal("Verify without keys succeeded")
	}
	if _, err := Verify(filepath.Join(tr.closed, "missing"), tr.keys.verifyKeys()); err == nil {
		t.Fatal("Verify of a missing path succeeded")
	}
}

func TestRotationKeepsTheChain(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithMaxSegmentBytes(16<<10), WithCheckpointEvery(40))
	appendConcurrently(t, w, 600, 8)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir)
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Segments != len(segs) || rep.Checkpoints != len(segs) {
		t.Fatalf("report %+v, %d segments", rep, len(segs))
	}
	// Each header names its predecessor and links to that segment's last MAC.
	var prevID, prevMAC string
	records := 0
	for i, s := range segs {
		lines := readLines(t, s)
		h := parsed(t, lines[0])
		if h.Kind != KindSegmentStart || h.PrevSegment != prevID || h.Prev != prevMAC {
			t.Fatalf("segment %d header %+v, want prev segment %q mac %q", i, h, prevID, prevMAC)
		}
		if i < len(segs)-1 {
			if fi, _ := os.Stat(s); fi.Size() < 16<<10 {
				t.Errorf("segment %d rotated at %d bytes", i, fi.Size())
			}
		}
		for _, l := range lines {
			if k := parsed(t, l).Kind; k == KindDecision || k == KindOutcome {
				records++
			}
		}
		prevID = h.Segment
		prevMAC = parsed(t, lines[len(lines)-1]).Mac
	}
	if records != 600 {
		t.Fatalf("%d caller records in the segments, want 600", records)
	}

	t.Run("a removed segment", func(t *testing.T) {
		cp := copyDir(t, dir)
		mid := filepath.Join(cp, filepath.Base(segs[1]))
		os.Remove(mid)
		os.Remove(mid + checkpointExt)
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemRemoved || rep.Problem.File != filepath.Join(cp, filepath.Base(segs[2])) {
			t.Fatalf("%+v", rep.Problem)
		}
	})
	t.Run("a rotated segment truncated with its checkpoint gone", func(t *testing.T) {
		cp := copyDir(t, dir)
		first := filepath.Join(cp, filepath.Base(segs[0]))
		os.Remove(first + checkpointExt)
		lines := readLines(t, first)
		writeLines(t, first, lines[:len(lines)-2]) // cut the final checkpoint and one record
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemTruncated || rep.Problem.File != first ||
			rep.Problem.Line != len(lines)-1 {
			t.Fatalf("%+v", rep.Problem)
		}
	})
	t.Run("a duplicated segment", func(t *testing.T) {
		cp := copyDir(t, dir)
		// A copy under another name: its header names another segment, so it is "edited".
		data, _ := os.ReadFile(segs[2])
		os.WriteFile(filepath.Join(cp, "30000101T000000.000000000Z-1-00000000.jsonl"), data, 0o644)
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemEdited {
			t.Fatalf("%+v", rep.Problem)
		}
	})
}

func TestSeveralWritersOneDirectory(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range 3 {
		w := keys.open(t, dir, WithMaxSegmentBytes(8<<10), WithCheckpointEvery(25))
		for g := range 2 {
			wg.Go(func() {
				for i := range 100 {
					if _, err := w.Append(t.Context(), sampleRecord(KindDecision, g*100+i)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		t.Cleanup(func() {
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Verify while the writers are still open, as an auditor would on a live broker.
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("%+v", rep.Problem)
	}
	starts := 0
	for _, s := range segments(t, dir) {
		if parsed(t, readLines(t, s)[0]).PrevSegment == "" {
			starts++
		}
	}
	if starts != 3 {
		t.Fatalf("%d chain starts, want one per writer", starts)
	}
}

func TestProblemString(t *testing.T) {
	p := Problem{Kind: ProblemEdited, File: "a.jsonl", Line: 3, Seq: 2, Detail: "x"}
	if got, want := p.String(), "a.jsonl:3: seq 2: edited: x"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
