// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// Interoperability with the official TypeScript SDK: a server written with
// npm @modelcontextprotocol/sdk (testdata/ts-server/server.mjs, its versions
// pinned by the committed package-lock.json) runs under fsbroker wrap, and
// the test plays the MCP host. The server's dependencies are installed with
// npm ci into a cache directory outside the repository, once per lock file
// (see npmtest.Project).
//
// Without node and npm, or without the registry, these tests skip and say
// why; with FSBROKER_REQUIRE_INTEROP=1 (as CI sets it) they fail instead.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/npmtest"
)

// tsServerDeps is the TypeScript server's npm project: its source and its
// dependencies, pinned by package-lock.json.
var tsServerDeps = &npmtest.Project{
	Src:     "testdata/ts-server",
	What:    "the TypeScript SDK server",
	MinNode: 18,
	Marker:  "@modelcontextprotocol/sdk/package.json",
}

// tsScript and tsHostScript are the TypeScript server's script and the
// TypeScript host's, copied next to their installed dependencies, shared by
// the tests of one test process.
var tsScript, tsHostScript struct {
	once sync.Once
	path string
	err  error
}

// tsServer returns the node binary and the path of the TypeScript server's
// script, installing the server's dependencies first when they are missing
// (the test skips, or fails, as npmtest.Project.Installed says).
func tsServer(t *testing.T) (node, script string) {
	t.Helper()
	node, dir := tsServerDeps.Installed(t)
	tsScript.once.Do(func() { tsScript.path, tsScript.err = tsCopyScript(dir, "server.mjs") })
	if tsScript.err != nil {
		t.Fatalf("TypeScript server: %v", tsScript.err)
	}
	return node, tsScript.path
}

// tsHost returns the node binary and the path of the TypeScript host's
// script (testdata/ts-server/host-elicit.mjs, run with the server's
// dependencies), installing them first when they are missing.
func tsHost(t *testing.T) (node, script string) {
	t.Helper()
	node, dir := tsServerDeps.Installed(t)
	tsHostScript.once.Do(func() { tsHostScript.path, tsHostScript.err = tsCopyScript(dir, "host-elicit.mjs") })
	if tsHostScript.err != nil {
		t.Fatalf("TypeScript host: %v", tsHostScript.err)
	}
	return node, tsHostScript.path
}

// tsCopyScript copies the script name of testdata/ts-server into dir, the
// install of its dependencies, under a name with its own hash, and returns
// its path.
func tsCopyScript(dir, name string) (string, error) {
	src, err := os.ReadFile(filepath.Join(tsServerDeps.Src, name))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(src)
	base := strings.TrimSuffix(name, ".mjs")
	script := filepath.Join(dir, base+"-"+hex.EncodeToString(sum[:])[:16]+".mjs")
	if have, err := os.ReadFile(script); err == nil && bytes.Equal(have, src) {
		return script, nil
	}
	tmp, err := os.CreateTemp(dir, "."+base+"-*.mjs")
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", name, err)
	}
	werr := tmp.Chmod(0o644)
	if werr == nil {
		_, werr = tmp.Write(src)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), script)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("copy %s to %s: %w", name, script, werr)
	}
	return script, nil
}

// tsTail returns the last n bytes of s, or all of it.
func tsTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// tsToolResult is a tools/call result.
type tsToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// text is the text of the result's only content item.
func (r *tsToolResult) text(t *testing.T) string {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("tool result content %+v: want one text item", r.Content)
	}
	return r.Content[0].Text
}

// tsCallTool calls the server's tool name with args (and _meta.progressToken
// when progressToken is not nil) and returns its result; a JSON-RPC error
// fails the test.
func tsCallTool(p *proc, id any, name string, args map[string]any, progressToken any) *tsToolResult {
	p.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if progressToken != nil {
		params["_meta"] = map[string]any{"progressToken": progressToken}
	}
	r := p.Call(id, "tools/call", params)
	if r.Error != nil {
		p.t.Fatalf("tools/call %s: %s", name, r.Raw)
	}
	var res tsToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		p.t.Fatalf("tools/call %s result %s: %v", name, r.Result, err)
	}
	return &res
}

// tsRoots is what the TypeScript server's "roots" tool reports.
type tsRoots struct {
	Roots           []rootEntry     `json:"roots"`
	Listings        int             `json:"listings"`
	ListChanged     int             `json:"listChanged"`
	Error           *string         `json:"error"`
	RootsCapability json.RawMessage `json:"rootsCapability"`
}

