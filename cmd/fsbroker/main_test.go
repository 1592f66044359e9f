// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// The tests of this package drive the real fsbroker binary (and the real
// example server) as subprocesses over real pipes: a test plays the MCP
// server on the broker's stdin and stdout with newline-delimited JSON and
// reads its log from stderr. Both binaries are built once, in TestMain.
//
// Every wait is an upper bound on something that should happen promptly;
// no test asserts how long anything took.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// waitLimit bounds each wait for something that should happen promptly.
const waitLimit = 30 * time.Second

var (
	brokerBin string // the fsbroker binary under test
	serverBin string // the example server (go-sdk)
	stateHome string // XDG_STATE_HOME of every broker started: state stays out of $HOME
)

func TestMain(m *testing.M) {
	if limit := os.Getenv(fileSizeLimitEnv); limit != "" {
		execWithFileSizeLimit(limit)
	}
	os.Exit(testMain(m))
}

// fileSizeLimitEnv makes the test binary a wrapper: it sets RLIMIT_FSIZE to
// that many bytes and executes its arguments (see startLimited).
const fileSizeLimitEnv = "FSBROKER_TEST_FSIZE"

// execWithFileSizeLimit replaces this process with os.Args[1:] under a file
// size limit: every write past limit bytes of a file fails with EFBIG.
func execWithFileSizeLimit(limit string) {
	n, err := strconv.ParseUint(limit, 10, 64)
	if err == nil {
		err = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
	}
	if err == nil && len(os.Args) > 1 {
		err = syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	}
	fmt.Fprintln(os.Stderr, "file size limit wrapper:", err)
	os.Exit(1)
}

// startLimited starts fsbroker with args under a file size limit of limit
// bytes.
func startLimited(t *testing.T, limit int, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{brokerBin}, withConsent(t, "", args)...)...)
	p := startProcEnv(t, cmd, fileSizeLimitEnv+"="+strconv.Itoa(limit))
	return p
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fsbroker-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	brokerBin = filepath.Join(dir, "fsbroker")
	serverBin = filepath.Join(dir, "example-server")
	stateHome = filepath.Join(dir, "state")
	// The broker is built with the race detector when the tests run with
	// it, so that a data race in the real process fails the test that drove
	// it (the binary prints "DATA RACE" and exits 66).
	var brokerFlags []string
	if raceEnabled {
		brokerFlags = append(brokerFlags, "-race")
	}
	for _, b := range []struct {
		out, pkg string
		flags    []string
	}{
		{brokerBin, "github.com/fsbroker/fsbroker/cmd/fsbroker", brokerFlags},
		{serverBin, "github.com/fsbroker/fsbroker/cmd/example-server", nil},
	} {
		// -buildvcs=auto: the commit is stamped when the tests run in a
		// checkout, whatever GOFLAGS says (fsbroker version reports it).
		args := append(append([]string{"build", "-buildvcs=auto", "-o", b.out}, b.flags...), b.pkg)
		cmd := exec.Command(goTool(), args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
			return 1
		}
	}
	return m.Run()
}

