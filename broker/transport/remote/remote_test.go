// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package remote

// These tests run the Stream against real HTTP servers (net/http/httptest)
// whose handlers play the MCP server's side of Streamable HTTP by hand, and,
// in TestRemoteSessionWithGoSDKServer, against the official Go SDK's server.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

const waitLimit = 10 * time.Second

const initRequest = `{"jsonrpc":"2.0","id":"fsbroker-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fsbroker","version":"test"}}}`

const initResult = `{"jsonrpc":"2.0","id":"fsbroker-1","result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`

// rpc is the part of a message the tests look at.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, b []byte) rpc {
	t.Helper()
	var m rpc
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("message %q: %v", b, err)
	}
	return m
}

// seen is one request as the server got it.
type seen struct {
	method string
	header http.Header
	body   string
}

// peer is an MCP server's side of Streamable HTTP, by hand. Each test sets
// the behaviour it needs; by default it answers initialize with JSON and a
// session id, accepts every other POST with 202, and holds a GET stream open
// on which the test pushes events.
type peer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	log    []seen
	posted chan rpc    // messages POSTed after initialize
	push   chan string // raw SSE text for the GET stream
	gets   chan http.Header

	onInit func(w http.ResponseWriter)                              // answers initialize (default: JSON with session "s-1")
	onGet  func(w http.ResponseWriter, r *http.Request, n int) bool // false: default behaviour
	onPost func(w http.ResponseWriter, m rpc) bool                  // false: default behaviour
	nGet   int
}

func newPeer(t *testing.T) *peer {
	p := &peer{t: t, posted: make(chan rpc, 64), push: make(chan string, 64), gets: make(chan http.Header, 64)}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	return p
}

func (p *peer) start() string {
	p.srv.Start()
	p.t.Cleanup(p.srv.Close)
	return p.srv.URL + "/mcp"
}

func (p *peer) requests() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.log...)
}

func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.log = append(p.log, seen{method: r.Method, header: r.Header.Clone(), body: string(body)})
	p.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var m rpc
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		if p.onPost != nil && p.onPost(w, m) {
			return
		}
		if m.Method == "initialize" {
			if p.onInit != nil {
				p.onInit(w)
				return
			}
			w.Header().Set("Mcp-Session-Id", "s-1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, initResult)
			return
		}
		p.posted <- m
		w.WriteHeader(http.StatusAccepted)
	case http.MethodGet:
		p.mu.Lock()
		p.nGet++
		n := p.nGet
		p.mu.Unlock()
		p.gets <- r.Header.Clone()
		if p.onGet != nil && p.onGet(w, r, n) {
			return
		}
		p.stream(w, r)
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// stream holds a GET stream open, writing what the test pushes.
func (p *peer) stream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-p.push:
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

func sseEvent(id, data string) string {
	s := ""
	if id != "" {
		s = "id: " + id + "\n"
	}
	return s + "data: " + data + "\n\n"
}

// read returns the next message the Stream reads, failing after waitLimit.
func read(t *testing.T, s *Stream) []byte {
	t.Helper()
	type result struct {
		msg []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		msg, err := s.Read()
		ch <- result{append([]byte(nil), msg...), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Read: %v", r.err)
		}
		return r.msg
	case <-time.After(waitLimit):
		t.Fatalf("nothing to Read within %s", waitLimit)
		return nil
	}
}

func readErr(t *testing.T, s *Stream) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() {
		_, err := s.Read()
		ch <- err
	}()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("Read did not return within %s", waitLimit)
		return nil
	}
}

func awaitPosted(t *testing.T, p *peer) rpc {
	t.Helper()
	select {
	case m := <-p.posted:
		return m
	case <-time.After(waitLimit):
		t.Fatalf("nothing POSTed within %s", waitLimit)
		return rpc{}
	}
}

func awaitGet(t *testing.T, p *peer) http.Header {
	t.Helper()
	select {
	case h := <-p.gets:
		return h
	case <-time.After(waitLimit):
		t.Fatalf("no GET within %s", waitLimit)
		return nil
	}
}

