// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// The audit commands are driven in-process through run(), on real trails that real writers
// wrote into t.TempDir().

// trail is a real audit trail: <state>/audit, written by two writers, its keys in <state>.
type trail struct {
	state, dir string
	key        []byte
	// secret is the path whose digest (under key) a decision record holds.
	secret string
}

// openWriter opens a writer on the trail with small segments, so that it rotates.
func (tr *trail) openWriter(t *testing.T) *audit.Writer {
	t.Helper()
	w, err := audit.Open(tr.dir, audit.WithStateDir(tr.state), audit.WithMaxSegmentBytes(1500),
		audit.WithCheckpointInterval(time.Hour), audit.WithCheckpointEvery(4))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeTrail writes the trail the tests read: two servers, each on its own writer, with a
// write, a denial, a read, a redacted path, and enough filler to rotate several segments.
func writeTrail(t *testing.T) *trail {
	t.Helper()
	state := t.TempDir()
	tr := &trail{state: state, dir: filepath.Join(state, "audit"), secret: "/secret/plan.txt"}
	w1, w2 := tr.openWriter(t), tr.openWriter(t)
	var err error
	if tr.key, err = audit.LoadKey(filepath.Join(state, audit.DefaultKeyFile)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	add := func(w *audit.Writer, r audit.Record) {
		t.Helper()
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	add(w1, audit.Record{Kind: audit.KindSessionStart, Server: "notes", SessionID: "s1", Transport: "stdio", ProtocolVersion: "2025-11-25"})
	add(w1, audit.Record{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: "d1", Method: "files/write",
		Operation: "write", Paths: []string{"/work/docs/a.md"}, Allow: audit.Bool(true), PolicyRevision: "rev-1", LatencyUs: 20})
	add(w1, audit.Record{Kind: audit.KindOutcome, Server: "notes", SessionID: "s1", DecisionID: "d1", Outcome: "ok", Bytes: 12, DurationUs: 90})
	add(w2, audit.Record{Kind: audit.KindSessionStart, Server: "indexer", SessionID: "s2", Transport: "child"})
	add(w2, audit.Record{Kind: audit.KindDecision, Server: "indexer", SessionID: "s2", DecisionID: "d2", Method: "files/read",
		Operation: "read", Paths: []string{"/etc/shadow"}, Allow: audit.Bool(false), Code: "PERMISSION_DENIED",
		Reasons: []string{"outside the roots"}, PolicyRevision: "rev-1", LatencyUs: 8})
	add(w1, audit.Record{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: "d3", Method: "files/read",
		Operation: "read", Paths: []string{"/work/docs/b.md"}, Allow: audit.Bool(true), PolicyRevision: "rev-1"})
	add(w1, audit.Record{Kind: audit.KindOutcome, Server: "notes", SessionID: "s1", DecisionID: "d3", Outcome: "ok", Bytes: 40})
	add(w2, audit.Record{Kind: audit.KindDecision, Server: "indexer", SessionID: "s2", DecisionID: "d4", Method: "files/list",
		Operation: "list", Paths: []string{audit.PathDigest(tr.key, tr.secret)}, Allow: audit.Bool(true)})
	for i := range 12 {
		w := w1
		if i%2 == 1 {
			w = w2
		}
		add(w, audit.Record{Kind: audit.KindConsent, Server: "filler", SessionID: "s9", Paths: []string{"/work/docs"},
			Detail: "granted for the session, record " + strings.Repeat("x", 40)})
	}
	add(w2, audit.Record{Kind: audit.KindSessionEnd, Server: "evil\x1b[2J\tname", SessionID: "s3"})
	for _, w := range []*audit.Writer{w1, w2} {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(tr.dir, "*.jsonl"))
	if len(segs) < 4 {
		t.Fatalf("%d segments: want rotations", len(segs))
	}
	return tr
}

// copyTrail copies the trail's directory, to damage the copy.
func (tr *trail) copy(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tr.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// runCmd runs one command line in-process.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// jsonRecords decodes JSON lines of records.
func jsonRecords(t *testing.T, out string) []audit.Record {
	t.Helper()
	var recs []audit.Record
	for line := range strings.Lines(out) {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a record line: %q: %v", line, err)
		}
		if r.Mac == "" {
			t.Errorf("the line lost its mac: %q", line)
		}
		recs = append(recs, r)
	}
	return recs
}

// findLine returns the segment file and 1-based line holding s.
func findLine(t *testing.T, dir, s string) (string, int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range segs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, s) {
				return f, i + 1
			}
		}
	}
	t.Fatalf("no segment holds %q", s)
	return "", 0
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	stateFlag := "--state-dir=" + tr.state

	out, errOut, code := runCmd(t, "audit", "verify", stateFlag)
	if code != 0 || !strings.Contains(out, "intact") || !strings.Contains(out, "record(s)") {
		t.Fatalf("verify of an intact trail: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "--checkpoint-pub") {
		t.Errorf("no note that the checkpoint key beside the log is only as safe as the log:\n%s", errOut)
	}
	out, _, code = runCmd(t, "audit", "verify", "--json", "--checkpoint-pub", filepath.Join(tr.dir, audit.PublicKeyFile), stateFlag, tr.dir)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || !rep.OK || rep.Segments < 4 || rep.Checkpoints == 0 {
		t.Fatalf("verify --json: exit %d, %+v (%v)\n%s", code, rep, err, out)
	}
	// One segment file verifies on its own.
	segs, _ := filepath.Glob(filepath.Join(tr.dir, "*.jsonl"))
	if out, errOut, code := runCmd(t, "audit", "verify", "--key", filepath.Join(tr.state, audit.DefaultKeyFile), segs[0]); code != 0 {
		t.Errorf("verify of one segment: exit %d\n%s%s", code, out, errOut)
	}

	t.Run("a flipped byte", func(t *testing.T) {
		t.Parallel()
		dir := tr.copy(t)
		file, line := findLine(t, dir, `"decisionId":"d2"`)
		b, _ := os.ReadFile(file)
		b = bytes.Replace(b, []byte("/etc/shadow"), []byte("/etc/shadoW"), 1)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCmd(t, "audit", "verify", stateFlag, dir)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"NOT INTACT", "tampering", file + ":" + strconv.Itoa(line) + ":", "edited"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("a torn tail", func(t *testing.T) {
		t.Parallel()
		dir := tr.copy(t)
		// The newest segment of a writer: one that no other segment follows.
		followed := map[string]bool{}
		for rec, err := range audit.Records(context.Background(), dir, audit.Filter{Kind: audit.KindSegmentStart}) {
			if err != nil {
				t.Fatal(err)
			}
			followed[rec.PrevSegment] = true
		}
		var last string
		segs, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		for _, s := range segs {
			if !followed[strings.TrimSuffix(filepath.Base(s), ".jsonl")] {
				last = s
			}
		}
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(`{"v":1,"seq":99,"time":"2026-`); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, errOut, code := runCmd(t, "audit", "verify", stateFlag, dir)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"TORN TAIL", "crash", "Not tampering", last + ":"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "NOT INTACT") {
			t.Errorf("a torn tail is reported as tampering:\n%s", out)
		}
	})

	t.Run("cannot run", func(t *testing.T) {
		t.Parallel()
		empty := t.TempDir()
		otherKey := filepath.Join(empty, "other.key")
		if err := os.WriteFile(otherKey, bytes.Repeat([]byte{7}, audit.KeySize), 0o600); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"--state-dir", empty, tr.dir}, 2, "no audit key"},
			{[]string{stateFlag, filepath.Join(empty, "nothing")}, 2, "no such file"},
			{[]string{stateFlag, "--checkpoint-pub", filepath.Join(empty, "none.pub"), tr.dir}, 2, "--checkpoint-pub"},
			{[]string{stateFlag, "--frobnicate"}, 2, "frobnicate"},
			{[]string{stateFlag, tr.dir, tr.dir}, 2, "at most one"},
			// A key that is not the trail's: every segment is under an unknown key. That is a
			// usage error naming both key ids, never a report of tampering.
			{[]string{"--key", otherKey, tr.dir}, 2, "is under audit key " + audit.MACKeyID(tr.key) +
				", but the key given (--key " + otherKey + ") has id " + audit.MACKeyID(bytes.Repeat([]byte{7}, audit.KeySize))},
			{[]string{"--state-dir", t.TempDir(), "--key", otherKey, tr.dir}, 2, "--state-dir DIR (its state directory"},
			// Without --state-dir or --key, the key is looked for where the broker that wrote the
			// trail kept it: the state directory that holds the audit directory.
			{[]string{tr.dir}, 0, "intact"},
			// The key from before a "rotation" makes it verify.
			{[]string{"--key", otherKey, "--old-key", filepath.Join(tr.state, audit.DefaultKeyFile), tr.dir}, 0, "intact"},
			{[]string{stateFlag, empty}, 2, "no checkpoint public key"},
			{[]string{stateFlag, "--checkpoint-pub", filepath.Join(tr.dir, audit.PublicKeyFile), empty}, 1, "nothing was verified"},
		}
		for _, c := range cases {
			out, errOut, code := runCmd(t, append([]string{"audit", "verify"}, c.args...)...)
			if code != c.code || !strings.Contains(out+errOut, c.want) {
				t.Errorf("verify %v: exit %d (want %d), output lacks %q?\n%s%s", c.args, code, c.code, c.want, out, errOut)
			}
			if strings.Contains(c.want, "audit key") && strings.Contains(out+errOut, "tampering") {
				t.Errorf("verify %v: a key that is not the trail's is reported as tampering:\n%s%s", c.args, out, errOut)
			}
		}
	})
}

