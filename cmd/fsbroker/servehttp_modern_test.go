// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/serve"
)

// modernVersion is protocol revision 2026-07-28.
const modernVersion = "2026-07-28"

// modernMeta is the per-request _meta of a raw request of protocol version
// from a host named name.
func modernMeta(version, name string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"` + name +
		`","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
}

// modernWriteCall is a raw tools/call of write_file whose _meta names
// version.
func modernWriteCall(version, path, content string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"` + path +
		`","content":"` + content + `"},` + modernMeta(version, "raw-host") + `}}`
}

// TestServeHTTPModernGoSDK: the official Go SDK client (go-sdk v1.8.0),
// left to its default, probes fsbroker serve --http with server/discover
// and speaks protocol 2026-07-28 over Streamable HTTP: no HTTP session (no
// Mcp-Session-Id), the roots and the consent question (--consent elicit)
// in InputRequiredResults that it answers from its own roots and its
// elicitation handler. A write in the writable root, a read and a
// resources/read of a new file are asked about once each and served; .env stays refused; the grants are the
// token identity's, not the declared name's. A 2025-11-25 client of the
// same server, beside it, has its HTTP session and the same identity's
// grants. The trail has one session_start of the revision, and at shutdown
// one session_end.
func TestServeHTTPModernGoSDK(t *testing.T) {
	t.Parallel()
	b := newHTTPBroker(t)
	b.preapprove = false
	b.start(t, "--consent", "elicit")
	var asked atomic.Int32
	opts := &mcp.ClientOptions{ElicitationHandler: countAsked(&asked, acceptEveryField)}
	cs := b.connectOn(t, "", "modern-host", opts)
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("the SDK client speaks %q, want %s", v, modernVersion)
	}
	if id := cs.ID(); id != "" {
		t.Errorf("the client holds HTTP session id %q; protocol %s has none", id, modernVersion)
	}
	written := filepath.Join(b.rw, "modern.txt")
	if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": written, "content": "over HTTP, 2026\n"}); isErr {
		t.Fatalf("write_file: %q", text)
	}
	if got := readFile(t, written); got != "over HTTP, 2026\n" {
		t.Errorf("the written file holds %q", got)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("%d consent questions for the write, want 1", n)
	}
	if text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); isErr || text != "alpha\n" {
		t.Errorf("read_text_file: %q (isError %v)", text, isErr)
	}
	if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": written, "content": "again\n"}); isErr {
		t.Errorf("the second write_file: %q", text)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("%d consent questions after a write, a read and a write again, want 2", n)
	}
	text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, ".env")})
	if !isErr || !strings.HasPrefix(text, "PERMISSION_DENIED") || strings.Contains(text, "hunter2") {
		t.Errorf("read of .env: %q (isError %v), want a PERMISSION_DENIED refusal", text, isErr)
	}
	resource := filepath.Join(b.rw, "resource.txt")
	writeFile(t, resource, "a resource\n")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: serve.FileURL(resource)})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "a resource\n" {
		t.Errorf("resources/read: %+v, %v", read, err)
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("%d consent questions after the resources/read of a new file, want 3", n)
	}
	if g := grantsOf(t, b.state, b.id, true); len(g) != 3 {
		t.Errorf("grants of the token's identity %s: %+v, want the write's, the read's and the resource's", b.id, g)
	}
	if g := grantsOf(t, b.state, "modern-host", false); len(g) > 0 {
		t.Errorf("grants kept under the declared name: %+v", g)
	}

	legacy := b.connectOn(t, "2025-11-25", "legacy-host", opts)
	if v := legacy.InitializeResult().ProtocolVersion; v != "2025-11-25" || legacy.ID() == "" {
		t.Fatalf("the 2025-11-25 client: version %q, session id %q", v, legacy.ID())
	}
	if text, isErr := callTool(t, legacy, "read_text_file", map[string]any{"path": written}); isErr || text != "again\n" {
		t.Errorf("read_text_file of the 2025-11-25 client: %q (isError %v)", text, isErr)
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("the 2025-11-25 client was asked about what the identity was granted (%d questions)", n)
	}

	starts := trailRecordsOf(t, b.trail, audit.KindSessionStart)
	var modernStarts int
	for _, r := range starts {
		if r.Server != b.id || r.Transport != "http" {
			t.Errorf("session_start %+v: want the token's identity %s over http", r, b.id)
		}
		if r.ProtocolVersion == modernVersion {
			modernStarts++
		}
	}
	if modernStarts != 1 || len(starts) != 2 {
		t.Errorf("session_start records %+v, want one of protocol %s and the 2025-11-25 session's", starts, modernVersion)
	}
	for _, r := range b.recordsNaming(t, "modern.txt") {
		if r.Server != b.id {
			t.Errorf("decision on modern.txt under %q, want %s", r.Server, b.id)
		}
	}
	sigterm(t, b.proc)
	var modernEnds int
	for _, r := range trailRecordsOf(t, b.trail, audit.KindSessionEnd) {
		if r.ProtocolVersion == modernVersion && r.Server == b.id {
			modernEnds++
		}
	}
	if modernEnds != 1 {
		t.Errorf("%d session_end records of protocol %s at shutdown, want 1", modernEnds, modernVersion)
	}
}

