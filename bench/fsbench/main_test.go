// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// These tests run tiny workloads against the real fsbaseline and fsbroker
// binaries, and mark3labs/mcp-filesystem-server when it can be built (from
// the Go module proxy, bench/peers/mark3labs), built once in TestMain, and
// check that the report is sane. They assert nothing about speed.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/npmtest"
)

var binDir string // where TestMain built fsbaseline, fsbroker and mark3labs' server

// mark3labsMissing is why TestMain could not build mark3labs' server ("":
// it did): without the module proxy, or with the proxy refusing, the tests
// run without that target and say so, unless FSBROKER_REQUIRE_INTEROP=1 (as
// CI sets it).
var mark3labsMissing string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fsbench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	goTool := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goTool = p // go test puts its own toolchain first on PATH
	}
	for name, pkg := range map[string]string{
		"fsbaseline": "github.com/fsbroker/fsbroker/bench/fsbaseline",
		"fsbroker":   "github.com/fsbroker/fsbroker/cmd/fsbroker",
	} {
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, name), pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", name, err, out)
			return 1
		}
	}
	// mark3labs' server, in its own module (as make bench-e2e builds it).
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "mcp-filesystem-server"), mark3labsPackage)
	cmd.Dir = filepath.Join("..", "peers", "mark3labs")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		mark3labsMissing = fmt.Sprintf("building %s in %s: %v: %s", mark3labsPackage, cmd.Dir, err, strings.TrimSpace(string(out)))
	}
	return m.Run()
}

// mark3labsPackage is the mark3labs target's main package.
const mark3labsPackage = "github.com/mark3labs/mcp-filesystem-server"

// withMark3labs returns targets with mark3labs added when TestMain built
// it; when it could not, the test says why and goes on without it, or
// fails when FSBROKER_REQUIRE_INTEROP=1.
func withMark3labs(t *testing.T, targets string) string {
	t.Helper()
	if mark3labsMissing == "" {
		return targets + ",mark3labs"
	}
	if os.Getenv(npmtest.RequireEnv) == "1" {
		t.Fatalf("%s=1, but mark3labs/mcp-filesystem-server cannot be built: %s", npmtest.RequireEnv, mark3labsMissing)
	}
	t.Logf("mark3labs/mcp-filesystem-server not available, its rows are left out (set %s=1 to fail instead): %s",
		npmtest.RequireEnv, mark3labsMissing)
	return targets
}

