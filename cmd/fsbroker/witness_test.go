// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// Tests of the audit witness with the real binary: brokers started with --audit-witness (a
// witness file, and syslog over a unix datagram socket that the test holds as the syslog
// daemon would), the attacks that cut a trail's end, and `fsbroker audit verify --witness`.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/syslogtest"
)

// witnessSession runs one broker session on state and trail with the extra arguments, makes a
// few requests, ends it cleanly and returns the segment it wrote.
func witnessSession(t *testing.T, state, trail, root string, extra ...string) string {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(trail, "*.jsonl"))
	args := append([]string{"stdio", "--root", root + ":rw", "--state-dir", state, "--audit", trail}, extra...)
	p := startBroker(t, "", args...)
	p.handshake("2025-11-25")
	// With --config (the second session), the root comes from --root, not
	// pre-approved: --consent auto (withConsent) answers the round.
	if r := p.Call("consent", "files/consent", map[string]any{"message": "m", "requestedPaths": []string{"proj"}, "access": "write"}); r.Error != nil || !strings.Contains(string(r.Result), `"granted":true`) {
		t.Fatalf("files/consent: %s", r.Raw)
	}
	for i := range 4 {
		if r := p.Call(i+1, "files/write", map[string]any{"path": fmt.Sprintf("proj/f%d.txt", i), "content": "x"}); r.Error != nil {
			t.Fatalf("write: %s", r.Raw)
		}
		if r := p.Call(100+i, "files/read", map[string]any{"path": fmt.Sprintf("proj/f%d.txt", i)}); r.Error != nil {
			t.Fatalf("read: %s", r.Raw)
		}
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("the session ended with exit status %d:\n%s", code, p.log())
	}
	after, _ := filepath.Glob(filepath.Join(trail, "*.jsonl"))
	var added []string
	for _, s := range after {
		if !slices.Contains(before, s) {
			added = append(added, s)
		}
	}
	if len(added) != 1 {
		t.Fatalf("the session added segments %q, want one", added)
	}
	return added[0]
}

// lastRecordSeq returns the seq of a segment's last record.
func lastRecordSeq(t *testing.T, path string) uint64 {
	t.Helper()
	lines := segmentLines(t, path)
	return lineRecord(t, lines[len(lines)-1]).Seq
}

