// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package swaptest starts and stops the swapper (the program in
// ../swapper): the second local process that swaps entries inside a root
// while a test's executor or watch works on it. It is the one way the
// executor's swap attacks and the watch's start it; only tests import it.
package swaptest

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// swapperPkg is the swapper program, built once per test binary.
const swapperPkg = "github.com/fsbroker/fsbroker/broker/executor/internal/swapper"

// Swapper is a running swapper.
type Swapper struct {
	t     testing.TB
	proc  *helperproc.Proc
	swaps int
	done  bool
}

// Start starts the swapper with args (its flags: -mode, -name, -target,
// -junk, -pause; see the program's doc) and returns once it swaps. It is
// stopped at the end of the test if the test has not stopped it. The test
// binary's TestMain must call helperproc.Run, which removes the built
// program after the tests.
func Start(t testing.TB, args ...string) *Swapper {
	t.Helper()
	p := helperproc.Start(t, exec.Command(helperproc.Build(t, swapperPkg), args...))
	p.Expect("ready")
	return &Swapper{t: t, proc: p}
}

// Stop ends the swapper, leaving its entries as they were before it
// started, and returns how many rounds it made; the test fails if it does
// not end cleanly with its count. Stopping it again returns the same count.
func (s *Swapper) Stop() int {
	s.t.Helper()
	if s.done {
		return s.swaps
	}
	s.done = true
	rest := s.proc.Stop()
	if len(rest) != 1 {
		s.t.Fatalf("the swapper ended with %q, want its count alone", rest)
	}
	if _, err := fmt.Sscanf(rest[0], "swaps=%d", &s.swaps); err != nil {
		s.t.Fatalf("the swapper ended with %q: %v", rest[0], err)
	}
	return s.swaps
}