// TestServeHTTPModernHeaders: a request of protocol 2026-07-28 over
// Streamable HTTP must name its revision in the MCP-Protocol-Version header
// and mirror its method and tool in Mcp-Method and Mcp-Name, as the
// revision's transport requires (HeaderMismatch, -32020, 400): without the
// header, with another version in it or in the body, without or with
// another Mcp-Method or Mcp-Name (plain or base64, or naming the first of
// two names in the body, which JSON readers take the last of), the write does not
// run, and nothing reaches the session (no session_start, no decision). A
// version no revision has gets UnsupportedProtocolVersionError (-32022,
// 400); no token 401; GET 405; initialize 404. With the headers right
// (Mcp-Name in base64 too), the write runs, whatever Mcp-Session-Id it
// carries, and no Mcp-Session-Id comes back. Inside a 2025-11-25 HTTP
// session, a body of the revision without its header is refused too.
func TestServeHTTPModernHeaders(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	target := filepath.Join(b.rw, "pwned.txt")
	write := modernWriteCall(modernVersion, target, "x")
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	good := []string{"Mcp-Protocol-Version", modernVersion, "Mcp-Method", "tools/call", "Mcp-Name", "write_file"}
	with := func(name, value string) []string { return append(append([]string{}, good...), name, value) }
	for _, tc := range []struct {
		name, method, body string
		headers            []string
		status, code       int
	}{
		{"no MCP-Protocol-Version", http.MethodPost, write, with("Mcp-Protocol-Version", ""), 400, -32020},
		{"MCP-Protocol-Version 2025-11-25", http.MethodPost, write, with("Mcp-Protocol-Version", "2025-11-25"), 400, -32020},
		{"the body names 2025-11-25", http.MethodPost, modernWriteCall("2025-11-25", target, "x"), good, 400, -32020},
		{"the body names no version", http.MethodPost, writeCall(target, "x"), good, 400, -32020},
		{"a version of no revision", http.MethodPost, write, with("Mcp-Protocol-Version", "2099-01-01"), 400, -32022},
		{"no Mcp-Method", http.MethodPost, write, with("Mcp-Method", ""), 400, -32020},
		{"Mcp-Method tools/list", http.MethodPost, write, with("Mcp-Method", "tools/list"), 400, -32020},
		{"no Mcp-Name", http.MethodPost, write, with("Mcp-Name", ""), 400, -32020},
		{"Mcp-Name read_text_file", http.MethodPost, write, with("Mcp-Name", "read_text_file"), 400, -32020},
		{"Mcp-Name read_text_file in base64", http.MethodPost, write, with("Mcp-Name", b64("read_text_file")), 400, -32020},
		{"Mcp-Name broken base64", http.MethodPost, write, with("Mcp-Name", "=?base64?%%%?="), 400, -32020},
		{"Mcp-Name the first of two names", http.MethodPost, strings.Replace(write, `"params":{`, `"params":{"name":"read_text_file",`, 1),
			with("Mcp-Name", "read_text_file"), 400, -32020},
		{"no token", http.MethodPost, write, with("Authorization", ""), 401, 0},
		{"another token", http.MethodPost, write, with("Authorization", "Bearer "+strings.Repeat("A", 43)), 401, 0},
		{"GET", http.MethodGet, "", with("Accept", "text/event-stream"), 405, 0},
		{"DELETE", http.MethodDelete, "", good, 405, 0},
		{"initialize", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"},` +
			modernMeta(modernVersion, "x") + `}}`, []string{"Mcp-Protocol-Version", modernVersion, "Mcp-Method", "initialize"}, 404, -32601},
	} {
		r := b.raw(t, tc.method, "", tc.body, tc.headers...)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		if tc.code != 0 {
			var reply struct {
				Error struct{ Code int } `json:"error"`
			}
			if json.Unmarshal([]byte(r.body), &reply) != nil || reply.Error.Code != tc.code {
				t.Errorf("%s: %s, want JSON-RPC error %d", tc.name, r.body, tc.code)
			}
		}
		if r.session != "" {
			t.Errorf("%s: got Mcp-Session-Id %q", tc.name, r.session)
		}
	}
	b.requireUntouched(t, target)
	if starts := trailRecordsOf(t, b.trail, audit.KindSessionStart); len(starts) != 0 {
		t.Errorf("refused requests reached a session: %+v", starts)
	}

	// Inside a 2025-11-25 session too, a body of the revision needs its
	// header.
	session := b.rawSession(t, "legacy-host")
	if r := b.raw(t, http.MethodPost, session, write); r.status != http.StatusBadRequest || !strings.Contains(r.body, "-32020") {
		t.Errorf("a body of %s in a 2025-11-25 session, without the header: %d %s, want 400 -32020", modernVersion, r.status, r.body)
	}
	b.requireUntouched(t, target)

	for i, headers := range [][]string{good, with("Mcp-Name", b64("write_file"))} {
		r := b.raw(t, http.MethodPost, "AAAAAAAAAAAAAAAAAAAAAAAAAA", modernWriteCall(modernVersion, target, "written"), headers...)
		if r.status != http.StatusOK || !strings.Contains(r.body, `"resultType":"complete"`) || strings.Contains(r.body, `"isError":true`) {
			t.Fatalf("write %d with the headers right: %d %s", i, r.status, r.body)
		}
		if r.session != "" {
			t.Errorf("write %d: got Mcp-Session-Id %q", i, r.session)
		}
	}
	if got := readFile(t, target); got != "written" {
		t.Errorf("the write left %q", got)
	}
}

