// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// The tests of fsbroker serve --http run the real binary on 127.0.0.1:0 and
// reach it over real sockets: as the official Go SDK's client
// (mcp.StreamableClientTransport) does, and with raw HTTP requests for the
// attacks on the transport. Each attack also checks what it did not reach:
// no session opened (no session_start in the trail), no file written, no
// decision recorded.

// httpBroker is fsbroker serve --http with a read-only root ro (a.txt,
// .env) and a writable root rw, both pre-approved unless preapprove is
// false, its state directory, its trail, and, once it runs, its URL, the
// identity of its HTTP sessions and the bearer token of its token file.
type httpBroker struct {
	*proc
	url        string
	ro, rw     string
	state      string
	trail      string
	preapprove bool
	token      string
	id         string       // the identity of its HTTP sessions, as it logs it
	client     *http.Client // sends the token (bearer), for the SDK client
	plain      *http.Client // sends what raw puts in a request, no more
}

// newHTTPBroker makes the roots and the directories of an httpBroker, not
// started.
func newHTTPBroker(t *testing.T) *httpBroker {
	t.Helper()
	dir := t.TempDir()
	b := &httpBroker{ro: realDir(t, filepath.Join(dir, "ro")), rw: realDir(t, filepath.Join(dir, "rw")),
		state: filepath.Join(dir, "state"), trail: filepath.Join(dir, "trail"), preapprove: true, plain: &http.Client{}}
	writeFile(t, filepath.Join(b.ro, "a.txt"), "alpha\n")
	writeFile(t, filepath.Join(b.ro, ".env"), "API_KEY=hunter2\n")
	return b
}

// startServeHTTP starts a new httpBroker with the flags.
func startServeHTTP(t *testing.T, flags ...string) *httpBroker {
	t.Helper()
	b := newHTTPBroker(t)
	b.start(t, flags...)
	return b
}

// start starts fsbroker serve --http ADDR (127.0.0.1:0 unless the flags
// give --http) with b's roots and the flags, waits for the URL it logs,
// and reads the token it wrote (the default token file, in the state
// directory, unless the flags give --http-token-file).
func (b *httpBroker) start(t *testing.T, flags ...string) {
	t.Helper()
	// withConsent writes the roots into a config file that pre-approves
	// them, as an operator would (it does so for stdio's command line),
	// with --consent auto.
	args := []string{"stdio", "--root", b.ro, "--root", b.rw + ":rw"}
	if b.preapprove {
		args = withConsent(t, "", args)
	}
	args[0] = "serve"
	args = append(args, "--state-dir", b.state, "--audit", b.trail)
	if !slices.Contains(flags, "--http") {
		args = append(args, "--http", "127.0.0.1:0")
	}
	p := startProc(t, exec.Command(brokerBin, append(args, flags...)...))
	b.proc = p
	t.Cleanup(func() { // before proc's own cleanup, which only closes stdin
		select {
		case <-p.exited:
		default:
			p.signal(syscall.SIGTERM)
			p.waitExit()
		}
	})
	b.url = b.waitLog(regexp.MustCompile(`serving the filesystem tools over Streamable HTTP: url=(\S+)`))[1]
	b.id = b.waitLog(regexp.MustCompile(`HTTP clients must send .* identity=(\S+)`))[1]
	tokenFile := filepath.Join(b.state, "http-token")
	if i := slices.Index(flags, "--http-token-file"); i >= 0 {
		tokenFile = flags[i+1]
	}
	b.token = strings.TrimSpace(readFile(t, tokenFile))
	b.client = &http.Client{Transport: bearer(b.token, nil)}
}

// bearerTransport adds Authorization: Bearer TOKEN to each request, as a
// host configured with the header does (Claude Code's --header, VS Code's
// headers).
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

// bearer is a bearerTransport over base (nil: http.DefaultTransport).
func bearer(token string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &bearerTransport{token: token, base: base}
}

// RoundTrip sends a copy of req with the header.
func (bt *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+bt.token)
	return bt.base.RoundTrip(req)
}

