// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package child

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/testlog"
	"github.com/hashicorp/go-hclog"
)

// These tests start real sh scripts as children and look at what reaches the
// logger and how the children end. Every wait is an upper bound: a test waits
// for an event, never for a fixed time.

// waitLimit bounds every wait for something that should happen promptly.
const waitLimit = 10 * time.Second

// logEntry is one hclog JSON line.
type logEntry struct {
	Level   string `json:"@level"`
	Message string `json:"@message"`
}

// logEntries parses every line of the log; a line that is not an hclog JSON
// entry fails the test.
func logEntries(t *testing.T, b *testlog.Lines) []logEntry {
	t.Helper()
	var out []logEntry
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// logMessages returns the logged messages.
func logMessages(t *testing.T, b *testlog.Lines) []string {
	t.Helper()
	var out []string
	for _, e := range logEntries(t, b) {
		out = append(out, e.Message)
	}
	return out
}

// logHas reports whether a logged message contains s.
func logHas(t *testing.T, b *testlog.Lines, s string) bool {
	t.Helper()
	for _, m := range logMessages(t, b) {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// waitForLog waits until a logged message contains s.
func waitForLog(t *testing.T, b *testlog.Lines, s string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !logHas(t, b, s) {
		if time.Now().After(deadline) {
			t.Fatalf("no log message containing %q within %s; log:\n%s", s, waitLimit, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newLogger() (hclog.Logger, *testlog.Lines) {
	buf := &testlog.Lines{}
	return hclog.New(&hclog.LoggerOptions{
		Name:       "server",
		Level:      hclog.Trace,
		Output:     buf,
		JSONFormat: true,
	}), buf
}

// startScript starts `sh -c script` and makes sure the child's whole process
// group is gone when the test ends, whatever happened.
func startScript(t *testing.T, script string) (*Process, *testlog.Lines) {
	t.Helper()
	log, buf := newLogger()
	p, err := Start("sh", []string{"-c", script}, log)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pid := p.PID()
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-p.Exited():
		case <-time.After(waitLimit):
			t.Errorf("child %d did not exit after SIGKILL", pid)
		}
	})
	return p, buf
}

// stopWithin calls Stop and fails the test if it does not return within
// limit. It reports whether Stop returned.
func stopWithin(t *testing.T, p *Process, grace, limit time.Duration) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		p.Stop(grace)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		t.Errorf("Stop(%s) did not return within %s", grace, limit)
		return false
	}
}

// alive reports whether pid names a live process. A zombie (exited, not yet
// reaped by its new parent) counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// No /proc (not Linux), or the process went away meanwhile: trust
		// kill(pid, 0).
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name, which is in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// waitGone waits until pid is gone.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running %s after Stop", what, pid, waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var gcPID = regexp.MustCompile(`^grandchild=(\d+)$`)

// grandchildPID returns the pid the script logged as "grandchild=N".
func grandchildPID(t *testing.T, buf *testlog.Lines) int {
	t.Helper()
	waitForLog(t, buf, "grandchild=")
	for _, m := range logMessages(t, buf) {
		if g := gcPID.FindStringSubmatch(m); g != nil {
			pid, _ := strconv.Atoi(g[1])
			return pid
		}
	}
	t.Fatalf("no grandchild pid in the log:\n%s", buf.String())
	return 0
}

func TestStderrLinesAreLogged(t *testing.T) {
	t.Parallel()
	// Lines with \n and \r\n endings, an empty line (not logged), a line of
	// 70,000 bytes (split at the 64 KiB bound) and a last line without a
	// newline.
	p, buf := startScript(t, `
printf 'first line\n' >&2
printf 'crlf line\r\n' >&2
printf '\n' >&2
head -c 70000 /dev/zero | tr '\0' a >&2
printf '\n' >&2
printf 'no newline at the end' >&2
exit 0`)
	select {
	case <-p.Exited():
	case <-time.After(waitLimit):
		t.Fatal("script did not exit")
	}
	stopWithin(t, p, time.Second, waitLimit) // waits for stderr to be logged

	msgs := logMessages(t, buf)
	var plain []string
	long := 0
	for _, m := range msgs {
		if m == "" {
			t.Errorf("an empty message was logged")
		}
		if strings.Trim(m, "a") == "" {
			if len(m) > maxStderrLine {
				t.Errorf("a logged piece of the long line has %d bytes, over %d", len(m), maxStderrLine)
			}
			long += len(m)
			continue
		}
		plain = append(plain, m)
	}
	want := []string{"first line", "crlf line", "no newline at the end"}
	if strings.Join(plain, "|") != strings.Join(want, "|") {
		t.Errorf("logged lines = %q, want %q", plain, want)
	}
	if long != 70000 {
		t.Errorf("the long line was logged with %d bytes in all, want 70000", long)
	}
	for _, e := range logEntries(t, buf) {
		if e.Level != "info" {
			t.Errorf("stderr line %q logged at %q, want info", e.Message, e.Level)
		}
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	log, _ := newLogger()
	if _, err := Start("fsbroker-no-such-command-xyz", nil, log); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Start of a command not in PATH: err = %v, want exec.ErrNotFound", err)
	}
	if _, err := Start("/nonexistent-dir/server", nil, log); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Start of a missing path: err = %v, want fs.ErrNotExist", err)
	}
}

func TestExitStatusAndWait(t *testing.T) {
	t.Parallel()
	p, _ := startScript(t, `read line; exit 3`)
	if p.PID() <= 0 {
		t.Fatalf("PID = %d", p.PID())
	}
	if got := p.ExitCode(); got != -1 {
		t.Errorf("ExitCode while running = %d, want -1", got)
	}
	if got := p.ExitDescription(); got != "running" {
		t.Errorf("ExitDescription while running = %q, want running", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err := p.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a running child = %v, want the context's error", err)
	}

	// The child's stdin is ours: a line makes it exit.
	if _, err := p.Stdin().Write([]byte("go\n")); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	err = p.Wait(ctx)
	cancel()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	if got := p.ExitCode(); got != 3 {
		t.Errorf("ExitCode = %d, want 3", got)
	}
	if got := p.ExitDescription(); got != "exit status 3" {
		t.Errorf("ExitDescription = %q, want %q", got, "exit status 3")
	}
	// Stop on an exited child only collects it, and may be called again.
	stopWithin(t, p, time.Hour, waitLimit)
	stopWithin(t, p, time.Hour, waitLimit)
	if got := p.ExitCode(); got != 3 {
		t.Errorf("ExitCode after Stop = %d, want 3", got)
	}
}

func TestStdoutIsThePipe(t *testing.T) {
	t.Parallel()
	p, _ := startScript(t, `while read line; do printf 'echo:%s\n' "$line"; done`)
	if _, err := p.Stdin().Write([]byte("hello\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := p.stdout.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatalf("SetReadDeadline: %v", err)
	}
	got := make([]byte, 0, 64)
	for !bytes.Contains(got, []byte("\n")) {
		b := make([]byte, 64)
		n, err := p.Stdout().Read(b)
		got = append(got, b[:n]...)
		if err != nil {
			break
		}
	}
	if string(got) != "echo:hello\n" {
		t.Errorf("stdout = %q, want %q", got, "echo:hello\n")
	}
	stopWithin(t, p, 5*time.Second, waitLimit)
	if p.ExitCode() != 0 {
		t.Errorf("exit = %s, want 0 after stdin closed", p.ExitDescription())
	}
}

// The stop sequence: each case is a child that ends at a different step.
func TestStopSequence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script string
		// grace for each step: long where the test expects the step to
		// succeed (an upper bound only), short where it must be passed.
		grace    time.Duration
		wantCode int
		wantDesc string // substring of ExitDescription
		// marker: whether the TERM trap must have run ("yes", "no"), or ""
		// where it depends on scheduling (a trap that does not exit may or
		// may not run before the SIGKILL).
		marker       string
		wantTermLog  bool   // "sending SIGTERM" was logged
		wantKillLog  bool   // "killing it" was logged
		wantLastLine string // a line the script logs on its way out
	}{
		{
			name: "step 1: exits when stdin closes",
			script: `trap 'echo got-TERM >&2; exit 9' TERM
echo ready >&2
cat >/dev/null
echo stdin-closed >&2
exit 0`,
			grace:        waitLimit,
			wantCode:     0,
			wantDesc:     "exit status 0",
			marker:       "no",
			wantLastLine: "stdin-closed",
		},
		{
			name: "step 2: ignores EOF, exits on SIGTERM",
			script: `trap 'echo got-TERM >&2; exit 0' TERM
echo ready >&2
while :; do sleep 0.05; done`,
			// A second per step: step 1 must pass, and step 2 must not
			// turn into a kill on a loaded machine.
			grace:        time.Second,
			wantCode:     0,
			wantDesc:     "exit status 0",
			marker:       "yes",
			wantTermLog:  true,
			wantLastLine: "got-TERM",
		},
		{
			name: "step 3: ignores SIGTERM, is killed",
			script: `trap 'echo got-TERM >&2' TERM
echo ready >&2
while :; do sleep 0.05; done`,
			grace:       100 * time.Millisecond,
			wantCode:    -1,
			wantDesc:    "killed",
			wantTermLog: true,
			wantKillLog: true,
		},
		{
			name: "step 3: SIGTERM ignored outright, is killed",
			script: `trap '' TERM
echo ready >&2
while :; do sleep 0.05; done`,
			grace:       100 * time.Millisecond,
			wantCode:    -1,
			wantDesc:    "killed",
			wantTermLog: true,
			wantKillLog: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, buf := startScript(t, tc.script)
			waitForLog(t, buf, "ready") // the traps are set
			if !stopWithin(t, p, tc.grace, 3*tc.grace+waitLimit) {
				return
			}
			select {
			case <-p.Exited():
			default:
				t.Fatal("Stop returned while the child runs")
			}
			if got := p.ExitCode(); got != tc.wantCode {
				t.Errorf("ExitCode = %d, want %d (%s)", got, tc.wantCode, p.ExitDescription())
			}
			if got := p.ExitDescription(); !strings.Contains(got, tc.wantDesc) {
				t.Errorf("ExitDescription = %q, want it to mention %q", got, tc.wantDesc)
			}
			if got := logHas(t, buf, "got-TERM"); tc.marker != "" && got != (tc.marker == "yes") {
				t.Errorf("TERM trap ran = %v, want %s; log:\n%s", got, tc.marker, buf.String())
			}
			if got := logHas(t, buf, "sending SIGTERM"); got != tc.wantTermLog {
				t.Errorf("SIGTERM logged = %v, want %v; log:\n%s", got, tc.wantTermLog, buf.String())
			}
			if got := logHas(t, buf, "killing it"); got != tc.wantKillLog {
				t.Errorf("kill logged = %v, want %v; log:\n%s", got, tc.wantKillLog, buf.String())
			}
			// Stop returns only once stderr is logged to its end.
			if tc.wantLastLine != "" && !logHas(t, buf, tc.wantLastLine) {
				t.Errorf("line %q not logged by the time Stop returned; log:\n%s", tc.wantLastLine, buf.String())
			}
			// Our ends of the pipes are closed.
			if _, err := p.Stdin().Write([]byte("x\n")); err == nil {
				t.Error("stdin still writable after Stop")
			}
			if _, err := p.Stdout().Read(make([]byte, 1)); err == nil {
				t.Error("stdout still readable after Stop")
			}
		})
	}
}

