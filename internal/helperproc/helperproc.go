// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package helperproc runs the second processes of multi-process tests: the
// test binary itself re-executed to play one role (another broker process
// on a shared state directory, a writer to kill mid-write, a consent prompt
// on a terminal), or a helper program built from a package of the module
// (the executor's swapper). The test talks to it over real pipes, one line
// at a time, and checks what it printed; a helper that dies, hangs or
// prints something unexpected fails the test with its standard error.
//
// A test package that re-executes itself declares its roles in TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(helperproc.Run(m, helperproc.Roles{"store": storeRole}))
//	}
//
// and starts one with Start(t, Command("store", args...)). Only tests
// import this package; the broker never does.
package helperproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// roleEnv names, in a helper process's environment, the role it plays.
const roleEnv = "FSBROKER_HELPER_ROLE"

// AnswerWait bounds each wait for a helper: its next line (its start
// included, which under the race detector on a loaded machine can take
// seconds) and its exit once asked to stop. It is generous on purpose: it
// catches a hung helper, it does not measure speed.
const AnswerWait = 30 * time.Second

// A Role is what a helper process does: it gets the arguments given to
// Command, talks to the test on its standard input and output, and returns
// when done. A non-nil error is printed on standard error and makes the
// process exit with status 1.
type Role func(args []string) error

// Roles are a test binary's roles, by name.
type Roles map[string]Role

// Run is the body of a test binary's TestMain. In a helper process (started
// through Command) it plays the role named in its environment and exits
// without running any test. Otherwise it runs the tests, removes the
// programs Build built, and returns the exit code for os.Exit.
func Run(m *testing.M, roles Roles) int {
	if name, ok := os.LookupEnv(roleEnv); ok {
		role := roles[name]
		if role == nil {
			fmt.Fprintf(os.Stderr, "helper: this test binary has no role %q\n", name)
			os.Exit(2)
		}
		if err := role(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", name, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	removeBuilt()
	return code
}

// Command returns the command that runs this test binary as a helper
// playing role with args (its TestMain must call Run with that role). The
// caller may add to its environment and wire it as it needs (a terminal,
// say) before starting it, with Start or on its own.
func Command(role string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, quickRaceExit())
	return cmd
}

// quickRaceExit keeps the race detector (when on) from sleeping a second at
// a helper's exit, keeping any GORACE options of the test's own.
func quickRaceExit() string {
	return strings.TrimSpace("GORACE=atexit_sleep_ms=0 " + os.Getenv("GORACE"))
}

// Proc is a running helper process with pipes to its standard input and
// from its standard output, read line by line.
type Proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // closed at the end of its output
	stderr *syncBuffer
	ended  bool
}

// Start starts cmd (from Command, or a program from Build) with pipes to
// its standard input and from its standard output, and its standard error
// kept for the failure messages. At the end of the test a helper still
// running is stopped as Stop does, or killed if the test failed; a helper
// that then exits with an error fails the test.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{t: t, cmd: cmd, lines: make(chan string, 64), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("helper %s: %v", cmd.Path, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("helper %s: %v", cmd.Path, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("helper %s: %v", cmd.Path, err)
	}
	p.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		if p.ended {
			return
		}
		if t.Failed() {
			p.Kill()
			return
		}
		p.Stop()
	})
	return p
}

// Send writes line, and a newline, to the helper's standard input.
func (p *Proc) Send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("helper: writing %q: %v%s", line, err, p.stderrNote())
	}
}

// Line returns the helper's next line of output; the test fails if the
// helper ends its output or says nothing within AnswerWait.
func (p *Proc) Line() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("helper: it ended its output%s", p.stderrNote())
		}
		return l
	case <-time.After(AnswerWait):
		p.t.Fatalf("helper: no answer within %v%s", AnswerWait, p.stderrNote())
	}
	return ""
}

// Expect reads the helper's next line and fails the test unless it is want.
func (p *Proc) Expect(want string) {
	p.t.Helper()
	if got := p.Line(); got != want {
		p.t.Fatalf("helper said %q, want %q%s", got, want, p.stderrNote())
	}
}

// Stop closes the helper's standard input (the signal to finish), waits for
// it to exit, and returns the lines it printed that were not read yet. The
// test fails if the helper exits with an error, or does not exit within
// AnswerWait (it is then killed).
func (p *Proc) Stop() []string {
	p.t.Helper()
	if p.ended {
		return nil
	}
	_ = p.stdin.Close()
	rest, ok := p.rest(AnswerWait)
	if !ok {
		p.Kill()
		p.t.Fatalf("helper: still running %v after its input closed%s", AnswerWait, p.stderrNote())
	}
	p.ended = true
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("helper: %v%s", err, p.stderrNote())
	}
	p.logStderr()
	return rest
}

// Kill kills the helper (SIGKILL on unix), waits for it, and returns the
// lines it printed before it died that were not read yet. The test fails
// if the helper had already exited by itself.
func (p *Proc) Kill() []string {
	p.t.Helper()
	if p.ended {
		return nil
	}
	p.ended = true
	killErr := p.cmd.Process.Kill()
	rest, ok := p.rest(AnswerWait)
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
	// On Windows every end counts as an exit, so there only a kill that
	// found the process gone tells that it ended by itself.
	exited := p.cmd.ProcessState != nil && p.cmd.ProcessState.Exited() && runtime.GOOS != "windows"
	switch {
	case !ok:
		p.t.Fatalf("helper: its output did not end %v after the kill%s", AnswerWait, p.stderrNote())
	case errors.Is(killErr, os.ErrProcessDone) || exited:
		p.t.Fatalf("helper: it had ended by itself before the kill (%v)%s", p.cmd.ProcessState, p.stderrNote())
	}
	p.logStderr()
	return rest
}

// rest reads the helper's output to its end, waiting at most d.
func (p *Proc) rest(d time.Duration) ([]string, bool) {
	var rest []string
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return rest, true
			}
			rest = append(rest, l)
		case <-timeout:
			return rest, false
		}
	}
}

// stderrNote is the helper's standard error so far, for a failure message.
func (p *Proc) stderrNote() string {
	if s := p.stderr.String(); s != "" {
		return "; its stderr:\n" + s
	}
	return ""
}

// logStderr logs what the helper wrote on standard error, if anything.
func (p *Proc) logStderr() {
	if s := p.stderr.String(); s != "" {
		p.t.Logf("helper stderr:\n%s", s)
	}
}

// syncBuffer is a buffer safe for the writes of exec's copying goroutine
// and the reads of the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
