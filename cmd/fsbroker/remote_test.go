// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

// The tests of connect --url: the broker serves remote MCP servers over
// Streamable HTTP. The peers are real HTTP servers: the example server (the
// official Go SDK behind its StreamableHTTPHandler) as its own process, and
// a raw Streamable HTTP server written here with net/http that sends
// files/* requests on its GET stream and reads the broker's answers from
// the POSTs. The broker relays nothing of a remote server's stderr, so the
// example server's own stderr is read.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// startExampleHTTP starts the example server in -http mode and returns its
// endpoint and its stderr.
func startExampleHTTP(t *testing.T) (string, *testlog.Lines) {
	t.Helper()
	cmd := exec.Command(serverBin, "-http", "127.0.0.1:0")
	out := &testlog.Lines{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("example server stderr:\n%s", out.String())
		}
	})
	return waitText(t, out, regexp.MustCompile(`listening on (http://\S+)`))[1], out
}

// waitText waits until buf matches re and returns the submatches.
func waitText(t *testing.T, buf *testlog.Lines, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		if m := re.FindStringSubmatch(buf.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output matching %q within %s; got:\n%s", re, waitLimit, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRemoteBroker runs fsbroker connect with args and extra environment
// variables, and stops it with SIGTERM at the end of the test if the test
// did not (closing its stdin does not end a remote session).
func startRemoteBroker(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := startProcEnv(t, exec.Command(brokerBin, withConsent(t, "", append([]string{"connect"}, args...))...), env...)
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	return p
}

// sigterm ends the broker and checks that it exits 0.
func sigterm(t *testing.T, p *proc) {
	t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
}

// trailTransports returns the transport of every record in the audit
// segments of dir that names one.
func trailTransports(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r audit.Record
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Transport != "" {
				out = append(out, r.Transport)
			}
		}
	}
	return out
}

// The official Go SDK's server behind its Streamable HTTP handler, reached
// with --url: its ListRoots gets the broker's roots once initialized, and
// again after a config edit (its roots/list_changed handler fires); the
// audit trail names the transport "http"; SIGTERM ends the session cleanly.
func TestRemoteURLInteropWithGoSDKServer(t *testing.T) {
	t.Parallel()
	url, serverErr := startExampleHTTP(t)
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "a"))
	b := realDir(t, filepath.Join(dir, "b"))
	trail := filepath.Join(dir, "audit")
	cfg := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, cfg, configOf(a))

	p := startRemoteBroker(t, nil, "--config", cfg, "--audit", trail, "--url", url, "--log-level", "debug")
	waitText(t, serverErr, regexp.MustCompile(regexp.QuoteMeta("initialized: 1 roots: file://"+a+" (a)")))

	replaceFile(t, cfg, configOf(a, b))
	changed := waitText(t, serverErr, regexp.MustCompile(`roots changed: 2 roots: ([^\n]*)`))[1]
	for _, want := range []string{"file://" + a + " (a)", "file://" + b + " (b)"} {
		if !strings.Contains(changed, want) {
			t.Errorf("the server's roots after the edit are %q, want them to include %q", changed, want)
		}
	}
	sigterm(t, p)
	if !strings.Contains(p.log(), "session ended") {
		t.Error(`log has no "session ended"`)
	}
	if strings.Contains(serverErr.String(), "roots/list failed") {
		t.Error("the server's roots/list failed")
	}
	transports := trailTransports(t, trail)
	if len(transports) == 0 {
		t.Fatal("no audit record names a transport")
	}
	for _, tr := range transports {
		if tr != "http" {
			t.Errorf("audit record with transport %q, want http", tr)
		}
	}
}

// seenRequest is one HTTP request as the raw server got it.
type seenRequest struct {
	method string
	header http.Header
}