// A background process that the child started is in the child's process
// group, so the SIGTERM (and SIGKILL) of the stop sequence reaches it too.
func TestStopReachesGrandchildren(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, script string
	}{
		{"child exits on SIGTERM", `sleep 300 &
echo "grandchild=$!" >&2
echo ready >&2
while :; do sleep 0.05; done`},
		{"child and grandchild ignore SIGTERM", `trap '' TERM
sleep 300 &
echo "grandchild=$!" >&2
echo ready >&2
while :; do sleep 0.05; done`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, buf := startScript(t, tc.script)
			gc := grandchildPID(t, buf)
			waitForLog(t, buf, "ready")
			if !alive(gc) {
				t.Fatalf("grandchild %d is not running before Stop", gc)
			}
			if !stopWithin(t, p, 200*time.Millisecond, waitLimit) {
				return
			}
			waitGone(t, gc, "grandchild")
		})
	}
}

// A child that exits at step 1 (stdin closed) but leaves a background process
// behind: the process group still has a member that holds the stderr pipe.
// Stop must still return, and stop that process.
func TestStopAfterChildExitsLeavingGrandchild(t *testing.T) {
	t.Parallel()
	p, buf := startScript(t, `sleep 300 &
echo "grandchild=$!" >&2
echo ready >&2
cat >/dev/null
exit 0`)
	gc := grandchildPID(t, buf)
	waitForLog(t, buf, "ready")
	returned := stopWithin(t, p, 200*time.Millisecond, waitLimit)
	if p.ExitCode() != 0 {
		t.Errorf("child exit = %s, want status 0", p.ExitDescription())
	}
	if !returned {
		return // cleanup kills the group, which lets Stop return
	}
	waitGone(t, gc, "grandchild")
}

// The same, with a grandchild that does not hold the stderr pipe: Stop
// returns, but the grandchild must not outlive it.
func TestStopAfterChildExitsLeavingDetachedGrandchild(t *testing.T) {
	t.Parallel()
	p, buf := startScript(t, `sleep 300 </dev/null >/dev/null 2>&1 &
echo "grandchild=$!" >&2
echo ready >&2
cat >/dev/null
exit 0`)
	gc := grandchildPID(t, buf)
	waitForLog(t, buf, "ready")
	if !stopWithin(t, p, 200*time.Millisecond, waitLimit) {
		return
	}
	waitGone(t, gc, "grandchild")
}
