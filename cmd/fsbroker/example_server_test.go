// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// The tests of the example server's raw, scripted mode (example-server
// -script demo, cmd/internal/exampleserver): a real MCP server process that
// sends files/* requests, served by a real fsbroker process, over stdio
// (fsbroker connect -- example-server ...) and over Streamable HTTP (fsbroker
// connect --url against example-server -http). The server's report (one line
// per request, with fsbroker's answer) shows each outcome; the audit trail
// must record the same decisions, verify, and hold no file content.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/cmd/internal/exampleserver"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// wantOutcome is what one request of a script should get: the request's
// method and target as the report shows them, ALLOWED, DENIED or FAILED, and a
// piece of the answer's description.
type wantOutcome struct {
	method, target, verdict, detail string
}

// demoOutcomes is what each request of the demo script gets from a broker
// serving project read-only and scratch writable, consent answered by auto,
// with a write limit of 1024 bytes. fsbroker demo pre-approves nothing, so
// the first read is refused for want of consent; the connect sessions of
// these tests pre-approve the roots in a config file (withConsent) instead,
// so that the first read is allowed and the README's write is refused by the
// read-only rule itself.
func demoOutcomes(project, scratch string, preapproved bool) []wantOutcome {
	firstRead := wantOutcome{"files/read", "project/src/main.go", "DENIED",
		"PERMISSION_DENIED: no consent grant covers path for read access"}
	readmeWrite := wantOutcome{"files/write", "project/README.md (5 bytes)", "DENIED",
		"PERMISSION_DENIED: no consent grant covers path for write access"}
	if preapproved {
		firstRead = wantOutcome{"files/read", "project/src/main.go", "ALLOWED", "29 bytes read"}
		readmeWrite.detail = `PERMISSION_DENIED: no rule allows this request; readonly: the root of path ("project") is read-only`
	}
	return []wantOutcome{
		{"roots/list", "", "ALLOWED", "roots: file://" + project + ", file://" + scratch},
		firstRead,
		{"files/consent", "read: project project/.env /etc", "ALLOWED", "approved: project; not approved: project/.env, /etc"},
		{"files/consent", "write: project/README.md scratch", "ALLOWED", "approved: scratch; not approved: project/README.md"},
		{"files/list", "project", "ALLOWED", "entries: project/README.md, project/src"},
		{"files/read", "project/src/main.go", "ALLOWED", "29 bytes read"},
		{"files/read", "project/.env", "DENIED", `PERMISSION_DENIED: secrets: path matches the protected name pattern ".env"`},
		readmeWrite,
		{"files/watch", "scratch", "ALLOWED", "watching"},
		{"files/write", "scratch/notes.md (8 bytes)", "ALLOWED", "written, now 8 bytes"},
		{"files/read", "project/../../etc/passwd", "DENIED", "PERMISSION_DENIED: the path climbs above its root"},
		{"files/write", "scratch/big.bin (2048 bytes)", "DENIED",
			"QUOTA_EXCEEDED: 2048 bytes is over the write limit of 1024 bytes per request"},
	}
}

// reportLine is one request line of the example server's report:
// "N. METHOD TARGET -> ALLOWED|DENIED|FAILED DETAIL", alone on its line or at the
// end of a log line (fsbroker connect logs the server's stderr).
var reportLine = regexp.MustCompile(`(?m)(?:^|\s)(\d+)\. (\S+) ?(.*?) +-> (ALLOWED|DENIED|FAILED) +(.*)$`)

// reportedEvent is the report's line for the change event of the write in
// scratch.
const reportedEvent = "notifications/files/changed: created scratch/notes.md"

// checkReport checks that the example server's report shows one line per
// request of the demo script, in order, each with the outcome in want, and
// the change event right after the write in scratch that caused it.
func checkReport(t *testing.T, report string, want []wantOutcome) {
	t.Helper()
	lines := reportLine.FindAllStringSubmatchIndex(report, -1)
	if len(lines) != len(want) {
		t.Errorf("the report has %d request lines, want %d:\n%s", len(lines), len(want), report)
	}
	eventAfter := -1 // the number of the request line the event follows
	eventAt := strings.Index(report, reportedEvent)
	for i, loc := range lines {
		sub := func(k int) string { return report[loc[2*k]:loc[2*k+1]] }
		n, _ := strconv.Atoi(sub(1))
		if eventAt > loc[1] {
			eventAfter = n
		}
		if i >= len(want) {
			continue
		}
		w := want[i]
		got := wantOutcome{sub(2), strings.TrimSpace(sub(3)), sub(4), sub(5)}
		if n != i+1 || got.method != w.method || got.target != w.target || got.verdict != w.verdict ||
			!strings.Contains(got.detail, w.detail) {
			t.Errorf("request %d: the report says %d. %s %s -> %s %s\nwant %s %s -> %s with %q",
				i+1, n, got.method, got.target, got.verdict, got.detail, w.method, w.target, w.verdict, w.detail)
		}
	}
	if eventAt < 0 {
		t.Errorf("the report lacks %q", reportedEvent)
	} else if eventAfter != 10 {
		t.Errorf("the change event follows request %d, want 10 (the write in scratch)", eventAfter)
	}
	if !strings.Contains(report, fmt.Sprintf("the script is done: %d requests", len(want))) {
		t.Errorf("the report does not say the script is done")
	}
}

