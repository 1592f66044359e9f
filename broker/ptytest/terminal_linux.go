// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package ptytest

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Terminal is a pseudo-terminal that a command gets as its controlling
// terminal: the test types on it (Type) and reads what the command showed
// (String, WaitFor).
type Terminal struct {
	master *os.File
	slave  *os.File
	done   chan struct{} // closed once everything shown has been collected

	mu  sync.Mutex
	buf strings.Builder
}

// Attach makes a new pseudo-terminal the controlling terminal of cmd, which
// must not have started: cmd runs in a new session with the terminal as an
// extra file. Call Started once cmd has started. Attach registers the
// terminal's own cleanup first, so that it runs after the caller's later
// ones (which stop the command): the terminal outlives the command.
func Attach(t testing.TB, cmd *exec.Cmd) *Terminal {
	t.Helper()
	master, slave := Open(t)
	term := &Terminal{master: master, slave: slave, done: make(chan struct{})}
	t.Cleanup(func() {
		master.Close()
		slave.Close()
		select {
		case <-term.done:
		case <-time.After(30 * time.Second):
			t.Error("the terminal's output did not end")
		}
	})
	cmd.ExtraFiles = append(cmd.ExtraFiles, slave)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
	cmd.SysProcAttr.Ctty = 2 + len(cmd.ExtraFiles) // the slave's descriptor in the child
	return term
}

// Started closes this process's copy of the terminal's slave side and
// collects what the command shows, until the command and its children are
// gone (the read then ends with EIO).
func (term *Terminal) Started() {
	term.slave.Close()
	go func() {
		defer close(term.done)
		_, _ = io.Copy(term, term.master)
	}()
}

// Write collects what the command showed.
func (term *Terminal) Write(b []byte) (int, error) {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.buf.Write(b)
}

// String is what the command has shown so far, with the terminal's
// end-of-line translation (ONLCR: "\r\n") undone.
func (term *Terminal) String() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return strings.ReplaceAll(term.buf.String(), "\r\n", "\n")
}

// Raw is what the command has shown so far, byte for byte.
func (term *Terminal) Raw() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.buf.String()
}

// Done is closed once the command's output has ended and been collected.
func (term *Terminal) Done() <-chan struct{} { return term.done }

// Type types s on the terminal (include "\n" for Enter).
func (term *Terminal) Type(t testing.TB, s string) {
	t.Helper()
	if _, err := term.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// WaitFor waits up to limit until the terminal has shown want at least n
// times and returns what it shows; it fails the test otherwise, with what
// context adds (nil: nothing).
func (term *Terminal) WaitFor(t testing.TB, want string, n int, limit time.Duration, context func() string) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		shown := term.String()
		if strings.Count(shown, want) >= n {
			return shown
		}
		if time.Now().After(deadline) {
			more := ""
			if context != nil {
				more = "\n" + context()
			}
			t.Fatalf("the terminal never showed %q %d time(s); it shows:\n%s%s", want, n, shown, more)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
