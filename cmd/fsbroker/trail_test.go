// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
)

// trailKeys loads the keys of the trail a broker wrote with --state-dir state
// and --audit dir.
func trailKeys(t *testing.T, state, dir string) audit.VerifyKeys {
	t.Helper()
	key, err := audit.LoadKey(filepath.Join(state, audit.DefaultKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := audit.LoadPublicKey(filepath.Join(dir, audit.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return audit.VerifyKeys{MAC: [][]byte{key}, Checkpoint: []ed25519.PublicKey{pub}}
}

// trailDirs makes a test's directory with an empty root proj and returns it,
// and the state directory, trail and root to run a broker with.
func trailDirs(t *testing.T) (dir, state, trail, root string) {
	t.Helper()
	dir = t.TempDir()
	state, trail, root = filepath.Join(dir, "state"), filepath.Join(dir, "trail"), filepath.Join(dir, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, state, trail, root
}

// trailDecisionRecords returns the decision records in the segments of dir.
func trailDecisionRecords(t *testing.T, dir string) []audit.Record {
	t.Helper()
	return trailRecordsOf(t, dir, audit.KindDecision)
}

// trailRecordsOf returns the records of kind in the segments of dir.
func trailRecordsOf(t *testing.T, dir string, kind audit.Kind) []audit.Record {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []audit.Record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var r audit.Record
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Kind == kind {
				out = append(out, r)
			}
		}
	}
	return out
}

// trailDecisions counts the decision records in the segments of dir.
func trailDecisions(t *testing.T, dir string) int {
	t.Helper()
	return len(trailDecisionRecords(t, dir))
}

// TestAuditFailsClosedOnAWriteFailure runs the broker under a file size
// limit (RLIMIT_FSIZE) of 600 bytes: a segment header fits, a header and a
// decision record do not, so every append of a decision record really fails
// (EFBIG, or a short write) while the broker, its keys and the files it is
// asked to write stay under the limit. Every request must be refused with
// "audit unavailable", nothing may be written, the failures are logged, the
// session goes on, and what reached the trail shows no tampering.
func TestAuditFailsClosedOnAWriteFailure(t *testing.T) {
	t.Parallel()
	_, state, trail, root := trailDirs(t)
	writeFile(t, filepath.Join(root, "old.txt"), "old content")
	p := startLimited(t, 600, "stdio", "--root", root+":rw", "--state-dir", state, "--audit", trail, "--audit-sync", "always")
	p.handshake("2025-11-25")

	for i := range 20 {
		name := fmt.Sprintf("f-%02d.txt", i)
		r := p.Call(i+1, "files/write", map[string]any{"path": "proj/" + name, "content": "new"})
		if r.Error == nil {
			t.Fatalf("write %d acknowledged although its decision record cannot be written", i)
		}
		d := dataOf(t, r)
		if d.Code != "IO_ERROR" || d.Reason != "audit unavailable" || d.DecisionID == "" {
			t.Fatalf("write %d: %s, want IO_ERROR audit unavailable with a decision id", i, r.Raw)
		}
		if _, err := os.Stat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Fatalf("write %d was refused but %s exists (%v)", i, name, err)
		}
	}
	for i, c := range []struct{ method, path string }{
		{"files/write", "proj/old.txt"}, {"files/delete", "proj/old.txt"}, {"files/rename", "proj/old.txt"},
	} {
		params := map[string]any{"path": c.path, "content": "overwritten"}
		if c.method == "files/rename" {
			params = map[string]any{"oldPath": c.path, "newPath": "proj/renamed.txt"}
		} else if c.method == "files/delete" {
			params = map[string]any{"path": c.path}
		}
		if r := p.Call(50+i, c.method, params); r.Error == nil || dataOf(t, r).Reason != "audit unavailable" {
			t.Fatalf("%s: %s, want audit unavailable", c.method, r.Raw)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "old.txt")); err != nil || string(b) != "old content" {
		t.Errorf("old.txt = %q, %v; want it untouched", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "renamed.txt")); !os.IsNotExist(err) {
		t.Errorf("renamed.txt exists: %v", err)
	}
	if p.countLog("cannot write the audit record") == 0 {
		t.Error("the audit failures were not logged")
	}
	if r := p.Call(100, "ping", nil); r.Error != nil {
		t.Errorf("ping: %s", r.Raw)
	}
	p.closeStdin()
	p.waitExit()

	rep, err := audit.Verify(trail, trailKeys(t, state, trail))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Problem != nil && rep.Problem.Kind.Tampering() {
		t.Errorf("the trail of a failing disk reads as tampered: %+v", rep)
	}
	if n := trailDecisions(t, trail); n != 0 {
		t.Errorf("%d decision records made it into segments that could not hold one", n)
	}
}

// TestAuditSurvivesSIGKILL kills a busy broker: the trail it leaves verifies
// up to, at most, a torn last line, and holds a decision record for every
// request that was answered.
func TestAuditSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	_, state, trail, root := trailDirs(t)
	writeFile(t, filepath.Join(root, "a.txt"), "hello")
	p := startBroker(t, "", "stdio", "--root", root+":rw", "--state-dir", state, "--audit", trail)
	p.handshake("2025-11-25")
	const n = 400
	for i := range n {
		method, params := "files/read", map[string]any{"path": "proj/a.txt"}
		if i%2 == 1 {
			method, params = "files/write", map[string]any{"path": fmt.Sprintf("proj/w-%d.txt", i%20), "content": "x"}
		}
		p.Send(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params})
	}
	// Kill it once some of the requests were answered.
	p.waitReplies(n / 4)
	answered := p.replies()
	p.signal(syscall.SIGKILL)
	p.waitExit()

	rep, err := audit.Verify(trail, trailKeys(t, state, trail))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Problem != nil && rep.Problem.Kind != audit.ProblemTorn {
		t.Fatalf("after SIGKILL: %+v, want intact or torn at the end", rep)
	}
	if got := trailDecisions(t, trail); got < answered {
		t.Errorf("%d decision records, but %d requests were answered", got, answered)
	}
	t.Logf("%d answered before SIGKILL; trail: %d records, problem %v", answered, rep.Records, rep.Problem)
}