// tsRootsOf calls the server's "roots" tool.
func tsRootsOf(p *proc, id any) tsRoots {
	p.t.Helper()
	text := tsCallTool(p, id, "roots", map[string]any{}, nil).text(p.t)
	var s tsRoots
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		p.t.Fatalf("the roots tool's text %q: %v", text, err)
	}
	return s
}

// tsRootsWant is the roots/list entries for dirs, each named by its base name
// unless names says otherwise.
func tsRootsWant(names map[string]string, dirs ...string) []rootEntry {
	out := make([]rootEntry, 0, len(dirs))
	for _, d := range dirs {
		name, ok := names[d]
		if !ok {
			name = filepath.Base(d)
		}
		out = append(out, rootEntry{URI: "file://" + d, Name: name})
	}
	return out
}

// awaitTSRoots polls the server's "roots" tool until its last listing is
// exactly want (URIs, names and order) after exactly listChanged
// notifications/roots/list_changed, and returns the report; it fails the
// test after waitLimit. Meanwhile it answers fsbroker's roots/list requests
// to the host with hostRoots (a host with the roots capability).
func awaitTSRoots(p *proc, hostRoots []string, want []rootEntry, listChanged int) tsRoots {
	p.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for i := 0; ; i++ {
		for {
			rl := p.TryAwait(0, isRootsRequest)
			if rl == nil {
				break
			}
			p.Send(map[string]any{"jsonrpc": "2.0", "id": rl.ID, "result": rootsOf(hostRoots...)})
		}
		s := tsRootsOf(p, fmt.Sprintf("roots-poll-%d", i))
		if s.Listings > 0 && s.ListChanged == listChanged && slices.Equal(s.Roots, want) {
			return s
		}
		if s.ListChanged > listChanged {
			p.t.Fatalf("the server got %d notifications/roots/list_changed, want %d (roots %+v)", s.ListChanged, listChanged, s.Roots)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("after %s the TypeScript server's listRoots() got %+v after %d list_changed (%d listings, error %v); want %+v after %d",
				waitLimit, s.Roots, s.ListChanged, s.Listings, tsStrOrNil(s.Error), want, listChanged)
		}
		time.Sleep(20 * time.Millisecond) // the poll's interval, not an assertion
	}
}

// tsStrOrNil is *s, or nil, for messages.
func tsStrOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// tsFixture is a wrapped session's directories: operator roots a and b on
// the command line, c (named "C docs") in the config file, d and outside
// unused at first, all but outside under work.
type tsFixture struct {
	work, a, b, c, d, outside string
	cfg                       string
	names                     map[string]string
}

// newTSFixture makes the directories and the config file (naming c).
func newTSFixture(t *testing.T) *tsFixture {
	t.Helper()
	f := &tsFixture{work: realDir(t, t.TempDir()), outside: realDir(t, t.TempDir())}
	f.a = realDir(t, filepath.Join(f.work, "a"))
	f.b = realDir(t, filepath.Join(f.work, "b"))
	f.c = realDir(t, filepath.Join(f.work, "c"))
	f.d = realDir(t, filepath.Join(f.work, "d"))
	f.names = map[string]string{f.c: "C docs", f.d: "D docs"}
	f.cfg = filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, f.cfg, f.config(f.c))
	return f
}

// config is the config file's text with the one root dir (c or d).
func (f *tsFixture) config(dir string) string {
	return fmt.Sprintf("version: 1\nroots:\n  - path: %s\n    name: %s\n    consent: preapproved\n", dir, f.names[dir])
}

// startTSWrap runs `fsbroker wrap --root a --root b --config cfg -- node
// server.mjs`.
func (f *tsFixture) startTSWrap(t *testing.T, node, script string) *proc {
	t.Helper()
	return startWrap(t, nil, "--root", f.a, "--root", f.b, "--config", f.cfg, "--log-level", "debug", "--", node, script)
}

// tsCheckInitialize checks that an initialize result is the TypeScript
// server's.
func tsCheckInitialize(t *testing.T, init *message) {
	t.Helper()
	var res struct {
		ServerInfo struct{ Name string } `json:"serverInfo"`
	}
	if err := json.Unmarshal(init.Result, &res); err != nil || res.ServerInfo.Name != "fsbroker-interop-ts-server" {
		t.Fatalf("initialize result %s: want the TypeScript server's (%v)", init.Result, err)
	}
}