// TestAuditWitnessCatchesACutTrail is issue 15 item 12 with the real binary: two broker
// sessions share a state directory, each sending its checkpoints to a witness file and to
// syslog (the first through flags, the second through its config file). Deleting the second
// broker's only segment with its checkpoint file, or cutting it short and deleting its
// checkpoint file, verifies clean on its own; `audit verify --witness` with either witness
// finds it, naming the segment, its broker process and how many records are missing.
func TestAuditWitnessCatchesACutTrail(t *testing.T) {
	t.Parallel()
	dir, state, trail, root := trailDirs(t)
	syslog := syslogtest.Listen(t, "unixgram")
	logDir := filepath.Join(dir, "log") // outside the state directory
	if err := os.Mkdir(logDir, 0o750); err != nil {
		t.Fatal(err)
	}
	witnessFile := filepath.Join(logDir, "witness.log")
	spec := syslog.Spec()
	first := witnessSession(t, state, trail, root, "--audit-witness", "file:"+witnessFile, "--audit-witness", spec)
	cfg := filepath.Join(logDir, "fsbroker.yaml")
	writeFile(t, cfg, fmt.Sprintf("audit:\n  witness: [\"file:witness.log\", %q]\n", spec)) // relative to the config file
	second := witnessSession(t, state, trail, root, "--config", cfg)
	if first == second {
		t.Fatal("one segment for two sessions")
	}
	syslog.WaitFor(t, "segment="+strings.TrimSuffix(filepath.Base(second), ".jsonl")+" ", fmt.Sprintf(" seq=%d ", lastRecordSeq(t, second)))
	syslogCopy := syslog.Save(t)
	witnesses := [][]string{{"--witness", witnessFile}, {"--witness", syslogCopy}}

	verify := func(t *testing.T, path string, extra ...string) (string, string, int) {
		t.Helper()
		return runFsbroker(t, nil, append([]string{"audit", "verify", "--state-dir", state, path}, extra...)...)
	}
	for _, w := range witnesses {
		out, errOut, code := verify(t, trail, w...)
		if code != 0 || !strings.Contains(out, "intact") || !strings.Contains(out, "2 of the 2 segment(s) the witness saw hold everything it saw") {
			t.Fatalf("the intact trail against %s: exit %d\n%s%s", w[1], code, out, errOut)
		}
	}

	id := strings.TrimSuffix(filepath.Base(second), ".jsonl")
	pid := strings.Split(id, "-")[1]
	lines := segmentLines(t, second)
	firstCkpt := slices.IndexFunc(lines, func(l []byte) bool { return lineRecord(t, l).Kind == audit.KindCheckpoint })
	for _, attack := range []struct {
		name    string
		cut     func(t *testing.T, seg string)
		kind    audit.ProblemKind
		missing uint64
	}{
		{"only segment deleted with its checkpoint", func(t *testing.T, seg string) {
			os.Remove(seg)
			os.Remove(seg + ".ckpt")
		}, audit.ProblemRemoved, lastRecordSeq(t, second) + 1},
		{"cut before its first checkpoint, checkpoint deleted", func(t *testing.T, seg string) {
			writeFile(t, seg, string(joinLines(lines[:firstCkpt])))
			os.Remove(seg + ".ckpt")
		}, audit.ProblemTruncated, lastRecordSeq(t, second) - lineRecord(t, lines[firstCkpt-1]).Seq},
	} {
		t.Run(attack.name, func(t *testing.T) {
			cp := copyTrailDir(t, trail)
			attack.cut(t, filepath.Join(cp, filepath.Base(second)))
			// What the trail alone says: intact.
			out, errOut, code := verify(t, cp)
			if code != 0 || !strings.Contains(out, "intact") {
				t.Fatalf("without a witness: exit %d\n%s%s", code, out, errOut)
			}
			for _, w := range witnesses {
				out, errOut, code := verify(t, cp, w...)
				want := []string{"NOT INTACT", id, fmt.Sprintf("at least %d records are missing", attack.missing), w[1] + ":"}
				if attack.kind == audit.ProblemRemoved {
					want = append(want, "broker process "+pid)
				}
				if code != 1 || slices.ContainsFunc(want, func(s string) bool { return !strings.Contains(out, s) }) {
					t.Fatalf("against %s: exit %d, want 1 and %q in\n%s%s", w[1], code, want, out, errOut)
				}
				out, _, code = verify(t, cp, append(w, "--json")...)
				var rep audit.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
					t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
				}
				if p := rep.Problem; rep.OK || p.Kind != attack.kind || p.Missing != attack.missing || !strings.HasPrefix(p.Witness, w[1]+":") ||
					rep.Witness == nil || rep.Witness.Confirmed != 1 {
					t.Fatalf("--json against %s: %s", w[1], out)
				}
			}
		})
	}

	t.Run("forged lines refused", func(t *testing.T) {
		// Someone with access to syslog (any local user can write to /dev/log) adds a line
		// saying retention deleted the second segment: its signature does not verify.
		data, err := os.ReadFile(witnessFile)
		if err != nil {
			t.Fatal(err)
		}
		var genuine string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "segment="+id+" ") {
				genuine = l
			}
		}
		fields := strings.Fields(genuine)
		forged := strings.Join([]string{fields[0], fields[1], "retention", fields[3], fields[4], fields[5], fields[6],
			"by=" + strings.TrimSuffix(filepath.Base(first), ".jsonl"), fields[7], fields[8], fields[9]}, " ")
		file := filepath.Join(t.TempDir(), "witness.log")
		writeFile(t, file, string(data)+"Mar  1 12:00:00 host logger: "+forged+"\n")
		cp := copyTrailDir(t, trail)
		os.Remove(filepath.Join(cp, filepath.Base(second)))
		os.Remove(filepath.Join(cp, filepath.Base(second)+".ckpt"))
		out, errOut, code := verify(t, cp, "--witness", file)
		if code != 1 || !strings.Contains(out, "removed") || !strings.Contains(out, "1 line(s) refused") || !strings.Contains(out, "forged") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})
}