// TestServeHTTPModernRefusesSelfConsent: without --consent, a 2026-07-28
// client over HTTP that declares elicitation and would approve every
// question is asked none (the client asking for access would answer its
// own question): the write is refused (one refusing decision in the
// trail), nothing is written, no grant kept.
func TestServeHTTPModernRefusesSelfConsent(t *testing.T) {
	t.Parallel()
	b := newHTTPBroker(t)
	b.preapprove = false
	b.start(t)
	var asked atomic.Int32
	cs := b.connectOn(t, "", "self-approver", &mcp.ClientOptions{ElicitationHandler: countAsked(&asked, acceptEveryField)})
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("the SDK client speaks %q, want %s", v, modernVersion)
	}
	planted := filepath.Join(b.rw, "planted.sh")
	if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": planted, "content": "echo pwned\n"}); !isErr ||
		!strings.HasPrefix(text, "PERMISSION_DENIED") {
		t.Errorf("write_file: %q (isError %v), want PERMISSION_DENIED", text, isErr)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the client was asked %d consent questions", n)
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", planted, err)
	}
	if recs := b.recordsNaming(t, "planted.sh"); len(recs) != 1 || recs[0].Allow == nil || *recs[0].Allow {
		t.Errorf("decisions on planted.sh: %+v, want one refusal", recs)
	}
	if g := grantsOf(t, b.state, b.id, true); len(g) > 0 {
		t.Errorf("grants kept: %+v", g)
	}
}
