// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// runDemoBinary runs `fsbroker demo args...` with the fsbroker at bin and
// returns its output, exit status and pid.
func runDemoBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code, pid int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"demo"}, args...)...)
	cmd.Env = brokerEnv()
	stdout, stderr, code = runExec(t, cmd)
	return stdout, stderr, code, cmd.Process.Pid
}

// aloneCopy puts a copy of the fsbroker binary (a hard link when it can) in
// a directory of its own, without an example-server beside it.
func aloneCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(realDir(t, t.TempDir()), "fsbroker")
	if os.Link(brokerBin, dst) == nil {
		return dst
	}
	src, err := os.Open(brokerBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestDemo runs `fsbroker demo` as the README's quick start does (make
// build puts example-server next to fsbroker), and as `go run ./cmd/fsbroker
// demo` does (fsbroker alone, which then starts itself as the server), and
// with --server. Each time the example server runs as a process of its own,
// from the expected executable, under the broker; its report shows one line
// per request: the roots listed, consent, a read allowed, a write refused in
// the read-only root, a .env read refused, a write in the writable root and
// its watch event, a `..` escape refused; then the audit table lists the
// session and the trail verifies; the secret's content appears nowhere.
func TestDemo(t *testing.T) {
	t.Parallel()
	alone := aloneCopy(t)
	for _, tc := range []struct {
		name       string
		bin        string
		args       []string
		wantServer []string // the server's command line, before "-script demo"
	}{
		{"example-server next to fsbroker", brokerBin, nil, []string{serverBin}},
		{"fsbroker alone runs itself as the server", alone, nil, []string{alone, exampleServerCommand}},
		{"--server", alone, []string{"--server", serverBin}, []string{serverBin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := realDir(t, t.TempDir())
			stdout, stderr, code, pid := runDemoBinary(t, tc.bin, append([]string{"--dir", dir}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			checkDemoWidth(t, stdout, stderr)
			stdout = unwrapDemo(stdout)
			project, scratch := filepath.Join(dir, "project"), filepath.Join(dir, "scratch")

			// The server: the command the demo says it started, with the pid it
			// says, is the process that reports itself, and it is not fsbroker.
			started := regexp.MustCompile(`server: (.*) -script demo, pid (\d+): a separate process`).FindStringSubmatch(stdout)
			if started == nil {
				t.Fatalf("the demo does not say which server it started:\n%s", stdout)
			}
			if got, want := started[1], strings.Join(tc.wantServer, " "); got != want {
				t.Errorf("the demo started %q, want %q", got, want)
			}
			startedPID, _ := strconv.Atoi(started[2])
			reportedPID, exe := reportedServer(t, stdout)
			if reportedPID != startedPID || reportedPID == pid || exe != tc.wantServer[0] {
				t.Errorf("the server reports pid %d and executable %s; want the started process %d (not fsbroker's %d) from %s",
					reportedPID, exe, startedPID, pid, tc.wantServer[0])
			}

			checkReport(t, stdout, demoOutcomes(project, scratch, false))
			for _, want := range []string{
				"session_start  -",
				"server example-server 1.0.0",
				"consent        files/consent  allow",
				"grant          files/consent  allow",
				"the path climbs above its root",
				"intact: 1 segment(s)",
				// A refused consent says why.
				"not approved: project/.env, /etc not approvable: /etc (the path is outside every root); " +
					`project/.env (secrets: path matches the protected name pattern ".env")`,
				`not approved: project/README.md not approvable: project/README.md (readonly: the root of path ("project") is read-only)`,
				"in " + dir + ": the directory you gave, kept",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("demo output lacks %q:\n%s", want, stdout)
				}
			}
			if regexp.MustCompile(`entries: [^\n]*\.env`).MatchString(stdout) {
				t.Errorf("the listing showed .env:\n%s", stdout)
			}
			checkDemoTrail(t, filepath.Join(dir, "state"), project, scratch, "stdio", false)
			checkDemoFiles(t, project, scratch)
			if t.Failed() {
				t.Logf("demo output:\n%s\n%s", stdout, stderr)
			}
		})
	}
}

// A --server that cannot be run is a usage error (exit 2) that names it,
// before anything is started.
func TestDemoBadServer(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-server")
	stdout, stderr, code := runFsbroker(t, nil, "demo", "--dir", t.TempDir(), "--server", missing+" -v")
	if code != 2 || !strings.Contains(stderr, "--server") || !strings.Contains(stderr, missing) {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --server %s", code, stderr, missing)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
}

// checkDemoWidth fails the test for every line of the demo's output wider
// than 100 columns.
func checkDemoWidth(t *testing.T, outputs ...string) {
	t.Helper()
	for _, out := range outputs {
		for i, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > demoWidth {
				t.Errorf("line %d is %d columns, more than %d: %q", i+1, n, demoWidth, line)
			}
		}
	}
}

// unwrapDemo joins the demo's continuation lines (indented 6 columns or
// more) to the lines they continue.
func unwrapDemo(out string) string {
	var b strings.Builder
	for i, line := range strings.Split(out, "\n") {
		if i > 0 {
			if strings.HasPrefix(line, "      ") && strings.TrimSpace(line) != "" {
				b.WriteString(" " + strings.TrimSpace(line))
				continue
			}
			b.WriteString("\n")
		}
		b.WriteString(line)
	}
	return b.String()
}

// TestDemoRemovesItsTemporaryDirectory: without --dir, the demo (and the
// demo --serve) works in a new temporary directory (under TMPDIR), says so,
// and removes it at the end; every line it prints fits in 100 columns, with
// the long paths of a deep TMPDIR too.
func TestDemoRemovesItsTemporaryDirectory(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"demo"}, {"demo", "--serve"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			tmp := filepath.Join(realDir(t, t.TempDir()), strings.Repeat("deep-directory-", 6))
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(brokerBin, args...)
			cmd.Env = append(brokerEnv(), "TMPDIR="+tmp)
			stdout, stderr, code := runExec(t, cmd)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			checkDemoWidth(t, stdout, stderr)
			// The path is longer than a line: compare without the breaks.
			compact := strings.Join(strings.Fields(stdout), "")
			if !regexp.MustCompile(`in` + regexp.QuoteMeta(tmp) + `/fsbroker-demo-\d+:atemporarydirectory,removedattheend`).MatchString(compact) {
				t.Fatalf("the demo does not say it works in a temporary directory under %s:\n%s", tmp, stdout)
			}
			if !strings.Contains(unwrapDemo(stdout), "intact: 1 segment(s)") {
				t.Errorf("the demo did not run to its end:\n%s", stdout)
			}
			if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
				t.Errorf("the demo left %v in TMPDIR (%v)", entries, err)
			}
		})
	}
}

