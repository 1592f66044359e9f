// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// The attacks of review 19 (findings 1 and 9) on fsbroker serve --http,
// from a local process that reaches the port: without the token it reaches
// nothing; with it, it is the token's identity whatever name it declares,
// and nobody approves its own consent unless the operator chose elicit.

// grantsOf lists the grants of the identity id, pinned or declared, in the
// state directory.
func grantsOf(t *testing.T, state, id string, pinned bool) []grantJSON {
	t.Helper()
	var out []grantJSON
	for _, g := range csListGrants(t, state, id) {
		if g.Server == id && g.Pinned == pinned {
			out = append(out, g)
		}
	}
	return out
}

// requirePrivateToken requires the token file at path to be mode 0600 and
// its token (read by the test) to have 32 characters or more.
func requirePrivateToken(t *testing.T, path, token string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the token file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 || len(token) < 32 {
		t.Fatalf("the token file %s: mode %v, a token of %d characters; want mode 0600 and 32 characters or more", path, fi.Mode(), len(token))
	}
}

// TestServeHTTPRequiresTheToken: without the token, or with another one,
// every request gets 401 with a Bearer challenge: initialize opens no
// session (no session_start in the trail), and a write with a made-up
// session id writes nothing and is decided nowhere. The token file is in
// the state directory, mode 0600; with its token the same requests work.
func TestServeHTTPRequiresTheToken(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	requirePrivateToken(t, filepath.Join(b.state, "http-token"), b.token)
	target := filepath.Join(b.rw, "pwned.txt")
	for _, auth := range []string{"", "Bearer " + strings.Repeat("A", 43), "Bearer " + b.token + "A", "Basic " + b.token} {
		for _, req := range []struct{ method, session, body string }{
			{http.MethodPost, "", initializeBody("claude-code")},
			{http.MethodPost, "AAAAAAAAAAAAAAAAAAAAAAAAAA", writeCall(target, "x")},
			{http.MethodGet, "AAAAAAAAAAAAAAAAAAAAAAAAAA", ""},
		} {
			r := b.raw(t, req.method, req.session, req.body, "Authorization", auth)
			if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") || r.session != "" {
				t.Errorf("%s with Authorization %q: %d (WWW-Authenticate %q, session %q), want 401 with a Bearer challenge",
					req.method, auth, r.status, r.header.Get("WWW-Authenticate"), r.session)
			}
		}
	}
	if starts := trailRecordsOf(t, b.trail, audit.KindSessionStart); len(starts) > 0 {
		t.Errorf("requests without the token started sessions: %+v", starts)
	}
	b.requireUntouched(t, target)
	session := b.rawSession(t, "claude-code")
	if r := b.raw(t, http.MethodPost, session, writeCall(target, "x")); r.status != http.StatusOK || strings.Contains(r.body, `"isError":true`) {
		t.Fatalf("a write with the token: %d %s", r.status, r.body)
	}
	if got := readFile(t, target); got != "x" {
		t.Errorf("the write with the token left %q", got)
	}
}

// TestServeHTTPRefusesSelfConsent: the attack of review 19's a1.py. A
// client with the token that declares elicitation and approves every
// question asks to write and to read in roots nobody pre-approved, with no
// --consent given: nobody is asked (not the client), both calls are
// refused, nothing is written and no grant is kept. With --consent elicit,
// which the operator chose, the question goes to the client, and the grant
// is the token's identity's.
func TestServeHTTPRefusesSelfConsent(t *testing.T) {
	t.Parallel()
	b := newHTTPBroker(t)
	b.preapprove = false
	b.start(t)
	b.waitLog(regexp.MustCompile(`consent over HTTP: nobody is asked`))
	var asked atomic.Int32
	cs := b.connectWith(t, "claude-code", &mcp.ClientOptions{ElicitationHandler: countAsked(&asked, acceptEveryField)})
	planted := filepath.Join(b.rw, "planted.sh")
	if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": planted, "content": "echo pwned\n"}); !isErr ||
		!strings.HasPrefix(text, "PERMISSION_DENIED") {
		t.Errorf("write_file: %q (isError %v), want PERMISSION_DENIED", text, isErr)
	}
	if text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); !isErr ||
		!strings.HasPrefix(text, "PERMISSION_DENIED") || strings.Contains(text, "alpha") {
		t.Errorf("read_text_file: %q (isError %v), want PERMISSION_DENIED", text, isErr)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the client was asked %d consent questions", n)
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", planted, err)
	}
	for _, g := range [][]grantJSON{grantsOf(t, b.state, b.id, true), grantsOf(t, b.state, "claude-code", false)} {
		if len(g) > 0 {
			t.Errorf("grants kept: %+v", g)
		}
	}
	sigterm(t, b.proc)

	// The operator chooses elicit: the client is asked, and its answer is
	// the token identity's grant, not the declared name's.
	b.start(t, "--consent", "elicit")
	b.waitLog(regexp.MustCompile(`--consent elicit over HTTP: each consent question goes to the HTTP client`))
	cs = b.connectWith(t, "claude-code", &mcp.ClientOptions{ElicitationHandler: countAsked(&asked, acceptEveryField)})
	if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": planted, "content": "asked\n"}); isErr {
		t.Errorf("write_file under --consent elicit: %q", text)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("%d consent questions under --consent elicit, want 1", n)
	}
	if g := grantsOf(t, b.state, b.id, true); len(g) != 1 || g[0].Path != "rw/planted.sh" || g[0].Access != "write" {
		t.Errorf("the token identity's grants %+v, want the write grant on rw/planted.sh", g)
	}
	if g := grantsOf(t, b.state, "claude-code", false); len(g) > 0 {
		t.Errorf("the declared name holds grants: %+v", g)
	}
}

