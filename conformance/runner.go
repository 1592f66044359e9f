// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of the runner and of case steps.
const (
	// DefaultVersion is the protocol version the runner answers initialize with.
	DefaultVersion = "2025-11-25"
	// DefaultGrace is how long the runner waits for the broker to exit after closing its
	// stdin, and again after SIGTERM.
	DefaultGrace = 5 * time.Second

	defaultCaseTimeout = 60 * time.Second
	defaultReplyWait   = 10 * time.Second
	defaultNotifyWait  = 5 * time.Second
	defaultQuietWait   = time.Second
	transcriptLines    = 40
	defaultRunWait     = 10 * time.Second
	retryPause         = 50 * time.Millisecond

	// serverName is the serverInfo.name of the runner's initialize result, and ${server}.
	serverName = "fsbroker-conformance"
)

// Placeholders of the broker command template. An argument equal to one of them is replaced by
// the arguments it stands for; when the template holds none of them, all four are appended in
// this order (to a server command template, [PlaceholderDirs] alone). Inside any other
// argument, {area} and {statedir} are replaced by the case's area and state directory.
const (
	PlaceholderRoots   = "{roots}"   // --root DIR[:rw], one pair per root; --config FILE when pre-approved
	PlaceholderState   = "{state}"   // --state-dir DIR
	PlaceholderConsent = "{consent}" // --consent MODE
	PlaceholderFlags   = "{flags}"   // the case's own flags
)

// PlaceholderBrokerBin stands, inside a tool's command template, for the first word of the
// command under test ([Runner.Broker][0], or [Runner.Server][0] in a serve case). {area} and
// {statedir} are replaced there too.
const PlaceholderBrokerBin = "{broker-bin}"

// ToolGrantsRevoke is the tool a run step names as {grants-revoke}: docs/protocol.md section 5's
// `fsbroker grants revoke` for the case's state directory. The case appends the selectors
// (--server ID, --path P, --all); the command must revoke the grants they match and block the
// pre-approved access they name, so that the running broker refuses new requests there within
// 1 second.
const ToolGrantsRevoke = "grants-revoke"

// ToolGrantsRestore is the tool a run step names as {grants-restore}: `fsbroker grants
// restore` for the case's state directory. The case appends the selectors (--server ID, --path
// P, --all); the command must lift the blocks of pre-approved access they match, so that the
// running broker allows that access again within 1 second.
const ToolGrantsRestore = "grants-restore"

// DefaultTools returns the tools of a runner whose Tools is nil: fsbroker's own commands,
// run as the broker command's program.
func DefaultTools() map[string][]string {
	return map[string][]string{
		ToolGrantsRevoke:  {PlaceholderBrokerBin, "grants", "revoke", "--state-dir", "{statedir}"},
		ToolGrantsRestore: {PlaceholderBrokerBin, "grants", "restore", "--state-dir", "{statedir}"},
	}
}

// ParseTools reads tool templates written as NAME=COMMAND ARGS..., several separated by ";"
// (the command is split at spaces, like the broker command). They are added to
// [DefaultTools]; "NAME=" with no command removes that tool, so the cases using it are
// skipped.
func ParseTools(spec string) (map[string][]string, error) {
	tools := DefaultTools()
	for item := range strings.SplitSeq(spec, ";") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, cmd, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if _, valid := toolName("{" + name + "}"); !ok || !valid {
			return nil, fmt.Errorf("tool %q: want NAME=COMMAND ARGS..., NAME in lower case (grants-revoke)", item)
		}
		if f := strings.Fields(cmd); len(f) > 0 {
			tools[name] = f
		} else {
			delete(tools, name)
		}
	}
	return tools, nil
}

// Runner runs cases against a broker command.
type Runner struct {
	// Broker is the command template, for example ["/usr/local/bin/fsbroker", "stdio"].
	Broker []string
	// Server is the command template of the filesystem MCP server the serve section's cases
	// play the host against, for example ["/usr/local/bin/fsbroker", "serve", "{roots}"] or
	// ["npx", "-y", "@modelcontextprotocol/server-filesystem"] ({dirs} appended).
	Server []string
	// Summary lists tags for each of which Run writes how many of the cases carrying it passed,
	// before its last line.
	Summary []string
	// Env is added to the runner's own environment for the broker.
	Env []string
	// Parallel bounds the cases run at once; default runtime.GOMAXPROCS(0)*2.
	Parallel int
	// Grace is the wait for the broker to exit after its stdin closes; default DefaultGrace.
	Grace time.Duration
	// Verbose prints every case's outcome (not only failures) and the transcripts of failures.
	Verbose bool
	// Tools maps the name of a command that run steps may use ({grants-revoke}) to its
	// command template, in which {broker-bin}, {area} and {statedir} are replaced; the step's
	// arguments follow it. nil means [DefaultTools]. A case using a tool that is not here, or
	// is mapped to nothing, is skipped.
	Tools map[string][]string
}

