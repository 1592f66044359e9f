// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"
)

// decideBenchOutput is the output of `GOGC=400 GOMEMLIMIT=36MiB go test
// -run '^$' -bench DecideFirstTouch -benchtime 2000x -cpu 1 ./engine` on the
// project's machine (2026-11-27), as make bench-e2e hands it to fsbench.
const decideBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/fsbroker/fsbroker/engine
cpu: AMD EPYC
BenchmarkDecideFirstTouch/default         	    2000	     80372 ns/op	     63193 p50-cpu-ns	     62993 p50-ns	    256451 p99-cpu-ns	    268508 p99-ns	   22959 B/op	     434 allocs/op
BenchmarkDecideFirstTouch/default-2grants 	    2000	     82617 ns/op	     62743 p50-cpu-ns	     62522 p50-ns	    237512 p99-cpu-ns	    243542 p99-ns	   22945 B/op	     434 allocs/op
PASS
ok  	github.com/fsbroker/fsbroker/engine	0.413s
`

func TestParseDecideBench(t *testing.T) {
	figs, err := parseDecideBench([]byte(decideBenchOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []decisionFigures{
		{Name: "default", P50CPU: 63193, P99CPU: 256451, P50: 62993, P99: 268508},
		{Name: "default-2grants", P50CPU: 62743, P99CPU: 237512, P50: 62522, P99: 243542},
	}
	if len(figs) != len(want) || figs[0] != want[0] || figs[1] != want[1] {
		t.Fatalf("figures %+v, want %+v", figs, want)
	}
	// go test names a benchmark run with GOMAXPROCS above 1 with a suffix.
	withProcs := strings.Replace(decideBenchOutput, "/default  ", "/default-2", 1)
	if figs, err := parseDecideBench([]byte(withProcs)); err != nil || figs[0].Name != "default" {
		t.Errorf("with the -2 suffix: %+v, %v", figs, err)
	}
	for name, bad := range map[string]string{
		"no result": "--- FAIL: BenchmarkDecideFirstTouch/default\n    firsttouch_bench_test.go:73: decision: deny\nFAIL\n",
		"no p99":    "BenchmarkDecideFirstTouch/default  2000  80372 ns/op  63193 p50-cpu-ns  62993 p50-ns  268508 p99-ns\n",
		"bad value": "BenchmarkDecideFirstTouch/default  2000  80372 ns/op  x p50-cpu-ns  62993 p50-ns  1 p99-cpu-ns  268508 p99-ns\n",
	} {
		if figs, err := parseDecideBench([]byte(bad)); err == nil {
			t.Errorf("%s: figures %+v, want an error", name, figs)
		}
	}
}

// TestDecisionBudget: the budget is on the 20-grant case's thread CPU
// percentiles, met only when both are within it, and not measured (saying
// why) when the benchmark gave nothing.
func TestDecisionBudget(t *testing.T) {
	for _, c := range []struct {
		p50, p99 time.Duration
		met      bool
	}{
		{15 * time.Microsecond, 60 * time.Microsecond, true},
		{16 * time.Microsecond, 30 * time.Microsecond, false},
		{10 * time.Microsecond, 61 * time.Microsecond, false},
	} {
		rep := &Report{Decisions: []decisionFigures{
			{Name: "default-2grants", P50CPU: time.Microsecond, P99CPU: time.Microsecond},
			{Name: "default", P50CPU: c.p50, P99CPU: c.p99, P50: time.Second, P99: time.Second},
		}}
		b := rep.decisionBudgets()
		if len(b) != 1 || b[0].Met == nil || *b[0].Met != c.met {
			t.Errorf("p50 %v, p99 %v: %+v, want met %v", c.p50, c.p99, b, c.met)
		}
	}
	rep := &Report{}
	rep.readDecideBench(t.TempDir() + "/missing.txt")
	if b := rep.decisionBudgets(); len(b) != 1 || b[0].Met != nil || !strings.Contains(b[0].Measured, "not measured") {
		t.Errorf("no output: %+v, want the budget not measured", b)
	}
	if b := (&Report{}).decisionBudgets(); len(b) != 0 {
		t.Errorf("without -decide: %+v, want no decision budget", b)
	}
}
