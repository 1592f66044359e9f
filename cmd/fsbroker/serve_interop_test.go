// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// Interoperability of fsbroker serve with the official SDK clients: the
// TypeScript SDK's Client (serve_interop_ts_test.go) and the Go SDK's
// mcp.Client (serve_interop_go_test.go) each start a real `fsbroker serve`
// on the same tree, list its tools and send the same requests,
// serveInteropCalls, in order; each reply, as the SDK decoded it, must match
// the row's matcher (conformance.Match: objects as subsets, $regex, $not,
// ...), and a tool's structuredContent must satisfy the outputSchema the
// server lists for it.
//
// To cover a method or a behaviour that lands later, add a row to
// serveInteropCalls (or change the row marked for it): a tools/call row names
// its tool, a row of another method names the method (both SDK drivers map
// it to the SDK's own call: resources/list, resources/templates/list,
// resources/read, resources/subscribe). serveAsksHostRoots says whether
// fsbroker serve asks the host for its roots (both clients declare the roots
// capability and answer roots/list from their own handlers). After the
// table, the trail must name each request by its tool or resources method
// (fsbroker audit query --method) and verify.
//
// Consent through the host's own UI: each SDK test also runs fsbroker serve
// without --consent and without pre-approved roots, as the hosts of
// serveInteropElicitRuns, one after the other on one state directory: a
// client that declares elicitation and answers elicitation/create from its
// own handler, accepting with every boolean field true (its read succeeds,
// and fsbroker grants list shows the grant of its identity) or declining
// (its read is refused, and it holds no grant: the first host's grant is
// not its own).

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/conformance"
	"github.com/fsbroker/fsbroker/serve"
)

// serveAsksHostRoots says that fsbroker serve sends roots/list to a host
// that declares the roots capability (its roots narrow the operator's); the
// clients answer with both operator roots, so every row keeps its answer.
const serveAsksHostRoots = true

// serveInteropPNG is a 1x1 PNG image.
const serveInteropPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// serveInteropCall is one request of the SDK clients and what its reply
// must match.
type serveInteropCall struct {
	// method is the request's method; "" is tools/call.
	method string
	// tool is the tool of a tools/call.
	tool string
	// args are the tool's arguments, or the params of another method.
	// Strings hold {rw}, {ro} and {outside}, the tree's directories.
	args map[string]any
	// want is matched against {"result": RESULT} or {"error": {"code":
	// CODE, "message": TEXT}}, as the SDK returned them; its strings hold
	// the same directories.
	want map[string]any
}

// params are the request's params.
func (c serveInteropCall) params() map[string]any {
	if c.method == "" {
		return map[string]any{"name": c.tool, "arguments": c.args}
	}
	return c.args
}

// name is the row's name in failures.
func (c serveInteropCall) name() string {
	if c.method == "" {
		return "tools/call " + c.tool
	}
	return c.method
}

// toolText is the matcher of a tool's success: one text item, and the same
// text as structuredContent.content.
func toolText(text any) map[string]any {
	return map[string]any{"result": map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text}},
		"structuredContent": map[string]any{"content": text},
		"isError":           map[string]any{"$not": true},
	}}
}

// toolRefused is the matcher of a refused tool call: isError, with one
// text item that matches the regular expression.
func toolRefused(pattern string) map[string]any {
	return map[string]any{"result": map[string]any{
		"isError":           true,
		"structuredContent": map[string]any{"$absent": true},
		"content":           []any{map[string]any{"type": "text", "text": map[string]any{"$regex": pattern}}},
	}}
}

// rpcError is the matcher of a JSON-RPC error reply with code.
func rpcError(code int) map[string]any {
	return map[string]any{"error": map[string]any{"code": code}, "result": map[string]any{"$absent": true}}
}

// diffText is edit_file's fenced unified diff of {rw}/e.txt for hunk.
func diffText(hunk string) string {
	return "```diff\nIndex: {rw}/e.txt\n===================================================================\n" +
		"--- {rw}/e.txt\toriginal\n+++ {rw}/e.txt\tmodified\n" + hunk + "```\n\n"
}

