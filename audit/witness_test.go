// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit/syslogtest"
)

// testLog is a logger writing to a file of the test, and the file.
func testLog(t *testing.T) (hclog.Logger, func() string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	read := func() string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	return hclog.New(&hclog.LoggerOptions{Output: f, Level: hclog.Debug}), read
}

// openWitness opens the witness of a setting, failing the test if it does not parse or open.
func openWitness(t *testing.T, spec string) Witness {
	t.Helper()
	ws, err := ParseWitnessSpec(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ws.Open()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// witnessedTrail is a trail of two broker processes sharing a log directory, and what a
// witness saw of it: process A wrote segments a1 and a2 (it reopened in between), process B
// wrote b1 alone.
type witnessedTrail struct {
	keys       testKeys
	dir        string
	a1, a2, b1 string // segment paths
	witness    string // a file holding what the witness saw
}

// writeWitnessedTrail writes the trail with the witness via ("file", "unixgram" or "udp").
func writeWitnessedTrail(t *testing.T, via string) *witnessedTrail {
	t.Helper()
	tr := &witnessedTrail{keys: newTestKeys(t), dir: t.TempDir()}
	var daemon *syslogtest.Daemon
	spec := "file:" + filepath.Join(t.TempDir(), "witness.log")
	if via != "file" {
		daemon = syslogtest.Listen(t, via)
		spec = daemon.Spec()
	}
	appendN := func(w *Writer, from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := tr.keys.open(t, tr.dir, WithWitness(openWitness(t, spec)), WithCheckpointEvery(4))
	b := tr.keys.open(t, tr.dir, WithWitness(openWitness(t, spec)), WithCheckpointEvery(4))
	tr.a1, tr.b1 = a.Segment(), b.Segment()
	appendN(a, 0, 10)
	appendN(b, 0, 5)
	if err := a.Reopen(); err != nil {
		t.Fatal(err)
	}
	tr.a2 = a.Segment()
	appendN(a, 10, 6)
	for _, w := range []*Writer{a, b} {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		for _, st := range w.WitnessStats() {
			if st.Failed != 0 || st.Sent == 0 {
				t.Fatalf("witness deliveries: %+v", st)
			}
		}
	}
	if daemon == nil {
		tr.witness = strings.TrimPrefix(spec, "file:")
		return tr
	}
	// UDP gives no acknowledgement: wait for the last statement of each segment.
	for _, seg := range []string{tr.a1, tr.a2, tr.b1} {
		daemon.WaitFor(t, "segment="+segID(seg)+" ", fmt.Sprintf(" seq=%d ", lastSeq(t, seg)))
	}
	tr.witness = daemon.Save(t)
	return tr
}

// segID returns a segment file's id.
func segID(path string) string { return strings.TrimSuffix(filepath.Base(path), segmentExt) }

// lastSeq returns the seq of a segment's last record.
func lastSeq(t testing.TB, path string) uint64 {
	t.Helper()
	lines := readLines(t, path)
	return parsed(t, lines[len(lines)-1]).Seq
}

// lastCheckpointSeq returns the seq of a segment's last checkpoint record (its header's, 0, if
// it has none): the furthest a witness hears of while the segment is open.
func lastCheckpointSeq(t testing.TB, path string) uint64 {
	t.Helper()
	var seq uint64
	for _, r := range recordsOf(t, path) {
		if r.Kind == KindCheckpoint {
			seq = r.Seq
		}
	}
	return seq
}

// witnessLog reads witness files under keys.
func witnessLog(t testing.TB, keys VerifyKeys, files ...string) *WitnessLog {
	t.Helper()
	wl := NewWitnessLog(keys)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		err = wl.Add(name, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return wl
}

// verifyWitnessed verifies path against the witness files.
func verifyWitnessed(t testing.TB, path string, keys VerifyKeys, files ...string) Report {
	t.Helper()
	rep, err := Verify(path, keys, AgainstWitness(witnessLog(t, keys, files...)))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestWitnessCatchesACutEnd is issue 15 item 12: deleting a broker's newest segment, or its
// only one, together with its checkpoint file, or cutting the newest short and deleting its
// checkpoint file, leaves a trail that verifies on its own. Against what a witness saw
// (a witness file, or syslog over a unix datagram socket or UDP, as log/syslog sends it), each
// is tampering, named with the segment, the witness line and the records missing.
func TestWitnessCatchesACutEnd(t *testing.T) {
	attacks := []struct {
		name string
		// cut tampers with the trail in dir and returns the segment it cut, the problem
		// kind Verify must report, and how many records are missing at least.
		cut func(t *testing.T, tr *witnessedTrail, dir string) (string, ProblemKind, uint64)
	}{
		{"newest segment deleted with its checkpoint", func(t *testing.T, tr *witnessedTrail, dir string) (string, ProblemKind, uint64) {
			p := filepath.Join(dir, filepath.Base(tr.a2))
			n := lastSeq(t, p)
			removeSegment(t, p)
			return p, ProblemRemoved, n + 1
		}},
		{"a broker's only segment deleted with its checkpoint", func(t *testing.T, tr *witnessedTrail, dir string) (string, ProblemKind, uint64) {
			p := filepath.Join(dir, filepath.Base(tr.b1))
			n := lastSeq(t, p)
			removeSegment(t, p)
			return p, ProblemRemoved, n + 1
		}},
		{"newest segment cut after its first checkpoint, checkpoint file deleted", func(t *testing.T, tr *witnessedTrail, dir string) (string, ProblemKind, uint64) {
			p := filepath.Join(dir, filepath.Base(tr.a2))
			lines := readLines(t, p)
			n := parsed(t, lines[len(lines)-1]).Seq
			cut := slices.IndexFunc(lines, func(l []byte) bool { return parsed(t, l).Kind == KindCheckpoint })
			writeLines(t, p, lines[:cut+1])
			os.Remove(p + checkpointExt)
			return p, ProblemTruncated, n - parsed(t, lines[cut]).Seq
		}},
	}
	for _, via := range []string{"file", "unixgram", "udp"} {
		t.Run(via, func(t *testing.T) {
			tr := writeWitnessedTrail(t, via)
			keys := tr.keys.verifyKeys()
			rep := verifyWitnessed(t, tr.dir, keys, tr.witness)
			if !rep.OK || rep.Witness.Segments != 3 || rep.Witness.Confirmed != 3 || rep.Witness.Refused != 0 {
				t.Fatalf("the intact trail against its witness: %+v, witness %+v", rep.Problems, rep.Witness)
			}
			for _, a := range attacks {
				t.Run(a.name, func(t *testing.T) {
					dir := copyDir(t, tr.dir)
					seg, kind, missing := a.cut(t, tr, dir)
					// On its own, the trail cannot tell.
					if rep := verifyOK(t, dir, keys); rep.Segments == 0 {
						t.Fatal("no segment left")
					}
					rep := verifyWitnessed(t, dir, keys, tr.witness)
					if rep.OK || rep.Problem == nil {
						t.Fatalf("verified against the witness: %+v", rep)
					}
					p := rep.Problem
					if p.Kind != kind || p.File != seg || p.Missing != missing || !strings.HasPrefix(p.Witness, tr.witness+":") {
						t.Fatalf("problem %+v, want %s of %s with %d missing", p, kind, seg, missing)
					}
					if kind == ProblemRemoved && !strings.Contains(p.Detail, "broker process "+fmt.Sprint(os.Getpid())) {
						t.Errorf("the problem does not name the broker process: %s", p.Detail)
					}
					if len(rep.Problems) != 1 || rep.Witness.Confirmed != 2 {
						t.Errorf("problems %v, witness %+v", rep.Problems, rep.Witness)
					}
				})
			}
		})
	}
}

// removeSegment deletes a segment with its checkpoint file.
func removeSegment(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + checkpointExt} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWitnessSeesEverySegmentAndSessionEnd: a witness hears of a segment when it starts, before
// any checkpoint (a broker killed then is still known), and of a session's end at once.
func TestWitnessSeesEverySegmentAndSessionEnd(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "witness.log")
	w := keys.open(t, dir, WithWitness(openWitness(t, "file:"+file)))
	defer w.Close()
	seg := w.Segment()
	statement := func(seq uint64) string { return fmt.Sprintf("segment=%s seq=%d ", segID(seg), seq) }
	waitFor(t, "the segment's start at the witness", func() bool {
		data, _ := os.ReadFile(file)
		return strings.Contains(string(data), statement(0))
	})
	if _, err := w.Append(t.Context(), sampleRecord(KindSessionStart, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindSessionEnd, 1)); err != nil {
		t.Fatal(err)
	}
	// The session's end is checkpointed at once (seq 3), not 5 s or 1000 records later.
	waitFor(t, "the session end at the witness", func() bool {
		data, _ := os.ReadFile(file)
		return strings.Contains(string(data), statement(3))
	})
	if recs := recordsOf(t, seg); len(recs) != 4 || recs[3].Kind != KindCheckpoint {
		t.Fatalf("records after the session end: %+v", recs)
	}
	// Deleting the segment before its first checkpoint is caught too.
	cp := copyDir(t, dir)
	removeSegment(t, filepath.Join(cp, filepath.Base(seg)))
	rep := verifyWitnessed(t, cp, keys.verifyKeys(), file)
	if rep.OK || rep.Problem.Kind != ProblemRemoved || rep.Problem.Missing != 4 {
		t.Fatalf("%+v", rep.Problem)
	}
}

// TestWitnessRefusesForgedLines: lines that do not verify are refused and named, never used,
// whether they would hide a cut (a retention statement for a deleted segment) or invent one
// (a checkpoint beyond a segment's end); lines of other trails are ignored.
func TestWitnessRefusesForgedLines(t *testing.T) {
	tr := writeWitnessedTrail(t, "file")
	keys := tr.keys.verifyKeys()
	genuine, err := os.ReadFile(tr.witness)
	if err != nil {
		t.Fatal(err)
	}
	last := lastSeq(t, tr.a1)
	var lastLine string
	for _, l := range strings.Split(string(genuine), "\n") {
		if strings.Contains(l, fmt.Sprintf("segment=%s seq=%d ", segID(tr.a1), last)) {
			lastLine = l
		}
	}
	if lastLine == "" {
		t.Fatalf("no statement of a1's last record in\n%s", genuine)
	}
	attacker := newTestKeys(t)
	forge := func(ev WitnessEvent, priv ed25519.PrivateKey) string {
		ev.AuditKeyID = MACKeyID(tr.keys.mac)
		ev.sign(priv)
		return ev.Line()
	}
	now := formatTime(time.Now())
	var otherSig [ed25519.SignatureSize]byte
	rand.Read(otherSig[:])
	forged := []string{
		// a1's last statement, claiming further: its signature no longer verifies.
		strings.Replace(lastLine, fmt.Sprintf(" seq=%d ", last), fmt.Sprintf(" seq=%d ", last+40), 1),
		// a retention statement for b1, under the attacker's own key.
		forge(WitnessEvent{Kind: WitnessRetention, Segment: segID(tr.b1), Seq: 100, MAC: strings.Repeat("a", 64), Time: now, By: segID(tr.a2)}, attacker.priv),
		// the same, claiming the trail's checkpoint key.
		func() string {
			ev := WitnessEvent{Kind: WitnessRetention, Segment: segID(tr.b1), Seq: 100, MAC: strings.Repeat("a", 64), Time: now,
				By: segID(tr.a2), AuditKeyID: MACKeyID(tr.keys.mac), KeyID: KeyID(tr.keys.priv.Public().(ed25519.PublicKey))}
			ev.Signature = fmt.Sprintf("%x", otherSig)
			return ev.Line()
		}(),
		// cut short by a syslog line limit.
		lastLine[:len(lastLine)-20],
	}
	// A genuine line of another trail: other keys.
	other := WitnessEvent{Kind: WitnessCheckpoint, Segment: segID(tr.b1), Seq: 99, MAC: strings.Repeat("b", 64), Time: now,
		AuditKeyID: MACKeyID(attacker.mac)}
	other.sign(attacker.priv)
	file := filepath.Join(t.TempDir(), "syslog")
	var text strings.Builder
	text.Write(genuine)
	for _, f := range forged {
		fmt.Fprintf(&text, "Mar  1 12:00:00 host evil[666]: %s\n", f)
	}
	fmt.Fprintf(&text, "%s\nan unrelated line\n", other.Line())
	if err := os.WriteFile(file, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	rep := verifyWitnessed(t, tr.dir, keys, file)
	if !rep.OK || rep.Witness.Refused != len(forged) || rep.Witness.OtherTrails != 1 || rep.Witness.Confirmed != 3 {
		t.Fatalf("forged lines changed the outcome: %+v, witness %+v", rep.Problems, rep.Witness)
	}
	if !strings.Contains(strings.Join(rep.Witness.RefusedExamples, "\n"), "forged") {
		t.Errorf("refused: %q", rep.Witness.RefusedExamples)
	}
	// b1 deleted: a forged retention statement does not excuse it.
	dir := copyDir(t, tr.dir)
	removeSegment(t, filepath.Join(dir, filepath.Base(tr.b1)))
	rep = verifyWitnessed(t, dir, keys, file)
	if rep.OK || rep.Problem.Kind != ProblemRemoved || filepath.Base(rep.Problem.File) != filepath.Base(tr.b1) {
		t.Fatalf("%+v", rep.Problem)
	}

	t.Run("checkpoint key not given", func(t *testing.T) {
		// The trail's headers name the key that signed the lines: the verifier lacks it.
		rep := verifyWitnessed(t, tr.dir, VerifyKeys{MAC: keys.MAC, Checkpoint: []ed25519.PublicKey{attacker.priv.Public().(ed25519.PublicKey)}}, tr.witness)
		i := slices.IndexFunc(rep.Problems, func(p Problem) bool { return p.Kind == ProblemUnknownKey && p.Witness != "" })
		if rep.OK || i < 0 || !strings.Contains(rep.Problems[i].Hint, KeyID(tr.keys.priv.Public().(ed25519.PublicKey))) {
			t.Fatalf("%+v", rep.Problems)
		}
	})
}

// TestWitnessAndRetention: retention tells the witness what it deletes, so that a segment the
// witness saw is accounted for even after the retention record naming it was deleted too; a
// segment cut before retention deleted it is still caught.
func TestWitnessAndRetention(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "witness.log")
	w1 := keys.open(t, dir, WithRetention(time.Hour, 0), WithSync(SyncNone), WithWitness(openWitness(t, "file:"+file)))
	defer w1.Close()
	w2 := keys.open(t, dir, WithSync(SyncNone), WithWitness(openWitness(t, "file:"+file)))
	for i := range 3 {
		if _, err := w2.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	only := w2.Segment() // w2's only segment: no successor, so no note
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	before := copyDir(t, dir) // for the cut below
	// w1 deletes it (the record is in c1), moves on, and deletes c1 with that record.
	c1 := segID(w1.Segment())
	ageAll(t, dir, []string{segID(only)}, 2*time.Hour)
	if err := w1.retain(); err != nil {
		t.Fatal(err)
	}
	if err := w1.Reopen(); err != nil {
		t.Fatal(err)
	}
	ageAll(t, dir, []string{c1}, 2*time.Hour)
	if err := w1.retain(); err != nil {
		t.Fatal(err)
	}
	if ids := segmentIDs(t, dir); slices.Contains(ids, c1) || slices.Contains(ids, segID(only)) {
		t.Fatalf("segments left: %v", ids)
	}
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	rep := verifyWitnessed(t, dir, keys.verifyKeys(), file)
	if !rep.OK || rep.Witness.RetentionRemoved != 2 {
		t.Fatalf("%+v, witness %+v", rep.Problems, rep.Witness)
	}

	// witnessLines writes the lines of the witness file that hold every one of subs to a new
	// file.
	witnessLines := func(t *testing.T, subs ...string) string {
		data, _ := os.ReadFile(file)
		var kept []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(l, s) }) {
				kept = append(kept, l)
			}
		}
		p := filepath.Join(t.TempDir(), "witness.log")
		if err := os.WriteFile(p, []byte(strings.Join(kept, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("retention statements lost", func(t *testing.T) {
		// The witness was down while retention ran: c1 is accounted for by the note beside
		// its successor, the other broker's segment by nothing any more.
		lost := witnessLines(t, " checkpoint ")
		rep := verifyWitnessed(t, dir, keys.verifyKeys(), lost)
		if rep.OK || len(rep.Problems) != 1 || rep.Problem.Kind != ProblemRemoved || filepath.Base(rep.Problem.File) != filepath.Base(only) {
			t.Fatalf("%+v", rep.Problems)
		}
	})
	t.Run("cut before retention", func(t *testing.T) {
		// The segment is cut (and its checkpoint file deleted) before retention deletes it:
		// retention announces the cut end, which is short of what the witness saw.
		cut := copyDir(t, before)
		p := filepath.Join(cut, filepath.Base(only))
		lines := readLines(t, p)
		writeLines(t, p, lines[:2])
		os.Remove(p + checkpointExt)
		cutWitness := witnessLines(t, " checkpoint ", "segment="+segID(only)+" ")
		w := keys.open(t, cut, WithRetention(time.Hour, 0), WithSync(SyncNone), WithWitness(openWitness(t, "file:"+cutWitness)))
		ageAll(t, cut, []string{segID(only)}, 2*time.Hour)
		if err := w.retain(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rep := verifyWitnessed(t, cut, keys.verifyKeys(), cutWitness)
		if rep.OK || rep.Problem.Kind != ProblemTruncated || filepath.Base(rep.Problem.File) != filepath.Base(only) || rep.Problem.Missing != lastSeq(t, filepath.Join(before, filepath.Base(only)))-1 {
			t.Fatalf("%+v", rep.Problems)
		}
	})
}

// TestWitnessDownDoesNotFailAppends: with the syslog daemon down, every append succeeds; the
// failure is logged once and counted, and once the daemon is back the latest checkpoint
// reaches it (delivery is retried).
func TestWitnessDownDoesNotFailAppends(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	path := syslogtest.SocketPath(t)
	logger, log := testLog(t)
	w := keys.open(t, dir, WithWitness(openWitness(t, "syslog:unixgram://"+path)), WithCheckpointEvery(1),
		WithWitnessTimeout(time.Second), WithLogger(logger))
	defer w.Close()
	for i := range 20 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatalf("append %d with the witness down: %v", i, err)
		}
	}
	waitFor(t, "a failed delivery", func() bool { return w.WitnessStats()[0].Failed > 0 })
	waitFor(t, "the failure logged", func() bool { return strings.Contains(log(), "audit witness unreachable") })
	if w.Failures() != 0 {
		t.Fatalf("the trail counts %d failures", w.Failures())
	}

	d := syslogtest.ListenAt(t, path)
	// The latest checkpoint of the segment, waiting since the daemon was down, arrives.
	d.WaitFor(t, "segment="+segID(w.Segment())+" ", fmt.Sprintf(" seq=%d ", lastCheckpointSeq(t, w.Segment())))
	waitFor(t, "the recovery logged", func() bool { return strings.Contains(log(), "audit witness reachable again") })
	if n := strings.Count(log(), "audit witness unreachable"); n != 1 {
		t.Errorf("the outage was logged %d times as a warning:\n%s", n, log())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d.WaitFor(t, fmt.Sprintf(" seq=%d ", lastSeq(t, w.Segment())))
	file := d.Save(t)
	if rep := verifyWitnessed(t, dir, keys.verifyKeys(), file); !rep.OK || rep.Witness.Confirmed != 1 {
		t.Fatalf("%+v %+v", rep.Problems, rep.Witness)
	}
}

// TestWitnessSlowDoesNotHoldUpAppends: a syslog daemon that stops reading (its socket's queue
// full, so that log/syslog's write blocks) holds up no append, even with a witness timeout of an
// hour; with a short timeout the stuck delivery is counted and logged as a failure, and Close
// does not wait for it past the timeout.
func TestWitnessSlowDoesNotHoldUpAppends(t *testing.T) {
	// appendAll appends n records (each one checkpointed), failing the test if that does not
	// finish within a minute: it would, if an append waited for the witness.
	appendAll := func(t *testing.T, w *Writer, n int) {
		done := make(chan error, 1)
		go func() {
			for i := range n {
				if _, err := w.Append(context.Background(), sampleRecord(KindDecision, i)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the appends are held up by the witness")
		}
	}

	t.Run("no timeout reached", func(t *testing.T) {
		d := syslogtest.Stalled(t)
		keys := newTestKeys(t)
		w := keys.open(t, t.TempDir(), WithWitness(openWitness(t, d.Spec())), WithCheckpointEvery(1), WithWitnessTimeout(time.Hour))
		appendAll(t, w, 200)
		if st := w.WitnessStats()[0]; st.Sent != 0 || st.Failed != 0 || st.Pending != 1 {
			t.Fatalf("%+v: want nothing sent, the statements coalesced into one waiting", st)
		}
		// The daemon reads again: the blocked write and the latest checkpoint go through.
		d.Resume()
		d.WaitFor(t, "segment="+segID(w.Segment())+" ", fmt.Sprintf(" seq=%d ", lastCheckpointSeq(t, w.Segment())))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		d := syslogtest.Stalled(t)
		keys := newTestKeys(t)
		logger, log := testLog(t)
		w := keys.open(t, t.TempDir(), WithWitness(openWitness(t, d.Spec())), WithCheckpointEvery(1),
			WithWitnessTimeout(200*time.Millisecond), WithLogger(logger))
		appendAll(t, w, 200)
		waitFor(t, "the stuck delivery counted", func() bool { return w.WitnessStats()[0].Failed > 0 })
		if !strings.Contains(log(), "audit witness unreachable") || !strings.Contains(log(), "no answer within 200ms") {
			t.Fatalf("log:\n%s", log())
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if st := w.WitnessStats()[0]; st.Sent != 0 || st.Pending != 0 || st.Failed < 2 {
			t.Fatalf("after Close: %+v", st)
		}
		if !strings.Contains(log(), "statements not delivered before the trail was closed") {
			t.Fatalf("log:\n%s", log())
		}
		if w.Failures() != 0 {
			t.Fatalf("the trail counts %d failures", w.Failures())
		}
	})
}

// FuzzWitnessLine feeds arbitrary lines to the witness reader: it never panics, a line it
// takes is exactly the statement it re-encodes (so a signature covers one reading only), and a
// line it takes whose signature verifies was signed by the key.
func FuzzWitnessLine(f *testing.F) {
	keys := newTestKeys(f)
	ev := WitnessEvent{Kind: WitnessCheckpoint, Segment: "20260301T120000.000000000Z-42-0123abcd", Seq: 7,
		MAC: strings.Repeat("ab", 32), Time: "2026-03-01T12:00:05.000000000Z", AuditKeyID: MACKeyID(keys.mac)}
	ev.sign(keys.priv)
	ret := ev
	ret.Kind, ret.By, ret.MAC = WitnessRetention, "20260301T130000.000000000Z-43-0123abcd", ""
	ret.sign(keys.priv)
	for _, seed := range []string{ev.Line(), "<30>Mar  1 12:00:05 fsbroker[42]: " + ev.Line(), ret.Line(),
		`{"msg":"` + ev.Line() + `"}`, "fsbroker-witness v2 checkpoint", "fsbroker-witness v1 checkpoint sig=" + strings.Repeat("0", 128)} {
		f.Add(seed)
	}
	pub := keys.priv.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, line string) {
		got, signed, err := parseWitnessLine([]byte(line))
		if err != nil {
			return
		}
		if string(signed) != got.signedText() {
			t.Fatalf("read %q, re-encoded %q", signed, got.signedText())
		}
		wl := NewWitnessLog(keys.verifyKeys())
		wl.addLine(witnessLoc{"fuzz", 1}, []byte(line))
		sig, _ := hex.DecodeString(got.Signature)
		if wl.stats.TrailLines == 1 && !ed25519.Verify(pub, []byte(got.signedText()), sig) {
			t.Fatalf("took a line whose signature does not verify: %q", line)
		}
	})
}