// replies counts the replies the broker has sent so far.
func (p *proc) replies() int {
	n := 0
	for _, m := range p.All() {
		if m.Method == "" && len(m.ID) > 0 {
			n++
		}
	}
	return n
}

// waitReplies waits until the broker has sent at least n replies.
func (p *proc) waitReplies(n int) {
	p.t.Helper()
	p.WaitFor(fmt.Sprintf("%d replies", n), func([]*message) bool { return p.replies() >= n })
}

// TestServerIDIsPinned: --server-id replaces the declared name as the
// server's identity in the audit trail (and for grants, quotas and policy).
func TestServerIDIsPinned(t *testing.T) {
	t.Parallel()
	_, state, trail, root := trailDirs(t)
	writeFile(t, filepath.Join(root, "a.txt"), "hello")
	p := startBroker(t, "", "stdio", "--root", root, "--state-dir", state, "--audit", trail, "--server-id", "indexer-prod")
	p.handshake("2025-11-25")
	if r := p.Call(1, "files/read", map[string]any{"path": "proj/a.txt"}); r.Error != nil {
		t.Fatalf("read: %s", r.Raw)
	}
	p.closeStdin()
	p.waitExit()
	recs := trailDecisionRecords(t, trail)
	if len(recs) == 0 || recs[0].Server != "indexer-prod" {
		t.Errorf("decision records %+v, want the pinned indexer-prod's", recs)
	}
}

// TestSIGHUPReopensTheTrail: a log shipper moves the segment away and sends
// SIGHUP; the broker goes on in a new segment that continues the chain.
func TestSIGHUPReopensTheTrail(t *testing.T) {
	t.Parallel()
	dir, state, trail, root := trailDirs(t)
	writeFile(t, filepath.Join(root, "a.txt"), "hello")
	p := startBroker(t, "", "stdio", "--root", root, "--state-dir", state, "--audit", trail)
	p.handshake("2025-11-25")
	if r := p.Call(1, "files/read", map[string]any{"path": "proj/a.txt"}); r.Error != nil {
		t.Fatalf("read: %s", r.Raw)
	}
	before, _ := filepath.Glob(filepath.Join(trail, "*.jsonl"))
	if len(before) != 1 {
		t.Fatalf("segments before SIGHUP: %q", before)
	}
	shipped := filepath.Join(dir, "shipped")
	if err := os.Mkdir(shipped, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(before[0], filepath.Join(shipped, filepath.Base(before[0]))); err != nil {
		t.Fatal(err)
	}
	p.signal(syscall.SIGHUP)
	p.waitLog(regexp.MustCompile(`SIGHUP: audit trail reopened`))
	if r := p.Call(2, "files/read", map[string]any{"path": "proj/a.txt"}); r.Error != nil {
		t.Fatalf("read after SIGHUP: %s", r.Raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	after, _ := filepath.Glob(filepath.Join(trail, "*.jsonl"))
	if len(after) != 1 || after[0] == before[0] {
		t.Fatalf("segments after SIGHUP: %q, want one new segment", after)
	}
	if n := trailDecisions(t, trail); n != 1 {
		t.Errorf("%d decisions in the new segment, want the read after SIGHUP", n)
	}
	// Shipped and current segments together verify as one chain.
	if err := os.Rename(filepath.Join(shipped, filepath.Base(before[0])), before[0]); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(trail, trailKeys(t, state, trail))
	if err != nil || !rep.OK || rep.Segments != 2 {
		t.Errorf("Verify = %+v, %v; want both segments intact", rep, err)
	}
}