// TestAuditConfigLocatesTheTrail: --config FILE gives the state directory and the trail's
// directory (relative to the file's directory) where no flag does; --state-dir, --audit and
// PATH win over it; and a config file the broker would refuse is refused.
func TestAuditConfigLocatesTheTrail(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	confDir := t.TempDir()
	rel, err := filepath.Rel(confDir, tr.state)
	if err != nil {
		t.Fatal(err)
	}
	config := func(name, content string) string {
		t.Helper()
		p := filepath.Join(confDir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Only stateDir: the trail is <stateDir>/audit, as the broker writes it.
	stateOnly := config("state.yaml", "version: 1\nstateDir: "+rel+"\n")
	// A damaged copy of the trail, named by audit.dir.
	damaged := tr.copy(t)
	file, _ := findLine(t, damaged, `"decisionId":"d2"`)
	b, _ := os.ReadFile(file)
	if err := os.WriteFile(file, bytes.Replace(b, []byte("/etc/shadow"), []byte("/etc/passwd"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	relDamaged, err := filepath.Rel(confDir, damaged)
	if err != nil {
		t.Fatal(err)
	}
	withDir := config("dir.yaml", "stateDir: "+rel+"\naudit:\n  dir: "+relDamaged+"\n  sync: always\n")
	empty := t.TempDir()

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"stateDir", []string{"verify", "--config", stateOnly}, 0, tr.dir + ": intact"},
		{"audit.dir", []string{"verify", "--config", withDir}, 1, file + ":"},
		{"--audit wins", []string{"verify", "--config", withDir, "--audit", tr.dir}, 0, tr.dir + ": intact"},
		{"PATH wins", []string{"verify", "--config", withDir, tr.dir}, 0, tr.dir + ": intact"},
		{"--state-dir wins", []string{"verify", "--config", stateOnly, "--state-dir", empty}, 2, filepath.Join(empty, "audit")},
		{"--state-dir wins for the key", []string{"verify", "--config", withDir, "--state-dir", empty}, 2, "no audit key"},
		{"--key wins", []string{"verify", "--config", withDir, "--key", filepath.Join(empty, "none.key")}, 2, "--key"},
		{"query", []string{"query", "--config", stateOnly, "--decision", "deny", "--format", "json"}, 0, `"decisionId":"d2"`},
		{"tail", []string{"tail", "--config", withDir, "-n", "1", "--decision", "deny", "--format", "json"}, 0, "/etc/passwd"},
		{"export", []string{"export", "--config", stateOnly, "--decision", "deny"}, 0, `"decision_id":"d2"`},
		{"hash", []string{"hash", "--config", stateOnly, tr.secret}, 0, audit.PathDigest(tr.key, tr.secret)},
		{"missing file", []string{"verify", "--config", filepath.Join(empty, "none.yaml")}, 2, "--config"},
		{"a setting the broker refuses", []string{"query", "--config", config("bad.yaml", "stateDir: "+rel+"\naudit:\n  dirr: x\n")}, 2, "dirr"},
		{"not YAML", []string{"hash", "--config", config("garbage.yaml", "stateDir: [\n"), "/a"}, 2, "garbage.yaml"},
	}
	for _, c := range cases {
		out, errOut, code := runCmd(t, append([]string{"audit"}, c.args...)...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%s: audit %v: exit %d (want %d), output lacks %q?\n%s%s", c.name, c.args, code, c.code, c.want, out, errOut)
		}
	}
}

// TestAuditKeyFromEnvironment: $FSBROKER_AUDIT_KEY stands in for the key file (not parallel:
// it sets the environment).
func TestAuditKeyFromEnvironment(t *testing.T) {
	tr := writeTrail(t)
	empty := t.TempDir()
	t.Setenv(auditKeyEnv, hex.EncodeToString(tr.key))
	if out, errOut, code := runCmd(t, "audit", "verify", "--state-dir", empty, tr.dir); code != 0 {
		t.Errorf("verify with the key in the environment: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code := runCmd(t, "audit", "hash", "--state-dir", empty, "/a/b")
	if code != 0 || strings.TrimSpace(out) != audit.PathDigest(tr.key, "/a/b") {
		t.Errorf("hash with the key in the environment: exit %d, %q", code, out)
	}
	t.Setenv(auditKeyEnv, "abcd")
	if _, errOut, code := runCmd(t, "audit", "verify", "--state-dir", empty, tr.dir); code != 2 || !strings.Contains(errOut, auditKeyEnv) {
		t.Errorf("a malformed key in the environment: exit %d\n%s", code, errOut)
	}
}

func TestAuditQuery(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	digest := audit.PathDigest(tr.key, tr.secret)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name string
		args []string
		want []string // "kind:decisionId" of each record, in order; nil for none
	}{
		{"what notes wrote yesterday", []string{"--server", "notes", "--method", "files/write", "--since", "24h"}, []string{"decision:d1"}},
		{"every denial", []string{"--decision", "deny"}, []string{"decision:d2"}},
		{"allowed decisions", []string{"--decision", "allow", "--server", "indexer"}, []string{"decision:d4"}},
		{"server", []string{"--server", "indexer", "--kind", "decision"}, []string{"decision:d2", "decision:d4"}},
		{"method", []string{"--method", "files/read"}, []string{"decision:d2", "decision:d3"}},
		{"kind", []string{"--kind", "outcome"}, []string{"outcome:d1", "outcome:d3"}},
		{"code of a decision", []string{"--code", "PERMISSION_DENIED"}, []string{"decision:d2"}},
		{"code of an outcome", []string{"--code", "ok"}, []string{"outcome:d1", "outcome:d3"}},
		{"path prefix", []string{"--path", "/work/docs", "--kind", "decision"}, []string{"decision:d1", "decision:d3"}},
		{"path prefix at a segment boundary only", []string{"--path", "/work/doc"}, nil},
		{"path digest", []string{"--path-digest", digest}, []string{"decision:d4"}},
		{"session", []string{"--session", "s1"}, []string{"session_start:", "decision:d1", "outcome:d1", "decision:d3", "outcome:d3"}},
		{"decision id", []string{"--decision-id", "d1"}, []string{"decision:d1", "outcome:d1"}},
		{"until excludes everything after", []string{"--until", "24h"}, nil},
		{"since in the future", []string{"--since", future}, nil},
		{"until in the future", []string{"--until", future, "--decision", "deny"}, []string{"decision:d2"}},
		{"limit", []string{"--kind", "decision", "--limit", "2"}, []string{"decision:d1", "decision:d2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"audit", "query", "--format", "json", "--state-dir", tr.state}, c.args...)
			out, errOut, code := runCmd(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, errOut)
			}
			var got []string
			for _, r := range jsonRecords(t, out) {
				got = append(got, string(r.Kind)+":"+r.DecisionID)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("records %v, want %v", got, c.want)
			}
			if len(c.want) == 0 && !strings.Contains(errOut, "no records match") {
				t.Errorf("nothing matched, and stderr does not say so: %q", errOut)
			}
		})
	}

	t.Run("json lines are the trail's lines", func(t *testing.T) {
		out, _, _ := runCmd(t, "audit", "query", "--format", "json", "--decision-id", "d2", "--audit", tr.dir)
		file, line := findLine(t, tr.dir, `"decisionId":"d2"`)
		b, _ := os.ReadFile(file)
		if want := strings.Split(string(b), "\n")[line-1] + "\n"; out != want {
			t.Errorf("json output %q, want the line %q", out, want)
		}
	})

	t.Run("table", func(t *testing.T) {
		// Flags may follow PATH.
		out, errOut, code := runCmd(t, "audit", "query", tr.dir, "--session", "s2")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		lines := slices.Collect(strings.Lines(out))
		if len(lines) != 4 { // header, session_start, d2, d4
			t.Fatalf("%d lines, want a header and 3 rows:\n%s", len(lines), out)
		}
		header := lines[0]
		for _, col := range []string{"TIME", "KIND", "SERVER", "METHOD", "RESULT", "CODE", "PATHS", "REASONS"} {
			if !strings.Contains(header, col) {
				t.Errorf("the header lacks %s: %q", col, header)
			}
		}
		for _, col := range []string{"SERVER", "RESULT", "PATHS"} {
			at := strings.Index(header, col)
			for _, l := range lines[1:] {
				if len(l) <= at || l[at-1] != ' ' || l[at] == ' ' {
					t.Errorf("column %s is not aligned in %q", col, l)
				}
			}
		}
		deny := lines[2]
		for _, want := range []string{"indexer", "files/read", "deny", "PERMISSION_DENIED", "/etc/shadow", "outside the roots"} {
			if !strings.Contains(deny, want) {
				t.Errorf("the denial's row lacks %q: %q", want, deny)
			}
		}
		// A hostile server name reaches the terminal escaped, not as control characters.
		out, _, _ = runCmd(t, "audit", "query", tr.dir, "--session", "s3")
		if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, `"evil\x1b[2J\tname"`) {
			t.Errorf("the server name is not escaped:\n%q", out)
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"--decision", "maybe"},
			{"--format", "xml"},
			{"--since", "yesterday"},
			{"--since", "-3h"},
			{"--since", "1h", "--until", "2h"},
			{"--kind", "decisions"},
			{"--path-digest", "sha256:00"},
			{"--limit", "-1"},
			{filepath.Join(tr.dir, "missing")},
		} {
			_, errOut, code := runCmd(t, append([]string{"audit", "query", "--state-dir", tr.state}, args...)...)
			if code != 2 || errOut == "" {
				t.Errorf("query %v: exit %d, want 2 with a message; stderr %q", args, code, errOut)
			}
		}
	})

	t.Run("a line that is not a record", func(t *testing.T) {
		dir := tr.copy(t)
		file, _ := findLine(t, dir, `"decisionId":"d2"`)
		b, _ := os.ReadFile(file)
		b = bytes.Replace(b, []byte(`"decisionId":"d2"`), []byte(`"decisionId":d2"`), 1)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCmd(t, "audit", "query", "--format", "json", "--kind", "decision", dir)
		if code != 1 || !strings.Contains(errOut, "audit verify") || len(jsonRecords(t, out)) != 3 {
			t.Errorf("exit %d, stderr %q, output:\n%s", code, errOut, out)
		}
	})
}

func TestAuditTail(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	all, _, _ := runCmd(t, "audit", "query", "--format", "json", tr.dir)
	allLines := slices.Collect(strings.Lines(all))

	out, errOut, code := runCmd(t, "audit", "tail", "-n", "3", "--format", "json", tr.dir)
	if code != 0 || !slices.Equal(slices.Collect(strings.Lines(out)), allLines[len(allLines)-3:]) {
		t.Fatalf("tail -n 3: exit %d, got\n%s\nwant the last 3 of\n%s%s", code, out, all, errOut)
	}
	out, _, _ = runCmd(t, "audit", "tail", tr.dir) // default: 10, as a table
	if n := len(slices.Collect(strings.Lines(out))); n != 11 {
		t.Errorf("tail: %d lines, want a header and 10 rows:\n%s", n, out)
	}
	out, _, _ = runCmd(t, "audit", "tail", "-n", "1", "--decision", "deny", "--format", "json", tr.dir)
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0].DecisionID != "d2" {
		t.Errorf("tail with a filter: %s", out)
	}
	if _, _, code := runCmd(t, "audit", "tail", "-n", "-2", tr.dir); code != 2 {
		t.Errorf("tail -n -2: exit %d, want 2", code)
	}

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr testlog.Lines
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"audit", "tail", "-f", "-n", "1", "--format", "json", tr.dir}, strings.NewReader(""), &stdout, &stderr)
		}()
		waitFor := func(what string, ok func(string) bool) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for !ok(stdout.String()) {
				select {
				case code := <-done:
					t.Fatalf("tail -f exited (%d) while waiting for %s\n%s%s", code, what, stdout.String(), stderr.String())
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %s from tail -f within 10s:\n%s%s", what, stdout.String(), stderr.String())
				}
			}
		}
		waitFor("last record", func(s string) bool { return strings.Count(s, "\n") == 1 })

		// A new writer starts a new segment file; its second record lands in the same file.
		w := tr.openWriter(t)
		defer w.Close()
		for _, id := range []string{"late-1", "late-2"} {
			if _, err := w.Append(context.Background(), audit.Record{Kind: audit.KindDecision, Server: "late", DecisionID: id,
				Method: "files/read", Allow: audit.Bool(true)}); err != nil {
				t.Fatal(err)
			}
			waitFor(id, func(s string) bool { return strings.Contains(s, `"decisionId":"`+id+`"`) })
		}
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("tail -f stopped with exit %d, want 0\n%s", code, stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("tail -f did not stop when its context ended")
		}
		recs := jsonRecords(t, stdout.String())
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.DecisionID)
		}
		if len(recs) != 3 || ids[1] != "late-1" || ids[2] != "late-2" {
			t.Errorf("tail -f printed %v, want the last record then late-1 and late-2, each once", ids)
		}
	})
}