// connect opens a session as the official Go SDK client named name, with
// the token. The SDK's client declares the roots capability, so it names
// both roots (a host that declares roots and lists none is served nothing).
func (b *httpBroker) connect(t *testing.T, name string) *mcp.ClientSession {
	t.Helper()
	return b.connectWith(t, name, nil)
}

// connectWith is connect with the client's options, on protocol 2025-11-25
// (an HTTP session; the SDK's default, 2026-07-28, has none: connectOn).
func (b *httpBroker) connectWith(t *testing.T, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return b.connectOn(t, "2025-11-25", name, opts)
}

// connectOn is connectWith on protocol version ("": the SDK's default,
// which probes with server/discover and speaks 2026-07-28 when the server
// does).
func (b *httpBroker) connectOn(t *testing.T, version, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, opts)
	client.AddRoots(&mcp.Root{URI: roots.FileURI(b.ro), Name: "ro"}, &mcp.Root{URI: roots.FileURI(b.rw), Name: "rw"})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url, HTTPClient: b.client, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s: connect to %s: %v", name, b.url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its text and isError.
func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s: no content", tool)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T, want text", tool, res.Content[0])
	}
	return text.Text, res.IsError
}

// rawResponse is what a raw request got.
type rawResponse struct {
	status  int
	header  http.Header
	body    string
	session string // its Mcp-Session-Id
}

// raw sends one HTTP request to the endpoint: method, the session id (""
// for none) and body (POST), with the token, and extra headers as name,
// value pairs ("Host" sets the request's host; an empty value removes the
// header, so "Authorization", "" sends no token).
func (b *httpBroker) raw(t *testing.T, method, session, body string, headers ...string) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, b.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+b.token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch {
		case headers[i] == "Host":
			req.Host = headers[i+1]
		case headers[i+1] == "":
			req.Header.Del(headers[i])
		default:
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	resp, err := b.plain.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, b.url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, b.url, err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(data), session: resp.Header.Get("Mcp-Session-Id")}
}

// initializeBody is a raw initialize request from a host named name.
func initializeBody(name string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` +
		name + `","version":"1"}}}`
}

// rawSession opens a session with raw requests and returns its id.
func (b *httpBroker) rawSession(t *testing.T, name string) string {
	t.Helper()
	r := b.raw(t, http.MethodPost, "", initializeBody(name))
	if r.status != http.StatusOK || r.session == "" {
		t.Fatalf("initialize: %d %q, session id %q", r.status, r.body, r.session)
	}
	if r := b.raw(t, http.MethodPost, r.session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", r.status, r.body)
	}
	return r.session
}

// writeCall is a raw tools/call of write_file.
func writeCall(path, content string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"` + path +
		`","content":"` + content + `"}}}`
}

// recordsNaming returns the trail's decision records whose paths mention name.
func (b *httpBroker) recordsNaming(t *testing.T, name string) []audit.Record {
	t.Helper()
	var out []audit.Record
	for _, r := range trailDecisionRecords(t, b.trail) {
		if slices.ContainsFunc(r.Paths, func(p string) bool { return strings.Contains(p, name) }) {
			out = append(out, r)
		}
	}
	return out
}

// requireUntouched requires that nothing wrote path or recorded a decision on it.
func (b *httpBroker) requireUntouched(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v): a refused request wrote it", path, err)
	}
	if recs := b.recordsNaming(t, filepath.Base(path)); len(recs) > 0 {
		t.Errorf("the trail has decisions on %s: %+v", filepath.Base(path), recs)
	}
}