// tsHostGotOnlyReplies checks that the host received nothing but replies to
// its own requests: no roots/list, files/* or anything else of the server's
// or fsbroker's, except roots/list requests from fsbroker when allowRoots.
func tsHostGotOnlyReplies(p *proc, allowRoots bool) {
	p.t.Helper()
	for _, m := range p.All() {
		if m.Method != "" && !(allowRoots && m.IsRequest("roots/list")) {
			p.t.Errorf("the host received %s", m.Raw)
		}
	}
}

// A host without the roots capability: the TypeScript server still sees the
// roots capability, with listChanged (fsbroker adds it), and its listRoots()
// gets exactly the operator's roots (the config file's, then the flags'),
// answered by fsbroker; its files/read is answered by fsbroker too. An edit
// of the config file reaches the server's list_changed handler, and its next
// listRoots() gets the new roots. The host sees none of it.
func TestWrapInteropTSSDKRoots(t *testing.T) {
	t.Parallel()
	node, script := tsServer(t)
	f := newTSFixture(t)
	writeFile(t, filepath.Join(f.c, "hello.txt"), "hello from c")

	p := f.startTSWrap(t, node, script)
	tsCheckInitialize(t, hostInitialize(p, false))
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})

	s := awaitTSRoots(p, nil, tsRootsWant(f.names, f.c, f.a, f.b), 0)
	// fsbroker added the capability the host did not declare. (The SDK
	// keeps only the members of it that it knows: filesystemBrokering is
	// dropped from what getClientCapabilities() returns.)
	var roots struct {
		ListChanged bool `json:"listChanged"`
	}
	if err := json.Unmarshal(s.RootsCapability, &roots); err != nil || !roots.ListChanged {
		t.Errorf("the server saw the client's roots capability %s, want fsbroker's, with listChanged (%v)", s.RootsCapability, err)
	}

	// files/read, sent raw by the SDK server, is answered by fsbroker (in
	// the root the config file pre-approves).
	read := tsCallTool(p, "read", "read", map[string]any{"path": filepath.Base(f.c) + "/hello.txt"}, nil)
	var file struct {
		Content string `json:"content"`
	}
	if text := read.text(t); read.IsError || json.Unmarshal([]byte(text), &file) != nil || file.Content != "hello from c" {
		t.Errorf("the server's files/read got %q, want the file's content", text)
	}

	// The config file's root c becomes d.
	replaceFile(t, f.cfg, f.config(f.d))
	awaitTSRoots(p, nil, tsRootsWant(f.names, f.d, f.a, f.b), 1)

	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0 (the server's)", code)
	}
	tsHostGotOnlyReplies(p, false)
}

// A host with the roots capability narrows the operator's roots: the
// TypeScript server's first listRoots() waits for the host's answer and gets
// only the operator root the host covers; the host's list_changed with a
// wider answer, and then a config edit, each reach the server's list_changed
// handler once, with the new intersection.
func TestWrapInteropTSSDKHostRoots(t *testing.T) {
	t.Parallel()
	node, script := tsServer(t)
	f := newTSFixture(t)

	p := f.startTSWrap(t, node, script)
	tsCheckInitialize(t, hostInitialize(p, true))
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})

	// The host's folders: b and one outside every operator root.
	awaitTSRoots(p, []string{f.b, f.outside}, tsRootsWant(f.names, f.b), 0)

	// Now the host's folder holds every operator root.
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	awaitTSRoots(p, []string{f.work}, tsRootsWant(f.names, f.c, f.a, f.b), 1)

	replaceFile(t, f.cfg, f.config(f.d))
	awaitTSRoots(p, []string{f.work}, tsRootsWant(f.names, f.d, f.a, f.b), 2)

	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0 (the server's)", code)
	}
	tsHostGotOnlyReplies(p, true)
}

