// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package leakcheck checks that what a test opened is closed again: that
// the process has no more goroutines and open files than before. Counts are
// of the whole process, so a test that uses it does not run in parallel
// with others (t.Parallel). Only tests import it; the broker never does.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Wait bounds Settle's wait for what is closing to end. It catches what
// never ends; it does not measure speed.
const Wait = 10 * time.Second

// Counts are how many goroutines and open files the process has.
type Counts struct {
	Goroutines int
	Files      int
}

// Take counts this process's goroutines and open files now. It skips the
// test where open files cannot be counted (no /proc/self/fd).
func Take(t testing.TB) Counts {
	t.Helper()
	return Counts{Goroutines: runtime.NumGoroutine(), Files: openFiles(t)}
}

// Settle waits, up to Wait, until this process has no more goroutines and
// open files than before, and fails the test with every goroutine's stack
// when it still has more.
func (before Counts) Settle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		now := Take(t)
		if now.Goroutines <= before.Goroutines && now.Files <= before.Files {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("left open: %d goroutines (before: %d), %d files (before: %d)\n%s",
				now.Goroutines, before.Goroutines, now.Files, before.Files, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openFiles is the number of this process's open file descriptors; it
// skips the test where they cannot be counted.
func openFiles(t testing.TB) int {
	t.Helper()
	n, err := OpenFiles()
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return n
}

// OpenFiles is the number of this process's open file descriptors, or an
// error where they cannot be counted (no /proc/self/fd: not Linux), for a
// test that checks the count where it can and goes on elsewhere.
func OpenFiles() (int, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("count open files: %w", err)
	}
	return len(fds), nil
}
