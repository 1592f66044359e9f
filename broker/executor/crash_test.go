// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestCrashLeavesOldOrNew kills a real broker-like process (internal/writer,
// looping executor.Write of 5 MiB payloads to one file, each version a
// different byte value) with SIGKILL at random moments, and checks after
// each kill that the file is one complete version, the old or a new one,
// never torn; and that RemoveStaleTemps then removes every temporary file
// the dead process left, leaving none.
func TestCrashLeavesOldOrNew(t *testing.T) {
	bin := writerPath(t)
	f := newFixture(t)
	const size = 5 << 20
	target := f.host("data.bin")
	// An initial version (seq 0, value 1+0 like every version the writer
	// makes), so that the file always exists.
	if err := os.WriteFile(target, payload(0, 1, size), 0o644); err != nil {
		t.Fatal(err)
	}
	const kills = 24
	var (
		lastSeq    uint64
		leftTemps  int
		afterWrite int // kills that found a newer version than the previous check
	)
	for i := 0; i < kills; i++ {
		cmd := exec.Command(bin, "-root", f.dir, "-state", f.state, "-file", "data.bin",
			"-value", "1", "-vary", "-size", "5242880")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(201)) * time.Millisecond) // a random moment, not a timing assertion
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("kill %d: the writer ended by itself (%v): %s", i, err, stderr.String())
		}

		// The file is one complete version, by the path and through the
		// executor.
		b, err := os.ReadFile(target)
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		seq, value, err := checkPayload(b)
		if err != nil {
			t.Fatalf("kill %d: the file is not one complete version: %v", i, err)
		}
		if value != byte(1+seq) {
			t.Fatalf("kill %d: version %d holds value %#x", i, seq, value)
		}
		res, err := f.x.Read(ctxT(t), f.resolve(t, "proj/data.bin", true), executor.ReadOptions{Length: 1 << 24})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := checkPayload(res.Data); err != nil {
			t.Fatalf("kill %d: executor.Read: %v", i, err)
		}
		if !bytes.Equal(res.Data, b) {
			t.Fatalf("kill %d: executor.Read and os.ReadFile differ", i)
		}
		if seq != lastSeq {
			afterWrite++ // each run starts again at 1: any complete version is fine
		}
		lastSeq = seq

		// The dead process's temporary file (if it died mid-write) is
		// removed by the sweep, and nothing else is.
		ts := temps(t, f.dir)
		for _, p := range ts {
			if !strings.Contains(filepath.Base(p), "-"+itoa(cmd.Process.Pid)+"-") {
				t.Fatalf("kill %d: a temporary file not of the dead process: %s", i, p)
			}
		}
		leftTemps += len(ts)
		n, err := f.x.RemoveStaleTemps(ctxT(t), f.root)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(ts) {
			t.Fatalf("kill %d: RemoveStaleTemps removed %d of %d", i, n, len(ts))
		}
		noTemps(t, f.tmp)
	}
	t.Logf("%d kills; %d left a temporary file (killed mid-write); %d found a version other than the previous check's",
		kills, leftTemps, afterWrite)
	if afterWrite == 0 {
		t.Fatal("the writer never completed a write before it was killed: the test proves nothing")
	}
}
