// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/usage"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// testTrail is a real audit writer in a temporary directory, with the keys
// that verify it.
type testTrail struct {
	*audit.Writer
	keys audit.VerifyKeys
}

// openTrail opens a real audit writer in a temporary directory.
func openTrail(t *testing.T) *testTrail {
	t.Helper()
	w, keys := audittest.Open(t)
	return &testTrail{Writer: w, keys: keys}
}

// trailRecords reads every record of the trail's segments, in file order
// (one writer: one chain), without the writer's own headers and
// checkpoints. It also returns the raw bytes of every segment.
func trailRecords(t *testing.T, w *testTrail) ([]audit.Record, []byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(w.Dir(), "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("segments: %v %v", files, err)
	}
	var recs []audit.Record
	var raw []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b...)
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r audit.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v: %s", f, err, sc.Bytes())
			}
			if r.Kind != audit.KindSegmentStart && r.Kind != audit.KindCheckpoint {
				recs = append(recs, r)
			}
		}
	}
	return recs, raw
}

// byDecision returns the decision and the outcome record of a decision id.
func byDecision(recs []audit.Record, id string) (decision, outcome *audit.Record) {
	for i := range recs {
		if recs[i].DecisionID != id {
			continue
		}
		switch recs[i].Kind {
		case audit.KindDecision:
			decision = &recs[i]
		case audit.KindOutcome:
			outcome = &recs[i]
		}
	}
	return decision, outcome
}

// lastDecision is the newest decision record.
func lastDecision(t *testing.T, recs []audit.Record) audit.Record {
	t.Helper()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Kind == audit.KindDecision {
			return recs[i]
		}
	}
	t.Fatal("no decision record")
	return audit.Record{}
}