// tool returns the command template of a tool, or nil.
func (r *Runner) tool(name string) []string {
	if r.Tools == nil {
		return DefaultTools()[name]
	}
	return r.Tools[name]
}

// Result is the outcome of one case.
type Result struct {
	// Case is the case run.
	Case *Case
	// Skipped holds why the case did not run, or "".
	Skipped string
	// Failures lists what went wrong; none means the case passed.
	Failures []string
	// Transcript holds the last lines exchanged ("> " sent, "< " received).
	Transcript []string
	// Stderr is what the broker wrote to its stderr.
	Stderr string
	// Duration is how long the case took.
	Duration time.Duration
}

// Passed reports whether the case ran and nothing failed.
func (r *Result) Passed() bool { return r.Skipped == "" && len(r.Failures) == 0 }

// Run runs cases, at most Parallel at once, writes a line per failure (with its details) to out
// (a line per case when Verbose) and ends with "N passed, M failed". It returns the results in
// the order of cases.
func (r *Runner) Run(ctx context.Context, cases []*Case, out io.Writer) []*Result {
	n := r.Parallel
	if n <= 0 {
		n = runtime.GOMAXPROCS(0) * 2
	}
	results := make([]*Result, len(cases))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res := r.RunCase(ctx, c)
			results[i] = res
			mu.Lock()
			defer mu.Unlock()
			r.report(out, res)
		}()
	}
	wg.Wait()
	passed, failed, skipped := 0, 0, 0
	for _, res := range results {
		switch {
		case res.Skipped != "":
			skipped++
		case res.Passed():
			passed++
		default:
			failed++
		}
	}
	r.summarize(out, results)
	if skipped > 0 {
		fmt.Fprintf(out, "%d skipped\n", skipped)
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	return results
}

// report prints one result.
func (r *Runner) report(out io.Writer, res *Result) {
	switch {
	case res.Skipped != "":
		if r.Verbose {
			fmt.Fprintf(out, "SKIP %s: %s\n", res.Case.Name, res.Skipped)
		}
	case res.Passed():
		if r.Verbose {
			fmt.Fprintf(out, "ok   %s (%.2fs)\n", res.Case.Name, res.Duration.Seconds())
		}
	default:
		fmt.Fprint(out, res.Report(r.Verbose))
	}
}

