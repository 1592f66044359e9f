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

// TestDemoRemovesItsTemporaryDirectory: without --dir, the demo works in a
// new temporary directory (under TMPDIR), says so, and removes it at the
// end; every line it prints fits in 100 columns, with the long paths of a
// deep TMPDIR too.
func TestDemoRemovesItsTemporaryDirectory(t *testing.T) {
	t.Parallel()
	tmp := filepath.Join(realDir(t, t.TempDir()), strings.Repeat("deep-directory-", 6))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(brokerBin, "demo")
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
}