// reportedServer returns the pid and executable the example server reports
// for itself.
func reportedServer(t *testing.T, report string) (int, string) {
	t.Helper()
	m := regexp.MustCompile(`example-server \(pid (\d+), ([^)]*)\): initialized over`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("the report does not say which process the server was:\n%s", report)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid, m[2]
}

// checkDemoTrail checks the audit trail that the demo script's session left
// in the broker's state directory state: it verifies; each decision the report showed is recorded, allowed or
// denied as shown; every session record names transport; and no file
// content reached it.
func checkDemoTrail(t *testing.T, state, project, scratch, transport string, preapproved bool) {
	t.Helper()
	want := []demoDecision{
		{"roots/list", "", true, ""},
		{"files/read", filepath.Join(project, "src/main.go"), preapproved, "PERMISSION_DENIED"},
		{"files/list", project, true, ""},
		{"files/read", filepath.Join(project, "src/main.go"), true, ""},
		{"files/read", filepath.Join(project, ".env"), false, "PERMISSION_DENIED"},
		{"files/write", filepath.Join(project, "README.md"), false, "PERMISSION_DENIED"},
		{"files/watch", scratch, true, ""},
		{"files/write", filepath.Join(scratch, "notes.md"), true, ""},
		{"files/read", `the path climbs above its root; path "project/../../etc/passwd"`, false, "PERMISSION_DENIED"},
		{"files/write", `2048 bytes is over the write limit of 1024 bytes per request; path "scratch/big.bin"`, false, "QUOTA_EXCEEDED"},
	}
	if preapproved {
		want[1].code = ""
	}
	dir := checkDemoDecisions(t, state, false, want)
	transports := trailTransports(t, dir)
	if len(transports) == 0 {
		t.Error("no audit record names a transport")
	}
	for _, tr := range transports {
		if tr != transport {
			t.Errorf("an audit record names the transport %q, want %q", tr, transport)
		}
	}
	checkTrailHoldsNoDemoContent(t, dir)
}

// demoDecision is a decision record of a demo session's trail, as the demo
// tests compare them: its method (or the fsbroker serve tool), its paths
// (or, when it has none, its detail and reasons), whether it allowed, and
// its code.
type demoDecision struct {
	method, path string
	allow        bool
	code         string
}

// checkDemoDecisions verifies the trail in state (one intact segment) and
// checks that each of want is among its decision records: the same method
// (the record's tool when byTool), allowed or not alike, the same code when
// want names one, and paths that contain want's. It returns the trail's
// directory.
func checkDemoDecisions(t *testing.T, state string, byTool bool, want []demoDecision) string {
	t.Helper()
	dir := filepath.Join(state, "audit")
	stdout, stderr, code := runFsbroker(t, nil, "audit", "verify", "--state-dir", state)
	if code != 0 || !strings.Contains(stdout, "intact: 1 segment(s)") {
		t.Errorf("audit verify: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var got []demoDecision
	for _, r := range trailDecisionRecords(t, dir) {
		path := strings.Join(r.Paths, " ")
		if len(r.Paths) == 0 {
			path = r.Detail + strings.Join(r.Reasons, " ")
		}
		method := r.Method
		if byTool {
			method = r.Tool
		}
		got = append(got, demoDecision{method, path, r.Allow != nil && *r.Allow, r.Code})
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g demoDecision) bool {
			return g.method == w.method && g.allow == w.allow && (w.code == "" || g.code == w.code) &&
				strings.Contains(g.path, w.path)
		}) {
			t.Errorf("the trail has no decision %+v; it has %+v", w, got)
		}
	}
	return dir
}

// checkTrailHoldsNoDemoContent fails the test when the content of a file
// the demo reads or writes (or tries to) is in a segment of the trail in dir.
func checkTrailHoldsNoDemoContent(t *testing.T, dir string) {
	t.Helper()
	segments, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range segments {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, content := range []string{"not-for-servers", "# Notes", "pwned", "func main"} {
			if strings.Contains(string(b), content) {
				t.Errorf("file content %q reached the trail %s", content, f)
			}
		}
	}
}

// checkDemoFiles checks what the demo script's writes left on disk: the
// write in scratch happened, the refused ones did not.
func checkDemoFiles(t *testing.T, project, scratch string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(project, "README.md")); err != nil || string(b) != exampleserver.DemoFiles["project/README.md"] {
		t.Errorf("README.md = %q, %v; want it untouched", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "notes.md")); err != nil || string(b) != "# Notes\n" {
		t.Errorf("scratch/notes.md = %q, %v; want the script's notes", b, err)
	}
	if _, err := os.Stat(filepath.Join(scratch, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("scratch/big.bin exists (%v); the oversized write was refused", err)
	}
}

// seedDemo makes the demo's workspace in a new directory and returns it,
// with its project and scratch roots (symlinks resolved, as roots/list shows
// them).
func seedDemo(t *testing.T) (dir, project, scratch string) {
	t.Helper()
	dir = realDir(t, t.TempDir())
	project, scratch, err := exampleserver.SeedDemo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, project, scratch
}

// The example server's demo script over stdio: fsbroker connect starts
// example-server -script demo as its child and serves its files/*
// requests. The server's report (its stderr, in fsbroker's log) shows every
// request allowed or denied as the roots, the consent and the built-in
// policies say; the server was a process of its own; the session ends when
// the script does, with status 0; the trail records the same decisions.
func TestExampleServerScriptOverStdio(t *testing.T) {
	t.Parallel()
	dir, project, scratch := seedDemo(t)
	state := filepath.Join(dir, "state")
	p := startBroker(t, "", "connect", "--root", project, "--root", scratch+":rw", "--state-dir", state,
		"--max-write-bytes", "1024", "--", serverBin, "-script", "demo")
	if code := p.waitExit(); code != 0 {
		t.Fatalf("fsbroker connect exited %d, want 0 (the server ends the session when its script is done)", code)
	}
	log := p.log()
	checkReport(t, log, demoOutcomes(project, scratch, true))
	pid, exe := reportedServer(t, log)
	if pid == p.cmd.Process.Pid || exe != serverBin {
		t.Errorf("the server ran as pid %d from %s; want a process of its own (fsbroker is %d) from %s",
			pid, exe, p.cmd.Process.Pid, serverBin)
	}
	checkDemoTrail(t, state, project, scratch, "stdio", true)
	checkDemoFiles(t, project, scratch)
}

// The example server's demo script over Streamable HTTP: example-server
// -script demo -http serves MCP by hand; fsbroker connect --url reaches it,
// answers the files/* requests the server sends on its event stream, and
// POSTs the answers. The report shows the same outcomes as over stdio; once
// fsbroker is stopped it ends the session (DELETE) and the server exits 0;
// the trail records the decisions under the transport http.
func TestExampleServerScriptOverHTTP(t *testing.T) {
	t.Parallel()
	dir, project, scratch := seedDemo(t)
	state := filepath.Join(dir, "state")
	cmd := exec.Command(serverBin, "-script", "demo", "-http", "127.0.0.1:0")
	serverErr := &testlog.Lines{}
	cmd.Stderr = serverErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("example server stderr:\n%s", serverErr.String())
		}
	})
	url := waitText(t, serverErr, regexp.MustCompile(`listening on (http://\S+)`))[1]

	p := startRemoteBroker(t, nil, "--root", project, "--root", scratch+":rw", "--state-dir", state,
		"--max-write-bytes", "1024", "--url", url)
	waitText(t, serverErr, regexp.MustCompile(`the script is done`))
	sigterm(t, p)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("the example server ended with %v, want status 0 once fsbroker ended the session", waitErr)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the example server still runs %s after fsbroker ended the session", waitLimit)
	}
	report := serverErr.String()
	if !strings.Contains(report, "initialized over Streamable HTTP") || !strings.Contains(report, "the client ended the session") {
		t.Errorf("the report does not show a Streamable HTTP session ended by the client:\n%s", report)
	}
	checkReport(t, report, demoOutcomes(project, scratch, true))
	checkDemoTrail(t, state, project, scratch, "http", true)
	checkDemoFiles(t, project, scratch)
}
