// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
)

// TestConcurrentSessionsFlood runs four broker processes on one state directory and one
// writable root, each sent a pipelined flood of mixed requests on the same few files: every
// request gets exactly one reply (none lost, no deadlock), every file holds one whole version
// (none torn or mixed), nothing is left outside the roots, and the audit trail of all four
// processes verifies and holds a decision for every reply.
func TestConcurrentSessionsFlood(t *testing.T) {
	t.Parallel()
	dir, state, trail, root := trailDirs(t)
	const (
		brokers  = 4
		requests = 400
		files    = 5
	)
	// Each version of a file is one letter repeated, long enough to be written in more than
	// one syscall by a naive writer: a torn file would mix letters or be short.
	version := func(b, i int) string { return strings.Repeat(string(rune('a'+(b*requests+i)%26)), 64<<10) }
	for f := range files {
		writeFile(t, filepath.Join(root, fmt.Sprintf("f%d.txt", f)), version(0, 0))
	}

	var wg sync.WaitGroup
	replies := make([]int, brokers)
	for b := range brokers {
		p := startBroker(t, "", "stdio", "--root", root+":rw", "--state-dir", state, "--audit", trail,
			"--rate-limit", "0", "--lock-wait", "30s")
		p.handshake("2025-11-25")
		wg.Go(func() {
			for i := range requests {
				id := fmt.Sprintf("b%d-%d", b, i)
				name := fmt.Sprintf("proj/f%d.txt", i%files)
				var method string
				var params map[string]any
				switch i % 5 {
				case 0, 1:
					method, params = "files/write", map[string]any{"path": name, "content": version(b, i)}
				case 2:
					method, params = "files/read", map[string]any{"path": name, "length": 1 << 20}
				case 3:
					method, params = "files/list", map[string]any{"path": "proj"}
				default:
					method, params = "files/create", map[string]any{"path": fmt.Sprintf("proj/d%d-%d", b, i), "type": "directory"}
				}
				p.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
			}
			for i := range requests {
				id := fmt.Sprintf("b%d-%d", b, i)
				r := p.Await("reply "+id, func(m *message) bool { return string(m.ID) == `"`+id+`"` })
				if r.Error != nil && dataOf(t, r).Code != "CONCURRENCY_CONFLICT" {
					t.Errorf("%s: %s", id, r.Raw)
				}
				replies[b]++
			}
			p.closeStdin()
			if code := p.waitExit(); code != 0 {
				t.Errorf("broker %d exit %d", b, code)
			}
		})
	}
	wg.Wait()

	for f := range files {
		b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("f%d.txt", f)))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 64<<10 || strings.Count(string(b), string(b[0])) != len(b) {
			t.Errorf("f%d.txt is torn: %d bytes, starting %q", f, len(b), b[:min(len(b), 16)])
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		switch e.Name() {
		case "state", "trail", "proj":
		default:
			t.Errorf("%s appeared outside the roots", e.Name())
		}
	}
	rep, err := audit.Verify(trail, trailKeys(t, state, trail))
	if err != nil || !rep.OK {
		t.Fatalf("the trail of %d brokers: %+v, %v", brokers, rep, err)
	}
	total := 0
	for _, n := range replies {
		total += n
	}
	if n := trailDecisions(t, trail); n < total {
		t.Errorf("%d decision records for %d replies", n, total)
	}
	t.Logf("%d brokers, %d requests each: %d segments, %d records, all verified", brokers, requests, rep.Segments, rep.Records)
}