// rawServer is a Streamable HTTP MCP server by hand: it answers initialize
// (as JSON or as an event stream) with a session id, accepts every other POST
// with 202 and hands the message to the test, and holds a GET stream open on
// which the test sends the server's requests.
type rawServer struct {
	t         *testing.T
	sse       bool // answer initialize with an event stream
	onGet     func(w http.ResponseWriter, r *http.Request, n int) bool
	posted    chan message  // messages the broker POSTed after initialize
	push      chan string   // SSE text for the GET stream
	getOpened chan struct{} // a GET stream was opened

	mu   sync.Mutex
	seen []seenRequest
	gets int
}

func newRawServer(t *testing.T) *rawServer {
	return &rawServer{t: t, posted: make(chan message, 64), push: make(chan string, 64), getOpened: make(chan struct{}, 64)}
}

const rawSessionID = "sess-42"

func (s *rawServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, seenRequest{r.Method, r.Header.Clone()})
	s.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		if m.Method != "initialize" {
			s.posted <- m
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"serverInfo": map[string]any{"name": "raw-http", "version": "1"}}})
		w.Header().Set("Mcp-Session-Id", rawSessionID)
		if s.sse {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: init-0\ndata:\n\nid: init-1\ndata: %s\n\n", result)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(result)
	case http.MethodGet:
		s.mu.Lock()
		s.gets++
		n := s.gets
		s.mu.Unlock()
		s.getOpened <- struct{}{}
		if s.onGet != nil && s.onGet(w, r, n) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": open\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-s.push:
				_, _ = io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
		}
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *rawServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// awaitPosted returns the next message the broker POSTed.
func (s *rawServer) awaitPosted(what string) message {
	s.t.Helper()
	select {
	case m := <-s.posted:
		return m
	case <-time.After(waitLimit):
		s.t.Fatalf("no %s POSTed within %s", what, waitLimit)
		return message{}
	}
}

// awaitInitialized waits for notifications/initialized.
func (s *rawServer) awaitInitialized() {
	s.t.Helper()
	if m := s.awaitPosted("notifications/initialized"); !m.IsNotification("notifications/initialized") {
		s.t.Fatalf("first POST after initialize is %s, want notifications/initialized", m.Raw)
	}
}

// request sends a request on the GET stream and returns the broker's reply.
func (s *rawServer) request(eventID string, id int, method string, params any) message {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	s.push <- sseText(eventID, string(b))
	m := s.awaitPosted(fmt.Sprintf("reply to %s %d", method, id))
	if !m.IsReplyTo(fmt.Sprint(id)) {
		s.t.Fatalf("POSTed %+v, want the reply to %s %d", m, method, id)
	}
	return m
}

func sseText(id, data string) string {
	if id != "" {
		return "id: " + id + "\ndata: " + data + "\n\n"
	}
	return "data: " + data + "\n\n"
}

// readContent checks a files/read reply and returns its content.
func readContent(t *testing.T, m message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("files/read failed: %+v", m.Error)
	}
	var res struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res.Content
}

