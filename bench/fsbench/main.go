// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command fsbench is fsbroker's end-to-end load generator (`make bench`,
// `make bench-e2e`): it drives programs over stdio as their peer would, side
// by side in one run, and reports what a user of each would feel.
//
// The targets, each started as a child from a command-line template:
//
//   - baseline: bench/fsbaseline, fsbroker's wire with plain OS calls and no
//     checks (the reference the budgets of docs/performance.md are ratios against);
//   - fsbroker: `fsbroker stdio` with its defaults (built-in policies, audit
//     trail in batch mode), the served directory as a writable root the
//     operator pre-approves (a config file, {config}: fsbench sends no
//     files/consent), a fresh --state-dir and --rate-limit 0: the per-server
//     rate limit (200 requests/s by default) is a throttle, not a cost, and
//     left on it would be all a throughput figure measured;
//   - mark3labs: github.com/mark3labs/mcp-filesystem-server v0.11.1, a Go
//     filesystem MCP server with no policy and no audit, built from the Go
//     module proxy (bench/peers/mark3labs, a module of its own); skipped,
//     with the reason, when it is not there;
//   - ts: the reference TypeScript filesystem MCP server
//     (@modelcontextprotocol/server-filesystem) under node, installed into a
//     cache directory by bench/install-ts-server.sh; skipped, with the
//     reason, when it is not there;
//   - floor: in the serve workloads' reads and listings only, fsbaseline
//     --tools --from-memory, which answers from results it prepared before
//     the first request: no file system call per request, so its req/s is
//     what fsbench and the pipes allow any server on this machine, the
//     bound a budget stated against the reference server must fit under.
//
// For baseline and fsbroker, fsbench plays the MCP server: it answers the
// child's initialize, then sends files/read, files/write and files/list. For
// the two MCP servers (mark3labs, ts) it plays the MCP client: initialize,
// then tools/call of their read tool (read_file for mark3labs,
// read_text_file for ts), write_file and list_directory.
//
// The first-touch workloads (keys first-*) name, in every request, a path
// the child has not been asked for in its session, as an agent indexing a
// repository does, so that no cache of a target answers it: files/read (or
// the read tool) of 1 KiB files, sequential and with -inflight in flight,
// and files/list (list_directory) of directories of -first-list entries.
// They run against every target in its own role, on the same tree and
// paths as the serve workloads below; a run ends when its paths are used
// up, or after -duration. The paged listing's first page is the first
// touch of a large directory.
//
// The serve workloads (keys serve-*) measure fsbroker in the other role, as
// the filesystem MCP server a host runs: `fsbroker serve` (-fsbroker-serve;
// the same config, state directory and rate limit as above), beside the
// TypeScript server, mark3labs and fsbaseline --tools (-baseline-tools: the
// same tools with plain OS calls), all driven as an MCP client drives them:
// initialize, then tools/call of read_text_file and list_directory with
// absolute paths. These runs touch each path once: every request names a
// file (or directory) not requested before in the child's session, as an
// agent indexing a repository does, so that no cache of a target answers
// it (-first files of 1 KiB, -first-dirs directories of -first-list
// entries); a run ends when its paths are used up, or after -duration.
// serve-start measures, over -starts children, the time from the process's
// start to its initialize result and to its first tools/call result (a
// read of a file not read before).
//
// The workloads: files/read of 1 KiB, 64 KiB and 1 MiB files, sequential and
// with -inflight requests outstanding; files/write of 4 KiB (sequential);
// files/list of a 1,000-entry directory; a 100,000-entry directory (in a
// root of its own) listed page by page, time per page; the time from the
// child's start to initialize (the same state directory for every start, as
// a restart would have); and a file of -chunked-size (1 GiB) written through
// chunked files/write requests of -chunk (1 MiB; offset advancing, final on
// the last), then read back with files/read of that offset and length (see
// chunked.go). Each workload runs in a fresh child, for -warmup and then
// -duration; reads cycle over -files files of each size; the chunked run
// writes and reads its file once, without a warm-up, and reports each half
// as a row of its own. The targets take turns workload by workload, -rounds
// times; with more than one round the round with the median requests per
// second is reported.
//
// For each workload and target the report gives the requests measured, p50
// and p99 latency (from just before a request is written to just after its
// reply is read), requests per second, the child's CPU time per request over
// the measured part (user and system, every thread, from /proc/PID/stat; it
// holds better than requests per second on a shared machine), the child's
// peak RSS (VmHWM when the run ends; n/a off Linux), and ratios against the baseline,
// mark3labs and the TypeScript server; then the first-touch rows again, all
// peers side by side (the first-touch table); then the budgets of
// docs/performance.md, met or not, as ratios, the first-touch ones (issues
// 21 and 19) first; and the machine with its load average before and after.
// With -decide FILE, the output of engine's BenchmarkDecideFirstTouch (`go
// test -bench`, which `make bench-e2e` runs first), the uncached decision's
// p50 and p99 join the budgets. -format markdown prints tables for
// docs/performance.md, -format json the same as JSON.
//
// Usage:
//
//	fsbench [flags]
//
// Templates are split at spaces; {root} is the served directory, {state} a
// fresh state directory for each child, {config} an fsbroker config file
// (beside the state directory) that lists {root} as a writable root with
// consent: preapproved, {bin} the directory of the fsbench binary and
// {tscache} the TypeScript server's cache directory. A target's serve
// template (-baseline-tools, -fsbroker-serve) runs the serve workloads; the
// MCP servers' one template (-mark3labs, -ts) runs both kinds.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The workload sizes.
var readSizes = []int{1 << 10, 64 << 10, 1 << 20}