// TestServeHTTPIdentityIsTheTokens: the attack of review 19's a2.py. A
// grant of the declared name claude-code (from a stdio session, say) is no
// HTTP client's, even one with the token that declares that name; what a
// client with the token is granted is the token's identity's (pinned),
// shown so by grants list and the trail, and a second client declaring
// another name, in this process or the next (the token file is kept, so
// the identity is the same), has it too.
func TestServeHTTPIdentityIsTheTokens(t *testing.T) {
	t.Parallel()
	b := newHTTPBroker(t)
	b.preapprove = false
	writeFile(t, filepath.Join(b.ro, "notes.txt"), "secret-notes\n")
	store, err := grants.Open(filepath.Join(b.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Grant(corridor.StateKeyOf("claude-code", false), grants.Grant{Access: grants.Read, Path: "ro",
		By: grants.ByPrompt, Root: grantRoot(t, b.ro)}); err != nil {
		t.Fatal(err)
	}
	_ = store.Close()

	b.start(t)
	cs := b.connect(t, "claude-code")
	notes := filepath.Join(b.ro, "notes.txt")
	if text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": notes}); !isErr || strings.Contains(text, "secret") {
		t.Errorf("a client declaring claude-code read with claude-code's grant: %q (isError %v)", text, isErr)
	}
	sigterm(t, b.proc)
	firstID, firstToken := b.id, b.token

	b.start(t, "--consent", "auto")
	if b.id != firstID || b.token != firstToken || !strings.HasPrefix(b.id, "http-") {
		t.Fatalf("after a restart: identity %q and token changed (was %q), want the same, http-...", b.id, firstID)
	}
	if text, isErr := callTool(t, b.connect(t, "claude-code"), "read_text_file", map[string]any{"path": notes}); isErr || text != "secret-notes\n" {
		t.Fatalf("read under --consent auto: %q (isError %v)", text, isErr)
	}
	if g := grantsOf(t, b.state, b.id, true); len(g) != 1 || g[0].Path != "ro/notes.txt" || g[0].Access != "read" {
		t.Errorf("the token identity's grants %+v, want the read grant on ro/notes.txt", g)
	}
	if g := grantsOf(t, b.state, "claude-code", false); len(g) != 1 || g[0].Path != "ro" {
		t.Errorf("the declared name's grants %+v, want only the one given before", g)
	}
	sigterm(t, b.proc)

	b.start(t) // no --consent: nobody is asked
	other := b.connect(t, "other-host")
	if text, isErr := callTool(t, other, "read_text_file", map[string]any{"path": notes}); isErr || text != "secret-notes\n" {
		t.Errorf("a client declaring other-host, with the token, read %q (isError %v): want the token's grant to hold", text, isErr)
	}
	if text, isErr := callTool(t, other, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); !isErr {
		t.Errorf("a path the token holds no grant on was read: %q", text)
	}
	for _, r := range append(trailRecordsOf(t, b.trail, audit.KindSessionStart), trailDecisionRecords(t, b.trail)...) {
		if r.Server != b.id {
			t.Errorf("a %s record of %s %v: server %q, want the token's identity %s", r.Kind, r.Tool, r.Paths, r.Server, b.id)
		}
	}
}

// TestServeHTTPClientIDPinsTheIdentity: with --client-id, HTTP sessions are
// that identity's, whatever name they declare.
func TestServeHTTPClientIDPinsTheIdentity(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t, "--client-id", "vscode-main")
	if b.id != "vscode-main" {
		t.Fatalf("identity %q, want vscode-main", b.id)
	}
	if _, isErr := callTool(t, b.connect(t, "claude-code"), "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); isErr {
		t.Fatal("read refused")
	}
	for _, r := range trailRecordsOf(t, b.trail, audit.KindSessionStart) {
		if r.Server != "vscode-main" {
			t.Errorf("session_start of %q, want vscode-main", r.Server)
		}
	}
}