// files/* over Streamable HTTP: a raw server sends files/read on its GET
// stream and reads the broker's answers from the POSTs; every request after
// initialize carries the session id, the protocol version and the configured
// Authorization header (from the config file with an environment variable,
// or from --header), which never reaches the broker's log; SIGTERM ends the
// session with DELETE.
func TestRemoteURLFilesAndHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		sse        bool
		headerFlag bool
	}{
		{"JSON reply, header from the config", false, false},
		{"SSE reply, header from --header", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t)
			srv.sse = tc.sse
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			dir := t.TempDir()
			a := realDir(t, filepath.Join(dir, "a"))
			writeFile(t, filepath.Join(a, "hello.txt"), "hello over http\n")
			token := "tok-" + rand.Text()
			cfg := filepath.Join(dir, "fsbroker.yaml")
			var env, args []string
			if tc.headerFlag {
				writeFile(t, cfg, configOf(a))
				args = []string{"--url", ts.URL + "/mcp", "--header", "Authorization: Bearer " + token}
			} else {
				writeFile(t, cfg, configOf(a)+fmt.Sprintf("remote:\n  url: %s/mcp?key=q-secret\n  headers:\n"+
					"    - name: Authorization\n      value: Bearer ${FSB_TEST_TOKEN}\n", ts.URL))
				env = []string{"FSB_TEST_TOKEN=" + token}
			}
			p := startRemoteBroker(t, env, append([]string{"--config", cfg, "--log-level", "trace"}, args...)...)
			srv.awaitInitialized()

			if got := readContent(t, srv.request("", 1, "files/read", map[string]any{"path": "a/hello.txt"})); got != "hello over http\n" {
				t.Errorf("files/read content %q", got)
			}
			denied := srv.request("", 2, "files/read", map[string]any{"path": "a/../../etc/passwd"})
			if denied.Error == nil || dataOf(t, &denied).Code != "PERMISSION_DENIED" {
				t.Errorf("files/read of an escape: %s, want PERMISSION_DENIED", denied.Raw)
			}
			sigterm(t, p)

			reqs := srv.requests()
			var methods []string
			for i, r := range reqs {
				methods = append(methods, r.method)
				if got := r.header.Get("Authorization"); got != "Bearer "+token {
					t.Errorf("request %d (%s): Authorization %q, want the configured one", i, r.method, got)
				}
				if i == 0 { // initialize
					continue
				}
				if sid, v := r.header.Get("Mcp-Session-Id"), r.header.Get("Mcp-Protocol-Version"); sid != rawSessionID || v != "2025-11-25" {
					t.Errorf("request %d (%s): Mcp-Session-Id %q, MCP-Protocol-Version %q; want %s, 2025-11-25",
						i, r.method, sid, v, rawSessionID)
				}
			}
			if got := strings.Join(methods, " "); got != "POST GET POST POST POST DELETE" {
				t.Errorf("requests: %s, want POST GET POST POST POST DELETE (initialize, the event stream, "+
					"initialized, two replies, the session's end)", got)
			}
			for _, secret := range []string{token, "q-secret"} {
				if strings.Contains(p.log(), secret) {
					t.Errorf("the log shows a secret (%s)", secret)
				}
			}
		})
	}
}

// TLS: a server with a certificate from its own CA is reached with --ca, and
// refused (exit 1, a certificate error in the log) without it.
func TestRemoteURLTLS(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below is expected
	ts.StartTLS()
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "a"))
	writeFile(t, filepath.Join(a, "f.txt"), "over TLS\n")
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})))

	p := startRemoteBroker(t, nil, "--root", a, "--url", ts.URL+"/mcp", "--ca", ca)
	srv.awaitInitialized()
	if got := readContent(t, srv.request("", 1, "files/read", map[string]any{"path": "a/f.txt"})); got != "over TLS\n" {
		t.Errorf("files/read content %q", got)
	}
	sigterm(t, p)

	q := startRemoteBroker(t, nil, "--root", a, "--url", ts.URL+"/mcp")
	if code := q.waitExit(); code != 1 {
		t.Errorf("without --ca: exit status %d, want 1", code)
	}
	if !strings.Contains(q.log(), "certificate") {
		t.Errorf("without --ca: the log does not name the certificate problem:\n%s", q.log())
	}
}

// A GET stream that drops is resumed with Last-Event-ID (after the
// server's retry time), and the server's requests on the new stream are
// answered.
func TestRemoteURLResumesEventStream(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t)
	lastEventID := make(chan string, 4)
	srv.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
		lastEventID <- r.Header.Get("Last-Event-Id")
		if n > 1 {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "retry: 50\n\n"+sseText("ev-1",
			`{"jsonrpc":"2.0","id":1,"method":"files/read","params":{"path":"a/f.txt"}}`))
		return true // the stream drops
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	a := realDir(t, filepath.Join(t.TempDir(), "a"))
	writeFile(t, filepath.Join(a, "f.txt"), "resumed\n")

	p := startRemoteBroker(t, nil, "--root", a, "--url", ts.URL+"/mcp")
	srv.awaitInitialized()
	first := srv.awaitPosted("reply to the request on the first stream")
	if !first.IsReplyTo("1") || readContent(t, first) != "resumed\n" {
		t.Fatalf("reply %s", first.Raw)
	}
	for i, want := range []string{"", "ev-1"} {
		select {
		case got := <-lastEventID:
			if got != want {
				t.Errorf("GET %d: Last-Event-ID %q, want %q", i+1, got, want)
			}
		case <-time.After(waitLimit):
			t.Fatalf("GET %d did not come", i+1)
		}
	}
	if got := readContent(t, srv.request("ev-2", 2, "files/read", map[string]any{"path": "a/f.txt"})); got != "resumed\n" {
		t.Errorf("files/read on the resumed stream: %q", got)
	}
	sigterm(t, p)
}