// TestServeHTTPWithGoSDKClient: the official Go SDK client reaches fsbroker
// serve --http, over plain HTTP on the default host (--http :0 is
// 127.0.0.1) and over TLS with a certificate made here, lists the roots,
// reads, writes in the writable root, and is refused the .env read; every
// call is in the trail as the client's, over http.
func TestServeHTTPWithGoSDKClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"http", false}, {"https", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var flags []string
			var pool *x509.CertPool
			if tc.tls {
				var cert, key string
				cert, key, pool = testCertificate(t)
				flags = []string{"--http", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key}
			} else {
				flags = []string{"--http", ":0"}
			}
			b := startServeHTTP(t, flags...)
			u, err := url.Parse(b.url)
			if err != nil || u.Hostname() != "127.0.0.1" || u.Path != "/mcp" || u.Scheme != tc.name {
				t.Fatalf("listening on %s, want %s://127.0.0.1:PORT/mcp (%v)", b.url, tc.name, err)
			}
			if tc.tls {
				b.client.Transport = bearer(b.token, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
			}
			cs := b.connect(t, "sdk-host")

			if text, isErr := callTool(t, cs, "list_allowed_directories", map[string]any{}); isErr ||
				!strings.Contains(text, b.ro) || !strings.Contains(text, b.rw) {
				t.Errorf("list_allowed_directories: %q (isError %v), want both roots", text, isErr)
			}
			if text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); isErr || text != "alpha\n" {
				t.Errorf("read_text_file: %q (isError %v)", text, isErr)
			}
			written := filepath.Join(b.rw, "new.txt")
			if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": written, "content": "over HTTP\n"}); isErr {
				t.Errorf("write_file refused: %q", text)
			}
			if got := readFile(t, written); got != "over HTTP\n" {
				t.Errorf("the written file holds %q", got)
			}
			text, isErr := callTool(t, cs, "read_text_file", map[string]any{"path": filepath.Join(b.ro, ".env")})
			if !isErr || !strings.HasPrefix(text, "PERMISSION_DENIED") || strings.Contains(text, "hunter2") {
				t.Errorf("read of .env: %q (isError %v), want a PERMISSION_DENIED refusal", text, isErr)
			}

			decisions := trailDecisionRecords(t, b.trail)
			if len(decisions) < 3 {
				t.Fatalf("%d decision records, want the read's, the write's and the refused read's at least", len(decisions))
			}
			starts := trailRecordsOf(t, b.trail, audit.KindSessionStart)
			if len(starts) != 1 || starts[0].Server != b.id || starts[0].Transport != "http" {
				t.Fatalf("session_start records %+v, want one of the token's identity %s over http", starts, b.id)
			}
			for _, r := range decisions {
				if r.Server != b.id || r.SessionID != starts[0].SessionID {
					t.Errorf("record %s %v: server %q session %q, want %s's session %q", r.Tool, r.Paths, r.Server, r.SessionID, b.id, starts[0].SessionID)
				}
			}
			if recs := b.recordsNaming(t, ".env"); len(recs) == 0 || recs[0].Allow == nil || *recs[0].Allow {
				t.Errorf("no refusing decision on .env in the trail: %+v", recs)
			}
		})
	}
}