// TestAuditWitnessDownDoesNotFailRequests: a syslog witness whose daemon is not there (no
// socket) neither stops the broker from starting nor fails a request; the failure is logged.
func TestAuditWitnessDownDoesNotFailRequests(t *testing.T) {
	t.Parallel()
	dir, state, trail, root := trailDirs(t)
	p := startBroker(t, "", "stdio", "--root", root+":rw", "--state-dir", state, "--audit", trail,
		"--audit-witness", "syslog:unixgram://"+filepath.Join(dir, "no-daemon.sock"))
	p.handshake("2025-11-25")
	for i := range 20 {
		if r := p.Call(i+1, "files/write", map[string]any{"path": fmt.Sprintf("proj/f%d.txt", i), "content": "x"}); r.Error != nil {
			t.Fatalf("write with the witness down: %s", r.Raw)
		}
	}
	p.waitLogCount("audit witness unreachable", 1)
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d:\n%s", code, p.log())
	}
	if n := p.countLog("audit witness unreachable"); n != 1 {
		t.Errorf("the outage was logged %d times as a warning:\n%s", n, p.log())
	}
	if !strings.Contains(p.log(), "statements not delivered before the trail was closed") {
		t.Errorf("the undelivered statements at exit are not logged:\n%s", p.log())
	}
	if rep, err := audit.Verify(trail, trailKeys(t, state, trail)); err != nil || !rep.OK {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestAuditWitnessPlacesRefused: a witness file where whatever can change the trail can change
// it too (inside the state directory, the audit directory or a root, also through a
// symbolic link or a relative path in the config file), and a spec that does not parse, stop
// the broker at start with exit status 2 and a message naming both.
func TestAuditWitnessPlacesRefused(t *testing.T) {
	t.Parallel()
	dir, state, trail, root := trailDirs(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "looks-outside")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, cfg, "stateDir: state\naudit:\n  witness: [\"file:state/witness.log\"]\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--audit-witness", "file:" + filepath.Join(state, "witness.log")}, []string{"inside the state directory"}},
		{[]string{"--audit-witness", "file:" + filepath.Join(link, "witness.log")}, []string{"inside the state directory"}},
		{[]string{"--audit-witness", "file:" + filepath.Join(trail, "witness.log")}, []string{"inside the audit directory"}},
		{[]string{"--audit-witness", "file:" + filepath.Join(root, "witness.log")}, []string{"inside the root proj"}},
		{[]string{"--config", cfg}, []string{"inside the state directory", filepath.Join(state, "witness.log")}},
		{[]string{"--audit-witness", "syslog:http://example.com:80"}, []string{"--audit-witness", "syslog:udp://HOST:PORT"}},
		{[]string{"--audit-witness", "file:" + filepath.Join(dir, "missing", "witness.log")}, []string{"no such file or directory"}},
	} {
		args := append([]string{"stdio", "--root", root + ":rw", "--state-dir", state, "--audit", trail}, tc.args...)
		_, errOut, code := runFsbroker(t, nil, args...)
		if code != 2 || slices.ContainsFunc(tc.want, func(s string) bool { return !strings.Contains(errOut, s) }) {
			t.Errorf("%q: exit %d, want 2 and %q in:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "witness.log")); err == nil {
		t.Error("a refused witness file was created")
	}
}

// TestAuditVerifyWitnessFileUnreadable: a witness file that cannot be read stops verify with
// exit status 2 (the check could not run).
func TestAuditVerifyWitnessFileUnreadable(t *testing.T) {
	t.Parallel()
	_, state, trail, root := trailDirs(t)
	witnessSession(t, state, trail, root)
	_, errOut, code := runFsbroker(t, nil, "audit", "verify", "--state-dir", state, trail, "--witness", filepath.Join(trail, "nope.log"))
	if code != 2 || !strings.Contains(errOut, "--witness") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	out, errOut, code := runFsbroker(t, nil, "audit", "verify", "--state-dir", state, trail, "--witness", filepath.Join(trail, audit.PublicKeyFile))
	if code != 0 || !strings.Contains(out, "warning: the witness files hold no line of this trail") {
		t.Fatalf("a file without witness lines: exit %d\n%s%s", code, out, errOut)
	}
}