// TestServeHTTPTokenFile: --http-token-file names the operator's own token
// file, whose token is then the one to send, and none is written in the
// state directory; a fresh one is written there, mode 0600, when it does
// not exist. (TestServeHTTPRefusesUnsafeStart has the token files refused.)
func TestServeHTTPTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	own := filepath.Join(dir, "token")
	operatorToken := strings.Repeat("0123456789abcdef", 4)
	writeFile(t, own, operatorToken+"\n")
	if err := os.Chmod(own, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startServeHTTP(t, "--http-token-file", own)
	if b.token != operatorToken {
		t.Fatalf("the token is %q, want the operator's", b.token)
	}
	if _, err := os.Stat(filepath.Join(b.state, "http-token")); !os.IsNotExist(err) {
		t.Errorf("a token file was written in the state directory (%v)", err)
	}
	b.rawSession(t, "with-the-operators-token")

	fresh := filepath.Join(dir, "fresh-token")
	b = startServeHTTP(t, "--http-token-file", fresh)
	requirePrivateToken(t, fresh, b.token)
	b.rawSession(t, "with-a-fresh-token")

}

// slowInitialize POSTs an initialize whose body (100 bytes announced) never
// comes, with Authorization: authorization unless empty (review 19's
// c1.py), and sends its answer's status on the channel it returns (0 when
// none came within waitLimit).
func (b *httpBroker) slowInitialize(t *testing.T, authorization string) <-chan int {
	t.Helper()
	never, hold := io.Pipe()
	t.Cleanup(func() { hold.Close() })
	req, err := http.NewRequest(http.MethodPost, b.url, never)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 100
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	status := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		resp, err := b.plain.Do(req.WithContext(ctx))
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	return status
}

// TestServeHTTPSlowBodiesDoNotBlock: the attack of review 19's c1.py. Eight
// requests without the token send initialize headers and never the body;
// each is answered 401, and a real client with the token opens a session
// and calls a tool meanwhile (before, four such bodies held every
// initialize slot for a minute).
func TestServeHTTPSlowBodiesDoNotBlock(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	var slow []<-chan int
	for i := range 8 {
		auth := ""
		if i%2 == 1 {
			auth = "Bearer " + strings.Repeat("B", 43)
		}
		slow = append(slow, b.slowInitialize(t, auth))
	}
	// connect and callTool bound each wait by waitLimit (30 s), half the
	// minute slow bodies used to hold the slots for.
	cs := b.connect(t, "real-host")
	if text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); isErr || text != "alpha\n" {
		t.Fatalf("a real client's read while slow bodies are held: %q (isError %v)", text, isErr)
	}
	for i, status := range slow {
		if got := <-status; got != http.StatusUnauthorized {
			t.Errorf("slow body %d: status %d, want 401", i, got)
		}
	}
	if starts := trailRecordsOf(t, b.trail, audit.KindSessionStart); len(starts) != 1 {
		t.Errorf("%d session_start records, want the real client's only", len(starts))
	}
}

// TestServeHTTPHeldEventStreamsExpire: review 19's session hog. Sessions
// whose client only holds their event stream open (GET) take every session
// slot (--http-max-sessions 2), so a real client gets 503; after the idle
// timeout (1 s) they end like any idle session, and the real client opens
// its session. (Before, an open GET kept a session for good.)
func TestServeHTTPHeldEventStreamsExpire(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t, "--http-max-sessions", "2", "--http-idle-timeout", "1s")
	for range 2 {
		session := b.rawSession(t, "hog")
		req, err := http.NewRequest(http.MethodGet, b.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %s", resp.Status)
		}
	}
	if r := b.raw(t, http.MethodPost, "", initializeBody("real-host")); r.status != http.StatusServiceUnavailable {
		t.Errorf("initialize while the hogs hold both sessions: %d, want 503", r.status)
	}
	b.awaitSession(t, "real-host")
	// One hog's end frees the slot the real client takes; the other's
	// timer may fire a moment later.
	n := b.countLog("ended an idle session")
	for deadline := time.Now().Add(waitLimit); n < 2 && time.Now().Before(deadline); n = b.countLog("ended an idle session") {
		time.Sleep(20 * time.Millisecond)
	}
	if n < 2 {
		t.Errorf("%d idle sessions ended, want the 2 hogs", n)
	}
}