// Report renders a failed result: the case, its failures, and with verbose the transcript and
// the broker's stderr.
func (res *Result) Report(verbose bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FAIL %s (%s, %.2fs)\n", res.Case.Name, res.Case.File, res.Duration.Seconds())
	fmt.Fprintf(&b, "     %s\n", strings.TrimSpace(res.Case.Description))
	for _, f := range res.Failures {
		fmt.Fprintf(&b, "  - %s\n", strings.ReplaceAll(f, "\n", "\n    "))
	}
	if verbose {
		b.WriteString("  transcript:\n")
		for _, l := range res.Transcript {
			fmt.Fprintf(&b, "    %s\n", l)
		}
		b.WriteString("  broker stderr:\n")
		for l := range strings.SplitSeq(strings.TrimRight(clip(res.Stderr, 8000), "\n"), "\n") {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}

// caseRun is the state of one case while it runs.
type caseRun struct {
	r        *Runner
	c        *Case
	ctx      context.Context
	tmp      string
	area     string
	state    string
	roots    []string     // absolute root directories
	rootArgs []string     // --root DIR[:rw] ...
	dirArgs  []string     // DIR ... ({dirs})
	rootCfg  []configRoot // the roots as a config file lists them
	config   string       // the config file that pre-approves the roots, once written
	env      []string     // the broker's and the tools' environment
	v        *vars
	s        *session          // the broker running now (set by the case's goroutine only)
	prev     []*session        // brokers that ran before a restart, in order
	smu      sync.Mutex        // guards s against the deadline watcher's read
	outside  map[string]string // snapshot of the area outside the roots
	fails    []string
	nextID   int
	ids      map[string]any // request step name -> id sent
	initReq  *message       // the broker's initialize request, once seen
	exitSet  bool           // a step already checked the exit
	ready    bool           // the runner, as the host, completed initialize
}

func (cr *caseRun) failf(format string, args ...any) {
	cr.fails = append(cr.fails, fmt.Sprintf(format, args...))
}

// RunCase runs one case in a fresh temporary directory against a fresh broker process.
func (r *Runner) RunCase(ctx context.Context, c *Case) *Result {
	start := time.Now()
	res := &Result{Case: c}
	defer func() { res.Duration = time.Since(start) }()
	for _, req := range c.Requires {
		switch {
		case req == "non-root" && isRoot():
			res.Skipped = "needs a user other than root"
		case req == "linux" && runtime.GOOS != "linux":
			res.Skipped = "needs Linux"
		}
		if res.Skipped != "" {
			return res
		}
	}
	for _, t := range c.Tools() {
		if len(r.tool(t)) == 0 {
			res.Skipped = fmt.Sprintf("the runner has no {%s} command (a run step needs it)", t)
			return res
		}
	}
	if len(r.command(c)) == 0 {
		res.Failures = []string{"no broker command"}
		if c.PlaysHost() {
			res.Failures = []string{"no server command (the case plays the host of a filesystem MCP server)"}
		}
		return res
	}
	timeout := defaultCaseTimeout
	if c.Timeout != "" {
		timeout, _ = time.ParseDuration(c.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cr := &caseRun{r: r, c: c, ctx: ctx, v: newVars(), ids: map[string]any{}}
	defer cr.cleanup()
	if err := cr.setUp(); err != nil {
		res.Failures = []string{"set-up: " + err.Error()}
		return res
	}
	// Past the deadline, a broker that stopped reading could hold a write to its stdin for
	// ever: kill it, which ends the write.
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cr.smu.Lock()
			if s := cr.s; s != nil && !s.hasExited() {
				signalGroup(s.cmd, false)
			}
			cr.smu.Unlock()
		case <-finished:
		}
	}()
	cr.run()
	close(finished)
	res.Failures = cr.fails
	if cr.s != nil {
		res.Transcript = cr.transcript(transcriptLines)
		var stderr []string
		for _, s := range append(slices.Clone(cr.prev), cr.s) {
			stderr = append(stderr, s.stderr.String())
		}
		res.Stderr = strings.Join(stderr, "--- (the broker restarted) ---\n")
	}
	return res
}

// transcript returns the last n lines exchanged, with every broker the case started.
func (cr *caseRun) transcript(n int) []string {
	var all []string
	for _, s := range cr.prev {
		all = append(all, s.lastTranscript(1<<30)...)
		all = append(all, "(the broker restarted)")
	}
	all = append(all, cr.s.lastTranscript(1<<30)...)
	if len(all) > n {
		all = append([]string{fmt.Sprintf("(%d earlier lines)", len(all)-n)}, all[len(all)-n:]...)
	}
	return all
}

// sessions returns every broker the case started, the running one last.
func (cr *caseRun) sessions() []*session {
	return append(slices.Clone(cr.prev), cr.s)
}

// setUp makes the directories and the fixture, and starts the broker.
func (cr *caseRun) setUp() error {
	tmp, err := os.MkdirTemp("", "fsbroker-conformance-")
	if err != nil {
		return err
	}
	if cr.tmp, err = filepath.EvalSymlinks(tmp); err != nil {
		cr.tmp = tmp
		return err
	}
	cr.area = filepath.Join(cr.tmp, "area")
	cr.state = filepath.Join(cr.tmp, "state")
	for _, d := range []string{cr.area, cr.state, filepath.Join(cr.tmp, "xdg"), filepath.Join(cr.tmp, "mounts")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	cr.v.fixed["area"] = filepath.ToSlash(cr.area)
	cr.v.fixed["state"] = filepath.ToSlash(cr.state)
	cr.v.fixed["server"] = serverName
	if err := buildFixture(cr.area, cr.c.Fixture, cr.v); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}
	for _, rt := range cr.c.Roots {
		dir, err := areaPath(cr.area, rt.Path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cr.roots = append(cr.roots, dir)
		arg := dir
		if rt.Mount != "" && rt.Mount != filepath.Base(dir) {
			arg = filepath.Join(cr.tmp, "mounts", rt.Mount)
			if err := os.Symlink(dir, arg); err != nil {
				return err
			}
		}
		cr.dirArgs = append(cr.dirArgs, arg)
		if rt.Writable {
			arg += ":rw"
		}
		cr.rootArgs = append(cr.rootArgs, "--root", arg)
		cr.rootCfg = append(cr.rootCfg, configRoot{Path: dir, Mount: rt.Mount, Writable: rt.Writable, Consent: "preapproved"})
	}
	if cr.outside, err = snapshot(cr.area, cr.roots); err != nil {
		return err
	}
	argv, err := cr.brokerArgv(cr.c.Consent, cr.c.Preapproved, cr.c.Flags)
	if err != nil {
		return err
	}
	cr.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(cr.tmp, "xdg"))
	cr.env = append(cr.env, cr.r.Env...)
	s, err := startSession(argv, cr.env, cr.tmp)
	if err != nil {
		return err
	}
	cr.setSession(s)
	return nil
}

// setSession makes s the running broker.
func (cr *caseRun) setSession(s *session) {
	cr.smu.Lock()
	defer cr.smu.Unlock()
	cr.s = s
}

// brokerArgv builds the broker command for a consent mode ("" is auto), a pre-approval of the
// roots (nil: the runner's default, see [Case.Preapproved]) and flags, ${...} references
// expanded in both. Pre-approved roots are given as a config file (preapprovedConfig), others
// as --root flags.
func (cr *caseRun) brokerArgv(consent string, preapproved *bool, rawFlags []string) ([]string, error) {
	consent = orDefault(consent, "auto")
	rootArgs := cr.rootArgs
	if preapproved == nil && consent == "auto" || preapproved != nil && *preapproved {
		cfg, err := cr.preapprovedConfig()
		if err != nil {
			return nil, err
		}
		rootArgs = []string{"--config", cfg}
	}
	consent, err := cr.v.str(consent)
	if err != nil {
		return nil, fmt.Errorf("consent: %w", err)
	}
	var flags []string
	for _, f := range rawFlags {
		x, err := cr.v.str(f)
		if err != nil {
			return nil, err
		}
		flags = append(flags, x)
	}
	template := cr.r.command(cr.c)
	if cr.c.PlaysHost() {
		template = serveTemplate(template)
	}
	return buildArgv(template, map[string][]string{
		PlaceholderRoots:   rootArgs,
		PlaceholderState:   {"--state-dir", cr.state},
		PlaceholderConsent: {"--consent", consent},
		PlaceholderFlags:   flags,
		PlaceholderDirs:    cr.dirArgs,
	}, cr.replacer()), nil
}

// configRoot is a root as the broker's config file lists it (schema/config.json).
type configRoot struct {
	Path     string `json:"path"`
	Mount    string `json:"mount,omitempty"`
	Writable bool   `json:"writable,omitempty"`
	Consent  string `json:"consent"`
}

// preapprovedConfig returns the config file that lists the case's roots, each with consent
// preapproved (the operator's pre-approval of PROTOCOL.md section 5), writing it on first use.
// It lies in the case's directory, outside the area and the state directory.
func (cr *caseRun) preapprovedConfig() (string, error) {
	if cr.config != "" {
		return cr.config, nil
	}
	b, err := json.MarshalIndent(map[string]any{"version": 1, "roots": cr.rootCfg}, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(cr.tmp, "preapproved.yaml") // JSON is YAML
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("pre-approving config: %w", err)
	}
	cr.config = p
	return p, nil
}

// replacer replaces {area} and {statedir} inside template arguments.
func (cr *caseRun) replacer() *strings.Replacer {
	return strings.NewReplacer("{area}", cr.area, "{statedir}", cr.state)
}

// buildArgv expands the command template.
func buildArgv(template []string, groups map[string][]string, inner *strings.Replacer) []string {
	order := []string{PlaceholderRoots, PlaceholderState, PlaceholderConsent, PlaceholderFlags}
	var argv []string
	used := false
	for _, a := range template {
		if g, ok := groups[a]; ok {
			argv = append(argv, g...)
			used = true
			continue
		}
		argv = append(argv, inner.Replace(a))
	}
	if !used {
		for _, p := range order {
			argv = append(argv, groups[p]...)
		}
	}
	return argv
}

// cleanup removes the case's directory, making read-only directories writable first.
func (cr *caseRun) cleanup() {
	if cr.s != nil && !cr.s.hasExited() {
		cr.s.stop(time.Second)
	}
	if cr.tmp == "" {
		return
	}
	_ = filepath.WalkDir(cr.tmp, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(cr.tmp)
}

// run plays the case: handshake, steps, end of session, checks of the tree.
func (cr *caseRun) run() {
	ok := cr.handshake()
	for i := range cr.c.Steps {
		if !ok {
			break
		}
		if cr.ctx.Err() != nil {
			cr.failf("the case's deadline passed before step %d", i+1)
			break
		}
		ok = cr.step(i, &cr.c.Steps[i])
	}
	cr.finish()
}

// handshake does the initialize exchange the case describes, unless it is manual.
func (cr *caseRun) handshake() bool {
	if cr.c.PlaysHost() {
		return cr.hostHandshake()
	}
	init := cr.c.Initialize
	if init == nil {
		init = &Initialize{}
	}
	if init.Manual {
		return true
	}
	return cr.awaitInitialize(init.Expect, "") && cr.answerInitialize(init, true)
}

// awaitInitialize waits for the broker's initialize request and matches its params.
func (cr *caseRun) awaitInitialize(expect any, within string) bool {
	m := cr.s.await(cr.ctx, duration(within, defaultReplyWait), func(m *message) bool {
		return m.isRequest() && m.method == "initialize"
	})
	if m == nil {
		cr.failf("initialize: the broker sent no initialize request (got %s)%s", describe(cr.s.pending(func(*message) bool { return true })), cr.exitNote())
		return false
	}
	cr.initReq = m
	cr.v.captured["initialize"] = m.value
	if expect != nil {
		return cr.matchValue("initialize params", expect, m.value["params"], m)
	}
	return true
}

// answerInitialize answers the initialize request; auto says whether the handshake is the
// runner's (then notifications/initialized is awaited unless told otherwise).
func (cr *caseRun) answerInitialize(init *Initialize, auto bool) bool {
	if cr.initReq == nil {
		cr.failf("answerInitialize: no initialize request was awaited")
		return false
	}
	reply := map[string]any{"jsonrpc": "2.0", "id": cr.initReq.id}
	if init.Error != nil {
		e, err := cr.v.subst(init.Error)
		if err != nil {
			cr.failf("answerInitialize: %v", err)
			return false
		}
		reply["error"] = e
	} else {
		var result any = map[string]any{
			"protocolVersion": orDefault(init.ProtocolVersion, DefaultVersion),
			"capabilities":    map[string]any{},
			"serverInfo":      map[string]any{"name": serverName, "version": "1.0.0"},
		}
		if init.Result != nil {
			var err error
			if result, err = cr.v.subst(init.Result); err != nil {
				cr.failf("answerInitialize: %v", err)
				return false
			}
		}
		if r, ok := result.(map[string]any); ok {
			if info, ok := r["serverInfo"].(map[string]any); ok {
				if name, ok := info["name"].(string); ok {
					cr.v.fixed["server"] = name
				}
			}
		}
		reply["result"] = result
	}
	if err := cr.s.send(reply); err != nil {
		cr.failf("answerInitialize: %v", err)
		return false
	}
	wait := auto && init.Error == nil
	if init.Initialized != nil {
		wait = *init.Initialized
	}
	if wait {
		n := cr.s.await(cr.ctx, defaultReplyWait, func(m *message) bool {
			return m.isNotification() && m.method == "notifications/initialized"
		})
		if n == nil {
			cr.failf("initialize: no notifications/initialized after the result")
			return false
		}
	}
	return true
}

// step runs one step; false ends the case.
func (cr *caseRun) step(i int, s *Step) bool {
	label := fmt.Sprintf("step %d (%s)", i+1, s.Name)
	fail := func(format string, args ...any) bool {
		msg := fmt.Sprintf(format, args...)
		if cr.ctx.Err() != nil {
			msg += " (the case's deadline passed)"
		}
		cr.failf("%s: %s", label, msg)
		return false
	}
	switch {
	case s.Request != nil:
		label = fmt.Sprintf("step %d (%s: request %s)", i+1, s.Name, s.Request.Method)
		retry := duration(s.Request.RetryFor, 0)
		deadline := time.Now().Add(retry)
		for attempt := 1; ; attempt++ {
			var id any
			if s.Request.ID != nil {
				var err error
				if id, err = cr.v.subst(s.Request.ID); err != nil {
					return fail("%v", err)
				}
			} else {
				cr.nextID++
				id = json.Number(fmt.Sprint(cr.nextID))
			}
			msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": s.Request.Method}
			if s.Request.Params != nil {
				p, err := cr.v.subst(s.Request.Params)
				if err != nil {
					return fail("params: %v", err)
				}
				msg["params"] = p
			}
			cr.ids[s.Name] = id
			if err := cr.s.send(msg); err != nil {
				return fail("%v", err)
			}
			if s.Request.Async {
				return true
			}
			why := cr.checkReply(label, s.Name, id, s.Expect, true)
			switch {
			case why == "":
				return true
			case retry == 0:
				cr.failf("%s", why)
				return false
			case time.Now().After(deadline) || cr.ctx.Err() != nil:
				cr.failf("%s\n(the last of %d attempts over %s: retryFor %s)", why, attempt, time.Since(deadline.Add(-retry)).Round(time.Millisecond), retry)
				return false
			}
			select {
			case <-time.After(retryPause):
			case <-cr.ctx.Done():
			}
		}
	case s.Reply != "":
		id, ok := cr.ids[s.Reply]
		if !ok {
			return fail("no async request named %q was sent", s.Reply)
		}
		return cr.awaitReply(label, s.Reply, id, s.Expect, true)
	case s.Raw != nil:
		line, err := cr.rawLine(s.Raw)
		if err != nil {
			return fail("%v", err)
		}
		if err := cr.s.sendLine(line); err != nil {
			return fail("%v", err)
		}
		if s.Expect == nil {
			return true
		}
		if !s.Expect.hasID {
			return fail("a raw step's expect must name the reply's id (null included)")
		}
		id, err := cr.v.subst(s.Expect.ID)
		if err != nil {
			return fail("%v", err)
		}
		return cr.awaitReply(label, s.Name, id, s.Expect, false)
	case s.Notify != nil:
		msg := map[string]any{"jsonrpc": "2.0", "method": s.Notify.Method}
		if s.Notify.Params != nil {
			p, err := cr.v.subst(s.Notify.Params)
			if err != nil {
				return fail("params: %v", err)
			}
			msg["params"] = p
		}
		if err := cr.s.send(msg); err != nil {
			return fail("%v", err)
		}
	case s.ExpectNotification != nil:
		ne := s.ExpectNotification
		want, err := cr.v.subst(ne.Params)
		if err != nil {
			return fail("%v", err)
		}
		m := cr.s.await(cr.ctx, duration(ne.Within, defaultNotifyWait), func(m *message) bool {
			return m.isNotification() && m.method == ne.Method && (want == nil || len(Match(want, m.value["params"], "/params")) == 0)
		})
		if m == nil {
			same := cr.s.pending(func(m *message) bool { return m.isNotification() && m.method == ne.Method })
			return fail("no notification %s matching %s within %s; %s notifications received and not yet matched: %s",
				ne.Method, show(want), duration(ne.Within, defaultNotifyWait), ne.Method, describe(same))
		}
		cr.v.captured[s.Name] = m.value
	case s.ExpectNoNotification != nil:
		ne := s.ExpectNoNotification
		want, err := cr.v.subst(ne.Params)
		if err != nil {
			return fail("%v", err)
		}
		select {
		case <-time.After(duration(ne.Within, defaultQuietWait)):
		case <-cr.ctx.Done():
		}
		got := cr.s.pending(func(m *message) bool {
			return m.isNotification() && m.method == ne.Method && (want == nil || len(Match(want, m.value["params"], "/params")) == 0)
		})
		if len(got) > ne.AtMost {
			return fail("want at most %d notifications %s matching %s, got %d: %s", ne.AtMost, ne.Method, show(want), len(got), describe(got))
		}
		for range got {
			cr.s.await(cr.ctx, 0, func(m *message) bool {
				return m.isNotification() && m.method == ne.Method && (want == nil || len(Match(want, m.value["params"], "/params")) == 0)
			})
		}
	case s.ExpectNoReply != nil:
		id, err := cr.v.subst(s.ExpectNoReply.ID)
		if err != nil {
			return fail("%v", err)
		}
		select {
		case <-time.After(duration(s.ExpectNoReply.Within, defaultQuietWait)):
		case <-cr.ctx.Done():
		}
		if got := cr.s.pending(func(m *message) bool { return m.isResponse() && exactEqual(id, m.id) }); len(got) > 0 {
			return fail("want no reply with id %s, got %s", show(id), describe(got))
		}
	case s.ExpectRequest != nil:
		re := s.ExpectRequest
		want, err := cr.v.subst(re.Params)
		if err != nil {
			return fail("%v", err)
		}
		m := cr.s.await(cr.ctx, duration(re.Within, defaultReplyWait), func(m *message) bool {
			return m.isRequest() && m.method == re.Method && (want == nil || len(Match(want, m.value["params"], "/params")) == 0)
		})
		if m == nil {
			return fail("no request %s matching %s from the broker within %s", re.Method, show(want), duration(re.Within, defaultReplyWait))
		}
		cr.v.captured[s.Name] = m.value
		if re.Method != "ping" {
			var result any = map[string]any{}
			if re.Result != nil {
				if result, err = cr.v.subst(re.Result); err != nil {
					return fail("%v", err)
				}
			}
			if err := cr.s.send(map[string]any{"jsonrpc": "2.0", "id": m.id, "result": result}); err != nil {
				return fail("%v", err)
			}
		}
	case s.ExpectExit != nil:
		cr.exitSet = true
		code, ok := cr.s.waitExit(cr.ctx, duration(s.ExpectExit.Within, defaultReplyWait))
		if !ok {
			return fail("the broker did not exit within %s", duration(s.ExpectExit.Within, defaultReplyWait))
		}
		if s.ExpectExit.Code != nil && code != *s.ExpectExit.Code {
			return fail("exit status %d, want %d", code, *s.ExpectExit.Code)
		}
	case s.ExpectStderr != nil:
		re, err := regexp.Compile(s.ExpectStderr.Regex)
		if err != nil {
			return fail("%v", err)
		}
		deadline := time.Now().Add(duration(s.ExpectStderr.Within, defaultNotifyWait))
		for !re.MatchString(cr.s.stderr.String()) {
			if time.Now().After(deadline) || cr.ctx.Err() != nil {
				return fail("stderr does not match /%s/", s.ExpectStderr.Regex)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case s.Signal != "":
		if err := signalProcess(cr.s.cmd, s.Signal); err != nil {
			return fail("signal %s: %v", s.Signal, err)
		}
	case s.CloseInput:
		cr.s.closeInput()
	case s.Disk != nil:
		if err := applyDisk(cr.area, s.Disk, cr.v); err != nil {
			return fail("disk %s %s: %v", s.Disk.Op, s.Disk.Path, err)
		}
		cr.resnapshot(s.Disk.Path, s.Disk.To)
	case s.Sleep != "":
		select {
		case <-time.After(duration(s.Sleep, 0)):
		case <-cr.ctx.Done():
		}
	case s.AwaitInitialize != nil:
		return cr.awaitInitialize(s.AwaitInitialize.Expect, s.AwaitInitialize.Within)
	case s.AnswerInitialize != nil:
		return cr.answerInitialize(s.AnswerInitialize, false)
	case s.Run != nil:
		if why := cr.runTool(s.Name, s.Run); why != "" {
			return fail("%s", why)
		}
	case s.Restart != nil:
		if why := cr.restart(s.Restart); why != "" {
			return fail("%s", why)
		}
		return cr.handshake()
	}
	return true
}

// runTool runs a run step's command to its end, captures {exitCode, stdout, stderr} under
// name and matches the exit status. It returns what went wrong, or "".
func (cr *caseRun) runTool(name string, rs *RunStep) string {
	tool, _ := toolName(rs.Argv[0])
	template := cr.r.tool(tool)
	if len(template) == 0 {
		return fmt.Sprintf("the runner has no {%s} command", tool)
	}
	inner := strings.NewReplacer(PlaceholderBrokerBin, cr.r.command(cr.c)[0], "{area}", cr.area, "{statedir}", cr.state)
	var argv []string
	for _, a := range template {
		argv = append(argv, inner.Replace(a))
	}
	for _, a := range rs.Argv[1:] {
		x, err := cr.v.str(a)
		if err != nil {
			return err.Error()
		}
		argv = append(argv, x)
	}
	within := duration(rs.Within, defaultRunWait)
	ctx, cancel := context.WithTimeout(cr.ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = cr.env, cr.tmp
	cmd.WaitDelay = time.Second
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	shown := strings.Join(argv, " ")
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	case ctx.Err() != nil:
		cr.s.note(fmt.Sprintf("$ %s (did not end within %s)", shown, within))
		return fmt.Sprintf("run %s: did not end within %s", shown, within)
	case err != nil:
		cr.s.note(fmt.Sprintf("$ %s (%v)", shown, err))
		return fmt.Sprintf("run %s: %v", shown, err)
	}
	cr.s.note(fmt.Sprintf("$ %s (exit status %d)", shown, code))
	cr.v.captured[name] = map[string]any{"exitCode": json.Number(fmt.Sprint(code)), "stdout": stdout.String(), "stderr": stderr.String()}
	var want any = json.Number("0")
	if rs.ExpectExit != nil {
		if want, err = cr.v.subst(rs.ExpectExit); err != nil {
			return err.Error()
		}
	}
	if diffs := Match(want, json.Number(fmt.Sprint(code)), "/exitCode"); len(diffs) > 0 {
		return fmt.Sprintf("run %s: exit status %d, want %s\n  stdout: %s\n  stderr: %s", shown, code, show(want),
			clip(strings.TrimSpace(stdout.String()), 1000), clip(strings.TrimSpace(stderr.String()), 1000))
	}
	return ""
}

// restart ends the running broker as a case's end does (end of input, a clean exit within the
// grace) and starts a new one on the same area and state directory. It returns what went
// wrong, or "". The caller does the handshake.
func (cr *caseRun) restart(rs *Restart) string {
	grace := duration(rs.Within, cr.r.grace())
	old := cr.s
	code, how := old.stop(grace)
	switch {
	case cr.exitSet:
	case how != "":
		return fmt.Sprintf("restart: the broker did not exit within %s after its stdin closed (ended by %s)", grace, how)
	case code != 0 && (old.sent("notifications/initialized") || cr.ready):
		return fmt.Sprintf("restart: exit status %d after the server closed its output, want 0", code)
	}
	consent, preapproved, flags := cr.c.Consent, cr.c.Preapproved, cr.c.Flags
	if rs.Consent != "" {
		consent = rs.Consent
	}
	if rs.Preapproved != nil {
		preapproved = rs.Preapproved
	}
	if rs.Flags != nil {
		flags = rs.Flags
	}
	argv, err := cr.brokerArgv(consent, preapproved, flags)
	if err != nil {
		return "restart: " + err.Error()
	}
	s, err := startSession(argv, cr.env, cr.tmp)
	if err != nil {
		return "restart: " + err.Error()
	}
	cr.prev = append(cr.prev, old)
	cr.setSession(s)
	cr.exitSet, cr.initReq, cr.ready = false, nil, false
	return ""
}

// rawLine builds a raw step's bytes.
func (cr *caseRun) rawLine(r *Raw) ([]byte, error) {
	switch {
	case r.Text != nil:
		s, err := cr.v.str(*r.Text)
		return []byte(s), err
	case r.Base64 != nil:
		return base64.StdEncoding.DecodeString(*r.Base64)
	}
	b := make([]byte, 0, len(r.Prefix)+r.Fill+len(r.Suffix))
	b = append(b, r.Prefix...)
	for range r.Fill {
		b = append(b, 'a')
	}
	return append(b, r.Suffix...), nil
}

// awaitReply waits for the reply with id and matches it; byRequest says the default
// expectation (none given) is a success.
func (cr *caseRun) awaitReply(label, name string, id any, e *Expect, byRequest bool) bool {
	if why := cr.checkReply(label, name, id, e, byRequest); why != "" {
		cr.failf("%s", why)
		return false
	}
	return true
}

// checkReply is awaitReply returning the failure instead of recording it ("" when the reply
// matched).
func (cr *caseRun) checkReply(label, name string, id any, e *Expect, byRequest bool) string {
	within := defaultReplyWait
	if e != nil {
		within = duration(e.Within, defaultReplyWait)
	}
	m := cr.s.await(cr.ctx, within, func(m *message) bool {
		return m.isResponse() && exactEqual(id, m.id)
	})
	if m == nil {
		return fmt.Sprintf("%s: no reply with id %s within %s%s", label, show(id), within, cr.exitNote())
	}
	cr.v.captured[name] = m.value
	want, err := cr.replyMatcher(e)
	if err != nil {
		return fmt.Sprintf("%s: %v", label, err)
	}
	if want == nil {
		return ""
	}
	return cr.valueDiff(label, want, m.value, m)
}

// replyMatcher turns an Expect into a matcher of the whole reply.
func (cr *caseRun) replyMatcher(e *Expect) (any, error) {
	if e == nil {
		return map[string]any{"result": map[string]any{"$any": true}, "error": map[string]any{"$absent": true}}, nil
	}
	if e.Any {
		return nil, nil
	}
	if e.Reply != nil {
		return cr.v.subst(e.Reply)
	}
	want := map[string]any{}
	if e.Result != nil {
		r, err := cr.v.subst(e.Result)
		if err != nil {
			return nil, err
		}
		want["result"], want["error"] = r, map[string]any{"$absent": true}
	}
	if e.Error != nil || e.Fail != "" {
		em := map[string]any{}
		if e.Fail != "" {
			em["code"] = json.Number(fmt.Sprint(failCodes[e.Fail]))
			em["data"] = map[string]any{"code": e.Fail}
		}
		if e.Error != nil {
			x, err := cr.v.subst(e.Error)
			if err != nil {
				return nil, err
			}
			given, ok := x.(map[string]any)
			if !ok {
				return nil, errors.New("expect.error must be an object")
			}
			for k, v := range given {
				if d, ok := v.(map[string]any); ok && k == "data" {
					if base, ok := em["data"].(map[string]any); ok {
						for dk, dv := range d {
							base[dk] = dv
						}
						continue
					}
				}
				em[k] = v
			}
		}
		want["error"], want["result"] = em, map[string]any{"$absent": true}
	}
	if len(want) == 0 {
		return map[string]any{"result": map[string]any{"$any": true}, "error": map[string]any{"$absent": true}}, nil
	}
	return want, nil
}

// matchValue matches and records a failure with the expected and received values.
func (cr *caseRun) matchValue(label string, want, got any, m *message) bool {
	if why := cr.valueDiff(label, want, got, m); why != "" {
		cr.failf("%s", why)
		return false
	}
	return true
}

// valueDiff matches and describes the differences, or returns "".
func (cr *caseRun) valueDiff(label string, want, got any, m *message) string {
	diffs := Match(want, got, "")
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the reply differs:\n  %s\nwant (matcher): %s\ngot: %s", label, strings.Join(diffs, "\n  "),
		show(want), clip(string(m.raw), 1500))
}

// resnapshot takes the runner's own disk change into the outside snapshot.
func (cr *caseRun) resnapshot(paths ...string) {
	now, err := snapshot(cr.area, cr.roots)
	if err != nil {
		cr.failf("snapshot: %v", err)
		return
	}
	affected := func(k string) bool {
		for _, p := range paths {
			if p != "" && (k == p || strings.HasPrefix(k, p+"/")) {
				return true
			}
		}
		return false
	}
	for k := range cr.outside {
		if affected(k) {
			delete(cr.outside, k)
		}
	}
	for k, v := range now {
		if affected(k) {
			cr.outside[k] = v
		}
	}
}

// exitNote says how the broker ended, if it did.
func (cr *caseRun) exitNote() string {
	if code, ok := cr.s.waitExit(cr.ctx, 100*time.Millisecond); ok {
		return fmt.Sprintf("; the broker exited with status %d", code)
	}
	return ""
}

// finish ends the session and checks the stream and the tree.
func (cr *caseRun) finish() {
	code, how := cr.s.stop(cr.r.grace())
	switch {
	case cr.exitSet:
	case how != "":
		cr.failf("the broker did not exit within %s after its stdin closed (ended by %s)", cr.r.grace(), how)
	case code != 0 && (cr.s.sent("notifications/initialized") || cr.ready):
		cr.failf("exit status %d after the server closed its output, want 0", code)
	}
	for _, s := range cr.sessions() {
		for _, b := range s.badLines() {
			cr.failf("stdout line is not a JSON-RPC message: %s", b)
		}
		if strings.Contains(s.stderr.String(), "WARNING: DATA RACE") {
			cr.failf("the race detector fired in the broker")
		}
	}
	if a := cr.c.After; a != nil {
		for i := range a.Files {
			for _, d := range checkEntry(cr.area, &a.Files[i], cr.v) {
				cr.failf("after: %s", d)
			}
		}
		dirs := make([]string, 0, len(a.Exactly))
		for d := range a.Exactly {
			dirs = append(dirs, d)
		}
		slices.Sort(dirs)
		for _, d := range dirs {
			for _, f := range checkExactly(cr.area, d, a.Exactly[d]) {
				cr.failf("after: %s", f)
			}
		}
	}
	if a := cr.c.After; a == nil || a.OutsideUnchanged == nil || *a.OutsideUnchanged {
		now, err := snapshot(cr.area, cr.roots)
		if err != nil {
			cr.failf("snapshot: %v", err)
			return
		}
		for _, d := range diffSnapshots(cr.outside, now) {
			cr.failf("%s", d)
		}
	}
}

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return DefaultGrace
}

// duration parses a validated duration, or returns def for "".
func duration(s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return def
	}
	return d
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