// The same TypeScript server, unwrapped and under fsbroker wrap (pinging it
// on its own), given the same host traffic that is not about roots or files:
// the host receives the same messages, in the same order, byte for byte
// (initialize, tools/list, tools/call with a logging notification and with
// structured content, progress notifications, a cancelled request that gets
// no reply and whose cancellation the server saw, a sampling request of the
// server's answered by the host, ping, an unknown method, a malformed line, an
// unknown tool). Two things are told apart: the id the server chose for its
// sampling request, which counts the server's requests (its listRoots()
// under wrap is one), and the malformed line, which fsbroker answers with
// -32700 (it passes no request on that it cannot read and record; the
// TypeScript server drops such a line without a word). Roots are the difference: unwrapped, the server sees
// no roots capability; wrapped, it lists the broker's roots.
func TestWrapInteropTSSDKSameAsUnwrapped(t *testing.T) {
	t.Parallel()
	node, script := tsServer(t)
	a := realDir(t, filepath.Join(t.TempDir(), "a"))

	direct := startProc(t, exec.Command(node, script))
	wrapped := startWrap(t, nil, "--root", a, "--ping-interval", "500ms", "--log-level", "debug", "--", node, script)
	want := tsHostSession(direct)
	got := tsHostSession(wrapped)
	const parseError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: message is not valid JSON"}}`
	if i := slices.Index(got, parseError); i < 0 {
		t.Errorf("the malformed line was not answered %s", parseError)
	} else {
		got = slices.Delete(got, i, i+1)
	}
	t.Logf("the host received %d messages unwrapped, %d wrapped", len(want), len(got))
	if len(got) != len(want) {
		t.Errorf("the host received %d messages wrapped, %d unwrapped", len(got), len(want))
	}
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("message %d to the host differs:\n wrapped: %s\n  direct: %s", i, g, w)
		}
	}

	if s := tsRootsOf(direct, "roots"); s.Error == nil || !strings.Contains(*s.Error, "roots capability") || s.Roots != nil {
		t.Errorf("unwrapped, the server reports roots %+v, error %v: want none, for want of the roots capability", s.Roots, tsStrOrNil(s.Error))
	}
	awaitTSRoots(wrapped, nil, tsRootsWant(nil, a), 0)

	for _, p := range []*proc{direct, wrapped} {
		p.closeStdin()
		if code := p.waitExit(); code != 0 {
			t.Errorf("%s exited with status %d, want 0", p.cmd.Args[0], code)
		}
	}
	if strings.Contains(wrapped.log(), "server did not answer ping") {
		t.Error("the TypeScript server did not answer fsbroker's ping")
	}
}

// tsHostSession plays a host without the roots capability through a session
// with the TypeScript server, checking each answer, and returns every
// message the host received, in order, as written, except that the ids of
// the server's requests are replaced by their order ("server-request-N").
func tsHostSession(p *proc) []string {
	t := p.t
	t.Helper()
	tsCheckInitialize(t, hostInitialize(p, false))
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})

	tl := p.Call("tools", "tools/list", nil)
	for _, tool := range []string{"roots", "echo", "progress", "wait", "status", "sample", "read"} {
		if !strings.Contains(string(tl.Result), `"name":"`+tool+`"`) {
			t.Errorf("tools/list %s: no tool %s", tl.Result, tool)
		}
	}

	const greeting = "héllo, wörld ✓ \"quoted\"\ttab"
	echo := tsCallTool(p, "echo", "echo", map[string]any{"text": greeting}, nil)
	if echo.text(t) != greeting || !strings.Contains(string(echo.StructuredContent), `"length":`) {
		t.Errorf("echo answered %+v, want %q", echo, greeting)
	}
	p.Await("logging notification", func(m *message) bool { return m.IsNotification("notifications/message") })

	if got := tsCallTool(p, "progress", "progress", map[string]any{"steps": 3}, "tok-1").text(t); got != "done: 3 steps" {
		t.Errorf("progress answered %q", got)
	}
	for i := 1; i <= 3; i++ {
		p.Await(fmt.Sprintf("progress notification %d", i), func(m *message) bool {
			return m.IsNotification("notifications/progress") &&
				strings.Contains(string(m.Params), fmt.Sprintf(`"progressToken":"tok-1","progress":%d,`, i))
		})
	}

	// A request the host cancels: its progress comes, its reply never.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": "w1", "method": "tools/call", "params": map[string]any{
		"name": "wait", "arguments": map[string]any{"label": "long"}, "_meta": map[string]any{"progressToken": 99}}})
	p.Await("progress of the request to cancel", func(m *message) bool {
		return m.IsNotification("notifications/progress") && strings.Contains(string(m.Params), `"progressToken":99`)
	})
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "w1", "reason": "host gave up"}})
	status := tsCallTool(p, "status", "status", map[string]any{}, nil).text(t)
	if want := `{"cancelled":[{"requestId":"w1","label":"long","reason":"host gave up"}]}`; status != want {
		t.Errorf("after the cancellation the server reports %s, want %s", status, want)
	}
	// The server handles messages in order: a reply to w1 would have come
	// before the status reply.
	if p.Has(func(m *message) bool { return m.IsReplyTo(`"w1"`) }) {
		t.Error("the cancelled request was answered")
	}

	// A request of the server's to the host.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": "sample", "method": "tools/call", "params": map[string]any{
		"name": "sample", "arguments": map[string]any{"prompt": "2+2?"}}})
	sr := p.Await("the server's sampling request", func(m *message) bool { return m.IsRequest("sampling/createMessage") })
	p.Send(map[string]any{"jsonrpc": "2.0", "id": sr.ID, "result": map[string]any{
		"model": "test-model", "role": "assistant", "content": map[string]any{"type": "text", "text": "4"}}})
	sample := p.Await("the sample tool's reply", func(m *message) bool { return m.IsReplyTo(`"sample"`) })
	if !strings.Contains(sample.Raw, "model test-model said: 4") {
		t.Errorf("the sample tool answered %s", sample.Raw)
	}

	p.ping("ping-1")
	if r := p.Call("nope", "no/such/method", map[string]any{}); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("an unknown method got %s, want error -32601", r.Raw)
	}
	p.SendRaw(`{"jsonrpc":"2.0","id":"broken",`)
	p.ping("ping-2")
	if r := tsCallTool(p, "nosuch", "nosuch", map[string]any{}, nil); !r.IsError {
		t.Errorf("an unknown tool got %+v, want isError", r)
	}

	var out []string
	n := 0
	for _, m := range p.All() {
		line := m.Raw
		if m.Method != "" && len(m.ID) > 0 {
			i := strings.LastIndex(line, `"id":`+string(m.ID))
			if i < 0 {
				t.Fatalf("cannot find the id of %s", line)
			}
			line = line[:i] + `"id":"server-request-` + strconv.Itoa(n) + `"` + line[i+len(`"id":`)+len(m.ID):]
			n++
		}
		out = append(out, line)
	}
	return out
}

