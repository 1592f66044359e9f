// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package exampleserver

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/fsbroker/fsbroker/broker/transport/streamable"
)

// Streamable HTTP headers (MCP 2025-11-25, transports).
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
)

// maxPostBytes bounds one POSTed message.
const maxPostBytes = 4 << 20

// httpTransport is the server side of MCP's Streamable HTTP transport for a
// single session, as an http.Handler for the MCP endpoint.
type httpTransport struct {
	msgs chan []byte   // the client's messages, for the peer
	out  chan []byte   // the server's requests and notifications, for the event stream
	done chan struct{} // closed when the client ends the session (DELETE)

	mu      sync.Mutex
	session string                 // the session id; "" until initialize
	version string                 // the protocol version agreed on
	pending map[string]chan []byte // JSON id of a request the client POSTed -> its reply
	endOnce sync.Once
}

func newHTTPTransport() *httpTransport {
	return &httpTransport{
		msgs:    make(chan []byte, 64),
		out:     make(chan []byte, 256),
		done:    make(chan struct{}),
		pending: map[string]chan []byte{},
	}
}

func (t *httpTransport) incoming() <-chan []byte { return t.msgs }

func (t *httpTransport) ended() <-chan struct{} { return t.done }

// send routes a message from the peer: the reply to a request the client
// POSTed goes back on that POST; everything else (the server's own requests
// and notifications) goes on the event stream.
func (t *httpTransport) send(msg []byte) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("route a message: %w", err)
	}
	if m.Method == "" {
		t.mu.Lock()
		reply, ok := t.pending[string(m.ID)]
		delete(t.pending, string(m.ID))
		t.mu.Unlock()
		if ok {
			reply <- msg // buffered: never blocks
			return nil
		}
	}
	select {
	case t.out <- msg:
		return nil
	case <-t.done:
		return errSessionEnded
	}
}

// end ends the session once.
func (t *httpTransport) end() {
	t.endOnce.Do(func() { close(t.done) })
}

// ServeHTTP is the MCP endpoint: POST, GET and DELETE.
func (t *httpTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !localOrigin(r.Header.Get("Origin")) {
		// DNS rebinding: a web page must not reach a local server.
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodPost:
		t.post(w, r)
	case http.MethodGet:
		t.get(w, r)
	case http.MethodDelete:
		if !t.checkSession(w, r) {
			return
		}
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // the reply goes out before the session's end stops the server
		}
		t.end()
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// post takes one JSON-RPC message from the client.
func (t *httpTransport) post(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPostBytes))
	if err != nil {
		status := http.StatusBadRequest
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "cannot read the message: "+err.Error(), status)
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		http.Error(w, "batches are not supported", http.StatusBadRequest)
		return
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "not a JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if m.isRequest() && !strings.Contains(r.Header.Get("Accept"), "application/json") {
		// A request's reply comes as JSON (never as an event stream).
		http.Error(w, "Accept must include application/json", http.StatusNotAcceptable)
		return
	}
	initialize := m.isRequest() && m.Method == "initialize"
	if initialize {
		if !t.open(w) {
			return
		}
	} else if !t.checkSession(w, r) {
		return
	}
	if !m.isRequest() {
		// A notification, or the reply to one of the server's requests.
		if t.deliver(w, r, body) {
			w.WriteHeader(http.StatusAccepted)
		}
		return
	}
	reply := make(chan []byte, 1)
	t.mu.Lock()
	t.pending[string(m.ID)] = reply
	t.mu.Unlock()
	if !t.deliver(w, r, body) {
		t.forget(m.ID)
		return
	}
	select {
	case b := <-reply:
		if initialize {
			var res struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			_ = json.Unmarshal(b, &res)
			t.mu.Lock()
			t.version = res.Result.ProtocolVersion
			t.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case <-r.Context().Done():
		t.forget(m.ID)
	case <-t.done:
		t.forget(m.ID)
		http.Error(w, "the session ended", http.StatusNotFound)
	}
}

// open starts the session on initialize, setting its id on the response; a
// second initialize is refused (one session per server).
func (t *httpTransport) open(w http.ResponseWriter) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.session != "" {
		http.Error(w, "this server serves one session, and it has begun", http.StatusBadRequest)
		return false
	}
	t.session = rand.Text()
	w.Header().Set(headerSessionID, t.session)
	return true
}

// checkSession checks a request's session id and protocol version: a
// missing id is 400, an unknown or ended session 404, a version other than
// the one agreed on 400.
func (t *httpTransport) checkSession(w http.ResponseWriter, r *http.Request) bool {
	t.mu.Lock()
	session, version := t.session, t.version
	t.mu.Unlock()
	got := r.Header.Get(headerSessionID)
	select {
	case <-t.done:
		session = "" // ended: no id is known any more
	default:
	}
	switch {
	case got == "":
		http.Error(w, headerSessionID+" is required after initialize", http.StatusBadRequest)
		return false
	case got != session:
		http.Error(w, "unknown session", http.StatusNotFound)
		return false
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && version != "" && v != version {
		if !slices.Contains(SupportedVersions, v) {
			http.Error(w, "unsupported "+headerProtocolVersion+" "+v, http.StatusBadRequest)
		} else {
			http.Error(w, headerProtocolVersion+" "+v+" is not the session's version "+version, http.StatusBadRequest)
		}
		return false
	}
	return true
}

// deliver hands a client message to the peer, unless the session ended
// first (then it answers 404 and returns false) or the client went.
func (t *httpTransport) deliver(w http.ResponseWriter, r *http.Request, body []byte) bool {
	select {
	case t.msgs <- body:
		return true
	case <-r.Context().Done():
		return false
	case <-t.done:
		http.Error(w, "the session ended", http.StatusNotFound)
		return false
	}
}

// forget drops a POSTed request whose reply is no longer wanted.
func (t *httpTransport) forget(id json.RawMessage) {
	t.mu.Lock()
	delete(t.pending, string(id))
	t.mu.Unlock()
}

// get serves the event stream on which the server sends its own requests
// and notifications, until the client goes or the session ends.
func (t *httpTransport) get(w http.ResponseWriter, r *http.Request) {
	if !t.checkSession(w, r) {
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case msg := <-t.out:
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		case <-t.done:
			return
		}
	}
}

// localOrigin reports whether an Origin header (when a browser sent one)
// names this machine.
func localOrigin(origin string) bool {
	return origin == "" || streamable.IsLoopbackOrigin(origin)
}