// testCertificate makes a self-signed certificate for 127.0.0.1 and
// localhost, writes it and its key as PEM files, and returns them with a
// pool that trusts it.
func testCertificate(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fsbroker serve --http test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeHTTPRefusesUnsafeStart: an address beyond loopback without TLS,
// half of the TLS pair, TLS or token flags without --http, or a token file
// others can read, whose token is too short, or inside a root stop
// fsbroker at start with exit status 2 and a message naming the flags, or
// the file and the fix; nothing listens, and no token file is written.
func TestServeHTTPRefusesUnsafeStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := realDir(t, filepath.Join(dir, "root"))
	cert, key, _ := testCertificate(t)
	readable, short := filepath.Join(dir, "readable"), filepath.Join(dir, "short")
	writeFile(t, readable, strings.Repeat("0123456789abcdef", 4))
	writeFile(t, short, "hunter2\n")
	for file, mode := range map[string]os.FileMode{readable: 0o644, short: 0o600} {
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		flags []string
		names []string // what the message must name
	}{
		{[]string{"--http", "0.0.0.0:0"}, []string{"--tls-cert", "--tls-key", "0.0.0.0:0"}},
		{[]string{"--http", "[::]:0"}, []string{"--tls-cert", "--tls-key"}},
		{[]string{"--http", "example.com:8443"}, []string{"--tls-cert", "--tls-key", "example.com"}},
		{[]string{"--http", "0.0.0.0:0", "--tls-cert", cert}, []string{"--tls-cert", "--tls-key"}},
		{[]string{"--http", "127.0.0.1:0", "--tls-key", key}, []string{"--tls-cert", "--tls-key"}},
		{[]string{"--tls-cert", cert, "--tls-key", key}, []string{"--tls-cert", "--http"}},
		{[]string{"--http", "127.0.0.1"}, []string{"--http", "HOST:PORT"}},
		{[]string{"--http-token-file", readable}, []string{"--http-token-file", "--http"}},
		{[]string{"--http", "127.0.0.1:0", "--http-token-file", readable}, []string{readable, "chmod 600"}},
		{[]string{"--http", "127.0.0.1:0", "--http-token-file", short}, []string{short, "32"}},
		{[]string{"--http", "127.0.0.1:0", "--http-token-file", filepath.Join(root, "token")}, []string{"--http-token-file", root}},
	} {
		args := append([]string{"serve", "--root", root, "--state-dir", filepath.Join(dir, "state")}, tc.flags...)
		p := startProc(t, exec.Command(brokerBin, args...))
		if code := p.waitExit(); code != exitUsage {
			t.Errorf("%v: exit status %d, want %d", tc.flags, code, exitUsage)
		}
		for _, name := range tc.names {
			if !strings.Contains(p.log(), name) {
				t.Errorf("%v: the message does not name %s:\n%s", tc.flags, name, p.log())
			}
		}
		if strings.Contains(p.log(), "serving the filesystem tools") {
			t.Errorf("%v: fsbroker served:\n%s", tc.flags, p.log())
		}
	}
	for _, file := range []string{filepath.Join(root, "token"), filepath.Join(dir, "state", "http-token")} {
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("%s was written (%v)", file, err)
		}
	}
}

// acceptEveryField answers an elicitation as a client that approves
// everything: accept, with each boolean field of the form true.
func acceptEveryField(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if err := remarshal(req.Params.RequestedSchema, &schema); err != nil {
		return nil, err
	}
	content := map[string]any{}
	for name, field := range schema.Properties {
		if field.Type == "boolean" {
			content[name] = true
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// countAsked is the elicitation handler answer that counts its questions in
// asked.
func countAsked(asked *atomic.Int32, answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return answer(ctx, req)
	}
}

// TestServeHTTPRefusesForeignOriginAndHost: DNS rebinding. A request from a
// web page of another origin (or the opaque origin "null"), or one whose
// Host header names another machine, gets 403 and opens no session; a page
// served from loopback is let in.
func TestServeHTTPRefusesForeignOriginAndHost(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	port := b.url[strings.LastIndex(b.url, ":")+1 : strings.LastIndex(b.url, "/")]
	for _, headers := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "https://evil.example:" + port},
		{"Origin", "null"},
		{"Origin", "http://127.0.0.1.evil.example"},
		{"Host", "evil.example:" + port},
		{"Host", "rebind.evil.example"},
	} {
		r := b.raw(t, http.MethodPost, "", initializeBody("rebinding-page"), headers...)
		if r.status != http.StatusForbidden || r.session != "" {
			t.Errorf("%s %s: %d, session id %q; want 403 and no session", headers[0], headers[1], r.status, r.session)
		}
	}
	if starts := trailRecordsOf(t, b.trail, audit.KindSessionStart); len(starts) > 0 {
		t.Errorf("refused requests started sessions: %+v", starts)
	}
	if s := b.rawSession(t, "local-page"); s == "" { // rawSession fails the test itself
		t.Fatal("no session")
	}
	if r := b.raw(t, http.MethodPost, "", initializeBody("local-page"), "Origin", "http://localhost:5173", "Host", "localhost:"+port); r.status != http.StatusOK {
		t.Errorf("a loopback origin and host: %d %s, want 200", r.status, r.body)
	}
}

