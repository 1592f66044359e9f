// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestStatNeverOpensAFIFO: a FIFO is described (type other) without being
// opened: Stat returns at once where an open for reading would block until
// a writer came.
func TestStatNeverOpensAFIFO(t *testing.T) {
	f := newFixture(t)
	if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tg := f.resolve(t, "proj/fifo", true)
	var (
		res executor.StatResult
		err error
	)
	within(t, 5*time.Second, "Stat of a FIFO", func() { res, err = f.x.Stat(ctxT(t), tg) })
	if err != nil || res.Type != executor.TypeOther {
		t.Fatalf("Stat: %+v, %v; want type other", res, err)
	}
}