// brokerEnv is the broker's environment: this process's, with its state
// under the test's directory and without the race runtime's one-second sleep
// at exit.
func brokerEnv() []string {
	// No desktop session bus: a broker under test shows no notification on
	// the developer's desktop (the notification tests give it their own bus).
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") })
	env = append(env, "XDG_STATE_HOME="+stateHome)
	if raceEnabled {
		env = append(env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	return env
}

// csListGrants runs `fsbroker grants list --json` for server (its pinned id,
// else its declared name).
func csListGrants(t *testing.T, state, server string) []grantJSON {
	t.Helper()
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", state, "--server", server, "--json")
	if code != 0 {
		t.Fatalf("grants list: exit status %d; stderr:\n%s", code, stderr)
	}
	var out listJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("grants list --json: %v\n%s", err, stdout)
	}
	return out.Grants
}

// goTool returns the go command on PATH: "go test" puts the bin directory of
// its own GOROOT first on the test's PATH, so this is the toolchain running
// the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// message is one line the broker wrote to its stdout.
type message = mcppeer.Message

// testServer is how the tests, as the broker's MCP server, name themselves.
var testServer = mcppeer.Implementation{Name: "cli-test-peer", Version: "0.0.1"}

// proc is a running fsbroker. For stdio sessions the test is its MCP server
// (for wrap, its host): the peer writes requests and replies to the broker's
// stdin and reads the broker's messages from its stdout, each of which must
// be a JSON-RPC message.
type proc struct {
	*mcppeer.Peer
	t      *testing.T
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File // our end of the broker's stdout
	stderr *testlog.Lines

	readDone chan struct{} // stdout and stderr reached EOF
	exited   chan struct{} // closed once the process has exited

	mu    sync.Mutex
	state *os.ProcessState
}

// startBroker runs fsbroker with args in dir (the test's working directory
// when empty).
func startBroker(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(brokerBin, withConsent(t, dir, args)...)
	cmd.Dir = dir
	return startProc(t, cmd)
}

// withConsent makes the roots a session test names usable without a
// files/consent round first, the way an operator does (PROTOCOL.md section
// 5): when the test gives no --consent and no --config of its own, its
// --root DIR[:rw] flags go into a config file (in a directory of the test's)
// that lists them with consent: preapproved, passed with --config in their
// place, and --consent auto answers the files/consent requests the test
// sends. A test that gives its own --consent or --config gets its roots as
// it gave them (pre-approved only where its config file says so) and
// --consent auto first on the line: a later --consent overrides it, and it
// overrides the consent of the test's config file. dir is the broker's
// working directory ("": the test's), against which relative roots are
// resolved. Only stdio and connect are changed.
func withConsent(t *testing.T, dir string, args []string) []string {
	t.Helper()
	if len(args) == 0 || (args[0] != "stdio" && args[0] != "connect") {
		return args
	}
	var (
		rootFlags []string
		rest      []string
		own       bool // the test gives --consent or --config
	)
	flags, tail := args[1:], []string(nil)
	if i := slices.Index(flags, "--"); i >= 0 {
		flags, tail = flags[:i], flags[i:]
	}
	for i := 0; i < len(flags); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(flags[i], "-"), "=")
		if !strings.HasPrefix(flags[i], "-") {
			rest = append(rest, flags[i])
			continue
		}
		switch name {
		case "consent", "config":
			own = true
		case "root":
			if !hasValue && i+1 < len(flags) {
				i++
				value = flags[i]
			}
			rootFlags = append(rootFlags, value)
			continue
		}
		rest = append(rest, flags[i])
	}
	if own || len(rootFlags) == 0 {
		return append([]string{args[0], "--consent", "auto"}, args[1:]...)
	}
	type configRoot struct {
		Path     string `json:"path"`
		Writable bool   `json:"writable"`
		Consent  string `json:"consent"`
	}
	var list []configRoot
	for _, f := range rootFlags {
		spec, err := roots.ParseFlag(f)
		if err != nil {
			t.Fatalf("--root %q: %v", f, err)
		}
		if !filepath.IsAbs(spec.Path) {
			base := dir
			if base == "" {
				var err error
				if base, err = os.Getwd(); err != nil {
					t.Fatal(err)
				}
			}
			spec.Path = filepath.Join(base, spec.Path)
		}
		list = append(list, configRoot{Path: spec.Path, Writable: spec.Writable, Consent: "preapproved"})
	}
	b, err := json.Marshal(map[string]any{"version": 1, "roots": list})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "preapproved.yaml") // JSON is YAML
	writeFile(t, cfg, string(b))
	out := append([]string{args[0], "--consent", "auto", "--config", cfg}, rest...)
	return append(out, tail...)
}

// startProc starts cmd (fsbroker, possibly behind a wrapper that sets limits
// first) with the broker's environment, wired to pipes.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	return startProcEnv(t, cmd)
}

// startProcEnv is startProc with more environment variables.
func startProcEnv(t *testing.T, cmd *exec.Cmd, env ...string) *proc {
	t.Helper()
	p, _, _ := startProcPipes(t, cmd, false, env...)
	return p
}

// startProcPipes is startProcEnv that, with keep, also returns this
// process's copies of the child's stdin read end and stdout write end, open
// (the caller closes them), to look at the descriptions the child inherited.
func startProcPipes(t *testing.T, cmd *exec.Cmd, keep bool, env ...string) (p *proc, stdinR, stdoutW *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(brokerEnv(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatalf("start fsbroker: %v", err)
	}
	if keep {
		stdinR, stdoutW = inR, outW
	} else {
		inR.Close()
		outW.Close()
	}
	errW.Close()
	p = &proc{t: t, cmd: cmd, stdin: inW, stdout: outR, stderr: &testlog.Lines{}, readDone: make(chan struct{}), exited: make(chan struct{})}
	p.Peer = mcppeer.New(t, "fsbroker", jsonrpc.NewLineStream(outR, inW, 0), mcppeer.RequireValid(), mcppeer.WithWait(waitLimit))
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		defer errR.Close()
		_, _ = io.Copy(p.stderr, errR)
	}()
	go func() {
		<-p.Done()
		_ = outR.Close()
		<-stderrDone
		close(p.readDone)
	}()
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.state = cmd.ProcessState
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(p.cleanup)
	return p, stdinR, stdoutW
}