// TestServeHTTPRequiresItsSession: after initialize, a request without the
// session id gets 400; with an id that is not the session's (one character
// changed, or made up) 404; with an MCP-Protocol-Version the session did not
// negotiate 400; GET and DELETE alike. None touches anything; the same
// write with the session's id and version then works.
func TestServeHTTPRequiresItsSession(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	session := b.rawSession(t, "raw-host")
	target := filepath.Join(b.rw, "pwned.txt")
	write := writeCall(target, "x")
	altered := session[:len(session)-1] + "A" // the session's id, one character changed
	if strings.HasSuffix(session, "A") {
		altered = session[:len(session)-1] + "B"
	}
	for _, tc := range []struct {
		name, method, session, body string
		headers                     []string
		status                      int
	}{
		{"no session id", http.MethodPost, "", write, nil, http.StatusBadRequest},
		{"one character changed", http.MethodPost, altered, write, nil, http.StatusNotFound},
		{"made up", http.MethodPost, "AAAAAAAAAAAAAAAAAAAAAAAAAA", write, nil, http.StatusNotFound},
		{"unsupported version", http.MethodPost, session, write, []string{"Mcp-Protocol-Version", "1999-01-01"}, http.StatusBadRequest},
		{"version not negotiated", http.MethodPost, session, write, []string{"Mcp-Protocol-Version", "2025-06-18"}, http.StatusBadRequest},
		{"GET without session id", http.MethodGet, "", "", []string{"Accept", "text/event-stream"}, http.StatusBadRequest},
		{"GET with another id", http.MethodGet, altered, "", []string{"Accept", "text/event-stream"}, http.StatusNotFound},
		{"DELETE with another id", http.MethodDelete, altered, "", nil, http.StatusNotFound},
	} {
		if r := b.raw(t, tc.method, tc.session, tc.body, tc.headers...); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	b.requireUntouched(t, target)
	r := b.raw(t, http.MethodPost, session, write, "Mcp-Protocol-Version", "2025-11-25")
	if r.status != http.StatusOK || strings.Contains(r.body, `"isError":true`) {
		t.Fatalf("the session's own write: %d %s", r.status, r.body)
	}
	if got := readFile(t, target); got != "x" {
		t.Errorf("the session's write left %q", got)
	}
}

// TestServeHTTPRefusesOversizedBody: a POST over --max-message-bytes gets 413
// and touches nothing; the session goes on.
func TestServeHTTPRefusesOversizedBody(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t, "--max-message-bytes", "4096")
	session := b.rawSession(t, "raw-host")
	target := filepath.Join(b.rw, "big.txt")
	r := b.raw(t, http.MethodPost, session, writeCall(target, strings.Repeat("x", 8192)))
	if r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("an 8 KiB message: %d %s, want 413", r.status, r.body)
	}
	b.requireUntouched(t, target)
	if r := b.raw(t, http.MethodPost, session, writeCall(target, "small")); r.status != http.StatusOK || strings.Contains(r.body, `"isError":true`) {
		t.Errorf("a small write after it: %d %s", r.status, r.body)
	}
}