// The official TypeScript SDK as the host, with the elicitation capability
// (form mode), and --consent elicit: the TypeScript server's files/consent
// reaches the host's elicitation handler as a form with one field per path;
// the path the host sets to true is granted and then read, the other is
// neither granted nor readable.
func TestWrapInteropTSSDKHostElicit(t *testing.T) {
	t.Parallel()
	node, server := tsServer(t)
	_, host := tsHost(t)
	a := realDir(t, t.TempDir())
	writeFile(t, filepath.Join(a, "hello.txt"), "hello from a")
	writeFile(t, filepath.Join(a, "other.txt"), "not for you")
	mount := filepath.Base(a)
	hello, other := mount+"/hello.txt", mount+"/other.txt"
	wrapCmd, err := json.Marshal([]string{brokerBin, "wrap", "--consent", "elicit", "--state-dir", t.TempDir(), "--root", a,
		"--", node, server})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, host)
	cmd.Env = append(brokerEnv(), "FSBROKER_TEST_HOST_CMD="+string(wrapCmd),
		`FSBROKER_TEST_APPROVE=["`+hello+`"]`, `FSBROKER_TEST_ASK=["`+hello+`","`+other+`"]`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript host: %v\n%s", err, tsTail(stderr.String(), 4000))
	}
	var res struct {
		Elicitations []struct {
			Mode            string `json:"mode"`
			Message         string `json:"message"`
			RequestedSchema struct {
				Properties map[string]struct {
					Type  string `json:"type"`
					Title string `json:"title"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		} `json:"elicitations"`
		Consent string            `json:"consent"`
		Reads   map[string]string `json:"reads"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the host printed %q: %v\n%s", out, err, tsTail(stderr.String(), 4000))
	}
	if len(res.Elicitations) != 1 || res.Elicitations[0].Mode != "form" || len(res.Elicitations[0].RequestedSchema.Properties) != 2 ||
		!strings.Contains(res.Elicitations[0].Message, "fsbroker-interop-ts-server") {
		t.Fatalf("the host's elicitations: %+v", res.Elicitations)
	}
	var consent struct {
		Granted       bool     `json:"granted"`
		ApprovedPaths []string `json:"approvedPaths"`
	}
	if err := json.Unmarshal([]byte(res.Consent), &consent); err != nil || !consent.Granted || !slices.Equal(consent.ApprovedPaths, []string{hello}) {
		t.Errorf("files/consent answered %q, want %s alone", res.Consent, hello)
	}
	if !strings.Contains(res.Reads[hello], "hello from a") {
		t.Errorf("reading the granted path: %q", res.Reads[hello])
	}
	if !strings.Contains(res.Reads[other], "-32002") || strings.Contains(res.Reads[other], "not for you") {
		t.Errorf("reading the path the host did not approve: %q", res.Reads[other])
	}
}