func TestAuditExport(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	out, errOut, code := runCmd(t, "audit", "export", "--format", "opa", tr.dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	type event struct {
		DecisionID  string            `json:"decision_id"`
		Labels      map[string]string `json:"labels"`
		Path        string            `json:"path"`
		RequestedBy string            `json:"requested_by"`
		Timestamp   time.Time         `json:"timestamp"`
		Bundles     map[string]struct {
			Revision string `json:"revision"`
		} `json:"bundles"`
		Input struct {
			Method string   `json:"method"`
			Paths  []string `json:"paths"`
			Server struct {
				ID string `json:"id"`
			} `json:"server"`
		} `json:"input"`
		Result struct {
			Allow   bool     `json:"allow"`
			Code    string   `json:"code"`
			Reasons []string `json:"reasons"`
		} `json:"result"`
		Metrics map[string]int64 `json:"metrics"`
		Custom  struct {
			Outcome *struct {
				Outcome string `json:"outcome"`
				Bytes   int64  `json:"bytes"`
			} `json:"outcome"`
		} `json:"custom"`
	}
	var evs []event
	for line := range strings.Lines(out) {
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.DecisionID)
		if ev.Labels["app"] != "fsbroker" || ev.Labels["id"] == "" || ev.Path != "fsbroker/authz/decision" ||
			ev.RequestedBy != "fsbroker" || ev.Timestamp.IsZero() {
			t.Errorf("event %s: %+v", ev.DecisionID, ev)
		}
	}
	if !slices.Equal(ids, []string{"d1", "d2", "d3", "d4"}) {
		t.Fatalf("events %v, want d1..d4", ids)
	}
	d1, d2 := evs[0], evs[1]
	if d1.Custom.Outcome == nil || d1.Custom.Outcome.Outcome != "ok" || d1.Custom.Outcome.Bytes != 12 ||
		d1.Input.Method != "files/write" || !d1.Result.Allow || d1.Bundles["fsbroker"].Revision != "rev-1" ||
		d1.Metrics["timer_rego_query_eval_ns"] != 20000 {
		t.Errorf("d1: %+v", d1)
	}
	if d2.Result.Allow || d2.Result.Code != "PERMISSION_DENIED" || !slices.Equal(d2.Result.Reasons, []string{"outside the roots"}) ||
		d2.Input.Server.ID != "indexer" || !slices.Equal(d2.Input.Paths, []string{"/etc/shadow"}) || d2.Custom.Outcome != nil {
		t.Errorf("d2: %+v", d2)
	}
	if evs[0].Labels["id"] == evs[1].Labels["id"] {
		t.Errorf("decisions of two writers carry one labels.id %s", evs[0].Labels["id"])
	}

	out, _, code = runCmd(t, "audit", "export", "--state-dir", tr.state, "--decision", "deny")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"decision_id":"d2"`) {
		t.Errorf("export --decision deny: exit %d\n%s", code, out)
	}
	if _, _, code := runCmd(t, "audit", "export", "--format", "csv", tr.dir); code != 2 {
		t.Errorf("export --format csv: exit %d, want 2", code)
	}
}

func TestAuditHash(t *testing.T) {
	t.Parallel()
	tr := writeTrail(t)
	out, errOut, code := runCmd(t, "audit", "hash", "--state-dir", tr.state, tr.secret)
	digest := strings.TrimSpace(out)
	if code != 0 || digest != audit.PathDigest(tr.key, tr.secret) {
		t.Fatalf("hash: exit %d, %q, want %s\n%s", code, out, audit.PathDigest(tr.key, tr.secret), errOut)
	}
	out, _, code = runCmd(t, "audit", "query", "--format", "json", "--path-digest", digest, tr.dir)
	if recs := jsonRecords(t, out); code != 0 || len(recs) != 1 || recs[0].DecisionID != "d4" {
		t.Errorf("query --path-digest of the hash: exit %d\n%s", code, out)
	}

	// A relative path is made absolute against the working directory, and says so.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCmd(t, "audit", "hash", "--key", filepath.Join(tr.state, audit.DefaultKeyFile), "docs/a.md")
	abs := filepath.Join(wd, "docs", "a.md")
	if code != 0 || strings.TrimSpace(out) != audit.PathDigest(tr.key, abs) || !strings.Contains(errOut, abs) {
		t.Errorf("hash of a relative path: exit %d, %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{
		{"--state-dir", t.TempDir(), "/a"}, // no key there
		{"--state-dir", tr.state},          // no PATH
		{"--state-dir", tr.state, "/a", "/b"},
	} {
		if _, errOut, code := runCmd(t, append([]string{"audit", "hash"}, args...)...); code != 2 || errOut == "" {
			t.Errorf("hash %v: exit %d, want 2 with a message", args, code)
		}
	}
}

func TestAuditHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"help"}, 0, []string{"\n  audit ", " check and read the audit trail"}}, // the column's width follows the longest name
		{[]string{"help", "audit"}, 0, []string{"verify", "query", "tail", "export", "hash"}},
		{[]string{"audit", "--help"}, 0, []string{"verify", "query"}},
		{[]string{"help", "audit", "query"}, 0, []string{"does not verify", "audit verify", "-since", "-path-digest", "--since 24h", "--decision deny"}},
		{[]string{"help", "audit", "verify"}, 0, []string{"-key", "-old-key", "-checkpoint-pub", "FSBROKER_AUDIT_KEY", "torn", "-config"}},
		{[]string{"help", "audit", "hash"}, 0, []string{"-config", "-state-dir"}},
		{[]string{"help", "audit", "tail"}, 0, []string{"-n, --lines N", "-f, --follow"}},
		{[]string{"help", "audit", "export"}, 0, []string{"OPA", "-format"}},
		{[]string{"help", "audit", "hash"}, 0, []string{"canonical", "relative"}},
		{[]string{"audit", "query", "-h"}, 0, []string{"does not verify"}},
		{[]string{"audit"}, 2, []string{"export, hash, query, tail or verify"}},
		{[]string{"audit", "frobnicate"}, 2, []string{"unknown command"}},
		{[]string{"help", "audit", "frobnicate"}, 2, []string{"unknown command"}},
	}
	for _, c := range cases {
		out, errOut, code := runCmd(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, out, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%v: output lacks %q:\n%s%s", c.args, w, out, errOut)
			}
		}
	}
}