const writeSize = 4 << 10

// Default templates of the four targets, and of the two that play another
// program in the serve workloads.
const (
	defaultBaseline      = "{bin}/fsbaseline --root {root}:rw"
	defaultBroker        = "{bin}/fsbroker stdio --config {config} --state-dir {state} --rate-limit 0"
	defaultMark3labs     = "{bin}/mcp-filesystem-server {root}"
	defaultTS            = "node {tscache}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js {root}"
	defaultBaselineTools = "{bin}/fsbaseline --tools --root {root}:rw"
	defaultBrokerServe   = "{bin}/fsbroker serve --config {config} --state-dir {state} --rate-limit 0"
	defaultFloor         = "{bin}/fsbaseline --tools --from-memory --root {root}:rw"
)

// config is one fsbench run's settings (its flags).
type config struct {
	targets       string // comma-separated target names to run
	baseline      string // command templates
	broker        string
	mark3labs     string
	ts            string
	baselineTools string // the templates of the serve workloads (ts: ts)
	brokerServe   string
	floor         string // the floor's template (serve reads and listings only)
	tsCache       string
	workloads     string // comma-separated workload keys; empty: all

	duration time.Duration
	warmup   time.Duration
	max      int // measured requests per run at most; 0: no limit
	inflight int
	starts   int
	rounds   int
	files    int // files per read size and per target for writes
	listN    int
	// The first-touch and serve workloads' paths, each requested once a
	// child: files of 1 KiB, and directories of firstList entries.
	first     int
	firstDirs int
	firstList int
	bigN      int
	page      int
	timeout   time.Duration

	chunkedSize int64 // bytes of the chunked run's file; 0: no chunked run
	chunk       int64 // bytes per request of the chunked run

	// decideBench is a file of `go test -bench DecideFirstTouch` output
	// whose uncached decision joins the budgets ("": none).
	decideBench string

	format string
	dir    string
	keep   bool
	quiet  bool
}

// defaultTSCache is where bench/install-ts-server.sh installs the
// TypeScript server (the same rule as the script's).
func defaultTSCache() string {
	if d := os.Getenv("FSBENCH_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "fsbroker-bench")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "fsbroker-bench")
	}
	return filepath.Join(home, ".cache", "fsbroker-bench")
}