func TestAuditRecordsEveryDecisionAndOutcome(t *testing.T) {
	w := openTrail(t)
	f := startFiles(t, WithAudit(w.Writer, false))
	const marker = "MARKER-a8f3e-never-in-the-trail"

	// An allowed read: a decision and an outcome with the bytes read.
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	// An allowed write whose content must never reach the trail.
	f.call("files/write", map[string]any{"path": "rw/new.txt", "content": marker})
	// A refusal by the decision stage (read-only root): its id comes back.
	denied := f.mustFail("files/write", map[string]any{"path": "ro/a.txt", "content": marker}, -32002, "PERMISSION_DENIED")
	// Refusals before the decision: a path that escapes, bad params.
	invalid := f.mustFail("files/read", map[string]any{"path": "ro/../../etc/passwd"}, -32002, "PERMISSION_DENIED")
	badParams := f.mustFail("files/read", map[string]any{"path": "ro/a.txt", "bogus": 1}, -32602, "INVALID_PARAMS")
	// An allowed operation that fails.
	missing := f.mustFail("files/delete", map[string]any{"path": "rw/nope.txt"}, -32001, "FILE_NOT_FOUND")
	f.call("roots/list", nil)

	recs, raw := trailRecords(t, w)
	if bytes.Contains(raw, []byte(marker)) {
		t.Fatal("file content reached the audit trail")
	}
	if recs[0].Kind != audit.KindSessionStart || recs[0].ProtocolVersion != "2025-11-25" || recs[0].Transport != "stdio" {
		t.Errorf("first record = %+v, want the session start", recs[0])
	}

	var reads, writes int
	for _, r := range recs {
		if r.Kind != audit.KindDecision || r.Allow == nil || !*r.Allow {
			continue
		}
		d, o := byDecision(recs, r.DecisionID)
		if o == nil {
			t.Errorf("allowed decision %s (%s) has no outcome", r.DecisionID, r.Method)
			continue
		}
		if r.SessionID == "" || r.Server == "" {
			t.Errorf("decision %+v: no session or server", r)
		}
		switch d.Method {
		case "files/read":
			reads++
			want := filepath.Join(f.ro, "a.txt")
			if len(d.Paths) != 1 || d.Paths[0] != want || d.Operation != "read" || o.Outcome != "ok" || o.Bytes != int64(len("hello, wörld\n")) {
				t.Errorf("read: decision %+v outcome %+v; want path %s and the bytes read", d, o, want)
			}
		case "files/write":
			writes++
			if o.Outcome != "ok" || o.Bytes != int64(len(marker)) {
				t.Errorf("write outcome %+v", o)
			}
		}
	}
	if reads != 1 || writes != 1 {
		t.Errorf("allowed reads %d, writes %d; want 1 and 1", reads, writes)
	}

	for name, data := range map[string]map[string]any{"denied": denied, "invalid": invalid, "bad params": badParams, "missing": missing} {
		id, _ := data["decisionId"].(string)
		d, o := byDecision(recs, id)
		if id == "" || d == nil {
			t.Errorf("%s: data.decisionId %q names no decision record", name, data["decisionId"])
			continue
		}
		if name == "missing" {
			// Deleting what is not there is allowed, and fails.
			if !*d.Allow || o == nil || o.Outcome != "FILE_NOT_FOUND" {
				t.Errorf("missing: decision %+v, outcome %+v; want allowed, then FILE_NOT_FOUND", d, o)
			}
			continue
		}
		if *d.Allow || d.Code != data["code"] || o != nil {
			t.Errorf("%s: decision %+v, outcome %+v; want a refusal with code %v and no outcome", name, d, o, data["code"])
		}
	}
	if d, _ := byDecision(recs, denied["decisionId"].(string)); d.Reasons[0] != "the root is read-only" || len(d.Paths) != 1 {
		t.Errorf("denied: %+v", d)
	}
	if d, _ := byDecision(recs, invalid["decisionId"].(string)); !strings.Contains(d.Detail, `"ro/../../etc/passwd"`) {
		t.Errorf("invalid path refusal detail %q, want the path as written", d.Detail)
	}
	if last := lastDecision(t, recs); last.Method != "roots/list" || !*last.Allow {
		t.Errorf("last decision %+v, want roots/list allowed", last)
	}

	// The session end, and a trail that verifies.
	f.cancel()
	<-f.ran
	f.ran <- nil // for the fixture's cleanup
	recs, _ = trailRecords(t, w)
	if recs[len(recs)-1].Kind != audit.KindSessionEnd {
		t.Errorf("last record %+v, want the session end", recs[len(recs)-1])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(w.Dir(), w.keys)
	if err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func TestAuditRedactsPaths(t *testing.T) {
	w := openTrail(t)
	f := startFiles(t, WithAudit(w.Writer, true))
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	f.mustFail("files/read", map[string]any{"path": "ro/missing-secret-name.txt"}, -32001, "FILE_NOT_FOUND")
	recs, raw := trailRecords(t, w)
	if bytes.Contains(raw, []byte(f.ro)) || bytes.Contains(raw, []byte("missing-secret-name")) {
		t.Fatalf("a path reached the redacted trail:\n%s", raw)
	}
	var found bool
	for _, r := range recs {
		if r.Kind == audit.KindDecision && r.Method == "files/read" && len(r.Paths) == 1 {
			found = found || r.Paths[0] == w.PathDigest(filepath.Join(f.ro, "a.txt"))
		}
	}
	if !found {
		t.Error("no decision record holds the digest of ro/a.txt")
	}
}

// TestAuditFailsClosed: when the decision record cannot be written, the
// request is refused with IO_ERROR "audit unavailable" and nothing is
// touched; a refusal stays a refusal.
func TestAuditFailsClosed(t *testing.T) {
	w := openTrail(t)
	var log testlog.Lines
	f := startFiles(t, WithAudit(w.Writer, false), WithLogger(log.Logger()))
	if err := w.Close(); err != nil { // every Append fails from now on
		t.Fatal(err)
	}
	data := f.mustFail("files/write", map[string]any{"path": "rw/b.txt", "content": "x"}, -32004, "IO_ERROR")
	if data["reason"] != "audit unavailable" || data["decisionId"] == "" {
		t.Errorf("data = %v", data)
	}
	if _, err := os.Stat(filepath.Join(f.rw, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the file was written without its audit record: %v", err)
	}
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32004, "IO_ERROR")
	f.mustFail("files/write", map[string]any{"path": "ro/a.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	// The session goes on.
	f.call("ping", map[string]any{})
	// The session guarded the writer and logged the run of failures once, not
	// once per request.
	if n := log.Count("[ERROR]", "cannot write the audit record"); n != 1 {
		t.Errorf("%d error lines for the failures, want 1:\n%s", n, log.String())
	}
}

// auditTimeout is the audit timeout of the tests below: far longer than a
// healthy append to a temporary directory takes, short enough to wait out.
const auditTimeout = time.Second

// stalledTrail is a real trail behind a sink that holds the records a test
// picks (a disk that stopped answering), guarded with auditTimeout.
func stalledTrail(t *testing.T) (*testTrail, *audittest.Stall, *audit.Guarded, *testlog.Lines) {
	t.Helper()
	w := openTrail(t)
	stall, guard, log := audittest.Stalled(t, w.Writer, auditTimeout)
	return w, stall, guard, log
}

// TestAuditTimeoutRefusesTheRequest: a decision record the trail does not
// write within the audit timeout refuses its request with IO_ERROR "audit
// unavailable" while the trail still holds it, and nothing is touched; the
// requests behind it are refused at once; the failures are counted and logged
// once; when the trail answers again, so does the broker.
func TestAuditTimeoutRefusesTheRequest(t *testing.T) {
	w, stall, guard, log := stalledTrail(t)
	f := startFiles(t, WithAudit(guard, false))
	t.Cleanup(stall.Release) // before the session's end, which is recorded

	stall.Hold(audittest.Kind(audit.KindDecision))
	data := f.mustFail("files/write", map[string]any{"path": "rw/b.txt", "content": "x"}, -32004, "IO_ERROR")
	if data["reason"] != "audit unavailable" || data["decisionId"] == "" {
		t.Errorf("data = %v", data)
	}
	if stall.Held() != 1 {
		t.Fatalf("the trail held %d records, want the write's decision", stall.Held())
	}
	// The trail still holds the record (it is not released yet): the reply
	// did not wait for it.
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32004, "IO_ERROR")
	if stall.Held() != 1 {
		t.Errorf("the trail was given %d records, want none after the one it holds", stall.Held()-1)
	}
	if _, err := os.Stat(filepath.Join(f.rw, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the file was written without its audit record: %v", err)
	}
	if got := guard.Stats(); got.Failures != 2 || got.Timeouts != 2 || got.Stuck != 1 {
		t.Errorf("Stats = %+v, want 2 failures, both timeouts, 1 stuck", got)
	}
	if n := log.Count("[ERROR]", "cannot write the audit record"); n != 1 {
		t.Errorf("%d error lines for the failures, want 1:\n%s", n, log.String())
	}

	stall.Release()
	audittest.Settled(t, guard)
	if _, err := os.Stat(filepath.Join(f.rw, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write happened once the trail answered: %v", err)
	}
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	if n := log.Count("[INFO]", "audit trail written again", "failed_appends=2"); n != 1 {
		t.Errorf("%d lines for the end of the failures, want 1:\n%s", n, log.String())
	}
	recs, _ := trailRecords(t, w)
	if d := lastDecision(t, recs); d.Method != "files/read" || !*d.Allow {
		t.Errorf("last decision %+v, want the read allowed", d)
	}
	if _, o := byDecision(recs, data["decisionId"].(string)); o != nil {
		t.Errorf("the refused write has an outcome %+v", o)
	}
}

// TestAuditTimeoutBoundsTheOutcome: the outcome record is written after the
// operation, regardless of the request's cancellation, but no longer without
// a limit: one the trail does not write within the audit timeout is counted as
// failed and the reply goes out.
func TestAuditTimeoutBoundsTheOutcome(t *testing.T) {
	_, stall, guard, log := stalledTrail(t)
	f := startFiles(t, WithAudit(guard, false))
	t.Cleanup(stall.Release)

	stall.Hold(audittest.Kind(audit.KindOutcome))
	if res, code, data := f.call("files/write", map[string]any{"path": "rw/c.txt", "content": "y"}); res == nil {
		t.Fatalf("write: error %d %v, want a result: the operation happened", code, data)
	}
	if stall.Held() != 1 {
		t.Fatalf("the trail held %d records, want the write's outcome", stall.Held())
	}
	if b, err := os.ReadFile(filepath.Join(f.rw, "c.txt")); err != nil || string(b) != "y" {
		t.Errorf("c.txt = %q, %v; want the write done", b, err)
	}
	if got := guard.Stats(); got.Failures != 1 || got.Timeouts != 1 {
		t.Errorf("Stats = %+v, want the outcome's timeout counted", got)
	}
	if n := log.Count("[ERROR]", "cannot write the audit record", "kind=outcome"); n != 1 {
		t.Errorf("%d error lines for the lost outcome, want 1:\n%s", n, log.String())
	}
}

// usageDecider records the bytesWrittenToday of every write it allows.
type usageDecider struct {
	rootModeDecider
	mu   sync.Mutex
	seen []int64
}

func (d *usageDecider) Decide(ctx context.Context, in *decision.Input) decision.Verdict {
	if in.Operation == decision.OpWrite {
		d.mu.Lock()
		d.seen = append(d.seen, in.Usage.BytesWrittenToday)
		d.mu.Unlock()
	}
	return d.rootModeDecider.Decide(ctx, in)
}

// TestUsageIsSharedAcrossSessions: the bytes a server wrote in one session
// count in the next (a reconnect does not reset the daily quota), and a usage
// store that cannot be read refuses writes but not reads.
func TestUsageIsSharedAcrossSessions(t *testing.T) {
	st, err := usage.Open(filepath.Join(t.TempDir(), usage.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d1, d2 := &usageDecider{}, &usageDecider{}
	f1 := startFiles(t, WithUsage(st), WithDecider(d1))
	f1.call("files/write", map[string]any{"path": "rw/a.txt", "content": "12345"})
	f1.call("files/write", map[string]any{"path": "rw/b.txt", "content": "123"})
	f2 := startFiles(t, WithUsage(st), WithDecider(d2))
	f2.call("files/write", map[string]any{"path": "rw/c.txt", "content": "1"})
	if !slices.Equal(d1.seen, []int64{0, 5}) || !slices.Equal(d2.seen, []int64{8}) {
		t.Errorf("bytesWrittenToday seen by session 1 %v, session 2 %v; want [0 5] and [8]", d1.seen, d2.seen)
	}

	if err := os.WriteFile(st.Path(f2.sess.StateKey()), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := f2.mustFail("files/write", map[string]any{"path": "rw/d.txt", "content": "x"}, -32004, "IO_ERROR")
	if !strings.Contains(data["reason"].(string), "quota") {
		t.Errorf("reason %q", data["reason"])
	}
	if _, err := os.Stat(filepath.Join(f2.rw, "d.txt")); !os.IsNotExist(err) {
		t.Errorf("d.txt written while the quota could not be checked: %v", err)
	}
	f2.call("files/read", map[string]any{"path": "ro/a.txt"})
}