// demoServeOutcomes is what each tool call of `fsbroker demo --serve` gets
// from fsbroker serve (project read-only, scratch writable, consent auto, a
// write limit of 1024 bytes): the same allowed and refused requests as the
// example server's demo script. The write in the read-only root is refused
// with PERMISSION_DENIED, by the read-only rule or for want of a grant the
// policy would not let be given.
func demoServeOutcomes(project, scratch string) []wantOutcome {
	return []wantOutcome{
		{"list_allowed_directories", "", "ALLOWED", "Allowed directories: " + project + ", " + scratch},
		{"list_directory", "project", "ALLOWED", "[FILE] README.md, [DIR] src"},
		{"read_text_file", "project/src/main.go", "ALLOWED", `29 bytes: "package main\n\nfunc main() {}\n"`},
		{"read_text_file", "project/.env", "DENIED", `PERMISSION_DENIED: secrets: path matches the protected name pattern ".env"`},
		{"write_file", "project/README.md (5 bytes)", "DENIED", "PERMISSION_DENIED: "},
		{"write_file", "scratch/notes.md (8 bytes)", "ALLOWED", "Successfully wrote to scratch/notes.md"},
		{"read_text_file", "project/../../etc/passwd", "DENIED", "PERMISSION_DENIED: the path climbs above its root"},
		{"write_file", "scratch/big.bin (2048 bytes)", "DENIED",
			"QUOTA_EXCEEDED: 2048 bytes is over the write limit of 1024 bytes per request"},
	}
}