func newStream(t *testing.T, url string, opts ...Option) *Stream {
	t.Helper()
	s, err := New(url, append([]Option{WithRetries(3, 10*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// handshake sends initialize and notifications/initialized, and returns the
// initialize reply.
func handshake(t *testing.T, s *Stream, p *peer) rpc {
	t.Helper()
	if err := s.Write([]byte(initRequest)); err != nil {
		t.Fatalf("Write initialize: %v", err)
	}
	reply := decode(t, read(t, s))
	if err := s.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		t.Fatalf("Write initialized: %v", err)
	}
	if m := awaitPosted(t, p); m.Method != "notifications/initialized" {
		t.Fatalf("posted %+v, want notifications/initialized", m)
	}
	return reply
}

// The whole exchange, with the initialize reply as JSON and as an event
// stream: the headers go with every request after initialize, the server's
// request comes on the GET stream (opened before notifications/initialized
// leaves), the reply is POSTed back, and Close ends the session with DELETE.
func TestRemoteStreamExchange(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			p := newPeer(t)
			if mode == "sse" {
				p.onInit = func(w http.ResponseWriter) {
					w.Header().Set("Mcp-Session-Id", "s-1")
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, "event: prime\nid: i0\ndata: \n\n")
					_, _ = io.WriteString(w, sseEvent("i1", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`))
					_, _ = io.WriteString(w, sseEvent("i2", initResult))
				}
			}
			s := newStream(t, p.start(), WithHeaders(http.Header{"Authorization": {"Bearer sekrit"}, "X-Extra": {"1"}}))
			if err := s.Write([]byte(initRequest)); err != nil {
				t.Fatal(err)
			}
			if mode == "sse" {
				if m := decode(t, read(t, s)); m.Method != "notifications/message" {
					t.Fatalf("first message %+v, want the notification sent before the reply", m)
				}
			}
			if m := decode(t, read(t, s)); string(m.ID) != `"fsbroker-1"` || m.Result == nil {
				t.Fatalf("initialize reply %+v", m)
			}
			if s.SessionID() != "s-1" || s.ProtocolVersion() != "2025-11-25" {
				t.Fatalf("session %q version %q", s.SessionID(), s.ProtocolVersion())
			}
			awaitGet(t, p)
			if err := s.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
				t.Fatal(err)
			}
			awaitPosted(t, p)

			p.push <- sseEvent("", `{"jsonrpc":"2.0","id":7,"method":"files/read","params":{"path":"a/b"}}`)
			if m := decode(t, read(t, s)); m.Method != "files/read" || string(m.ID) != "7" {
				t.Fatalf("server request %+v", m)
			}
			if err := s.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":"x"}}`)); err != nil {
				t.Fatal(err)
			}
			if m := awaitPosted(t, p); string(m.ID) != "7" || string(m.Result) != `{"content":"x"}` {
				t.Fatalf("reply posted %+v", m)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Read(); !errors.Is(err, io.EOF) {
				t.Errorf("Read after Close: %v, want EOF", err)
			}
			if err := s.Write([]byte(`{"jsonrpc":"2.0","method":"x"}`)); !errors.Is(err, ErrClosed) {
				t.Errorf("Write after Close: %v, want ErrClosed", err)
			}

			reqs := p.requests()
			var methods []string
			for i, r := range reqs {
				methods = append(methods, r.method)
				if r.header.Get("Authorization") != "Bearer sekrit" || r.header.Get("X-Extra") != "1" {
					t.Errorf("request %d (%s) lacks the configured headers", i, r.method)
				}
				if i == 0 {
					if r.header.Get("Mcp-Session-Id") != "" || r.header.Get("Mcp-Protocol-Version") != "" {
						t.Errorf("initialize carries session headers: %v", r.header)
					}
					if !strings.Contains(r.header.Get("Accept"), "application/json") ||
						!strings.Contains(r.header.Get("Accept"), "text/event-stream") {
						t.Errorf("initialize Accept = %q", r.header.Get("Accept"))
					}
					continue
				}
				if r.header.Get("Mcp-Session-Id") != "s-1" || r.header.Get("Mcp-Protocol-Version") != "2025-11-25" {
					t.Errorf("request %d (%s): session %q version %q", i, r.method,
						r.header.Get("Mcp-Session-Id"), r.header.Get("Mcp-Protocol-Version"))
				}
			}
			if got := strings.Join(methods, " "); got != "POST GET POST POST DELETE" {
				t.Errorf("requests %s, want POST GET POST POST DELETE", got)
			}
		})
	}
}

// Over TLS with HTTP/2 (one connection carries the event stream and the
// POSTs), trusting the server's CA only.
func TestRemoteStreamHTTP2(t *testing.T) {
	p := newPeer(t)
	var mu sync.Mutex
	protos := map[string]int{}
	inner := p.srv.Config.Handler
	p.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.Proto]++
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(p.srv.Certificate())
	s := newStream(t, p.srv.URL+"/mcp", WithRootCAs(pool))
	handshake(t, s, p)
	p.push <- sseEvent("", `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	if m := decode(t, read(t, s)); m.Method != "roots/list" {
		t.Fatalf("got %+v", m)
	}
	if err := s.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`)); err != nil {
		t.Fatal(err)
	}
	awaitPosted(t, p)
	mu.Lock()
	defer mu.Unlock()
	if len(protos) != 1 || protos["HTTP/2.0"] == 0 {
		t.Errorf("protocols used: %v, want HTTP/2.0 only", protos)
	}
}

// A GET stream that breaks is resumed with Last-Event-ID after the server's
// retry time, and what the server sends on the new stream arrives.
func TestRemoteStreamResumesEventStream(t *testing.T) {
	p := newPeer(t)
	p.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n > 1 {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "retry: 20\n\n"+sseEvent("e1", `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		return true // the handler returns: the stream is cut
	}
	s := newStream(t, p.start())
	handshake(t, s, p)
	if h := awaitGet(t, p); h.Get("Last-Event-Id") != "" {
		t.Errorf("first GET has Last-Event-ID %q", h.Get("Last-Event-Id"))
	}
	if m := decode(t, read(t, s)); m.Method != "ping" {
		t.Fatalf("got %+v, want the ping from the first stream", m)
	}
	h := awaitGet(t, p)
	if h.Get("Last-Event-Id") != "e1" || h.Get("Mcp-Session-Id") != "s-1" {
		t.Fatalf("second GET: Last-Event-ID %q, session %q; want e1, s-1", h.Get("Last-Event-Id"), h.Get("Mcp-Session-Id"))
	}
	p.push <- sseEvent("e2", `{"jsonrpc":"2.0","id":2,"method":"files/read","params":{"path":"a"}}`)
	if m := decode(t, read(t, s)); m.Method != "files/read" {
		t.Fatalf("got %+v after resumption", m)
	}
}

// A POST's event stream cut before the reply is resumed with GET and
// Last-Event-ID; one without event ids cannot be, and the request gets an
// error reply instead of none.
func TestRemoteStreamResumesReply(t *testing.T) {
	t.Run("with event id", func(t *testing.T) {
		p := newPeer(t)
		p.onInit = func(w http.ResponseWriter) {
			w.Header().Set("Mcp-Session-Id", "s-1")
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: r0\nretry: 10\ndata:\n\n")
		}
		p.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
			if r.Header.Get("Last-Event-Id") != "r0" {
				return false
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, sseEvent("r1", initResult))
			return true
		}
		s := newStream(t, p.start())
		if err := s.Write([]byte(initRequest)); err != nil {
			t.Fatal(err)
		}
		if m := decode(t, read(t, s)); string(m.ID) != `"fsbroker-1"` || m.Result == nil {
			t.Fatalf("reply %+v", m)
		}
	})
	t.Run("without", func(t *testing.T) {
		p := newPeer(t)
		p.onInit = func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, ": nothing\n\n")
		}
		s := newStream(t, p.start())
		if err := s.Write([]byte(initRequest)); err != nil {
			t.Fatal(err)
		}
		m := decode(t, read(t, s))
		if string(m.ID) != `"fsbroker-1"` || m.Error == nil || m.Error.Code != jsonrpc.CodeInternalError {
			t.Fatalf("reply %+v, want an internal error for the request", m)
		}
	})
}

// A request refused with an HTTP error and a JSON-RPC error body gets that
// error as its reply; without such a body, Write fails.
func TestRemoteStreamHTTPErrors(t *testing.T) {
	t.Run("JSON-RPC error body", func(t *testing.T) {
		p := newPeer(t)
		p.onInit = func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"unsupported protocol version"}}`)
		}
		s := newStream(t, p.start())
		if err := s.Write([]byte(initRequest)); err != nil {
			t.Fatal(err)
		}
		m := decode(t, read(t, s))
		if string(m.ID) != `"fsbroker-1"` || m.Error == nil || m.Error.Code != -32602 {
			t.Fatalf("reply %+v", m)
		}
	})
	t.Run("unauthorized", func(t *testing.T) {
		p := newPeer(t)
		p.onInit = func(w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) }
		s := newStream(t, p.start())
		err := s.Write([]byte(initRequest))
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("Write: %v, want a 401 error", err)
		}
	})
	t.Run("transient then fine", func(t *testing.T) {
		p := newPeer(t)
		var mu sync.Mutex
		n := 0
		p.onPost = func(w http.ResponseWriter, m rpc) bool {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
			return false
		}
		s := newStream(t, p.start())
		if err := s.Write([]byte(initRequest)); err != nil {
			t.Fatal(err)
		}
		if m := decode(t, read(t, s)); m.Result == nil {
			t.Fatalf("reply %+v", m)
		}
	})
	t.Run("refused reply is dropped", func(t *testing.T) {
		p := newPeer(t)
		p.onPost = func(w http.ResponseWriter, m rpc) bool {
			if m.Method == "" {
				http.Error(w, "no", http.StatusBadRequest)
				return true
			}
			return false
		}
		s := newStream(t, p.start())
		handshake(t, s, p)
		if err := s.Write([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`)); err != nil {
			t.Fatalf("Write of a refused reply: %v, want nil (logged, the session goes on)", err)
		}
	})
}

// A 404 for the session ends the stream with ErrSessionExpired, and Close
// then sends no DELETE.
func TestRemoteStreamSessionExpired(t *testing.T) {
	p := newPeer(t)
	p.onPost = func(w http.ResponseWriter, m rpc) bool {
		if m.Method == "ping" {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	}
	s := newStream(t, p.start())
	handshake(t, s, p)
	if err := s.Write([]byte(`{"jsonrpc":"2.0","id":"fsbroker-2","method":"ping"}`)); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Write: %v, want ErrSessionExpired", err)
	}
	if err := readErr(t, s); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Read: %v, want ErrSessionExpired", err)
	}
	_ = s.Close()
	for _, r := range p.requests() {
		if r.method == http.MethodDelete {
			t.Error("DELETE sent for a session the server no longer knows")
		}
	}
}

// A server without a GET stream (405) is served over POSTs alone.
func TestRemoteStreamWithoutEventStream(t *testing.T) {
	p := newPeer(t)
	p.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return true
	}
	s := newStream(t, p.start())
	handshake(t, s, p)
	if err := s.Write([]byte(`{"jsonrpc":"2.0","id":"fsbroker-2","method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	awaitPosted(t, p)
	time.Sleep(50 * time.Millisecond) // no retries of the GET
	if n := len(p.gets); n != 1 {
		t.Errorf("%d GETs, want 1", n)
	}
}

// An oversized event is reported as ErrMessageTooLarge and the stream goes
// on.
func TestRemoteStreamOversizedMessage(t *testing.T) {
	p := newPeer(t)
	s := newStream(t, p.start(), WithMaxMessageBytes(1024))
	handshake(t, s, p)
	p.push <- sseEvent("", `{"jsonrpc":"2.0","id":1,"method":"files/write","params":{"content":"`+strings.Repeat("x", 2000)+`"}}`)
	p.push <- sseEvent("", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if err := readErr(t, s); !errors.Is(err, jsonrpc.ErrMessageTooLarge) {
		t.Fatalf("Read: %v, want ErrMessageTooLarge", err)
	}
	if m := decode(t, read(t, s)); m.Method != "ping" {
		t.Fatalf("got %+v after the oversized message", m)
	}
}

// A server that went away: the event stream cannot be reopened, and Read
// reports it once the retries are spent.
func TestRemoteStreamServerGone(t *testing.T) {
	p := newPeer(t)
	p.onGet = func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		go p.srv.Close()
		return true
	}
	s := newStream(t, p.start())
	if err := s.Write([]byte(initRequest)); err != nil {
		t.Fatal(err)
	}
	read(t, s)
	err := readErr(t, s)
	if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "event stream") {
		t.Fatalf("Read: %v, want the event stream's failure", err)
	}
}

// Nothing secret reaches errors: not the URL's query or user info.
func TestRemoteStreamErrorsHideSecrets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s := newStream(t, "http://user:pw-secret@"+addr+"/mcp?token=q-secret", WithRetries(0, time.Millisecond),
		WithHeaders(http.Header{"Authorization": {"Bearer h-secret"}}))
	err = s.Write([]byte(initRequest))
	if err == nil {
		t.Fatal("Write to a closed port succeeded")
	}
	for _, secret := range []string{"pw-secret", "q-secret", "h-secret"} {
		if strings.Contains(err.Error(), secret) || strings.Contains(s.URL(), secret) {
			t.Errorf("%q leaks into %q or %q", secret, err, s.URL())
		}
	}
}

func TestRemoteNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		url    string
		header http.Header
		want   string
	}{
		{"ftp://x/mcp", nil, "scheme"},
		{"http:///mcp", nil, "no host"},
		{"http://x/mcp", http.Header{"Mcp-Session-Id": {"a"}}, "set by the transport"},
		{"http://x/mcp", http.Header{"Content-Type": {"a"}}, "set by the transport"},
		{"http://x/mcp", http.Header{"Bad Name": {"a"}}, "not a valid header name"},
		{"http://x/mcp", http.Header{"X-A": {"a\r\nX-B: b"}}, "control character"},
	} {
		_, err := New(tc.url, WithHeaders(tc.header))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %v): %v, want %q", tc.url, tc.header, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\r\n") {
			t.Errorf("error shows the header value: %q", err)
		}
	}
}

