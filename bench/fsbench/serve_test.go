// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOnceRunsNameEachPathOnce: a run of the serve workloads (loadSpec.once)
// sends each of its requests once, sequentially and with requests in flight,
// and ends when they are used up, however long -duration is; its warm-up
// takes at most a quarter of them, however long -warmup is. The target is a
// real MCP filesystem server (fsbaseline --tools) reading real files.
func TestOnceRunsNameEachPathOnce(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	var paths []string
	for _, p := range filePaths(".", "f", n) {
		if err := os.WriteFile(filepath.Join(root, p), textOfSize(1<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	proto := toolsProto{root: root, readTool: "read_text_file"}
	for _, inflight := range []int{1, 4} {
		c, err := startChild([]string{filepath.Join(binDir, "fsbaseline"), "--tools", "--root", root}, root, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proto.handshake(c); err != nil {
			t.Fatal(err)
		}
		o := proto.readOp(paths, 1<<10)
		sent := map[int]int{}
		req := o.req
		o.req = func(buf []byte, id int64, i int) []byte {
			sent[i]++
			return req(buf, id, i)
		}
		// -warmup and -duration far longer than the run: only the paths
		// running out ends the warm-up early and the run (a run that went on
		// is killed after a while, and fails).
		watchdog := time.AfterFunc(30*time.Second, c.kill)
		st, err := runLoad(c, o, loadSpec{inflight: inflight, warmup: time.Hour, duration: time.Hour, once: n})
		watchdog.Stop()
		if cerr := c.close(5 * time.Second); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("%d in flight: %v", inflight, err)
		}
		if st.errors > 0 {
			t.Errorf("%d in flight: %d errors, the first: %s", inflight, st.errors, st.firstErr)
		}
		for i := range n {
			if sent[i] != 1 {
				t.Errorf("%d in flight: request %d sent %d times, want once", inflight, i, sent[i])
			}
		}
		if len(sent) != n {
			t.Errorf("%d in flight: %d distinct requests sent, want the %d paths", inflight, len(sent), n)
		}
		if min := n - n/onceWarmupShare; len(st.lat) < min {
			t.Errorf("%d in flight: %d requests measured, want at least %d (the warm-up takes at most a quarter)", inflight, len(st.lat), min)
		}
	}
}

// TestFloorRunsOnlyServeReadsAndListings: the floor (fsbaseline --tools
// --from-memory) has rows in the serve reads and listings, every reply
// checked as the other targets' are (the content of each file, each
// directory's entries), and no row elsewhere; the serve budgets name its
// ratio to the reference server's.
func TestFloorRunsOnlyServeReadsAndListings(t *testing.T) {
	cfg := tinyConfig(t, "floor,fsbroker,ts")
	cfg.floor = filepath.Join(binDir, "fsbaseline") + " --tools --from-memory --root {root}:rw"
	cfg.workloads = "read-1k,serve-read-1k,serve-read-1k-xN,serve-list,serve-start"
	rep, err := run(cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	floorRows := map[string]bool{}
	for _, r := range rep.Results {
		if r.Target != "floor" {
			continue
		}
		floorRows[r.Workload] = true
		if r.Skipped != "" || r.Errors > 0 || r.Requests == 0 || r.RPSvsTS <= 0 {
			t.Errorf("floor, %s: skipped %q, %d errors (%s), %d requests, %v the reference's req/s",
				r.Workload, r.Skipped, r.Errors, r.FirstError, r.Requests, r.RPSvsTS)
		}
	}
	if want := []string{"serve-list", "serve-read-1k", "serve-read-1k-x4"}; !slices.Equal(slices.Sorted(maps.Keys(floorRows)), want) {
		t.Errorf("floor rows in %v, want exactly %v", slices.Sorted(maps.Keys(floorRows)), want)
	}
	named := 0
	for _, b := range rep.Budgets {
		if strings.Contains(b.Measured, "the floor (answers from memory)") {
			named++
		}
	}
	if named != 3 {
		t.Errorf("%d budgets name the floor, want the 3 serve reads and listings: %+v", named, rep.Budgets)
	}
}