// A server that forgets the session (404) ends it: exit 1, with the reason
// in the log.
func TestRemoteURLSessionExpired(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t)
	srv.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
		http.Error(w, "unknown session", http.StatusNotFound)
		return true
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	p := startRemoteBroker(t, nil, "--root", t.TempDir(), "--url", ts.URL+"/mcp")
	if code := p.waitExit(); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(p.log(), "no longer knows this session") {
		t.Errorf("the log does not say the session is gone:\n%s", p.log())
	}
	for _, r := range srv.requests() {
		if r.method == http.MethodDelete {
			t.Error("DELETE sent for a session the server no longer knows")
		}
	}
}

// SIGTERM while a POST hangs (a server that never answers initialize):
// fsbroker still stops, after the shutdown timeout, with status 0.
func TestRemoteURLStopsWhileAPOSTHangs(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	posted := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posted <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	p := startRemoteBroker(t, nil, "--root", t.TempDir(), "--url", ts.URL+"/mcp", "--shutdown-timeout", "200ms")
	select {
	case <-posted:
	case <-time.After(waitLimit):
		t.Fatal("no POST of initialize")
	}
	sigterm(t, p)
}

// Usage and configuration errors exit 2 with a message naming the setting,
// and never show a header's value.
func TestRemoteURLConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "a"))
	config := func(name, body string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, configOf(a)+body)
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"url and command", []string{"--url", "http://127.0.0.1:1/mcp", "--", "true"}, "not both"},
		{"no server", []string{"--root", a}, "--url URL"},
		{"bad scheme", []string{"--url", "ftp://example.com/mcp"}, "--url: remote URL ftp://example.com/mcp: the scheme must be http or https"},
		{"config remote without url", []string{"--config", config("nourl.yaml", "remote:\n  ca: x.pem\n")}, "/remote/url: required property is missing"},
		{"config without remote", []string{"--config", config("none.yaml", "")}, "--url URL"},
		{"unset variable", []string{"--config", config("env.yaml",
			"remote:\n  url: http://127.0.0.1:1/mcp\n  headers:\n    - name: X-Key\n      value: ${FSB_SURELY_UNSET_VAR}\n")},
			"/remote/headers/0 (X-Key): the environment variable FSB_SURELY_UNSET_VAR is not set"},
		{"reserved header", []string{"--url", "http://127.0.0.1:1/mcp", "--header", "Mcp-Session-Id: hidden-value"},
			"--header: header Mcp-Session-Id: set by the transport itself"},
		{"malformed header", []string{"--url", "http://127.0.0.1:1/mcp", "--header", "hidden-value"},
			"--header number 1: want 'NAME: VALUE'"},
		{"missing CA", []string{"--url", "https://127.0.0.1:1/mcp", "--ca", filepath.Join(dir, "nope.pem")}, "--ca: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startRemoteBroker(t, nil, tc.args...)
			if code := p.waitExit(); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(p.log(), tc.want) {
				t.Errorf("log %q does not contain %q", p.log(), tc.want)
			}
			if strings.Contains(p.log(), "hidden-value") {
				t.Errorf("the log shows a header value: %q", p.log())
			}
			checkNoPoliciesLoaded(t, p.log())
		})
	}
}
