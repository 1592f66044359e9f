// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The decision budget of issue 21 (an uncached decision with the built-in
// set and 20 grants: p50 <= 15 us, p99 <= 60 us) is measured by a Go
// benchmark, engine's BenchmarkDecideFirstTouch, not end to end: `make
// bench-e2e` runs it first, as docs/performance.md says to (GOGC=400
// GOMEMLIMIT=36MiB, -cpu 1), and hands its output to fsbench (-decide FILE),
// which reads the figures and puts the budget beside the others.

// decideBenchmark is the benchmark whose output -decide reads.
const decideBenchmark = "BenchmarkDecideFirstTouch"

// decideBudgetCase is the sub-benchmark the budget is about: the built-in
// set with 20 grants.
const decideBudgetCase = "default"

// The decision budget, on each call's thread CPU time.
const (
	decideP50Budget = 15 * time.Microsecond
	decideP99Budget = 60 * time.Microsecond
)

// decisionFigures are one sub-benchmark's percentiles, of each call's
// thread CPU time and of its wall time.
type decisionFigures struct {
	Name   string        `json:"name"` // the sub-benchmark: default (20 grants), default-2grants
	P50CPU time.Duration `json:"p50CpuNs"`
	P99CPU time.Duration `json:"p99CpuNs"`
	P50    time.Duration `json:"p50Ns"`
	P99    time.Duration `json:"p99Ns"`
}

// benchLine matches a result line of decideBenchmark: its sub-benchmark's
// name (without the -GOMAXPROCS suffix go test adds beyond -cpu 1), then
// the iterations and the metrics.
var benchLine = regexp.MustCompile(`^` + decideBenchmark + `/(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parseDecideBench reads the figures of every sub-benchmark of
// decideBenchmark in out, the output of `go test -bench`. It fails when a
// result line lacks a figure, and when there is no result line (the
// benchmark failed, or did not run).
func parseDecideBench(out []byte) ([]decisionFigures, error) {
	var figs []decisionFigures
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := decisionFigures{Name: m[1]}
		metrics := map[string]*time.Duration{"p50-cpu-ns": &f.P50CPU, "p99-cpu-ns": &f.P99CPU, "p50-ns": &f.P50, "p99-ns": &f.P99}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			if d, ok := metrics[fields[i+1]]; ok {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					return nil, fmt.Errorf("%s/%s: %s %q: %w", decideBenchmark, f.Name, fields[i+1], fields[i], err)
				}
				*d = time.Duration(v)
				delete(metrics, fields[i+1])
			}
		}
		if len(metrics) > 0 {
			return nil, fmt.Errorf("%s/%s: a result without its percentiles: %s", decideBenchmark, f.Name, sc.Text())
		}
		figs = append(figs, f)
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("no %s result in the output", decideBenchmark)
	}
	return figs, nil
}

// readDecideBench sets rep's decision figures from the file path (-decide),
// or, when it cannot, why not.
func (rep *Report) readDecideBench(path string) {
	out, err := os.ReadFile(path)
	if err == nil {
		rep.Decisions, err = parseDecideBench(out)
	}
	if err != nil {
		rep.DecideError = err.Error()
	}
}

// decisionBudgets is the decision budget as -decide's benchmark measured
// it; none without -decide.
func (rep *Report) decisionBudgets() []budget {
	name := fmt.Sprintf("policy decision, uncached (%s/%s: built-in set, 20 grants): p50 <= %s, p99 <= %s of thread CPU",
		decideBenchmark, decideBudgetCase, fmtDur(decideP50Budget), fmtDur(decideP99Budget))
	if rep.DecideError != "" {
		return []budget{{Budget: name, Measured: "not measured: " + rep.DecideError}}
	}
	for _, f := range rep.Decisions {
		if f.Name == decideBudgetCase {
			met := f.P50CPU <= decideP50Budget && f.P99CPU <= decideP99Budget
			return []budget{{Budget: name, Met: &met, Measured: fmt.Sprintf("p50 %s, p99 %s (wall: p50 %s, p99 %s)",
				fmtDur(f.P50CPU), fmtDur(f.P99CPU), fmtDur(f.P50), fmtDur(f.P99))}}
		}
	}
	if len(rep.Decisions) > 0 {
		return []budget{{Budget: name, Measured: "not measured: no " + decideBudgetCase + " case in the benchmark's output"}}
	}
	return nil
}