// serveInteropCalls are the SDK clients' requests, in order (later rows see
// what earlier writes did). Every tool has a row: TestServeInteropCallsCoverTools.
var serveInteropCalls = []serveInteropCall{
	{tool: serve.ToolListAllowedDirectories, args: map[string]any{}, want: toolText("Allowed directories:\n{rw}\n{ro}")},
	{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{rw}/a.txt"}, want: toolText("alpha\nbeta\ngamma\n")},
	{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{rw}/a.txt", "head": 2}, want: toolText("alpha\nbeta")},
	{tool: serve.ToolReadFile, args: map[string]any{"path": "{rw}/a.txt", "tail": 2}, want: toolText("gamma\n")},
	{tool: serve.ToolReadMediaFile, args: map[string]any{"path": "{rw}/pic.png"}, want: map[string]any{"result": map[string]any{
		"content":           []any{map[string]any{"type": "image", "mimeType": "image/png", "data": serveInteropPNG}},
		"structuredContent": map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": serveInteropPNG}}},
	}}},
	{tool: serve.ToolReadMultipleFiles, args: map[string]any{"paths": []any{"{rw}/a.txt", "{ro}/r.txt"}},
		want: toolText("{rw}/a.txt:\nalpha\nbeta\ngamma\n\n\n---\n{ro}/r.txt:\nread only\n\n")},
	{tool: serve.ToolListDirectory, args: map[string]any{"path": "{rw}"},
		want: toolText("[FILE] a.txt\n[FILE] e.txt\n[FILE] move.txt\n[FILE] pic.png\n[DIR] sub")},
	{tool: serve.ToolListDirectoryWithSizes, args: map[string]any{"path": "{rw}/sub", "sortBy": "size"},
		want: toolText("[FILE] big.txt                              20 B\n[FILE] b.md                                  4 B\n\nTotal: 2 files, 0 directories\nCombined size: 24 B")},
	{tool: serve.ToolDirectoryTree, args: map[string]any{"path": "{rw}/sub", "excludePatterns": []any{"big*"}},
		want: toolText("[\n  {\n    \"name\": \"b.md\",\n    \"type\": \"file\"\n  }\n]")},
	{tool: serve.ToolSearchFiles, args: map[string]any{"path": "{rw}", "pattern": "**/*.md"}, want: toolText("{rw}/sub/b.md")},
	{tool: serve.ToolWriteFile, args: map[string]any{"path": "{rw}/new.txt", "content": "new ✓\n"}, want: toolText("Successfully wrote to {rw}/new.txt")},
	{tool: serve.ToolEditFile, args: map[string]any{"path": "{rw}/e.txt", "edits": []any{map[string]any{"oldText": "two", "newText": "TWO"}}, "dryRun": true},
		want: toolText(diffText("@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"))},
	{tool: serve.ToolEditFile, args: map[string]any{"path": "{rw}/e.txt", "edits": []any{map[string]any{"oldText": "three", "newText": "3"}}},
		want: toolText(diffText("@@ -1,3 +1,3 @@\n one\n two\n-three\n+3\n"))},
	{tool: serve.ToolCreateDirectory, args: map[string]any{"path": "{rw}/made/deeper"}, want: toolText("Successfully created directory {rw}/made/deeper")},
	{tool: serve.ToolMoveFile, args: map[string]any{"source": "{rw}/move.txt", "destination": "{rw}/sub/moved.txt"},
		want: toolText("Successfully moved {rw}/move.txt to {rw}/sub/moved.txt")},
	{tool: serve.ToolGetFileInfo, args: map[string]any{"path": "{rw}/a.txt"},
		want: toolText(map[string]any{"$regex": "^size: 17\ncreated: .+\nmodified: .+\naccessed: .+\nisDirectory: false\nisFile: true\npermissions: 644$"})},

	// Refusals.
	{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{rw}/.env"}, want: toolRefused("^PERMISSION_DENIED: secrets: ")},
	{tool: serve.ToolWriteFile, args: map[string]any{"path": "{ro}/new.txt", "content": "x"}, want: toolRefused("^PERMISSION_DENIED: readonly: ")},
	{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{outside}/secret.txt"}, want: toolRefused("^PERMISSION_DENIED: ")},
	{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{rw}/../outside/secret.txt"}, want: toolRefused("^PERMISSION_DENIED: ")},
	{tool: "no_such_tool", args: map[string]any{}, want: rpcError(-32602)},
	{tool: serve.ToolReadTextFile, args: map[string]any{"head": 1}, want: rpcError(-32602)},

	// Resources (item 5): the same files, read through the same corridor.
	{method: "resources/list", args: map[string]any{}, want: map[string]any{"result": map[string]any{
		"resources": map[string]any{"$contains": []any{map[string]any{"uri": "file://{rw}/a.txt", "mimeType": "text/plain"},
			map[string]any{"uri": "file://{ro}/r.txt"}}}}}},
	{method: "resources/templates/list", args: map[string]any{}, want: map[string]any{"result": map[string]any{
		"resourceTemplates": []any{map[string]any{"uriTemplate": "file:///{+path}"}}}}},
	{method: "resources/read", args: map[string]any{"uri": "file://{rw}/a.txt"}, want: map[string]any{"result": map[string]any{
		"contents": []any{map[string]any{"uri": "file://{rw}/a.txt", "mimeType": "text/plain", "text": "alpha\nbeta\ngamma\n"}}}}},
	{method: "resources/read", args: map[string]any{"uri": "file://{rw}/.env"}, want: map[string]any{"error": map[string]any{
		"code": map[string]any{"$not": 0}}, "result": map[string]any{"$absent": true}}},
	{method: "resources/subscribe", args: map[string]any{"uri": "file://{rw}/a.txt"}, want: map[string]any{
		"result": map[string]any{}, "error": map[string]any{"$absent": true}}},
}

// The tree after the calls: the files (relative to the tree's base) and
// their content, the directories, and the paths where nothing may be.
var (
	serveInteropFilesAfter = map[string]string{
		"rw/a.txt":           "alpha\nbeta\ngamma\n",
		"rw/new.txt":         "new ✓\n",
		"rw/e.txt":           "one\ntwo\n3\n",
		"rw/sub/moved.txt":   "moving\n",
		"rw/.env":            "API_KEY=hunter2\n",
		"ro/r.txt":           "read only\n",
		"outside/secret.txt": "outside secret\n",
	}
	serveInteropDirsAfter   = []string{"rw/made/deeper"}
	serveInteropAbsentAfter = []string{"rw/move.txt", "ro/new.txt"}
)

// serveInteropSecrets are contents no reply may show: the secret's and the
// outside file's.
var serveInteropSecrets = []string{"hunter2", "outside secret"}

// serveInteropTree is the tree both SDK tests serve: rw (a writable root),
// ro (a read-only root) and outside, all in base, with fsbroker's state
// directory beside them.
type serveInteropTree struct {
	base, rw, ro, outside, state string
}

// newServeInteropTree writes the tree in a new temporary directory.
func newServeInteropTree(t *testing.T) serveInteropTree {
	t.Helper()
	base := realDir(t, t.TempDir())
	tr := serveInteropTree{base: base, rw: filepath.Join(base, "rw"), ro: filepath.Join(base, "ro"),
		outside: filepath.Join(base, "outside"), state: filepath.Join(base, "state")}
	png, err := base64.StdEncoding.DecodeString(serveInteropPNG)
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, base, map[string]string{
		"rw/a.txt":           "alpha\nbeta\ngamma\n",
		"rw/e.txt":           "one\ntwo\nthree\n",
		"rw/move.txt":        "moving\n",
		"rw/pic.png":         string(png),
		"rw/.env":            "API_KEY=hunter2\n",
		"rw/sub/b.md":        "# b\n",
		"rw/sub/big.txt":     "0123456789abcdefghij",
		"ro/r.txt":           "read only\n",
		"outside/secret.txt": "outside secret\n",
	})
	return tr
}

// serveArgs is the fsbroker command line serving the tree: the roots as a
// host config gives them, consent approving what the policy allows.
func (tr serveInteropTree) serveArgs() []string {
	return []string{"serve", "--root", tr.rw + ":rw", "--root", tr.ro, "--state-dir", tr.state, "--consent", "auto", "--log-level", "warn"}
}

// hostRoots are the roots the SDK clients answer roots/list with: both
// operator roots.
func (tr serveInteropTree) hostRoots() []rootEntry {
	return []rootEntry{{URI: "file://" + tr.rw, Name: "rw"}, {URI: "file://" + tr.ro, Name: "ro"}}
}

// expand returns v (a matcher or params) with {rw}, {ro} and {outside}
// replaced in every string, numbers decoded as json.Number as
// conformance.Match reads them. (The tree's paths need no JSON escapes.)
func (tr serveInteropTree) expand(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.NewReplacer("{rw}", tr.rw, "{ro}", tr.ro, "{outside}", tr.outside).Replace(string(b)))
	out, err := decodeNumbers(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// serveInteropOutcome is what an SDK client got: the tools it listed (name
// and outputSchema, as the SDK decoded them), each reply as
// {"result": ...} or {"error": {"code", "message"}}, and how many roots/list
// requests its handler answered.
type serveInteropOutcome struct {
	Tools []struct {
		Name         string `json:"name"`
		OutputSchema any    `json:"outputSchema"`
	} `json:"tools"`
	Replies     []json.RawMessage `json:"replies"`
	RootsListed int               `json:"rootsListed"`
}

// checkServeInterop holds what an SDK client got to the table: the tools
// fsbroker lists are the reference's, in order; each reply matches its row;
// a tool's structuredContent satisfies its outputSchema where validate says
// so (validate is nil for an SDK that validates it itself, failing the call
// otherwise); no reply shows a secret; the host was asked for its roots as
// serveAsksHostRoots says; and the tree ends as the calls left it.
func checkServeInterop(t *testing.T, sdk string, tr serveInteropTree, got *serveInteropOutcome,
	validate func(tool string, schema, structured any) error) {
	t.Helper()
	defs, err := serve.Tools()
	if err != nil {
		t.Fatal(err)
	}
	var names, want []string
	schemas := map[string]any{}
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		schemas[tool.Name] = tool.OutputSchema
	}
	for _, d := range defs {
		want = append(want, d.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("%s: tools/list names %q, want %q", sdk, names, want)
	}
	if len(got.Replies) != len(serveInteropCalls) {
		t.Fatalf("%s: %d replies for %d calls", sdk, len(got.Replies), len(serveInteropCalls))
	}
	for i, call := range serveInteropCalls {
		reply, err := decodeNumbers(got.Replies[i])
		if err != nil {
			t.Fatalf("%s: reply %d: %v", sdk, i, err)
		}
		for _, d := range conformance.Match(tr.expand(t, call.want), reply, "") {
			t.Errorf("%s: row %d (%s %v): %s\n  reply: %s", sdk, i, call.name(), call.args, d, got.Replies[i])
		}
		for _, secret := range serveInteropSecrets {
			if strings.Contains(string(got.Replies[i]), secret) {
				t.Errorf("%s: row %d (%s %v): the reply shows %q: %s", sdk, i, call.name(), call.args, secret, got.Replies[i])
			}
		}
		result, _ := reply.(map[string]any)["result"].(map[string]any)
		if call.method != "" || validate == nil || result == nil || result["isError"] == true {
			continue
		}
		if err := validate(call.tool, schemas[call.tool], result["structuredContent"]); err != nil {
			t.Errorf("%s: row %d (%s): structuredContent against the outputSchema the server lists: %v", sdk, i, call.name(), err)
		}
	}
	if asked := got.RootsListed > 0; asked != serveAsksHostRoots {
		t.Errorf("%s: fsbroker serve sent roots/list %d times; serveAsksHostRoots is %v", sdk, got.RootsListed, serveAsksHostRoots)
	}
	checkServeInteropTree(t, tr)
	checkServeInteropTrail(t, sdk, tr)
}

// checkServeInteropTrail requires the trail the table's calls left to name
// each request by its tool or resources method (docs/protocol.md section
// 8): fsbroker audit query --method read_text_file finds the reads'
// decision and outcome records (tool read_text_file; operation read, where
// the request was not refused before the policy), and
// --method resources/read the resource reads' (an allowed one and the
// secret's refusal); fsbroker audit verify verifies the trail.
func checkServeInteropTrail(t *testing.T, sdk string, tr serveInteropTree) {
	t.Helper()
	for _, method := range []string{serve.ToolReadTextFile, serve.MethodResourcesRead} {
		stdout, stderr, code := runFsbroker(t, nil, "audit", "query", "--state-dir", tr.state, "--method", method, "--format", "json")
		if code != 0 {
			t.Errorf("%s: fsbroker audit query --method %s: exit status %d\n%s", sdk, method, code, stderr)
			continue
		}
		count := map[string]int{}
		for _, rec := range jsonRecords(t, stdout) {
			if rec.Method != method || rec.Tool != method || rec.Operation != "" && rec.Operation != "read" {
				t.Errorf("%s: audit query --method %s gave %s of method %q, tool %q, operation %q",
					sdk, method, rec.Kind, rec.Method, rec.Tool, rec.Operation)
			}
			key := string(rec.Kind)
			if rec.Allow != nil && rec.Kind == audit.KindDecision {
				key += fmt.Sprintf(" allow=%v", *rec.Allow)
			}
			count[key]++
		}
		for _, want := range []string{"decision allow=true", "decision allow=false", "outcome"} {
			if count[want] == 0 {
				t.Errorf("%s: audit query --method %s finds no %s record: %v", sdk, method, want, count)
			}
		}
	}
	if stdout, stderr, code := runFsbroker(t, nil, "audit", "verify", "--state-dir", tr.state); code != 0 {
		t.Errorf("%s: fsbroker audit verify: exit status %d\n%s%s", sdk, code, stdout, stderr)
	}
}

// decodeNumbers decodes JSON keeping numbers as json.Number, as
// conformance.Match reads them.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkServeInteropTree requires the tree to be as the calls left it.
func checkServeInteropTree(t *testing.T, tr serveInteropTree) {
	t.Helper()
	for rel, want := range serveInteropFilesAfter {
		if data, err := os.ReadFile(filepath.Join(tr.base, rel)); err != nil || string(data) != want {
			t.Errorf("%s is %q (%v), want %q", rel, data, err, want)
		}
	}
	for _, rel := range serveInteropDirsAfter {
		if fi, err := os.Stat(filepath.Join(tr.base, rel)); err != nil || !fi.IsDir() {
			t.Errorf("%s: want a directory (%v)", rel, err)
		}
	}
	for _, rel := range serveInteropAbsentAfter {
		if _, err := os.Lstat(filepath.Join(tr.base, rel)); !os.IsNotExist(err) {
			t.Errorf("%s: want nothing there (%v)", rel, err)
		}
	}
}

// TestServeInteropCallsCoverTools: the table calls every tool fsbroker
// serve lists.
func TestServeInteropCallsCoverTools(t *testing.T) {
	defs, err := serve.Tools()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		if !slices.ContainsFunc(serveInteropCalls, func(c serveInteropCall) bool { return c.method == "" && c.tool == d.Name }) {
			t.Errorf("no row of serveInteropCalls calls %s", d.Name)
		}
	}
}

// serveInteropElicitRun is one host of the consent runs: its name (the
// identity its grants are kept under) and whether its elicitation handler
// accepts (every boolean field true) or declines.
type serveInteropElicitRun struct {
	client string
	accept bool
}

// serveInteropElicitRuns are the consent runs of an SDK ("go", "ts"), in
// order on one state directory: the first host's grant must not serve the
// second.
func serveInteropElicitRuns(sdk string) []serveInteropElicitRun {
	return []serveInteropElicitRun{
		{client: "fsbroker-interop-" + sdk + "-accepts", accept: true},
		{client: "fsbroker-interop-" + sdk + "-declines", accept: false},
	}
}

// serveInteropElicitCall is the one request of a consent run: a read of a
// file no grant covers.
var serveInteropElicitCall = serveInteropCall{tool: serve.ToolReadTextFile, args: map[string]any{"path": "{rw}/a.txt"}}

// elicitArgs is the fsbroker command line of the consent runs: the roots,
// no pre-approval, and no --consent, so that a host declaring elicitation
// is asked (protocol.md section 8).
func (tr serveInteropTree) elicitArgs() []string {
	return []string{"serve", "--root", tr.rw + ":rw", "--root", tr.ro, "--state-dir", tr.state, "--log-level", "warn"}
}

// serveInteropElicitOutcome is what an SDK host of a consent run got: the
// read's reply, as in serveInteropOutcome, and how many elicitation/create
// requests its handler answered.
type serveInteropElicitOutcome struct {
	Reply        json.RawMessage `json:"reply"`
	Elicitations int             `json:"elicitations"`
}

// checkServeInteropElicit holds a consent run to what its handler answered:
// asked once; accepted, the file is read and fsbroker grants list shows one
// read grant of the file, by elicit, for the host's declared identity;
// declined, the read is refused (isError, PERMISSION_DENIED, consent not
// given) and the host holds no grant.
func checkServeInteropElicit(t *testing.T, sdk string, tr serveInteropTree, run serveInteropElicitRun, got serveInteropElicitOutcome) {
	t.Helper()
	if got.Elicitations != 1 {
		t.Errorf("%s, %s: its handler answered %d elicitation/create requests, want 1", sdk, run.client, got.Elicitations)
	}
	want := toolRefused("^PERMISSION_DENIED: no consent grant covers the path for read access, and consent was not given$")
	if run.accept {
		want = toolText("alpha\nbeta\ngamma\n")
	}
	reply, err := decodeNumbers(got.Reply)
	if err != nil {
		t.Fatalf("%s, %s: reply %s: %v", sdk, run.client, got.Reply, err)
	}
	for _, d := range conformance.Match(tr.expand(t, want), reply, "") {
		t.Errorf("%s, %s: %s\n  reply: %s", sdk, run.client, d, got.Reply)
	}
	gs := csListGrants(t, tr.state, run.client)
	switch {
	case !run.accept && len(gs) != 0:
		t.Errorf("%s, %s declined, yet holds grants %+v", sdk, run.client, gs)
	case run.accept && (len(gs) != 1 || gs[0].Path != "rw/a.txt" || gs[0].Access != "read" || gs[0].By != "elicit" ||
		gs[0].Server != run.client || gs[0].Pinned):
		t.Errorf("%s, %s accepted: grants %+v, want one read grant of rw/a.txt by elicit for its declared name", sdk, run.client, gs)
	}
}

// serveInteropSpec is what an SDK host needs: the server command, the roots
// to answer roots/list with, and the requests.
func serveInteropSpec(t *testing.T, tr serveInteropTree) map[string]any {
	calls := make([]any, 0, len(serveInteropCalls))
	for _, c := range serveInteropCalls {
		method := c.method
		if method == "" {
			method = "tools/call"
		}
		calls = append(calls, map[string]any{"method": method, "params": tr.expand(t, c.params())})
	}
	return map[string]any{
		"command": append([]string{brokerBin}, tr.serveArgs()...),
		"roots":   tr.hostRoots(),
		"calls":   calls,
	}
}
