// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package helperproc_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

func TestMain(m *testing.M) {
	os.Exit(helperproc.Run(m, helperproc.Roles{
		// echo says ready and its arguments, then repeats each line it
		// reads in upper case until its input closes, then says bye.
		"echo": func(args []string) error {
			fmt.Println("ready", strings.Join(args, ","))
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				fmt.Println(strings.ToUpper(sc.Text()))
			}
			fmt.Println("bye")
			return sc.Err()
		},
		// count prints 1, 2, 3... until killed.
		"count": func([]string) error {
			for i := 1; ; i++ {
				fmt.Println(i)
			}
		},
		// fail says one line and fails.
		"fail": func([]string) error {
			fmt.Println("failing")
			return errors.New("the failure of the role")
		},
	}))
}

// TestTalk: a helper gets its arguments, answers line by line, and ends
// when its input closes; Stop returns what was not read.
func TestTalk(t *testing.T) {
	h := helperproc.Start(t, helperproc.Command("echo", "a", "b"))
	h.Expect("ready a,b")
	h.Send("one")
	h.Expect("ONE")
	h.Send("two")
	if rest := h.Stop(); !slices.Equal(rest, []string{"TWO", "bye"}) {
		t.Fatalf("Stop returned %q", rest)
	}
}

// TestKill: Kill returns the lines the helper printed before it died.
func TestKill(t *testing.T) {
	h := helperproc.Start(t, helperproc.Command("count"))
	h.Expect("1")
	rest := h.Kill()
	for i, l := range rest {
		if l != fmt.Sprint(i+2) {
			t.Fatalf("line %d after the kill is %q", i, l)
		}
	}
}

// TestBuild: a program of the module is built once and runs.
func TestBuild(t *testing.T) {
	const pkg = "github.com/fsbroker/fsbroker/broker/executor/internal/swapper"
	bin := helperproc.Build(t, pkg)
	if again := helperproc.Build(t, pkg); again != bin {
		t.Fatalf("built twice: %s and %s", bin, again)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
}

// TestFailures: what goes wrong in a helper fails the test, with the
// helper's stderr in the message.
func TestFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(tb testing.TB)
		want string
	}{
		{"exits with an error", func(tb testing.TB) {
			h := helperproc.Start(tb, helperproc.Command("fail"))
			h.Expect("failing")
			h.Stop()
		}, "the failure of the role"},
		{"says something else", func(tb testing.TB) {
			helperproc.Start(tb, helperproc.Command("echo")).Expect("hello")
		}, `want "hello"`},
		{"ends its output", func(tb testing.TB) {
			h := helperproc.Start(tb, helperproc.Command("fail"))
			h.Expect("failing")
			h.Line()
		}, "ended its output"},
		{"has no such role", func(tb testing.TB) {
			h := helperproc.Start(tb, helperproc.Command("nosuch"))
			h.Stop()
		}, `no role "nosuch"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			r.run(c.run)
			if !strings.Contains(r.fatal, c.want) {
				t.Fatalf("the failure is %q, want it to say %q", r.fatal, c.want)
			}
		})
	}
}

// recorder is a testing.TB whose Fatalf is recorded instead of failing
// the test, and whose cleanups run at the end of run.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	failed   bool
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) Logf(format string, args ...any) { r.TB.Logf(format, args...) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	if r.fatal == "" {
		r.fatal = fmt.Sprintf(format, args...)
	}
	r.failed = true
	r.mu.Unlock()
	runtime.Goexit()
}

// run runs f and then the cleanups as a test would, each on a goroutine
// that Fatalf may end.
func (r *recorder) run(f func(tb testing.TB)) {
	do := func(g func()) {
		done := make(chan struct{})
		go func() { defer close(done); g() }()
		<-done
	}
	do(func() { f(r) })
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		do(r.cleanups[i])
	}
}