// The broker's own session over a Stream to the official Go SDK's server
// behind its Streamable HTTP handler: the server's ListRoots, called as soon
// as it is told the session is initialized, gets the broker's roots.
func TestRemoteSessionWithGoSDKServer(t *testing.T) {
	dir := t.TempDir()
	set, err := roots.New([]roots.Spec{{Path: dir, Mount: "project"}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	server := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			go func() {
				res, err := req.Session.ListRoots(context.Background(), &mcp.ListRootsParams{})
				if err != nil {
					got <- "error: " + err.Error()
					return
				}
				var uris []string
				for _, r := range res.Roots {
					uris = append(uris, r.URI)
				}
				got <- strings.Join(uris, ",")
			}()
		},
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)

	s := newStream(t, ts.URL)
	policy, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := broker.NewSession(s, broker.WithRoots(func() *roots.Set { return set }), broker.WithTransport("http"),
		broker.WithDecider(engine.Decider{Engine: policy}), broker.WithoutAuditTrail())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()
	real, _ := filepath.EvalSymlinks(dir)
	select {
	case uris := <-got:
		if uris != "file://"+real {
			t.Errorf("the server's roots: %q, want file://%s", uris, real)
		}
	case err := <-done:
		t.Fatalf("session ended early: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("the server's ListRoots did not return")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if s.SessionID() == "" {
		t.Error("no session id from the SDK server")
	}
}
