// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestTwoBrokerProcesses runs two broker-like processes (internal/writer)
// that share one state directory and write one file with different byte
// values, while this process reads the file in a loop, whole by path and
// in chunks through the executor: every read is one complete payload, both
// writers succeed, and no temporary file is left once they exit.
func TestTwoBrokerProcesses(t *testing.T) {
	bin := writerPath(t)
	f := newFixture(t)
	const size = 1 << 20
	target := f.host("shared.bin")
	if err := os.WriteFile(target, payload(0, 'Z', size), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out, errOut string
		err         error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i, v := range []byte{'A', 'B'} {
		cmd := exec.Command(bin, "-root", f.dir, "-state", f.state, "-file", "shared.bin",
			"-value", fmt.Sprint(v), "-size", fmt.Sprint(size), "-n", "40")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			results[i] = result{stdout.String(), stderr.String(), err}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	reads, chunked, restarts := 0, 0, 0
	seen := map[byte]int{}
	check := func(how string, b []byte) {
		t.Helper()
		_, v, err := checkPayload(b)
		if err != nil {
			t.Fatalf("%s read %d: %v", how, reads, err)
		}
		seen[v]++
	}
	for running := true; running; {
		select {
		case <-done:
			running = false // one more round after both exited
		default:
		}
		b, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		check("os.ReadFile", b)
		reads++

		// In 256 KiB chunks through the executor, from one resolution:
		// the identity check refuses a chunk of a replaced file, so the
		// chunks of one pass all come from one version.
		tg := f.resolve(t, "proj/shared.bin", true)
		var got []byte
		for off := int64(0); ; {
			res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Offset: off, Length: 256 << 10})
			if err != nil {
				wantCode(t, err, "CONCURRENCY_CONFLICT", "")
				restarts++
				got = nil
				break
			}
			got = append(got, res.Data...)
			off += int64(len(res.Data))
			if res.EOF {
				break
			}
		}
		if got != nil {
			check("chunked executor", got)
			chunked++
		}
	}
	for i, r := range results {
		var ok, fail int
		if _, err := fmt.Sscanf(r.out, "ok=%d fail=%d", &ok, &fail); err != nil || r.err != nil {
			t.Fatalf("writer %d: %v, output %q, stderr %q", i, r.err, r.out, r.errOut)
		}
		if ok == 0 || fail != 0 {
			t.Errorf("writer %d: %d writes succeeded, %d failed (stderr %q)", i, ok, fail, r.errOut)
		}
	}
	noTemps(t, f.tmp)
	if n, err := f.x.RemoveStaleTemps(ctxT(t), f.root); err != nil || n != 0 {
		t.Fatalf("RemoveStaleTemps after a clean exit: %d, %v", n, err)
	}
	t.Logf("%d whole reads, %d chunked reads (%d restarted on a replaced file); versions seen by value: %v",
		reads, chunked, restarts, seen)
}