// parseFlags returns the run's config from args.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("fsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.targets, "targets", strings.Join(targetNames, ","), "the `targets` to run, comma-separated, of "+strings.Join(targetNames, ", "))
	fs.StringVar(&cfg.baseline, "baseline", defaultBaseline, "command `template` of the baseline")
	fs.StringVar(&cfg.broker, "fsbroker", defaultBroker, "command `template` of fsbroker")
	fs.StringVar(&cfg.mark3labs, "mark3labs", defaultMark3labs, "command `template` of mark3labs/mcp-filesystem-server (both kinds of workload)")
	fs.StringVar(&cfg.ts, "ts", defaultTS, "command `template` of the TypeScript server (both kinds of workload)")
	fs.StringVar(&cfg.baselineTools, "baseline-tools", defaultBaselineTools, "command `template` of the baseline in the serve workloads (an MCP server)")
	fs.StringVar(&cfg.brokerServe, "fsbroker-serve", defaultBrokerServe, "command `template` of fsbroker in the serve workloads (fsbroker serve)")
	fs.StringVar(&cfg.floor, "floor", defaultFloor, "command `template` of the floor, an MCP server answering the serve reads and listings from memory")
	fs.StringVar(&cfg.tsCache, "ts-cache", defaultTSCache(), "`dir` of the TypeScript server's install ({tscache}; bench/install-ts-server.sh)")
	fs.StringVar(&cfg.workloads, "workloads", "", "the `workloads` to run, comma-separated (default all: "+strings.Join(workloadKeys(), ",")+")")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "measured time of each run")
	fs.DurationVar(&cfg.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each run")
	fs.IntVar(&cfg.max, "n", 0, "measured requests of each run at most (0: as many as -duration allows)")
	fs.IntVar(&cfg.inflight, "inflight", 8, "requests outstanding at once in the concurrent read runs")
	fs.IntVar(&cfg.starts, "starts", 10, "starts measured for the start-to-initialize figure")
	fs.IntVar(&cfg.rounds, "rounds", 1, "runs of every workload against every target, interleaved; the round with the median req/s is reported (for a noisy machine)")
	fs.IntVar(&cfg.files, "files", 64, "distinct files of each read size, read in turn")
	fs.IntVar(&cfg.listN, "list", 1000, "entries of the files/list directory")
	fs.IntVar(&cfg.first, "first", 20000, "files of 1 KiB the first-touch and serve reads request once each (a run ends when they are used up)")
	fs.IntVar(&cfg.firstDirs, "first-dirs", 300, "directories the first-touch and serve listings request once each (a run ends when they are used up)")
	fs.IntVar(&cfg.firstList, "first-list", 1000, "entries of each directory of the first-touch and serve listings")
	fs.IntVar(&cfg.bigN, "big", 100000, "entries of the directory listed page by page (0: no paged run)")
	fs.IntVar(&cfg.page, "page", 1000, "entries per page of the paged listing")
	cfg.chunkedSize, cfg.chunk = 1<<30, 1<<20
	fs.Var(sizeValue{&cfg.chunkedSize}, "chunked-size", "`bytes` of the file written then read in chunks (K, M, G suffixes; 0: no chunked run). "+
		"Over 1G, fsbroker's default policy refuses the rest: 1 GiB a day (UTC) is its write quota per server "+
		"(max_bytes_per_day), which the fresh state directory of each run starts at zero; give -fsbroker a --policies DIR raising it")
	fs.Var(sizeValue{&cfg.chunk}, "chunk", "`bytes` per request of the chunked run (K, M, G suffixes; fsbroker's defaults allow up to 16M)")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "a run still going this long after its warm-up and duration is killed (the chunked run: when no reply comes for this long)")
	fs.StringVar(&cfg.decideBench, "decide", "", "`file` of `go test -bench DecideFirstTouch ./engine` output: its uncached decision joins the budgets")
	fs.StringVar(&cfg.format, "format", "text", "output `format`: text, markdown or json")
	fs.StringVar(&cfg.dir, "dir", "", "work `dir` for the served tree and state (default a fresh temporary one, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the work directory")
	fs.BoolVar(&cfg.quiet, "q", false, "no progress lines on stderr")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: fsbench [flags]\n\n"+
			"Drives fsbaseline, fsbroker, mark3labs/mcp-filesystem-server and the TypeScript filesystem MCP server\n"+
			"over stdio and reports latency, throughput and peak RSS side by side, with fsbroker's budgets (docs/performance.md);\n"+
			"the first-* workloads name a path never requested before in every request; the serve-* ones do too, and\n"+
			"drive fsbroker serve and fsbaseline --tools as MCP servers, as mark3labs and the TypeScript one.\n"+
			"Templates: {root} served dir, {state} fresh state dir, {config} fsbroker config pre-approving {root} (writable), {bin} fsbench's dir, {tscache}.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case cfg.format != "text" && cfg.format != "markdown" && cfg.format != "json":
		return nil, fmt.Errorf("-format %q: want text, markdown or json", cfg.format)
	case cfg.inflight < 1 || cfg.starts < 1 || cfg.rounds < 1 || cfg.files < 1 || cfg.listN < 1 || cfg.bigN < 0:
		return nil, errors.New("-inflight, -starts, -rounds, -files and -list must be at least 1, -big at least 0")
	case cfg.first < cfg.starts || cfg.firstDirs < 1 || cfg.firstList < 1:
		return nil, errors.New("-first must be at least -starts, -first-dirs and -first-list at least 1")
	case cfg.page < 1 || cfg.page > 10000:
		return nil, errors.New("-page must be 1 to 10000")
	case cfg.duration <= 0:
		return nil, errors.New("-duration must be positive")
	case cfg.chunk < 1:
		return nil, errors.New("-chunk must be at least 1 byte")
	}
	for _, k := range splitList(cfg.workloads) {
		if !slicesContains(workloadKeys(), k) {
			return nil, fmt.Errorf("-workloads: unknown workload %q (known: %s)", k, strings.Join(workloadKeys(), ","))
		}
	}
	for _, k := range splitList(cfg.targets) {
		if !slices.Contains(targetNames, k) {
			return nil, fmt.Errorf("-targets: unknown target %q (known: %s)", k, strings.Join(targetNames, ", "))
		}
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsbench:", err)
		os.Exit(2)
	}
	var progress io.Writer = os.Stderr
	if cfg.quiet {
		progress = io.Discard
	}
	rep, err := run(cfg, progress)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsbench:", err)
		os.Exit(1)
	}
	if err := rep.write(os.Stdout, cfg.format); err != nil {
		fmt.Fprintln(os.Stderr, "fsbench:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func slicesContains(list []string, s string) bool { return slices.Contains(list, s) }

// workload is one kind of run.
type workload struct {
	key      string // its name in -workloads and the JSON
	title    string
	kind     string // read, write, list, pages, start or chunked
	size     int    // bytes per file (read, write)
	inflight int
	// serve: a serve workload, every target an MCP server driven with
	// tools/call (their serve templates), each path requested once.
	serve bool
	// once: each request names a path not requested before in the child's
	// session (the first-touch and serve reads and listings).
	once bool
}

// allWorkloads returns every workload, in the report's order.
func allWorkloads(inflight int) []workload {
	var ws []workload
	for _, size := range readSizes {
		name := sizeName(size)
		key := "read-" + strings.ToLower(strings.TrimSuffix(strings.ReplaceAll(name, " ", ""), "iB"))
		ws = append(ws, workload{key: key, title: "files/read " + name, kind: "read", size: size, inflight: 1})
		if inflight > 1 {
			ws = append(ws, workload{key: key + "-x" + strconv.Itoa(inflight), title: "files/read " + name + ", " + strconv.Itoa(inflight) + " in flight",
				kind: "read", size: size, inflight: inflight})
		}
	}
	ws = append(ws,
		workload{key: "write-4k", title: "files/write 4 KiB", kind: "write", size: writeSize, inflight: 1},
		workload{key: "list", title: "files/list of a directory", kind: "list", inflight: 1},
		workload{key: "list-paged", title: "files/list page by page", kind: "pages", inflight: 1},
		workload{key: "start", title: "start to initialize", kind: "start", inflight: 1},
		workload{key: "first-read-1k", title: "first touch: files/read 1 KiB, each file once", kind: "read", size: 1 << 10, inflight: 1, once: true},
	)
	if inflight > 1 {
		ws = append(ws, workload{key: "first-read-1k-x" + strconv.Itoa(inflight), kind: "read", size: 1 << 10, inflight: inflight, once: true,
			title: "first touch: files/read 1 KiB, each file once, " + strconv.Itoa(inflight) + " in flight"})
	}
	ws = append(ws,
		workload{key: "first-list", title: "first touch: files/list, each directory once", kind: "list", inflight: 1, once: true},
		workload{key: "serve-read-1k", title: "serve: read_text_file 1 KiB, each file once", kind: "read", size: 1 << 10, inflight: 1, serve: true, once: true},
	)
	if inflight > 1 {
		ws = append(ws, workload{key: "serve-read-1k-x" + strconv.Itoa(inflight), kind: "read", size: 1 << 10, inflight: inflight, serve: true, once: true,
			title: "serve: read_text_file 1 KiB, each file once, " + strconv.Itoa(inflight) + " in flight"})
	}
	return append(ws,
		workload{key: "serve-list", title: "serve: list_directory, each directory once", kind: "list", inflight: 1, serve: true, once: true},
		workload{key: "serve-start", title: "serve: start to first answer", kind: "start", inflight: 1, serve: true},
		workload{key: "chunked", title: "a large file written then read in chunks", kind: "chunked", inflight: 1},
	)
}

// workloadKeys are the keys of the workloads, -inflight 8.
func workloadKeys() []string {
	var keys []string
	for _, w := range allWorkloads(8) {
		keys = append(keys, strings.Replace(w.key, "-x8", "-xN", 1))
	}
	return keys
}

// selected reports whether -workloads includes w.
func (cfg *config) selected(w workload) bool {
	list := splitList(cfg.workloads)
	if len(list) == 0 {
		return true
	}
	key := w.key
	if w.kind == "read" && w.inflight > 1 {
		key = key[:strings.LastIndex(key, "-x")] + "-xN"
	}
	return slicesContains(list, key)
}

// serveSelected reports whether -workloads includes a serve workload.
func (cfg *config) serveSelected() bool {
	return slices.ContainsFunc(allWorkloads(cfg.inflight), func(w workload) bool { return w.serve && cfg.selected(w) })
}

// onceSelected reports whether -workloads includes a workload that needs
// the repo root (see tree): a first-touch or serve one.
func (cfg *config) onceSelected() bool {
	return slices.ContainsFunc(allWorkloads(cfg.inflight), func(w workload) bool { return (w.once || w.serve) && cfg.selected(w) })
}

// filesSelected reports whether -workloads includes a workload that is not
// a serve one.
func (cfg *config) filesSelected() bool {
	return slices.ContainsFunc(allWorkloads(cfg.inflight), func(w workload) bool { return !w.serve && cfg.selected(w) })
}

// sizeName writes a size as 1 KiB, 64 KiB, 1 MiB, 1 GiB.
func sizeName[T int | int64](size T) string {
	n := int64(size)
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// targetNames are the targets fsbench knows, in the report's order.
var targetNames = []string{"baseline", "fsbroker", "mark3labs", "ts", "floor"}

// target is one program under test.
type target struct {
	name      string
	tmpl      string
	serveTmpl string // the template of the serve workloads
	skip      string // why it is not run, when it is not
	serveSkip string // the same for the serve workloads
	hint      string // what to do when it cannot start
	// readTool, for an MCP filesystem server in every workload (mark3labs,
	// ts), is the name of its tool that reads a whole text file; "" for
	// the targets in fsbroker's role outside the serve workloads.
	readTool string
	// floorOnly: the target runs only the serve workloads' reads and
	// listings (the floor).
	floorOnly bool
}

// template is tg's command template for w.
func (tg *target) template(w workload) string {
	if w.serve {
		return tg.serveTmpl
	}
	return tg.tmpl
}

// skipped is why tg does not run w ("": it does).
func (tg *target) skipped(w workload) string {
	if tg.floorOnly {
		if !w.serve || w.kind == "start" {
			return "n/a: the floor runs the serve reads and listings only"
		}
		return tg.serveSkip
	}
	if w.serve && tg.skip == "" {
		return tg.serveSkip
	}
	return tg.skip
}

// proto is how fsbench talks to tg serving root in w: as an MCP client to
// every target in the serve workloads and to the MCP servers (mark3labs,
// ts), over fsbroker's wire otherwise.
func (tg *target) proto(w workload, root string) protocol {
	switch {
	case tg.readTool != "":
		return toolsProto{root: root, readTool: tg.readTool}
	case w.serve:
		return toolsProto{root: root, readTool: "read_text_file"}
	}
	return filesProto{mount: filepath.Base(root)}
}

// bench is one fsbench run in progress.
type bench struct {
	cfg      *config
	work     string // the work directory
	tree     *tree
	bin      string
	progress io.Writer
	states   int // state directories made so far
	runs     int // chunked runs so far (each has a directory of its own)
}

// newState makes a fresh state directory for a child of tg.
func (b *bench) newState(tg *target) (string, error) {
	b.states++
	state := filepath.Join(b.work, "state", fmt.Sprintf("%s-%d", tg.name, b.states))
	return state, os.MkdirAll(state, 0o700)
}

// argv expands the template tmpl for a child serving root with state as its
// state directory.
func (b *bench) argv(tmpl, root, state string) []string {
	r := strings.NewReplacer("{root}", root, "{state}", state, "{config}", configPath(state), "{bin}", b.bin, "{tscache}", b.cfg.tsCache)
	fields := strings.Fields(tmpl)
	for i, f := range fields {
		fields[i] = r.Replace(f)
	}
	return fields
}

// configPath is the {config} of a child whose state directory is state:
// beside it, outside the served root and the state directory (fsbroker
// refuses a config file inside either).
func configPath(state string) string { return state + ".yaml" }

// writeConfig writes {config} for a child serving root with state: root as
// a writable root the operator pre-approves, which is how fsbroker serves a
// root without a files/consent round (--consent auto approves only what a
// server asks for).
func writeConfig(root, state string) error {
	doc, err := json.Marshal(map[string]any{"version": 1, "roots": []map[string]any{
		{"path": root, "writable": true, "consent": "preapproved"}}}) // JSON is YAML
	if err != nil {
		return fmt.Errorf("fsbroker config: %w", err)
	}
	if err := os.WriteFile(configPath(state), doc, 0o600); err != nil {
		return fmt.Errorf("fsbroker config: %w", err)
	}
	return nil
}

// start starts a child of tg for w serving root, with a fresh state
// directory when state is "", and completes the handshake; it returns the
// time from the start to initialize.
func (b *bench) start(tg *target, w workload, root, state string) (*child, time.Duration, error) {
	if state == "" {
		var err error
		if state, err = b.newState(tg); err != nil {
			return nil, 0, err
		}
	}
	tmpl := tg.template(w)
	if strings.Contains(tmpl, "{config}") {
		if err := writeConfig(root, state); err != nil {
			return nil, 0, err
		}
	}
	c, err := startChild(b.argv(tmpl, root, state), b.work, []string{"XDG_STATE_HOME=" + filepath.Join(b.work, "xdg-state")})
	if err != nil {
		return nil, 0, err
	}
	watchdog := time.AfterFunc(b.cfg.timeout, c.kill)
	took, err := tg.proto(w, root).handshake(c)
	watchdog.Stop()
	if err != nil {
		c.close(time.Second)
		return nil, 0, fmt.Errorf("handshake: %w", err)
	}
	return c, took, nil
}

// run runs every selected workload against every target, one workload at
// a time (the targets side by side, so that a noisy neighbour hurts all
// of them alike), and returns the report.
func run(cfg *config, progress io.Writer) (*Report, error) {
	b := &bench{cfg: cfg, progress: progress}
	if exe, err := os.Executable(); err == nil {
		b.bin = filepath.Dir(exe)
	}
	b.work = cfg.dir
	if b.work == "" {
		dir, err := os.MkdirTemp("", "fsbench-")
		if err != nil {
			return nil, err
		}
		b.work = dir
	}
	if !cfg.keep {
		defer os.RemoveAll(b.work)
	}
	var targets []*target
	for _, name := range splitList(cfg.targets) {
		targets = append(targets, newTarget(cfg, name))
	}
	fmt.Fprintf(progress, "fsbench: making the served tree in %s\n", b.work)
	t, err := makeTree(b.work, cfg, targets)
	if err != nil {
		return nil, fmt.Errorf("making the served tree: %w", err)
	}
	b.tree = t
	rep := newReport(cfg)
	if cfg.decideBench != "" {
		rep.readDecideBench(cfg.decideBench)
	}
	for _, tg := range targets {
		// One start first, of each template that will run: a target that
		// cannot run is skipped, and says why.
		if cfg.filesSelected() {
			b.tryStart(tg, workload{}, &tg.skip)
		}
		info := targetInfo{Name: tg.name, Skipped: tg.skip}
		info.Command = strings.Join(b.argv(tg.tmpl, t.root, filepath.Join(b.work, "state", tg.name+"-N")), " ")
		if cfg.serveSelected() {
			serve := workload{serve: true}
			if tg.serveTmpl != tg.tmpl || !cfg.filesSelected() { // else tried above
				b.tryStart(tg, serve, &tg.serveSkip)
			}
			info.ServeCommand = strings.Join(b.argv(tg.serveTmpl, t.repoRoot, filepath.Join(b.work, "state", tg.name+"-N")), " ")
			info.ServeSkipped = tg.skipped(serve)
		}
		rep.Targets = append(rep.Targets, info)
	}
	type key struct{ workload, target string }
	rounds := map[key][]*result{}
	for round := 1; round <= cfg.rounds; round++ {
		for _, w := range allWorkloads(cfg.inflight) {
			if !cfg.selected(w) || w.kind == "pages" && cfg.bigN == 0 || w.kind == "chunked" && cfg.chunkedSize == 0 {
				continue
			}
			// A workload may give more than one row (the chunked run: the
			// write and the read); the report lists them row by row, the
			// targets side by side.
			var byRow [][]*result
			for _, tg := range targets {
				if tg.skipped(w) != "" {
					continue
				}
				rows := b.runWorkload(tg, w)
				label := ""
				if cfg.rounds > 1 {
					label = fmt.Sprintf(" (round %d)", round)
				}
				for i, res := range rows {
					if i == len(byRow) {
						byRow = append(byRow, nil)
					}
					byRow[i] = append(byRow[i], res)
					rounds[key{res.Workload, tg.name}] = append(rounds[key{res.Workload, tg.name}], res)
					fmt.Fprintf(progress, "fsbench: %-16s %-9s %s%s\n", res.Workload, tg.name, res.summary(), label)
				}
			}
			if round == 1 {
				for _, row := range byRow {
					rep.Results = append(rep.Results, row...)
				}
			}
		}
	}
	for i, r := range rep.Results {
		rep.Results[i] = median(rounds[key{r.Workload, r.Target}])
	}
	rep.Machine.LoadAfter = loadAverage()
	rep.finish()
	return rep, nil
}

// newTarget is the target name (one of targetNames) as cfg gives it.
func newTarget(cfg *config, name string) *target {
	tg := &target{name: name}
	switch name {
	case "baseline":
		tg.tmpl, tg.serveTmpl, tg.hint = cfg.baseline, cfg.baselineTools, "build it with `make bench-e2e` or give -baseline and -baseline-tools"
	case "fsbroker":
		tg.tmpl, tg.serveTmpl, tg.hint = cfg.broker, cfg.brokerServe, "build it with `make bench-e2e` or give -fsbroker and -fsbroker-serve"
	case "mark3labs":
		tg.tmpl, tg.serveTmpl, tg.readTool = cfg.mark3labs, cfg.mark3labs, "read_file"
		tg.hint = "build it with `make bench-e2e` (bench/peers/mark3labs, from the Go module proxy), or give -mark3labs"
	case "ts":
		tg.tmpl, tg.serveTmpl, tg.readTool = cfg.ts, cfg.ts, "read_text_file"
		tg.hint = "install it with bench/install-ts-server.sh, or give -ts"
	case "floor":
		tg.serveTmpl, tg.floorOnly = cfg.floor, true
		tg.skip = tg.skipped(workload{})
		tg.hint = "build it with `make bench-e2e` or give -floor"
	}
	if strings.TrimSpace(tg.tmpl) == "" && tg.skip == "" {
		tg.skip = "no command"
	}
	if strings.TrimSpace(tg.serveTmpl) == "" {
		tg.serveSkip = "no command"
	}
	return tg
}

// tryStart starts tg for w once and stops it; when it cannot, *skip says why.
func (b *bench) tryStart(tg *target, w workload, skip *string) {
	if *skip != "" {
		return
	}
	c, _, err := b.start(tg, w, b.rootOf(w), "")
	if err == nil {
		err = c.close(5 * time.Second)
	}
	if err != nil {
		*skip = fmt.Sprintf("cannot start: %v (%s)", err, tg.hint)
		what := ""
		if w.serve {
			what = " (serve workloads)"
		}
		fmt.Fprintf(b.progress, "fsbench: %s%s skipped: %s\n", tg.name, what, *skip)
	}
}

// rootOf is the root the targets serve in w (see tree).
func (b *bench) rootOf(w workload) string {
	switch {
	case w.serve || w.once:
		return b.tree.repoRoot
	case w.kind == "pages":
		return b.tree.bigRoot
	}
	return b.tree.root
}

// runWorkload runs w against tg in fresh children and returns its rows: one,
// or the two of the chunked run and of serve-start.
func (b *bench) runWorkload(tg *target, w workload) []*result {
	switch {
	case w.kind == "chunked":
		return b.runChunked(tg, w)
	case w.kind == "start" && w.serve:
		return b.runServeStarts(tg, w)
	}
	return []*result{b.runOne(tg, w)}
}

// runOne runs w, a workload of one row, against tg in fresh children.
func (b *bench) runOne(tg *target, w workload) *result {
	res := &result{Workload: w.key, Title: w.title, Target: tg.name, PeakRSS: -1}
	switch {
	case w.kind == "list" && w.serve:
		res.Title = fmt.Sprintf("serve: list_directory of %d entries, each directory once", b.cfg.firstList)
	case w.kind == "list" && w.once:
		res.Title = fmt.Sprintf("first touch: files/list of %d entries, each directory once", b.cfg.firstList)
	case w.kind == "list":
		res.Title = fmt.Sprintf("files/list of %d entries", b.cfg.listN)
	case w.kind == "pages":
		res.Title = fmt.Sprintf("files/list of %d entries, per page of %d", b.cfg.bigN, b.cfg.page)
	}
	if w.kind == "start" {
		b.runStarts(tg, w, res)
		return res
	}
	root := b.rootOf(w)
	proto := tg.proto(w, root)
	spec := loadSpec{inflight: w.inflight, warmup: b.cfg.warmup, duration: b.cfg.duration, max: b.cfg.max}
	var o op
	var pages *pageOp
	switch {
	case w.once && w.kind == "read":
		o = proto.readOp(b.tree.firstFiles, w.size)
		spec.once = len(b.tree.firstFiles)
	case w.once && w.kind == "list":
		o = proto.listOp(b.tree.firstDirs, b.cfg.firstList)
		spec.once = len(b.tree.firstDirs)
	case w.kind == "read":
		o = proto.readOp(filePaths(readDir(w.size), "f", b.cfg.files), w.size)
	case w.kind == "write":
		o = proto.writeOp(filePaths("w", tg.name+"-", b.cfg.files), string(textOfSize(w.size)))
	case w.kind == "list":
		o = proto.listOp([]string{"l1000"}, b.cfg.listN)
	case w.kind == "pages":
		if pages = proto.pageOp("lbig", b.cfg.page); pages == nil {
			res.Skipped = "n/a: no paged listing"
			return res
		}
	}
	c, _, err := b.start(tg, w, root, "")
	if err != nil {
		res.Skipped = "failed: " + err.Error()
		return res
	}
	cpuAtStart := time.Duration(-1)
	spec.onMeasure = func() { cpuAtStart = c.cpuTime() }
	watchdog := time.AfterFunc(spec.warmup+spec.duration+b.cfg.timeout, c.kill)
	var st *runStats
	if pages != nil {
		st, err = runPages(c, pages, proto.pageOp("lwarm", b.cfg.page), b.cfg.bigN, b.cfg.page, spec)
	} else {
		st, err = runLoad(c, o, spec)
	}
	watchdog.Stop()
	res.PeakRSS = c.peakRSS()
	cpuAtEnd := c.cpuTime()
	if cerr := c.close(5 * time.Second); err == nil && cerr != nil {
		err = fmt.Errorf("at the end: %w", cerr)
	}
	if err != nil {
		res.Skipped = "failed: " + err.Error()
		return res
	}
	res.fill(st)
	if cpuAtStart >= 0 && cpuAtEnd >= 0 && res.Requests > 0 {
		res.CPUPerRequest = (cpuAtEnd - cpuAtStart) / time.Duration(res.Requests)
	}
	return res
}

// runStarts measures the time from start to initialize over cfg.starts
// children, as a user restarting it would see it: all with the same state
// directory, which an unmeasured first start has set up.
func (b *bench) runStarts(tg *target, w workload, res *result) {
	st := &runStats{}
	state, err := b.newState(tg)
	if err == nil {
		var c *child
		if c, _, err = b.start(tg, w, b.tree.root, state); err == nil {
			err = c.close(5 * time.Second)
		}
	}
	if err != nil {
		res.Skipped = "failed: " + err.Error()
		return
	}
	for range b.cfg.starts {
		c, took, err := b.start(tg, w, b.tree.root, state)
		if err != nil {
			st.fail(err)
			continue
		}
		res.PeakRSS = max(res.PeakRSS, c.peakRSS())
		if err := c.close(5 * time.Second); err != nil {
			st.fail(err)
			continue
		}
		st.lat = append(st.lat, took)
	}
	res.fill(st)
	res.RPS = 0
}

// isStartRow reports whether the rows of workload are times from a start
// (no requests per second).
func isStartRow(workload string) bool {
	return workload == "start" || strings.HasPrefix(workload, "serve-start")
}

// median returns the round to report of several rounds of one workload
// against one target: a failed one if any (failures are not averaged away),
// else the one with the median requests per second (the median p50 for
// starts), with the median of the rounds' first pages (and of their CPU).
func median(rounds []*result) *result {
	for _, r := range rounds {
		if r.Skipped != "" || r.Errors > 0 {
			return r
		}
	}
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b *result) int {
		if isStartRow(a.Workload) {
			return cmp.Compare(a.P50, b.P50)
		}
		return cmp.Compare(a.RPS, b.RPS)
	})
	m := sorted[len(sorted)/2]
	m.Rounds = len(rounds)
	// A paged run's first page is one request a round: the median of the
	// rounds', not the median round's.
	var firsts, cpus []time.Duration
	for _, r := range rounds {
		if r.FirstPage > 0 {
			firsts = append(firsts, r.FirstPage)
		}
		if r.FirstPageCPU > 0 {
			cpus = append(cpus, r.FirstPageCPU)
		}
	}
	if len(firsts) > 0 {
		m.FirstPage = percentile(firsts, 50)
	}
	if len(cpus) > 0 {
		m.FirstPageCPU = percentile(cpus, 50)
	}
	return m
}
