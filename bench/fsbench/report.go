// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one fsbench run's figures; -format json prints it as is.
type Report struct {
	Date     string       `json:"date"` // RFC 3339, UTC
	Machine  machine      `json:"machine"`
	Settings settings     `json:"settings"`
	Targets  []targetInfo `json:"targets"`
	Results  []*result    `json:"results"`
	// Decisions are engine's BenchmarkDecideFirstTouch figures (-decide),
	// one per sub-benchmark; none without -decide.
	Decisions []decisionFigures `json:"decisions,omitempty"`
	// DecideError is why -decide gave no figures ("": it did, or no -decide).
	DecideError string   `json:"decideError,omitempty"`
	Budgets     []budget `json:"budgets"`
}

// machine is where the run happened.
type machine struct {
	CPUs   int    `json:"cpus"`
	Model  string `json:"model"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Kernel string `json:"kernel,omitempty"`
	Go     string `json:"go"`
	// The load averages (1, 5 and 15 minutes) before and after the run: a
	// busy machine's figures are not comparable with a quiet one's.
	LoadBefore string `json:"loadBefore,omitempty"`
	LoadAfter  string `json:"loadAfter,omitempty"`
}

// loadAverage returns the first three fields of /proc/loadavg, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// settings are the run's flags that shape the figures.
type settings struct {
	Warmup   string `json:"warmup"`
	Duration string `json:"duration"`
	MaxN     int    `json:"maxRequests,omitempty"`
	Inflight int    `json:"inflight"`
	Files    int    `json:"files"`
	ListN    int    `json:"listEntries"`
	BigN     int    `json:"pagedEntries"`
	Page     int    `json:"pageSize"`
	Starts   int    `json:"starts"`
	Rounds   int    `json:"rounds"`
	// The chunked run's file and request sizes, in bytes.
	ChunkedSize int64 `json:"chunkedSize"`
	Chunk       int64 `json:"chunk"`
	// The first-touch and serve workloads' paths, each requested once a
	// child: files of 1 KiB, and directories of FirstList entries.
	First     int `json:"firstFiles"`
	FirstDirs int `json:"firstDirs"`
	FirstList int `json:"firstListEntries"`
}

// targetInfo is one target as run (or skipped).
type targetInfo struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	Skipped string `json:"skipped,omitempty"`
	// The command of the serve workloads, when any ran.
	ServeCommand string `json:"serveCommand,omitempty"`
	ServeSkipped string `json:"serveSkipped,omitempty"`
}

// result is one workload against one target.
type result struct {
	Workload   string        `json:"workload"`
	Title      string        `json:"title"`
	Target     string        `json:"target"`
	Requests   int           `json:"requests"` // measured and successful (pages, starts)
	Errors     int           `json:"errors"`
	FirstError string        `json:"firstError,omitempty"`
	P50        time.Duration `json:"p50Ns"`
	P99        time.Duration `json:"p99Ns"`
	// FirstPage is a paged listing's first page (its latency): the child's
	// first listing of the directory, which it has not listed before (after
	// one listing of a small directory, so that the child is warm); 0 for
	// the other workloads. p50 and p99 leave it out (it is sent in the
	// warm-up) unless -warmup is 0.
	FirstPage time.Duration `json:"firstPageNs,omitempty"`
	// FirstPageCPU is the target's CPU time over its first page (every
	// thread's, to the nanosecond); 0 when not known.
	FirstPageCPU time.Duration `json:"firstPageCpuNs,omitempty"`
	RPS          float64       `json:"rps"`          // 0 for starts
	PeakRSS      int64         `json:"peakRssBytes"` // -1: not known (not Linux)
	// CPUPerRequest is the target's CPU time (user and system, every
	// thread) over the measured part, per measured request; 0 when not
	// known. On a shared machine it holds better than req/s, which waits on
	// the scheduler.
	CPUPerRequest time.Duration `json:"cpuPerRequestNs,omitempty"`
	// BytesPerSecond is the chunked run's file size over the time of its
	// half (write or read); 0 for the other workloads.
	BytesPerSecond float64 `json:"bytesPerSecond,omitempty"`
	Skipped        string  `json:"skipped,omitempty"`
	Rounds         int     `json:"rounds,omitempty"` // the median of this many rounds

	// Ratios against the baseline's, mark3labs' and the TypeScript
	// server's figures in the same run; 0 when there is none.
	RPSvsBaseline  float64 `json:"rpsVsBaseline,omitempty"`
	RPSvsMark3labs float64 `json:"rpsVsMark3labs,omitempty"`
	RPSvsTS        float64 `json:"rpsVsTs,omitempty"`
	P50vsBaseline  float64 `json:"p50VsBaseline,omitempty"`
	P50vsMark3labs float64 `json:"p50VsMark3labs,omitempty"`
	P50vsTS        float64 `json:"p50VsTs,omitempty"`
}

// budget is one of fsbroker's budgets (docs/performance.md) as this run measured it.
type budget struct {
	Budget   string `json:"budget"`
	Measured string `json:"measured"`
	Met      *bool  `json:"met"` // null: not measured in this run
	// FirstTouch: a budget of issue 21 or of issue 19's serve, on paths
	// never requested before (printed first, under a heading of its own).
	FirstTouch bool `json:"firstTouch,omitempty"`
}

func newReport(cfg *config) *Report {
	return &Report{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: thisMachine(),
		Settings: settings{
			Warmup: cfg.warmup.String(), Duration: cfg.duration.String(), MaxN: cfg.max, Inflight: cfg.inflight,
			Files: cfg.files, ListN: cfg.listN, BigN: cfg.bigN, Page: cfg.page, Starts: cfg.starts,
			Rounds: cfg.rounds, ChunkedSize: cfg.chunkedSize, Chunk: cfg.chunk,
			First: cfg.first, FirstDirs: cfg.firstDirs, FirstList: cfg.firstList,
		},
		Results: []*result{},
		Budgets: []budget{},
	}
}

func thisMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(), Model: "unknown",
		LoadBefore: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// fill sets the figures from a run's stats.
func (r *result) fill(st *runStats) {
	r.Requests, r.Errors, r.FirstError = len(st.lat), st.errors, st.firstErr
	r.RPS = st.rps()
	r.P50 = percentile(st.lat, 50)
	r.P99 = percentile(st.lat, 99)
	r.FirstPage = st.first
	if r.FirstPage > 0 {
		r.FirstPageCPU = st.firstCPU
	}
}

// ok reports whether r has figures to compare.
func (r *result) ok() bool { return r != nil && r.Skipped == "" && r.Requests > 0 }

// summary is r in one line, for the progress output.
func (r *result) summary() string {
	if r.Skipped != "" {
		return r.Skipped
	}
	s := fmt.Sprintf("p50 %s, p99 %s", fmtDur(r.P50), fmtDur(r.P99))
	if r.FirstPage > 0 {
		s += ", first page " + fmtDur(r.FirstPage)
		if r.FirstPageCPU > 0 {
			s += " (CPU " + fmtDur(r.FirstPageCPU) + ")"
		}
	}
	if r.RPS > 0 {
		s = fmtRPS(r.RPS) + " req/s, " + s
	}
	if r.BytesPerSecond > 0 {
		s = fmtMiBps(r.BytesPerSecond) + ", " + s
	}
	if r.CPUPerRequest > 0 {
		s += ", CPU/req " + fmtDur(r.CPUPerRequest)
	}
	s += ", peak RSS " + fmtRSS(r.PeakRSS)
	if r.Errors > 0 {
		s += fmt.Sprintf("; %d errors, the first: %s", r.Errors, r.FirstError)
	}
	return s
}

// find returns the result of workload against target, or nil.
func (rep *Report) find(workload, target string) *result {
	for _, r := range rep.Results {
		if r.Workload == workload && r.Target == target {
			return r
		}
	}
	return nil
}

// ratio is a / b, or 0 when either is not positive.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// finish computes the ratios and the budgets.
func (rep *Report) finish() {
	for _, r := range rep.Results {
		if !r.ok() {
			continue
		}
		if base := rep.find(r.Workload, "baseline"); base.ok() {
			r.RPSvsBaseline = ratio(r.RPS, base.RPS)
			r.P50vsBaseline = ratio(float64(r.P50), float64(base.P50))
		}
		if m := rep.find(r.Workload, "mark3labs"); m.ok() {
			r.RPSvsMark3labs = ratio(r.RPS, m.RPS)
			r.P50vsMark3labs = ratio(float64(r.P50), float64(m.P50))
		}
		if ts := rep.find(r.Workload, "ts"); ts.ok() {
			r.RPSvsTS = ratio(r.RPS, ts.RPS)
			r.P50vsTS = ratio(float64(r.P50), float64(ts.P50))
		}
	}
	rep.Budgets = rep.budgets()
}

// firstTouch marks bs as first-touch budgets and returns them.
func firstTouch(bs []budget) []budget {
	for i := range bs {
		bs[i].FirstTouch = true
	}
	return bs
}

// budgets checks fsbroker's figures against its budgets (docs/performance.md).
func (rep *Report) budgets() []budget {
	var out []budget
	first := false // whether the budgets add adds are first-touch ones
	add := func(name, measured string, met *bool) {
		out = append(out, budget{Budget: name, Measured: measured, Met: met, FirstTouch: first})
	}
	verdict := func(ok bool) *bool { return &ok }
	minimum := map[int]float64{1 << 10: 0.5, 64 << 10: 0.8, 1 << 20: 0.9}
	for _, w := range allWorkloads(rep.Settings.Inflight) {
		broker, base := rep.find(w.key, "fsbroker"), rep.find(w.key, "baseline")
		first = w.once || w.serve || w.kind == "start"
		if w.serve && w.kind == "start" {
			out = append(out, firstTouch(rep.serveStartBudgets(w))...)
			continue
		}
		if broker == nil {
			continue // not run
		}
		if w.once && !w.serve {
			out = append(out, firstTouch(rep.firstTouchBudgets(w, broker, base))...)
			continue
		}
		if w.serve { // reads and listings: against the reference server
			name := broker.Title + ": req/s >= 3x the reference server's"
			ts := rep.find(w.key, "ts")
			if !broker.ok() || !ts.ok() {
				add(name, "not measured", nil)
				continue
			}
			measured := fmt.Sprintf("%.2fx (%s against %s req/s)", broker.RPSvsTS, fmtRPS(broker.RPS), fmtRPS(ts.RPS))
			if base.ok() {
				measured += fmt.Sprintf("; %.2fx the baseline's", broker.RPSvsBaseline)
			}
			if floor := rep.find(w.key, "floor"); floor.ok() {
				measured += fmt.Sprintf("; the floor (answers from memory) %.2fx the reference's", floor.RPSvsTS)
			}
			add(name, measured, verdict(broker.RPSvsTS >= 3))
			continue
		}
		switch w.kind {
		case "read":
			name := fmt.Sprintf("%s: req/s >= %.1fx the baseline's", w.title, minimum[w.size])
			if !broker.ok() || !base.ok() {
				add(name, "not measured", nil)
				continue
			}
			add(name, fmt.Sprintf("%.2fx", broker.RPSvsBaseline), verdict(broker.RPSvsBaseline >= minimum[w.size]))
		case "list":
			name := broker.Title + ": p50 <= 1.5x the baseline's"
			if !broker.ok() || !base.ok() {
				add(name, "not measured", nil)
				continue
			}
			add(name, fmt.Sprintf("%.2fx (%s against %s)", broker.P50vsBaseline, fmtDur(broker.P50), fmtDur(base.P50)),
				verdict(broker.P50vsBaseline <= 1.5))
		case "pages":
			name := broker.Title + ": p99 < 50 ms a page"
			if !broker.ok() {
				add(name, "not measured", nil)
				continue
			}
			add(name, fmt.Sprintf("p50 %s, p99 %s", fmtDur(broker.P50), fmtDur(broker.P99)), verdict(broker.P99 < 50*time.Millisecond))
			first = true
			name = fmt.Sprintf("files/list of %d entries: the first page, of a directory not listed before, <= 50 ms", rep.Settings.BigN)
			if !broker.ok() || broker.FirstPage <= 0 {
				add(name, "not measured", nil)
				continue
			}
			measured := fmtDur(broker.FirstPage)
			if base.ok() && base.FirstPage > 0 {
				measured += " (the baseline: " + fmtDur(base.FirstPage) + ")"
			}
			add(name, measured, verdict(broker.FirstPage <= 50*time.Millisecond))
		case "start":
			name := "start to initialize sent: p50 <= 50 ms"
			if !broker.ok() {
				add(name, "not measured", nil)
				continue
			}
			add(name, fmt.Sprintf("p50 %s, p99 %s", fmtDur(broker.P50), fmtDur(broker.P99)), verdict(broker.P50 <= 50*time.Millisecond))
		}
	}
	first = false
	if write, read := rep.find("chunked-write", "fsbroker"), rep.find("chunked-read", "fsbroker"); write != nil {
		name := fmt.Sprintf("%s written and read in %s chunks: peak RSS <= 64 MiB",
			sizeName(rep.Settings.ChunkedSize), sizeName(rep.Settings.Chunk))
		switch {
		case !write.ok() || !read.ok() || write.Errors > 0 || read.Errors > 0:
			add(name, "not measured (the run failed)", nil)
		case write.PeakRSS < 0 || read.PeakRSS < 0:
			add(name, "n/a (no /proc/PID/status)", nil)
		default:
			add(name, fmt.Sprintf("write %s, read %s (%s and %s)", fmtRSS(write.PeakRSS), fmtRSS(read.PeakRSS),
				fmtMiBps(write.BytesPerSecond), fmtMiBps(read.BytesPerSecond)),
				verdict(write.PeakRSS <= 64<<20 && read.PeakRSS <= 64<<20))
		}
	}
	out = append(out, firstTouch(rep.peakRSSBudget("fsbroker serve: peak RSS <= 64 MiB in every serve run", func(r *result) bool {
		return strings.HasPrefix(r.Workload, "serve-")
	}))...)
	out = append(out, firstTouch(rep.peakRSSBudget("peak RSS <= 64 MiB in every run", func(*result) bool { return true }))...)
	return append(out, firstTouch(rep.decisionBudgets())...)
}

// firstTouchBudgets are the budgets of w, a first-touch workload in
// fsbroker's client role (issue 21): reads at least half the baseline's
// req/s and never fewer than mark3labs'; a listing's p50 at most 1.5x the
// baseline's.
func (rep *Report) firstTouchBudgets(w workload, broker, base *result) []budget {
	var out []budget
	add := func(name, measured string, met bool) {
		out = append(out, budget{Budget: name, Measured: measured, Met: &met})
	}
	if w.kind == "list" {
		name := broker.Title + ": p50 <= 1.5x the baseline's"
		if !broker.ok() || !base.ok() {
			return append(out, budget{Budget: name, Measured: "not measured"})
		}
		add(name, fmt.Sprintf("%.2fx (%s against %s)", broker.P50vsBaseline, fmtDur(broker.P50), fmtDur(base.P50)), broker.P50vsBaseline <= 1.5)
		return out
	}
	for _, peer := range []struct {
		target, of string
		least      float64
		ratio      float64
	}{
		{"baseline", "0.5x the baseline's", 0.5, broker.RPSvsBaseline},
		{"mark3labs", "mark3labs'", 1, broker.RPSvsMark3labs},
	} {
		name := broker.Title + ": req/s >= " + peer.of
		other := rep.find(w.key, peer.target)
		if !broker.ok() || !other.ok() {
			out = append(out, budget{Budget: name, Measured: "not measured"})
			continue
		}
		add(name, fmt.Sprintf("%.2fx (%s against %s req/s)", peer.ratio, fmtRPS(broker.RPS), fmtRPS(other.RPS)), peer.ratio >= peer.least)
	}
	return out
}

// peakRSSBudget is the budget name over fsbroker's rows that of selects: the
// largest peak RSS among them against 64 MiB; none when no such row ran.
func (rep *Report) peakRSSBudget(name string, of func(*result) bool) []budget {
	var peak *result
	runs, unknown := 0, false
	for _, r := range rep.Results {
		if r.Target == "fsbroker" && r.Skipped == "" && of(r) {
			runs++
			unknown = unknown || r.PeakRSS < 0
			if peak == nil || r.PeakRSS > peak.PeakRSS {
				peak = r
			}
		}
	}
	switch {
	case runs == 0:
		return nil
	case unknown:
		return []budget{{Budget: name, Measured: "n/a (no /proc/PID/status)"}}
	}
	met := peak.PeakRSS <= 64<<20
	return []budget{{Budget: name, Measured: fmt.Sprintf("at most %s (%s)", fmtRSS(peak.PeakRSS), peak.Title), Met: &met}}
}

// serveStartBudgets are the budgets of serve-start's rows: each p50 <= 50 ms.
func (rep *Report) serveStartBudgets(w workload) []budget {
	var out []budget
	for _, row := range []string{"-init", "-call"} {
		r := rep.find(w.key+row, "fsbroker")
		if r == nil {
			continue // not run
		}
		name := r.Title + ": p50 <= 50 ms"
		if !r.ok() || r.Errors > 0 {
			out = append(out, budget{Budget: name, Measured: "not measured"})
			continue
		}
		met := r.P50 <= 50*time.Millisecond
		out = append(out, budget{Budget: name, Measured: fmt.Sprintf("p50 %s, p99 %s", fmtDur(r.P50), fmtDur(r.P99)), Met: &met})
	}
	return out
}

// write prints rep in format: text, markdown or json.
func (rep *Report) write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "markdown":
		return rep.writeMarkdown(w)
	}
	return rep.writeText(w)
}

// header is the run's circumstances in a few lines.
func (rep *Report) header() []string {
	m := rep.Machine
	kernel := m.OS
	if m.Kernel != "" {
		kernel += " " + m.Kernel
	}
	s := rep.Settings
	cycle := ""
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Workload, "read-") {
			cycle = fmt.Sprintf("; files/read cycles over %d files", s.Files)
			break
		}
	}
	lines := []string{
		fmt.Sprintf("fsbench %s: %d CPUs (%s), %s/%s, %s", rep.Date, m.CPUs, m.Model, kernel, m.Arch, m.Go),
		fmt.Sprintf("each run: a fresh child, %s warm-up, then %s measured%s; concurrent reads keep %d in flight",
			s.Warmup, s.Duration, cycle, s.Inflight),
	}
	for _, r := range rep.Results {
		if r.Workload == "chunked-write" {
			lines = append(lines, fmt.Sprintf("chunked: a %s file written by files/write of %s (offset advancing, final on the last), "+
				"then read by files/read of %s, once, in one child; no warm-up; peak RSS of each half on its own",
				sizeName(s.ChunkedSize), sizeName(s.Chunk), sizeName(s.Chunk)))
			break
		}
	}
	if s.Rounds > 1 {
		lines = append(lines, fmt.Sprintf("%d rounds, targets interleaved; each figure is from the round with the median req/s (p50 for starts)", s.Rounds))
	}
	if m.LoadBefore != "" {
		lines = append(lines, fmt.Sprintf("load average (1, 5, 15 min): %s before, %s after", m.LoadBefore, m.LoadAfter))
	}
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Workload, "serve-") || strings.HasPrefix(r.Workload, "first-") {
			lines = append(lines, fmt.Sprintf("first-touch and serve rows: each request names a path the child has not been asked for "+
				"(%d files of 1 KiB, %d directories of %d entries), and a run ends when they are used up; "+
				"in the serve rows every target is an MCP server driven with tools/call (absolute paths)",
				s.First, s.FirstDirs, s.FirstList))
			break
		}
	}
	for _, t := range rep.Targets {
		if t.Skipped != "" {
			lines = append(lines, fmt.Sprintf("target %s: skipped: %s", t.Name, t.Skipped))
		} else {
			lines = append(lines, fmt.Sprintf("target %s: %s", t.Name, t.Command))
		}
		switch {
		case t.ServeCommand == "":
		case t.ServeSkipped != "":
			lines = append(lines, fmt.Sprintf("target %s, serve rows: skipped: %s", t.Name, t.ServeSkipped))
		case t.ServeCommand != t.Command:
			lines = append(lines, fmt.Sprintf("target %s, serve rows: %s", t.Name, t.ServeCommand))
		}
	}
	return lines
}

var columns = []string{"workload", "target", "requests", "errors", "p50", "p99", "req/s",
	"req/s vs baseline", "req/s vs ts", "p50 vs baseline", "p50 vs ts", "CPU/req", "peak RSS"}

// row is r's cells, in columns' order.
func (r *result) row() []string {
	if r.Skipped != "" {
		return []string{r.Title, r.Target, r.Skipped, "", "", "", "", "", "", "", "", "", ""}
	}
	rps := fmtRPS(r.RPS)
	rpsBase, rpsTS := fmtRatio(r.RPSvsBaseline), fmtRatio(r.RPSvsTS)
	if r.RPS == 0 {
		rps, rpsBase, rpsTS = "-", "-", "-"
	}
	p50, p99 := fmtDur(r.P50), fmtDur(r.P99)
	cpu := "-"
	if r.CPUPerRequest > 0 {
		cpu = fmtDur(r.CPUPerRequest)
	}
	if r.Requests == 0 {
		p50, p99, rps = "-", "-", "-"
	}
	return []string{r.Title, r.Target, strconv.Itoa(r.Requests), strconv.Itoa(r.Errors), p50, p99, rps,
		rpsBase, rpsTS, fmtRatio(r.P50vsBaseline), fmtRatio(r.P50vsTS), cpu, fmtRSS(r.PeakRSS)}
}

func (rep *Report) errorNotes() []string {
	var notes []string
	for _, r := range rep.Results {
		if r.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s, %s: %d errors, the first: %s", r.Title, r.Target, r.Errors, r.FirstError))
		}
	}
	return notes
}

// firstPageNotes tell each target's first page of the paged listing, which
// p50 and p99 leave out: the child's first listing of the directory.
func (rep *Report) firstPageNotes() []string {
	var notes []string
	for _, r := range rep.Results {
		if r.ok() && r.FirstPage > 0 {
			cpu := ""
			if r.FirstPageCPU > 0 {
				cpu = ", CPU " + fmtDur(r.FirstPageCPU)
			}
			notes = append(notes, fmt.Sprintf("%s, %s: first page %s%s (the child's first listing of the directory)",
				r.Title, r.Target, fmtDur(r.FirstPage), cpu))
		}
	}
	return notes
}

// firstTouchColumns are the first-touch table's columns.
var firstTouchColumns = []string{"workload", "target", "requests", "req/s", "req/s vs baseline", "req/s vs mark3labs", "req/s vs ts",
	"p50", "p99", "p50 vs baseline", "CPU/req", "peak RSS"}

// firstTouchRows are the first-touch table's rows, in firstTouchColumns'
// order: every target's first-touch reads and listings in the client role
// (first-*), the first page of the paged listing, then the reads and
// listings as serve's MCP server (serve-*) and serve's starts to a first
// answer. In the serve rows fsbroker is fsbroker serve and the baseline
// fsbaseline --tools.
func (rep *Report) firstTouchRows() [][]string {
	var client, pages, serve [][]string
	for _, r := range rep.Results {
		rows := &client
		switch {
		case r.Workload == "list-paged":
			rows = &pages
		case strings.HasPrefix(r.Workload, "serve-"):
			rows = &serve
		}
		target := r.Target
		switch {
		case strings.HasPrefix(r.Workload, "serve-") && target == "fsbroker":
			target = "fsbroker serve"
		case strings.HasPrefix(r.Workload, "serve-") && target == "baseline":
			target = "baseline --tools"
		case target == "floor":
			target = "floor (from memory)"
		}
		switch {
		case r.Workload == "list-paged":
			title := fmt.Sprintf("the first page of %d entries, of a directory not listed before", rep.Settings.BigN)
			if !r.ok() || r.FirstPage <= 0 {
				*rows = append(*rows, []string{title, target, cmp.Or(r.Skipped, "not measured"), "", "", "", "", "", "", "", "", ""})
				continue
			}
			vsBase := 0.0
			if base := rep.find(r.Workload, "baseline"); base.ok() {
				vsBase = ratio(float64(r.FirstPage), float64(base.FirstPage))
			}
			cpu := "-"
			if r.FirstPageCPU > 0 {
				cpu = fmtDur(r.FirstPageCPU)
			}
			*rows = append(*rows, []string{title, target, "1", "-", "-", "-", "-", fmtDur(r.FirstPage), "-", fmtRatio(vsBase), cpu, fmtRSS(r.PeakRSS)})
		case strings.HasPrefix(r.Workload, "first-") || strings.HasPrefix(r.Workload, "serve-"):
			if r.Skipped != "" {
				*rows = append(*rows, []string{r.Title, target, r.Skipped, "", "", "", "", "", "", "", "", ""})
				continue
			}
			full := r.row() // in columns' order
			rps, vsBase, vsTS := full[6], full[7], full[8]
			vsM := fmtRatio(r.RPSvsMark3labs)
			if r.RPS == 0 {
				vsM = "-"
			}
			*rows = append(*rows, []string{r.Title, target, full[2], rps, vsBase, vsM, vsTS, full[4], full[5], full[9], full[11], full[12]})
		}
	}
	return slices.Concat(client, pages, serve)
}

// firstTouchHeading introduces the first-touch table.
func (rep *Report) firstTouchHeading() string {
	s := rep.Settings
	return fmt.Sprintf("First touch: each request names a path the child has not been asked for (%d files of 1 KiB, %d directories of %d entries), "+
		"all peers side by side; ratios from this run", s.First, s.FirstDirs, s.FirstList)
}

// budgetHeadings introduce the two budget tables: the first-touch budgets,
// then the others.
var budgetHeadings = [2]string{
	"fsbroker against its first-touch budgets (issues 21 and 19; docs/performance.md), in this run:",
	"fsbroker against its other budgets (docs/performance.md), in this run:",
}

// budgetGroups splits the budgets: the first-touch ones, those of the
// client role's first-touch reads and listings first, then the others.
func (rep *Report) budgetGroups() [2][]budget {
	var g [2][]budget
	for _, b := range rep.Budgets {
		if b.FirstTouch {
			g[0] = append(g[0], b)
		} else {
			g[1] = append(g[1], b)
		}
	}
	slices.SortStableFunc(g[0], func(a, b budget) int {
		return cmp.Compare(budgetRank(a), budgetRank(b))
	})
	return g
}

// budgetRank orders the first-touch budgets: the client role's reads and
// listings (issue 21's first) before the rest.
func budgetRank(b budget) int {
	if strings.HasPrefix(b.Budget, "first touch: ") {
		return 0
	}
	return 1
}

func (rep *Report) writeText(w io.Writer) error {
	for _, l := range rep.header() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, r := range rep.Results {
		fmt.Fprintln(tw, strings.Join(r.row(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range append(rep.firstPageNotes(), rep.errorNotes()...) {
		fmt.Fprintln(w, n)
	}
	if rows := rep.firstTouchRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\n%s:\n", rep.firstTouchHeading())
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.Join(firstTouchColumns, "\t"))
		for _, row := range rows {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for i, group := range rep.budgetGroups() {
		if len(group) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", budgetHeadings[i])
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, b := range group {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", b.Budget, b.Measured, fmtMet(b.Met))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func (rep *Report) writeMarkdown(w io.Writer) error {
	for _, l := range rep.header() {
		fmt.Fprintf(w, "%s  \n", l)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %s |\n", strings.Join(columns, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(columns)))
	for _, r := range rep.Results {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r.row(), " | "))
	}
	if notes := append(rep.firstPageNotes(), rep.errorNotes()...); len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	if rows := rep.firstTouchRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\n%s:\n\n", rep.firstTouchHeading())
		fmt.Fprintf(w, "| %s |\n", strings.Join(firstTouchColumns, " | "))
		fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(firstTouchColumns)))
		for _, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	for i, group := range rep.budgetGroups() {
		if len(group) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n\n| budget | measured | met |\n| --- | --- | --- |\n", budgetHeadings[i])
		for _, b := range group {
			fmt.Fprintf(w, "| %s | %s | %s |\n", b.Budget, b.Measured, fmtMet(b.Met))
		}
	}
	return nil
}

func fmtMet(met *bool) string {
	switch {
	case met == nil:
		return "not measured"
	case *met:
		return "met"
	}
	return "NOT met"
}

// fmtDur writes d in us, ms or s with three significant digits or so.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " us"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// fmtRPS writes requests per second with thousands separators.
func fmtRPS(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	if v < 0.1 {
		return strconv.FormatFloat(v, 'f', 3, 64) + "x"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}

// fmtMiBps writes bytes per second as MiB/s.
func fmtMiBps(v float64) string {
	return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB/s"
}

func fmtRSS(b int64) string {
	if b < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}