// cleanup ends the broker if the test did not, and checks what every test
// must hold: the race detector found nothing in the broker. (That stdout
// carried only JSON-RPC messages the peer checks after this, at the end of
// the test.)
func (p *proc) cleanup() {
	t := p.t
	select {
	case <-p.exited:
	default:
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(waitLimit):
			t.Errorf("fsbroker did not exit %s after its stdin closed; killing it", waitLimit)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	_ = p.stdin.Close()
	select {
	case <-p.readDone:
	case <-time.After(waitLimit):
		t.Errorf("fsbroker's stdout or stderr still open %s after it exited", waitLimit)
	}
	log := p.stderr.String()
	if strings.Contains(log, "DATA RACE") {
		t.Errorf("the race detector fired in fsbroker")
	}
	if t.Failed() {
		t.Logf("fsbroker %s stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), log)
	}
}

// ping sends a ping and checks that it is answered with {}.
func (p *proc) ping(id any) {
	p.t.Helper()
	r := p.Call(id, "ping", nil)
	if r.Error != nil || string(r.Result) != "{}" {
		p.t.Fatalf("ping %v answered %s, want result {}", id, r.Raw)
	}
}

// replyInitialize answers the initialize request with version.
func (p *proc) replyInitialize(init *message, version string) {
	p.t.Helper()
	p.ReplyInitialize(init, version, testServer)
}

// handshake completes the MCP lifecycle with version and returns the
// initialize request.
func (p *proc) handshake(version string) *message {
	p.t.Helper()
	return p.AcceptInitialize(version, testServer)
}

// rootEntry is one root in a roots/list result.
type rootEntry struct {
	URI  string `json:"uri"`
	Name string `json:"name"`
}

// listRoots calls roots/list and returns the roots.
func (p *proc) listRoots(id any) []rootEntry {
	p.t.Helper()
	r := p.Call(id, "roots/list", nil)
	if r.Error != nil {
		p.t.Fatalf("roots/list failed: %s", r.Raw)
	}
	var res struct {
		Roots *[]rootEntry `json:"roots"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || res.Roots == nil {
		p.t.Fatalf("roots/list result %s: want {\"roots\": [...]} (%v)", r.Result, err)
	}
	return *res.Roots
}

// waitExit waits for the broker to exit and for its output to end, and
// returns its exit status (-1 when a signal ended it).
func (p *proc) waitExit() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		p.t.Fatalf("fsbroker did not exit within %s", waitLimit)
	}
	select {
	case <-p.readDone:
	case <-time.After(waitLimit):
		p.t.Fatalf("fsbroker's output still open %s after it exited", waitLimit)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.ExitCode()
}

// closeStdin ends the broker's input.
func (p *proc) closeStdin() {
	_ = p.stdin.Close()
}

// signal sends sig to the broker.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal fsbroker: %v", err)
	}
}

// log returns the broker's stderr so far.
func (p *proc) log() string { return p.stderr.String() }

// countLog counts the occurrences of s in the log.
func (p *proc) countLog(s string) int { return strings.Count(p.log(), s) }

// waitLog waits until the log matches re and returns the first match's
// submatches.
func (p *proc) waitLog(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		if m := re.FindStringSubmatch(p.log()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no log line matching %q within %s", re, waitLimit)
		}
		select {
		case <-p.readDone:
			if m := re.FindStringSubmatch(p.log()); m != nil {
				return m
			}
			p.t.Fatalf("fsbroker's log ended without a line matching %q", re)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitLogCount waits until s occurs at least n times in the log.
func (p *proc) waitLogCount(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for p.countLog(s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("log has %q %d times, want at least %d, after %s", s, p.countLog(s), n, waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dataOf decodes an error's data.
type errorData struct {
	Code       string `json:"code"`
	Reason     string `json:"reason"`
	DecisionID string `json:"decisionId"`
	Errors     []struct {
		Pointer string `json:"pointer"`
		Message string `json:"message"`
	} `json:"errors"`
}

func dataOf(t *testing.T, m *message) errorData {
	t.Helper()
	var d errorData
	if m.Error == nil || len(m.Error.Data) == 0 {
		t.Fatalf("reply %s has no error data", m.Raw)
	}
	if err := json.Unmarshal(m.Error.Data, &d); err != nil {
		t.Fatalf("error data of %s: %v", m.Raw, err)
	}
	return d
}

// realDir creates dir (and its parents) and returns its symlink-resolved
// path (testfs.RealDir, under the name this package's tests use).
func realDir(t *testing.T, dir string) string { t.Helper(); return testfs.RealDir(t, dir) }

// fileURIPath checks that uri is a file:// URI without a host and returns its
// path.
func fileURIPath(t *testing.T, uri string) string {
	t.Helper()
	const prefix = "file://"
	if !strings.HasPrefix(uri, prefix) || !strings.HasPrefix(uri[len(prefix):], "/") {
		t.Fatalf("root uri %q is not file:///...", uri)
	}
	// The tests' directories have no characters that need escaping.
	return uri[len(prefix):]
}

// alive reports whether pid names a process that has not exited (a zombie
// counts as exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// writeFile writes content to path in place (testfs.WriteFile, under the
// name this package's tests use).
func writeFile(t *testing.T, path, content string) { t.Helper(); testfs.WriteFile(t, path, content) }

// writeTree writes files (slash-separated paths relative to base, and their
// content) under base, making the directories on the way.
func writeTree(t *testing.T, base string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, content)
	}
}

// replaceFile writes content to path atomically: a temporary file in the
// same directory renamed over it.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// readFile returns a file's content.
func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
