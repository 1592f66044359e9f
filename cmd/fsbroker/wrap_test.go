// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// The tests of fsbroker wrap play the MCP host on the broker's stdin and
// stdout, with a real server behind it: the example server (official Go SDK)
// and a scripted server, which is this test binary started again in a helper
// mode (see scriptedServer).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedServerEnv makes this test binary the scripted MCP server; its
// value is the status the server exits with when its input ends.
const scriptedServerEnv = "FSBROKER_TEST_SCRIPTED_SERVER"

func init() {
	if status := os.Getenv(scriptedServerEnv); status != "" {
		os.Exit(scriptedServer(status))
	}
}

// The scripted server's fixed lines, which the host must receive byte for
// byte as the server wrote them.
const (
	scriptedInitResult = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}}`
	scriptedSampling   = `{"jsonrpc":"2.0","id":42,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`
	scriptedLog        = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello host"}}`
	scriptedProgress   = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1,"total":2}}`
	scriptedElicit     = `{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}`
	scriptedCancel7    = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"changed my mind"}}`
)

// scriptedServer is a raw MCP server on stdin and stdout, for wrap's tests.
// It logs what it receives to stderr ("scripted: ..."), which fsbroker relays
// into its log. It answers initialize and ping; once initialized it sends
// requests that fsbroker must answer (files/read, fs.list) and ones that must
// reach the host (sampling/createMessage, elicitation/create, a cancellation,
// notifications); it holds the host's tools/list requests until it has
// answered two pings (the broker's), so that the broker's ping ids meet the
// host's in flight; and it acts on the host's "notifications/test/step". It
// reports a request id received twice while in flight as DUPLICATE, and exits
// with status when its input ends.
func scriptedServer(status string) int {
	code, _ := strconv.Atoi(status)
	var wmu sync.Mutex
	send := func(line string) {
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = os.Stdout.WriteString(line + "\n")
	}
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "scripted: "+format+"\n", args...) }

	// Before initialization: refused by the broker, never seen by the host.
	send(`{"jsonrpc":"2.0","id":"early","method":"roots/list"}`)
	inFlight := map[string]bool{}
	var heldTools []string
	pings := 0
	releaseTools := func() {
		if pings < 2 {
			return
		}
		for _, id := range heldTools {
			delete(inFlight, id)
			send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[]}}`)
		}
		heldTools = nil
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &m) != nil {
				say("unreadable line %q", line)
				continue
			}
			id := string(m.ID)
			if m.Method != "" && id != "" {
				if inFlight[id] {
					say("DUPLICATE request id %s (%s)", id, m.Method)
				}
				inFlight[id] = true
			}
			answer := func(result string) {
				delete(inFlight, id)
				send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
			}
			switch m.Method {
			case "initialize":
				var p struct {
					Capabilities map[string]json.RawMessage `json:"capabilities"`
				}
				_ = json.Unmarshal(m.Params, &p)
				say("initialize capabilities roots=%s sampling=%s", p.Capabilities["roots"], p.Capabilities["sampling"])
				delete(inFlight, id)
				send(scriptedInitResult)
			case "notifications/initialized":
				say("initialized")
				send(`{"jsonrpc":"2.0","id":1,"method":"files/read","params":{"path":"a/hello.txt"}}`)
				send(`{"jsonrpc":"2.0","id":2,"method":"fs.list","params":{"path":"a"}}`)
				send(scriptedSampling)
				send(scriptedLog)
				send(scriptedProgress)
				send(scriptedElicit)
				send(scriptedCancel7)
			case "notifications/test/step":
				var p struct {
					Step string          `json:"step"`
					ID   json.RawMessage `json:"id"`
				}
				_ = json.Unmarshal(m.Params, &p)
				switch p.Step {
				case "collide": // a request with the id of a request of the broker's in flight to the host
					send(`{"jsonrpc":"2.0","id":` + string(p.ID) + `,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
				case "consent-ask": // a request the broker answers, through the host with --consent elicit
					send(`{"jsonrpc":"2.0","id":"c2","method":"files/consent","params":{"message":"may I read?","requestedPaths":["a/hello.txt"]}}`)
				case "consent": // a request the broker answers slowly, cancelled
					send(`{"jsonrpc":"2.0","id":"c1","method":"files/consent","params":{"message":"may I?","requestedPaths":["b/x"]}}`)
					time.AfterFunc(300*time.Millisecond, func() {
						send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"no longer needed"}}`)
					})
				}
			case "tools/list":
				heldTools = append(heldTools, id)
				releaseTools()
			case "ping":
				say("ping %s", id)
				answer(`{}`)
				pings++
				releaseTools()
			case "test/slow":
				say("holding %s", id)
			case "notifications/cancelled":
				say("cancelled %s", m.Params)
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				if json.Unmarshal(m.Params, &p) == nil {
					delete(inFlight, string(p.RequestID))
				}
			case "":
				say("reply %s %s%s", id, m.Result, m.Error)
			default:
				say("unexpected %s", bytes.TrimSpace(line))
			}
		}
		if err != nil {
			say("end of input")
			return code
		}
	}
}

// startWrap runs fsbroker wrap with args (--consent auto first; a later
// --consent wins) and env added to the broker's environment.
func startWrap(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(brokerBin, append([]string{"wrap", "--consent", "auto"}, args...)...)
	return startProcEnv(t, cmd, env...)
}

// hostInitialize sends the host's initialize (with the roots capability when
// hostRoots) and returns the reply.
func hostInitialize(p *proc, hostRoots bool) *message {
	p.t.Helper()
	caps := map[string]any{"sampling": map[string]any{}}
	if hostRoots {
		caps["roots"] = map[string]any{"listChanged": true}
	}
	r := p.Call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": caps,
		"clientInfo": map[string]any{"name": "test-host", "version": "1"}})
	if r.Error != nil {
		p.t.Fatalf("initialize failed: %s", r.Raw)
	}
	return r
}

// rootsOf is a roots/list result naming dirs.
func rootsOf(dirs ...string) map[string]any {
	list := make([]map[string]any, 0, len(dirs))
	for _, d := range dirs {
		list = append(list, map[string]any{"uri": "file://" + d, "name": filepath.Base(d)})
	}
	return map[string]any{"roots": list}
}

func isRootsRequest(m *message) bool { return m.IsRequest("roots/list") }

// The example server (official Go SDK) under wrap: it lists the roots once
// initialized and on list_changed. The host's roots narrow the operator's:
// a host root above both operator roots shows both, a host root outside them
// adds nothing, and a narrower host root (after the host's list_changed)
// leaves one; a host list_changed that changes nothing visible is not passed
// on. The host's ping reaches the server; closing the host's input stops the
// server, and fsbroker exits with its status.
func TestWrapInteropWithGoSDKServer(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	a := realDir(t, filepath.Join(dir, "a"))
	b := realDir(t, filepath.Join(dir, "b"))
	outside := realDir(t, t.TempDir())

	p := startWrap(t, nil, "--root", a, "--root", b, "--log-level", "debug", "--", serverBin)
	pid := serverPID(t, p)
	init := hostInitialize(p, true)
	var res struct {
		ServerInfo struct{ Name string } `json:"serverInfo"`
	}
	if err := json.Unmarshal(init.Result, &res); err != nil || res.ServerInfo.Name != "fsbroker-example-server" {
		t.Fatalf("initialize result %s: want the example server's", init.Result)
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})

	rl := p.Await("roots/list from fsbroker", isRootsRequest)
	p.Send(map[string]any{"jsonrpc": "2.0", "id": rl.ID, "result": rootsOf(dir, outside)})
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta("initialized: 2 roots: file://" + a + " (a), file://" + b + " (b)")))

	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	rl2 := p.Await("second roots/list from fsbroker", isRootsRequest)
	p.Send(map[string]any{"jsonrpc": "2.0", "id": rl2.ID, "result": rootsOf(a)})
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta("roots changed: 1 roots: file://" + a + " (a)")))

	// The same view again: the server hears nothing.
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	rl3 := p.Await("third roots/list from fsbroker", isRootsRequest)
	p.Send(map[string]any{"jsonrpc": "2.0", "id": rl3.ID, "result": rootsOf(a, outside)})
	p.waitLogCount("the host's roots apply", 3)
	p.ping("fsbroker-wrap-1") // an id like the broker's own: the server answers it
	if n := p.countLog("roots changed:"); n != 1 {
		t.Errorf("the server listed roots after a change %d times, want 1", n)
	}

	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0 (the server's)", code)
	}
	if alive(pid) {
		t.Errorf("server %d still runs after fsbroker exited", pid)
	}
	if strings.Contains(p.log(), "roots/list failed") {
		t.Error("the server's roots/list failed")
	}
	for _, m := range p.All() {
		if m.Method != "" && m.Method != "roots/list" {
			t.Errorf("the host received %s", m.Raw)
		}
	}
}

// A host that declares no roots: the operator's roots apply as they are, and
// fsbroker never asks the host for roots.
func TestWrapHostWithoutRoots(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	a := realDir(t, filepath.Join(dir, "a"))
	b := realDir(t, filepath.Join(dir, "b"))
	p := startWrap(t, nil, "--root", a, "--root", b, "--", serverBin)
	hostInitialize(p, false)
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta("initialized: 2 roots: file://" + a + " (a), file://" + b + " (b)")))
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0", code)
	}
	if p.Has(isRootsRequest) {
		t.Error("fsbroker asked a host without the roots capability for its roots")
	}
}

// The scripted server under wrap, message by message: what fsbroker answers
// itself never reaches the host, everything else passes unchanged both ways,
// ids never collide, cancellations go where their request went, and fsbroker
// exits with the server's status.
func TestWrapScriptedServer(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	a := realDir(t, filepath.Join(dir, "a"))
	realDir(t, filepath.Join(dir, "b"))
	writeFile(t, filepath.Join(a, "hello.txt"), "hello from a")
	cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, cfg, fmt.Sprintf("version: 1\nroots:\n  - path: %s\n    consent: preapproved\n  - path: %s\n", a, filepath.Join(dir, "b")))
	// The consent command never answers in time: files/consent stays in
	// flight until the server cancels it.
	ask := filepath.Join(t.TempDir(), "ask")
	writeFile(t, ask, "#!/bin/sh\nexec sleep 30\n")
	if err := os.Chmod(ask, 0o755); err != nil {
		t.Fatal(err)
	}

	p := startWrap(t, []string{scriptedServerEnv + "=7"}, "--config", cfg, "--consent", "command:"+ask,
		"--ping-interval", "500ms", "--log-level", "debug", "--", os.Args[0])
	p.waitLog(regexp.MustCompile(`scripted: reply "early" [^\n]*"NOT_INITIALIZED"`))

	init := hostInitialize(p, true)
	if init.Raw != scriptedInitResult {
		t.Errorf("the host got the initialize result\n%s\nwant it unchanged:\n%s", init.Raw, scriptedInitResult)
	}
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta(`scripted: initialize capabilities roots={"filesystemBrokering":true,"listChanged":true} sampling={}`)))
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	// Ids like the broker's own pings (fsbroker-2, -3 follow its initialize),
	// held by the server while the broker pings it.
	for _, id := range []string{"fsbroker-2", "fsbroker-3"} {
		p.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/list"})
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "id": "h-slow", "method": "test/slow"})
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "h-slow"}})

	// The broker's roots/list is in flight to the host; the server sends a
	// request with the same id.
	rl := p.Await("roots/list from fsbroker", isRootsRequest)
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/test/step", "params": map[string]any{"step": "collide", "id": rl.ID}})
	collide := p.Await("the server's colliding request", func(m *message) bool {
		return m.IsRequest("sampling/createMessage") && strings.Contains(string(m.Params), `"maxTokens":1`)
	})
	if string(collide.ID) == string(rl.ID) {
		t.Errorf("the host has two requests in flight with id %s", rl.ID)
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "id": collide.ID, "result": map[string]any{"model": "collide"}})
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta(`scripted: reply ` + string(rl.ID) + ` {"model":"collide"}`)))

	s42 := p.Await("sampling request 42", func(m *message) bool { return m.IsRequest("sampling/createMessage") && string(m.ID) == "42" })
	if s42.Raw != scriptedSampling {
		t.Errorf("the host got\n%s\nwant\n%s", s42.Raw, scriptedSampling)
	}
	p.SendRaw(`{"jsonrpc":"2.0","id":42,"result":{"model":"m42","role":"assistant","content":{"type":"text","text":"hi"}}}`)
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta(`scripted: reply 42 {"model":"m42","role":"assistant","content":{"type":"text","text":"hi"}}`)))

	// The host's roots: its directory holds both operator roots. The
	// server's files requests, held until now, are answered by fsbroker.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": rl.ID, "result": rootsOf(dir)})
	p.waitLog(regexp.MustCompile(`scripted: reply 1 \{[^\n]*"content":"hello from a"`))
	p.waitLog(regexp.MustCompile(`scripted: reply 2 \{[^\n]*"path":"a/hello.txt"`))

	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/test/step", "params": map[string]any{"step": "consent"}})
	p.waitLog(regexp.MustCompile(`request cancelled by the peer; not replying: method=files/consent`))

	for _, id := range []string{"fsbroker-2", "fsbroker-3"} {
		r := p.Await("tools/list reply "+id, func(m *message) bool { return m.IsReplyTo(strconv.Quote(id)) })
		if want := `{"jsonrpc":"2.0","id":"` + id + `","result":{"tools":[]}}`; r.Raw != want {
			t.Errorf("the host got\n%s\nwant\n%s", r.Raw, want)
		}
	}
	for _, want := range []string{scriptedLog, scriptedProgress, scriptedElicit, scriptedCancel7} {
		p.Await(want, func(m *message) bool { return m.Raw == want })
	}
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta(`scripted: cancelled {"requestId":"h-slow"}`)))

	p.closeStdin()
	if code := p.waitExit(); code != 7 {
		t.Errorf("exit status = %d, want 7 (the server's)", code)
	}
	log := p.log()
	for _, bad := range []string{"DUPLICATE", `scripted: reply "c1"`, "server did not answer ping", "scripted: unexpected"} {
		if strings.Contains(log, bad) {
			t.Errorf("log has %q", bad)
		}
	}
	if n := strings.Count(log, "scripted: ping "); n < 2 {
		t.Errorf("the server answered %d pings of the broker's, want at least 2", n)
	}
	// Both collisions happened, and were resolved by renaming.
	if !strings.Contains(log, `scripted: ping "fsbroker-wrap-`) && !strings.Contains(log, "a host request's id is in use toward the server") {
		t.Error("the broker's pings never met the host's requests with the same ids")
	}
	if !strings.Contains(log, "a server request's id is in use toward the host") {
		t.Error("the server's request with the id of the broker's roots/list was not renamed")
	}
	roots := 0
	for _, m := range p.All() {
		switch {
		case m.Method == "roots/list":
			roots++
		case strings.HasPrefix(m.Method, "files/"), strings.HasPrefix(m.Method, "fs."), m.Method == "ping",
			string(m.ID) == `"early"`, string(m.ID) == `"c1"`:
			t.Errorf("the host received %s", m.Raw)
		case m.Method == "" && string(m.ID) != "1" && string(m.ID) != `"fsbroker-2"` && string(m.ID) != `"fsbroker-3"`:
			t.Errorf("the host received a reply it did not ask for: %s", m.Raw)
		}
	}
	if roots != 1 {
		t.Errorf("the host received %d roots/list requests, want 1 (fsbroker's)", roots)
	}
}

// The server's exit status is fsbroker's, also when the server fails before
// the host says anything; a server command that does not exist is a
// configuration error.
func TestWrapExitStatus(t *testing.T) {
	t.Parallel()
	p := startWrap(t, nil, "--root", t.TempDir(), "--", "sh", "-c", "echo leaving >&2; exit 3")
	if code := p.waitExit(); code != 3 {
		t.Errorf("exit status = %d, want 3", code)
	}
	if !strings.Contains(p.log(), "leaving") {
		t.Error("the server's stderr is not in the log")
	}
	p = startWrap(t, nil, "--root", t.TempDir(), "--", filepath.Join(t.TempDir(), "no-such-server"))
	if code := p.waitExit(); code != exitUsage {
		t.Errorf("exit status for a missing server = %d, want %d", code, exitUsage)
	}
	p = startWrap(t, nil, "--root", t.TempDir())
	if code := p.waitExit(); code != exitUsage {
		t.Errorf("exit status without a server command = %d, want %d", code, exitUsage)
	}
}

// A server that answers the host's initialize with a protocol version the
// broker does not support: the host gets the answer as it came, then the
// session is closed with a clear log line, the server is stopped and
// fsbroker exits 1.
func TestWrapUnsupportedVersion(t *testing.T) {
	t.Parallel()
	const result = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"old","version":"1"}}}`
	p := startWrap(t, nil, "--root", t.TempDir(), "--", "sh", "-c", "read -r line; printf '%s\\n' '"+result+"'; while read -r line; do :; done")
	r := hostInitialize(p, false)
	if r.Raw != result {
		t.Errorf("the host got\n%s\nwant\n%s", r.Raw, result)
	}
	if code := p.waitExit(); code != exitFailure {
		t.Errorf("exit status = %d, want %d", code, exitFailure)
	}
	if !strings.Contains(p.log(), "protocol version is not supported") {
		t.Error("the log does not say the version is not supported")
	}
}

// TestWrapURL: wrap in front of a remote server over Streamable HTTP. The test
// plays the host; the official Go SDK's server, reached over HTTP, lists its
// roots when the host's notifications/initialized reaches it, and gets the
// broker's, answered by fsbroker and not the host.
func TestWrapURL(t *testing.T) {
	t.Parallel()
	endpoint, serverErr := startExampleHTTP(t)
	a := realDir(t, filepath.Join(t.TempDir(), "a"))
	p := startBroker(t, "", "wrap", "--consent", "auto", "--root", a, "--url", endpoint)
	p.Send(map[string]any{"jsonrpc": "2.0", "id": "h1", "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test-host", "version": "1"},
	}})
	init := p.Await("the server's initialize result", func(m *message) bool { return m.IsReplyTo(`"h1"`) })
	if init.Error != nil || !strings.Contains(string(init.Result), "serverInfo") {
		t.Fatalf("initialize through wrap --url: %s", init.Raw)
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	waitText(t, serverErr, regexp.MustCompile(regexp.QuoteMeta("initialized: 1 roots: file://"+a+" (a)")))
	if p.Has(func(m *message) bool { return m.IsRequest("roots/list") }) {
		t.Error("the server's roots/list reached the host")
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit %d", code)
	}
	_, stderr, code := runFsbroker(t, nil, "wrap", "--url", endpoint, "--", "/bin/true")
	if code != 2 || !strings.Contains(stderr, "not both") {
		t.Errorf("wrap --url with a command: exit %d\n%s", code, stderr)
	}
}