// tinyConfig is a run of every workload that takes a few seconds. The
// TypeScript server's place is taken by fsbaseline --tools, a real MCP
// filesystem server with the same tools, so that every row and budget that
// needs one is measured.
func tinyConfig(t *testing.T, targets string) *config {
	t.Helper()
	cfg, err := parseFlags([]string{
		"-targets", targets,
		"-baseline", filepath.Join(binDir, "fsbaseline") + " --root {root}:rw",
		"-fsbroker", filepath.Join(binDir, "fsbroker") + " stdio --config {config} --state-dir {state} --rate-limit 0",
		"-ts", filepath.Join(binDir, "fsbaseline") + " --tools --root {root}:rw",
		"-mark3labs", filepath.Join(binDir, "mcp-filesystem-server") + " {root}",
		"-baseline-tools", filepath.Join(binDir, "fsbaseline") + " --tools --root {root}:rw",
		"-fsbroker-serve", filepath.Join(binDir, "fsbroker") + " serve --config {config} --state-dir {state} --rate-limit 0",
		"-duration", "150ms", "-warmup", "30ms", "-inflight", "4", "-starts", "2",
		"-files", "4", "-list", "50", "-big", "250", "-page", "100",
		"-first", "3000", "-first-dirs", "300", "-first-list", "10",
		"-chunked-size", "300K", "-chunk", "64K", // 5 chunks, the last a short one
		"-dir", t.TempDir(), "-timeout", "20s",
	}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRunAgainstBaselineAndBroker(t *testing.T) {
	targets := withMark3labs(t, "baseline,fsbroker,ts")
	mark3labs := strings.HasSuffix(targets, ",mark3labs")
	cfg := tinyConfig(t, targets)
	cfg.decideBench = filepath.Join(t.TempDir(), "decide.txt")
	if err := os.WriteFile(cfg.decideBench, []byte(decideBenchOutput), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := run(cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	n := len(splitList(targets))
	want := 0
	for _, w := range allWorkloads(4) {
		switch {
		case w.kind == "chunked":
			want += chunkedRows * n
		case w.serve && w.kind == "start":
			want += serveStartRows * n
		default:
			want += n
		}
	}
	if len(rep.Results) != want {
		t.Fatalf("%d results, want %d (every workload against the %d targets)", len(rep.Results), want, n)
	}
	for _, r := range rep.Results {
		name := r.Title + ", " + r.Target
		switch {
		case (r.Target == "ts" || r.Target == "mark3labs") && strings.HasPrefix(r.Skipped, "n/a: ") &&
			(r.Workload == "list-paged" || strings.HasPrefix(r.Workload, "chunked-")):
			continue // no paged listing, no chunks: MCP filesystem servers
		case r.Skipped != "":
			t.Errorf("%s: skipped: %s", name, r.Skipped)
			continue
		case r.Errors > 0:
			t.Errorf("%s: %d errors, the first: %s", name, r.Errors, r.FirstError)
		case r.Requests == 0:
			t.Errorf("%s: no request measured", name)
		case r.P50 <= 0 || r.P50 > r.P99:
			t.Errorf("%s: p50 %v, p99 %v", name, r.P50, r.P99)
		case !isStartRow(r.Workload) && r.RPS <= 0:
			t.Errorf("%s: %v req/s", name, r.RPS)
		case runtime.GOOS == "linux" && r.PeakRSS <= 0:
			t.Errorf("%s: peak RSS %d", name, r.PeakRSS)
		case strings.HasPrefix(r.Workload, "chunked-") && (r.Requests != 5 || r.BytesPerSecond <= 0):
			t.Errorf("%s: %d chunks at %v bytes/s, want all 5", name, r.Requests, r.BytesPerSecond)
		}
		if r.Target == "baseline" && !isStartRow(r.Workload) && r.RPSvsBaseline != 1 {
			t.Errorf("%s: %v the baseline's req/s, want 1", name, r.RPSvsBaseline)
		}
		noTS := slices.Contains([]string{"list-paged", "chunked-write", "chunked-read"}, r.Workload)
		if r.Target == "fsbroker" && (r.P50vsBaseline <= 0 || r.P50vsTS <= 0 && !noTS) {
			t.Errorf("%s: no ratio against the baseline (%v) or the ts server (%v)", name, r.P50vsBaseline, r.P50vsTS)
		}
		if mark3labs && r.Target == "fsbroker" && (r.P50vsMark3labs <= 0 || !isStartRow(r.Workload) && r.RPSvsMark3labs <= 0) && !noTS {
			t.Errorf("%s: no ratio against mark3labs (p50 %v, req/s %v)", name, r.P50vsMark3labs, r.RPSvsMark3labs)
		}
		if (strings.HasPrefix(r.Workload, "serve-") || strings.HasPrefix(r.Workload, "first-")) && !isStartRow(r.Workload) {
			// Each request names a path of its own: the warm-up and the
			// measured part together never repeat one.
			paths := 3000
			if strings.HasSuffix(r.Workload, "-list") {
				paths = 300
			}
			if r.Requests > paths {
				t.Errorf("%s: %d requests measured, more than the %d paths", name, r.Requests, paths)
			}
		}
		if (r.Workload == "list-paged") != (r.FirstPage > 0) {
			t.Errorf("%s: first page %v (only the paged listing has one)", name, r.FirstPage)
		}
	}
	// The budgets: the first-touch ones (issues 21 and 19) and the others.
	var serveBudgets, firstBudgets, firstTouch, decision int
	for _, b := range rep.Budgets {
		switch {
		case strings.HasPrefix(b.Budget, "serve: ") || strings.HasPrefix(b.Budget, "fsbroker serve: "):
			serveBudgets++
		case strings.HasPrefix(b.Budget, "first touch: "):
			firstBudgets++
		case strings.HasPrefix(b.Budget, "policy decision, uncached"):
			decision++
			if b.Met == nil || *b.Met || !strings.Contains(b.Measured, "p50 63.2 us, p99 256.5 us") {
				t.Errorf("decision budget %+v: want not met, with the benchmark's p50 and p99 of thread CPU", b)
			}
		}
		if b.FirstTouch {
			firstTouch++
		}
		if b.Met == nil && !(!mark3labs && strings.HasSuffix(b.Budget, ">= mark3labs'")) {
			t.Errorf("budget %q not measured: %s", b.Budget, b.Measured)
		}
	}
	if serveBudgets != 6 {
		t.Errorf("%d serve budgets, want 6 (reads, reads in flight, listings, the two starts, RSS): %+v", serveBudgets, rep.Budgets)
	}
	if firstBudgets != 5 {
		t.Errorf("%d first-touch budgets of the client role, want 5 (reads and reads in flight against the baseline and mark3labs, listings): %+v",
			firstBudgets, rep.Budgets)
	}
	if decision != 1 {
		t.Errorf("%d decision budgets, want 1: %+v", decision, rep.Budgets)
	}
	// Those, the paged listing's first page, the start and every run's RSS.
	if want := serveBudgets + firstBudgets + decision + 3; firstTouch != want {
		t.Errorf("%d first-touch budgets, want %d: %+v", firstTouch, want, rep.Budgets)
	}
	if g := rep.budgetGroups(); len(g[0]) != firstTouch || !strings.HasPrefix(g[0][0].Budget, "first touch: ") {
		t.Errorf("first-touch budgets %+v: want them all, the client role's reads first", g[0])
	}
	if len(rep.Budgets)-firstTouch != 9 {
		t.Errorf("%d other budgets, want 9 (six reads, the listing, the pages, the chunked run): %+v", len(rep.Budgets)-firstTouch, rep.Budgets)
	}

	for _, format := range []string{"text", "markdown", "json"} {
		var out bytes.Buffer
		if err := rep.write(&out, format); err != nil {
			t.Fatal(err)
		}
		wants := []string{"files/read 1 KiB", "serve: read_text_file 1 KiB, each file once", "serve: start to the first tools/call result",
			"first touch: files/read 1 KiB, each file once, 4 in flight", "first touch: files/list of 10 entries, each directory once"}
		if format != "json" {
			wants = append(wants, "First touch: each request names a path", "fsbroker serve", "baseline --tools",
				budgetHeadings[0], budgetHeadings[1], "the first page of 250 entries")
			if mark3labs {
				wants = append(wants, "mark3labs")
			}
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s output without %q:\n%s", format, want, out.String())
			}
		}
		firstPage := "fsbroker: first page "
		if format == "json" {
			firstPage = `"firstPageNs"`
		}
		if !strings.Contains(out.String(), firstPage) {
			t.Errorf("%s output without the paged listing's first page:\n%s", format, out.String())
		}
		if format == "json" {
			var back Report
			if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) {
				t.Errorf("the JSON does not read back (%v):\n%s", err, out.String())
			}
		}
	}
}

// TestMissingTargetIsSkipped: a target that cannot start (the TypeScript
// server not installed, mark3labs' server not built) is reported as
// skipped, with the reason and what to do, and the others still run.
func TestMissingTargetIsSkipped(t *testing.T) {
	cfg := tinyConfig(t, "baseline,ts,mark3labs")
	cfg.ts = filepath.Join(binDir, "no-such-server") + " {root}"
	cfg.mark3labs = filepath.Join(binDir, "no-such-mcp-filesystem-server") + " {root}"
	cfg.workloads = "read-1k,start,first-read-1k"
	rep, err := run(cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 3 || !strings.Contains(rep.Targets[1].Skipped, "bench/install-ts-server.sh") ||
		!strings.Contains(rep.Targets[2].Skipped, "bench/peers/mark3labs") {
		t.Fatalf("targets %+v: want ts and mark3labs skipped with the install and build hints", rep.Targets)
	}
	if len(rep.Results) != 3 || !rep.Results[0].ok() || rep.Results[0].Target != "baseline" {
		t.Fatalf("results %+v: want the baseline's three", rep.Results)
	}
	var out bytes.Buffer
	rep.write(&out, "text")
	for _, want := range []string{"target ts: skipped: cannot start", "target mark3labs: skipped: cannot start"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table does not say %q:\n%s", want, out.String())
		}
	}
}

// TestRunTimesOut: a target that never answers is killed after -timeout and
// the run reports it instead of hanging.
func TestRunTimesOut(t *testing.T) {
	cfg := tinyConfig(t, "baseline")
	// A "broker" that sends initialize, takes the result and then reads
	// forever without answering.
	script := filepath.Join(t.TempDir(), "silent.sh")
	body := `#!/bin/sh
echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"filesystemBrokering":true}}}}'
read -r line
echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
while read -r line; do :; done
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.baseline = script
	cfg.workloads = "read-1k"
	cfg.timeout = 500 * time.Millisecond
	start := time.Now()
	rep, err := run(cfg, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || !strings.Contains(rep.Results[0].Skipped, "no answer in time") {
		t.Fatalf("results %+v: want the run failed for no answer", rep.Results)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-format", "yaml"},
		{"-targets", "baseline,nginx"},
		{"-workloads", "read-2k"},
		{"-page", "0"},
		{"-chunk", "0"},
		{"-chunked-size", "1T"},
		{"-chunked-size", "-1"},
		{"extra"},
	} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	cfg, err := parseFlags([]string{"-workloads", "read-1k-xN,list"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, w := range allWorkloads(cfg.inflight) {
		if cfg.selected(w) {
			keys = append(keys, w.key)
		}
	}
	if strings.Join(keys, ",") != "read-1k-x8,list" {
		t.Errorf("selected %v", keys)
	}
}

func TestSkim(t *testing.T) {
	line := []byte(`{"result":{"content":"a \"quoted\" \\ \\\" {[ text","n":[1,{"x":"}"}],"isError":false},"jsonrpc":"2.0","id":42}`)
	id, result, rpcErr, isReply, err := envelope(line)
	if err != nil || id != 42 || rpcErr != nil || !isReply {
		t.Fatalf("envelope: id %d, error %s, reply %v, %v", id, rpcErr, isReply, err)
	}
	if got := string(member(result, "content")); got != `"a \"quoted\" \\ \\\" {[ text"` {
		t.Errorf("content %s", got)
	}
	if got := string(member(result, "n")); got != `[1,{"x":"}"}]` {
		t.Errorf("n %s", got)
	}
	if got := string(member(result, "isError")); got != "false" {
		t.Errorf("isError %s", got)
	}
	if _, _, _, isReply, _ := envelope([]byte(`{"jsonrpc":"2.0","method":"notifications/x","params":{}}`)); isReply {
		t.Error("a notification taken for a reply")
	}
	for _, bad := range []string{``, `[1]`, `{"a":}`, `{"a":"unterminated}`, `{"a":1`} {
		if _, _, _, _, err := envelope([]byte(bad)); err == nil {
			t.Errorf("%q skimmed without an error", bad)
		}
	}
}

func TestMedianRound(t *testing.T) {
	rounds := []*result{{Workload: "read-1k", RPS: 3}, {Workload: "read-1k", RPS: 1}, {Workload: "read-1k", RPS: 2}}
	if m := median(rounds); m.RPS != 2 || m.Rounds != 3 {
		t.Errorf("median of 3, 1, 2 req/s: %+v", m)
	}
	starts := []*result{{Workload: "start", P50: 30}, {Workload: "start", P50: 10}, {Workload: "start", P50: 20}}
	if m := median(starts); m.P50 != 20 {
		t.Errorf("median start: %+v", m)
	}
	pages := []*result{{Workload: "list-paged", RPS: 1, FirstPage: 9}, {Workload: "list-paged", RPS: 2, FirstPage: 7},
		{Workload: "list-paged", RPS: 3, FirstPage: 8}}
	if m := median(pages); m.RPS != 2 || m.FirstPage != 8 {
		t.Errorf("median of paged rounds: %+v, want 2 req/s and the median first page, 8", m)
	}
	rounds[1].Errors = 1
	if m := median(rounds); m != rounds[1] {
		t.Errorf("a round with errors is not the one reported: %+v", m)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 50), percentile(d, 99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %v, p99 %v", p50, p99)
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestCPUTime reads a process's CPU time as it grows: this test process
// burns CPU until /proc says it used more than before.
func TestCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU time comes from /proc")
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: &exec.Cmd{Process: self}}
	before := c.cpuTime()
	if before < 0 {
		t.Fatalf("cpuTime %v", before)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for c.cpuTime() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v while this test burned CPU", before)
		}
		for i := range 1_000_000 {
			x ^= i
		}
	}
	_ = x
}