// TestServeHTTPIsolatesSessions: two hosts' sessions have their own ids
// and trail sessions (under the token's identity, both); one's id does not
// reach the other, and ending one leaves the other serving.
func TestServeHTTPIsolatesSessions(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	a, c := b.connect(t, "host-a"), b.connect(t, "host-c")
	if a.ID() == "" || a.ID() == c.ID() {
		t.Fatalf("session ids %q and %q", a.ID(), c.ID())
	}
	for cs, name := range map[*mcp.ClientSession]string{a: "a.txt", c: "c.txt"} {
		if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": filepath.Join(b.rw, name), "content": name}); isErr {
			t.Fatalf("write %s: %s", name, text)
		}
	}
	recA, recC := b.recordsNaming(t, "a.txt"), b.recordsNaming(t, "c.txt")
	if len(recA) == 0 || len(recC) == 0 {
		t.Fatalf("decision records: %d for a.txt, %d for c.txt", len(recA), len(recC))
	}
	if recA[0].Server != b.id || recC[0].Server != b.id || recA[0].SessionID == recC[0].SessionID {
		t.Errorf("a.txt by %s in session %s, c.txt by %s in session %s: want %s in each host's own session", recA[0].Server,
			recA[0].SessionID, recC[0].Server, recC[0].SessionID, b.id)
	}
	// A tools/call with host-c's id is in host-c's session, whatever it says.
	r := b.raw(t, http.MethodPost, c.ID(), writeCall(filepath.Join(b.rw, "via-c.txt"), "c"), "Mcp-Protocol-Version", "2025-11-25")
	if r.status != http.StatusOK {
		t.Fatalf("write with host-c's id: %d %s", r.status, r.body)
	}
	if recs := b.recordsNaming(t, "via-c.txt"); len(recs) == 0 || recs[0].SessionID != recC[0].SessionID {
		t.Errorf("the write with host-c's id is recorded as %+v, want host-c's session", recs)
	}
	idA := a.ID()
	if err := a.Close(); err != nil {
		t.Fatalf("close host-a: %v", err)
	}
	if r := b.raw(t, http.MethodPost, idA, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("host-a's id after its DELETE: %d, want 404", r.status)
	}
	if text, isErr := callTool(t, c, "read_text_file", map[string]any{"path": filepath.Join(b.ro, "a.txt")}); isErr || text != "alpha\n" {
		t.Errorf("host-c after host-a ended: %q (isError %v)", text, isErr)
	}
}

// TestServeHTTPBoundsSessions: with --http-max-sessions 1, a second
// initialize gets 503 and no session; once the first ends, one opens again.
func TestServeHTTPBoundsSessions(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t, "--http-max-sessions", "1")
	first := b.connect(t, "first")
	if r := b.raw(t, http.MethodPost, "", initializeBody("second")); r.status != http.StatusServiceUnavailable || r.session != "" {
		t.Errorf("a second session: %d, session id %q; want 503 and none", r.status, r.session)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	b.awaitSession(t, "second")
}

// awaitSession sends initialize as name until a session opens, within
// waitLimit, and returns its id.
func (b *httpBroker) awaitSession(t *testing.T, name string) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		r := b.raw(t, http.MethodPost, "", initializeBody(name))
		if r.status == http.StatusOK && r.session != "" {
			return r.session
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session for %s within %s: %d %s", name, waitLimit, r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeHTTPEndsIdleSessions: a session with nothing in progress and no
// event stream ends after --http-idle-timeout: its id gets 404 and its end is
// in the trail.
func TestServeHTTPEndsIdleSessions(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t, "--http-idle-timeout", "300ms")
	session := b.rawSession(t, "idle-host")
	b.waitLog(regexp.MustCompile(`ended an idle session`))
	if r := b.raw(t, http.MethodPost, session, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); r.status != http.StatusNotFound {
		t.Errorf("the idle session's id: %d, want 404", r.status)
	}
	deadline := time.Now().Add(waitLimit)
	for len(trailRecordsOf(t, b.trail, audit.KindSessionEnd)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no session_end in the trail")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeHTTPShutdownEndsSessions: SIGTERM with two sessions open (each
// with its event stream) ends both, recorded in the trail, and exits 0.
func TestServeHTTPShutdownEndsSessions(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	for _, name := range []string{"host-1", "host-2"} {
		cs := b.connect(t, name)
		if _, isErr := callTool(t, cs, "list_allowed_directories", map[string]any{}); isErr {
			t.Fatalf("%s: list_allowed_directories refused", name)
		}
	}
	sigterm(t, b.proc)
	starts, ends := trailRecordsOf(t, b.trail, audit.KindSessionStart), trailRecordsOf(t, b.trail, audit.KindSessionEnd)
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("%d session_start and %d session_end records, want 2 and 2", len(starts), len(ends))
	}
	ended := map[string]bool{}
	for _, r := range ends {
		ended[r.SessionID+" "+r.Server] = true
	}
	for _, r := range starts {
		if !ended[r.SessionID+" "+r.Server] {
			t.Errorf("session %s of %s has no session_end", r.SessionID, r.Server)
		}
	}
}