// TestDemoServe runs `fsbroker demo --serve`: fsbroker serve runs as a
// process of its own (this binary, not the demo's process), and the demo's
// host calls its tools, one line per call with its verdict and the result or
// refusal text: the roots, a listing without the secret, a read allowed, the
// secret refused, a write refused in the read-only root and allowed in the
// writable one, a `..` escape and an oversized write refused. Each call is a
// decision in the server's trail, naming its tool, allowed or refused as the
// line says; the trail verifies; the secret's and the refused write's content
// appear nowhere; the files on disk are as the verdicts say.
func TestDemoServe(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	stdout, stderr, code, pid := runDemoBinary(t, brokerBin, "--serve", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	checkDemoWidth(t, stdout, stderr)
	stdout = unwrapDemo(stdout)
	project, scratch := filepath.Join(dir, "project"), filepath.Join(dir, "scratch")

	started := regexp.MustCompile(`server: (\S+) serve (.*), pid (\d+): a separate process`).FindStringSubmatch(stdout)
	if started == nil {
		t.Fatalf("the demo does not say which server it started:\n%s", stdout)
	}
	if started[1] != brokerBin || !strings.Contains(started[2], "--consent auto") {
		t.Errorf("the demo started %s serve %s, want %s serve with --consent auto", started[1], started[2], brokerBin)
	}
	if serverPID, _ := strconv.Atoi(started[3]); serverPID == pid || serverPID == 0 {
		t.Errorf("fsbroker serve ran as pid %d, the demo as %d: want a process of its own", serverPID, pid)
	}

	want := demoServeOutcomes(project, scratch)
	lines := reportLine.FindAllStringSubmatch(stdout, -1)
	if len(lines) != len(want) {
		t.Errorf("%d call lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, m := range lines {
		if i >= len(want) {
			break
		}
		w := want[i]
		got := wantOutcome{m[2], strings.TrimSpace(m[3]), m[4], m[5]}
		if m[1] != strconv.Itoa(i+1) || got.method != w.method || got.target != w.target || got.verdict != w.verdict ||
			!strings.HasPrefix(got.detail, w.detail) {
			t.Errorf("call %d: the demo says %s. %s %s -> %s %s\nwant %s %s -> %s with %q", i+1, m[1], got.method, got.target,
				got.verdict, got.detail, w.method, w.target, w.verdict, w.detail)
		}
	}
	for _, want := range []string{
		"done: 8 calls, 4 allowed, 4 denied, 0 failed",
		"initialized fsbroker serve over stdio, protocol 2025-11-25",
		"intact: 1 segment(s)",
		"in " + dir + ": the directory you gave, kept",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	for _, content := range []string{"not-for-servers", "pwned", ".env, ", "] .env"} {
		if strings.Contains(stdout, content) {
			t.Errorf("the demo's output shows %q:\n%s", content, stdout)
		}
	}
	checkDemoServeTrail(t, filepath.Join(dir, "state"), project, scratch)
	checkDemoFiles(t, project, scratch)
	if t.Failed() {
		t.Logf("demo output:\n%s\n%s", stdout, stderr)
	}
}

// checkDemoServeTrail checks the trail fsbroker serve left in state for the
// demo's calls: it verifies; each call is a decision record naming its tool,
// with the host's identity, allowed or refused (with the code) as the demo
// showed; no file content reached it.
func checkDemoServeTrail(t *testing.T, state, project, scratch string) {
	t.Helper()
	dir := checkDemoDecisions(t, state, true, []demoDecision{
		{"list_directory", project, true, ""},
		{"read_text_file", filepath.Join(project, "src/main.go"), true, ""},
		{"read_text_file", filepath.Join(project, ".env"), false, "PERMISSION_DENIED"},
		{"write_file", filepath.Join(project, "README.md"), false, "PERMISSION_DENIED"},
		{"write_file", filepath.Join(scratch, "notes.md"), true, ""},
		{"read_text_file", `the path climbs above its root; path "project/../../etc/passwd"`, false, "PERMISSION_DENIED"},
		{"write_file", `2048 bytes is over the write limit of 1024 bytes per request; path "scratch/big.bin"`, false, "QUOTA_EXCEEDED"},
	})
	for _, r := range trailDecisionRecords(t, dir) {
		if r.Server != "fsbroker-demo" {
			t.Errorf("a decision record names the host %q, want fsbroker-demo: %+v", r.Server, r)
		}
	}
	checkTrailHoldsNoDemoContent(t, dir)
}

// --serve starts fsbroker serve, not an example server: --server with it is
// a usage error (exit 2) that names both, before anything is started.
func TestDemoServeRefusesServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := runFsbroker(t, nil, "demo", "--serve", "--dir", dir, "--server", serverBin)
	if code != 2 || !strings.Contains(stderr, "--server") || !strings.Contains(stderr, "--serve") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming --server and --serve", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); stdout != "" || len(entries) != 0 {
		t.Errorf("stdout %q, %d entries in --dir: want nothing printed or made", stdout, len(entries))
	}
}
