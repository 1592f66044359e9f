// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package remote carries a broker session to a remote MCP server over MCP's
// Streamable HTTP transport (protocol revision 2025-11-25), in the client
// role. A Stream is a jsonrpc.Stream, so broker.Session runs over it exactly as
// over stdio:
//
//   - every message the broker writes is POSTed to the server's endpoint
//     (Accept: application/json, text/event-stream); the server answers a
//     request with one JSON message or with an event stream (SSE) that may
//     carry the server's own requests and notifications before the reply;
//   - once the server has answered initialize, the Stream opens the
//     standalone event stream (GET), on which the server sends requests of
//     its own (roots/list, files/*), and keeps it open: a dropped stream is
//     resumed with Last-Event-ID when the server gave event ids (honouring
//     its retry field), and is opened afresh when it did not;
//   - the session id the server assigns (Mcp-Session-Id) and the negotiated
//     protocol version (MCP-Protocol-Version) go with every later request,
//     and Close ends the session with DELETE;
//   - TLS uses the system roots or the given CA pool, and extra headers
//     (Authorization, say) go with every request. Header values are never
//     logged, and neither is the URL's query or user info.
//
// The official Go SDK's StreamableClientTransport was the first choice, but
// used on its own (not inside an mcp.Client, which cannot answer custom
// methods such as files/read) it never opens the standalone GET stream and
// never sends MCP-Protocol-Version: both hang on an unexported hook that only
// mcp.Client calls. It also fails the whole connection on one undecodable or
// oversized event, where the broker answers -32700 or -32600 and goes on.
// Hence this small client, on the standard library alone.
package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// Defaults of a Stream.
const (
	// DefaultMaxRetries is how many times in a row a request that failed in a
	// way worth retrying (no connection, 429, 502, 503, 504) or a broken event
	// stream is tried again before giving up.
	DefaultMaxRetries = 5
	// DefaultRetryDelay is the first wait before a retry; it doubles with
	// each failure in a row, up to maxRetryDelay. A server's retry field
	// takes its place for event streams.
	DefaultRetryDelay = 500 * time.Millisecond
	// DefaultResponseTimeout bounds the wait for the headers of any HTTP
	// response (not for the events of a stream).
	DefaultResponseTimeout = 30 * time.Second
	// DefaultCloseTimeout bounds the DELETE that ends the session.
	DefaultCloseTimeout = 5 * time.Second
)

// healthyStream is how long an event stream must stay open for its end not
// to count as a failure when nothing came on it.
const healthyStream = 5 * time.Second

// maxRetryDelay caps the wait between retries, a server's retry field
// included.
const maxRetryDelay = 30 * time.Second

// Header names of the transport (canonical form).
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
)

var (
	// ErrSessionExpired is returned (by Read and Write) once the server
	// answers 404 Not Found for the session: it ended the session, or it
	// restarted and lost it. Starting again means a new session.
	ErrSessionExpired = errors.New("the server no longer knows this session (HTTP 404 Not Found): it ended the session or restarted")
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("remote stream closed")
)

// Option configures a Stream.
type Option func(*Stream)

// WithHeaders adds headers to every request (authentication, for example).
// Their values are never logged. New refuses the headers the transport sets
// itself (Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version,
// Last-Event-ID, Host, Content-Length) and malformed names or values.
func WithHeaders(h http.Header) Option {
	return func(s *Stream) {
		for name, values := range h {
			for _, v := range values {
				s.headers.Add(name, v)
			}
		}
	}
}

// WithRootCAs makes TLS trust these certificate authorities instead of the
// system's. Ignored with WithHTTPClient.
func WithRootCAs(pool *x509.CertPool) Option { return func(s *Stream) { s.rootCAs = pool } }

// WithHTTPClient sends every request with c (its transport decides TLS and
// proxies). c must not have a Timeout, which would cut event streams.
func WithHTTPClient(c *http.Client) Option { return func(s *Stream) { s.client = c } }

// WithLogger sets the logger for the transport's own events (streams
// resumed, retries, a server that offers no event stream).
func WithLogger(l hclog.Logger) Option { return func(s *Stream) { s.log = l } }

// WithMaxMessageBytes bounds one incoming message (a JSON body or the data
// of one event); a larger one is discarded and Read returns
// jsonrpc.ErrMessageTooLarge for it. <= 0 means
// jsonrpc.DefaultMaxMessageBytes.
func WithMaxMessageBytes(n int) Option {
	return func(s *Stream) {
		if n > 0 {
			s.max = n
		}
	}
}

// WithRetries sets how many failures in a row are retried (0: none) and the
// first wait, which doubles with each failure.
func WithRetries(n int, delay time.Duration) Option {
	return func(s *Stream) {
		if n >= 0 {
			s.maxRetries = n
		}
		if delay > 0 {
			s.retryDelay = delay
		}
	}
}

// WithResponseTimeout bounds the wait for a response's headers.
func WithResponseTimeout(d time.Duration) Option {
	return func(s *Stream) {
		if d > 0 {
			s.respTimeout = d
		}
	}
}

// WithCloseTimeout bounds the DELETE that Close sends to end the session.
func WithCloseTimeout(d time.Duration) Option {
	return func(s *Stream) {
		if d > 0 {
			s.closeTimeout = d
		}
	}
}

// item is one Read result.
type item struct {
	msg []byte
	err error
}

// Stream is a jsonrpc.Stream to one remote MCP server over Streamable HTTP.
// Write may be called from many goroutines (each message is its own POST);
// Read from one.
type Stream struct {
	endpoint     string // where requests go
	display      string // the endpoint as logs show it: no user info, no query
	client       *http.Client
	ownClient    bool
	rootCAs      *x509.CertPool
	headers      http.Header
	log          hclog.Logger
	max          int
	maxRetries   int
	retryDelay   time.Duration
	respTimeout  time.Duration
	closeTimeout time.Duration

	ctx      context.Context // the stream's life: cancelled by Close
	cancel   context.CancelFunc
	incoming chan item

	failOnce sync.Once
	failed   chan struct{}
	failErr  error

	mu         sync.Mutex
	closed     bool
	wg         sync.WaitGroup // the goroutines reading responses
	sessionID  string
	version    string
	initID     jsonrpc.ID    // the initialize request's id, once sent
	listening  chan struct{} // made when initialize is answered; closed once the event stream was tried
	listenDone bool

	closeOnce sync.Once
}

var _ jsonrpc.Stream = (*Stream)(nil)

// New returns a Stream to the MCP endpoint at rawURL (http or https). No
// request is made until the first Write.
func New(rawURL string, opts ...Option) (*Stream, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("remote URL: %v", redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("remote URL %s: the scheme must be http or https", displayURL(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("remote URL %s: no host", displayURL(u))
	}
	u.Fragment, u.RawFragment = "", ""
	s := &Stream{
		endpoint:     u.String(),
		display:      displayURL(u),
		headers:      http.Header{},
		log:          hclog.NewNullLogger(),
		max:          jsonrpc.DefaultMaxMessageBytes,
		maxRetries:   DefaultMaxRetries,
		retryDelay:   DefaultRetryDelay,
		respTimeout:  DefaultResponseTimeout,
		closeTimeout: DefaultCloseTimeout,
		incoming:     make(chan item, 16),
		failed:       make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	for name, values := range s.headers {
		for _, v := range values {
			if err := CheckHeader(name, v); err != nil {
				return nil, err
			}
		}
	}
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone() // proxies from the environment, HTTP/2
		tr.TLSClientConfig = &tls.Config{RootCAs: s.rootCAs, MinVersion: tls.VersionTLS12}
		tr.ResponseHeaderTimeout = s.respTimeout
		s.client = &http.Client{Transport: tr}
		s.ownClient = true
	}
	if u.Scheme == "http" && len(s.headers) > 0 && !isLoopback(u.Hostname()) {
		s.log.Warn("the remote headers (credentials?) go over plain http to a host that is not this machine; use https",
			"url", s.display)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// URL returns the endpoint as it may be logged: without user info, query or
// fragment.
func (s *Stream) URL() string { return s.display }

// SessionID returns the session id the server assigned ("" before
// initialize, or for a server without sessions).
func (s *Stream) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// ProtocolVersion returns the protocol version of the server's initialize
// result, which goes with every later request ("" before it).
func (s *Stream) ProtocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Read returns the next message from the server: from a reply to a POST or
// from an event stream. It returns jsonrpc.ErrMessageTooLarge (and stays
// usable) for an oversized message, io.EOF once the stream is closed, and the
// error that broke the stream otherwise (ErrSessionExpired, an event stream
// that could not be resumed).
func (s *Stream) Read() ([]byte, error) {
	select {
	case it := <-s.incoming:
		return it.msg, it.err
	default:
	}
	select {
	case it := <-s.incoming:
		return it.msg, it.err
	case <-s.failed:
		select { // what arrived before the failure goes first
		case it := <-s.incoming:
			return it.msg, it.err
		default:
		}
		return nil, s.failErr
	case <-s.ctx.Done():
		return nil, io.EOF
	}
}

// Write POSTs one message and starts reading the answer, if any; it returns
// once the server has accepted the message (the response's headers). A reply
// to a request reaches Read. A message the server refuses with an HTTP error
// fails the Write, except for a request refused with a JSON-RPC error body
// (which Read returns as the request's reply) and a reply or notification
// refused with a client or server error (logged and dropped: the session goes
// on, as after a malformed message on stdio).
func (s *Stream) Write(msg []byte) error {
	if s.ctx.Err() != nil {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	callID, method := peek(msg)
	what := "reply"
	switch {
	case method != "" && !callID.IsZero():
		what = method + " request"
	case method != "":
		what, callID = method, ""
	default:
		callID = ""
	}
	if what == "initialize request" {
		s.mu.Lock()
		s.initID = callID
		s.mu.Unlock()
	}
	if what != "initialize request" {
		s.awaitListening()
	}
	resp, err := s.post(msg, what)
	if err != nil {
		return err
	}
	return s.handlePostResponse(resp, callID, what)
}

// peek returns a message's id and method without reading the rest: the
// broker's replies (a files/read result can be megabytes) are not scanned
// past their "result" or "error" key.
func peek(msg []byte) (id jsonrpc.ID, method string) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", ""
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		switch key, _ := tok.(string); key {
		case "result", "error":
			return id, ""
		case "method":
			if dec.Decode(&method) != nil {
				return "", ""
			}
		case "id":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return "", ""
			}
			id, _ = jsonrpc.ParseID(raw)
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return "", ""
			}
		}
	}
	return id, method
}

// post sends one message, retrying what is worth retrying.
func (s *Stream) post(body []byte, what string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := s.newRequest(http.MethodPost, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := s.do(req)
		var wait time.Duration
		retry := false
		switch {
		case err != nil:
			if s.ctx.Err() != nil {
				return nil, ErrClosed
			}
			retry = notSent(err)
		case transientStatus(resp.StatusCode):
			retry, wait = true, retryAfter(resp)
		}
		if !retry || attempt >= s.maxRetries {
			return resp, err
		}
		reason := ""
		if err != nil {
			reason = err.Error()
		} else {
			reason = resp.Status
			discard(resp)
		}
		wait = max(wait, s.backoff(attempt+1, 0))
		s.log.Warn("POST failed; retrying", "message", what, "reason", reason, "attempt", attempt+1, "wait", wait)
		if !s.sleep(wait) {
			return nil, ErrClosed
		}
	}
}

// handlePostResponse takes the server's answer to a POST.
func (s *Stream) handlePostResponse(resp *http.Response, callID jsonrpc.ID, what string) error {
	s.noteSession(resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return s.refused(resp, callID, what)
	}
	ct := mediaType(resp)
	if callID.IsZero() {
		// A reply or notification: 202 Accepted without a body is the rule.
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent {
			s.log.Debug("the server answered a message that needs no answer", "message", what, "status", resp.Status)
		}
		discard(resp)
		return nil
	}
	switch ct {
	case "application/json":
		if !s.goRead(func() { s.readJSON(resp, callID) }) {
			resp.Body.Close()
			return ErrClosed
		}
	case "text/event-stream":
		if !s.goRead(func() { s.follow(resp, callID) }) {
			resp.Body.Close()
			return ErrClosed
		}
	default:
		discard(resp)
		if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
			// Not what the transport says, but not wrong either: the reply
			// may still come on the event stream.
			s.log.Debug("the server accepted a request without answering it", "message", what, "status", resp.Status)
			return nil
		}
		return fmt.Errorf("POST %s (%s): %s with Content-Type %q; want application/json or text/event-stream",
			s.display, what, resp.Status, ct)
	}
	return nil
}

// refused handles a POST answered with an HTTP error status.
func (s *Stream) refused(resp *http.Response, callID jsonrpc.ID, what string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	discard(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound && s.SessionID() != "":
		s.fail(ErrSessionExpired)
		return ErrSessionExpired
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("POST %s (%s): %s: the server refused the credentials (see the remote headers)",
			s.display, what, resp.Status)
	}
	rpcErr := errorBody(body)
	if !callID.IsZero() && rpcErr != nil {
		// The server's JSON-RPC error is the request's reply.
		reply, err := json.Marshal(map[string]any{"jsonrpc": jsonrpc.Version, "id": callID, "error": rpcErr})
		if err == nil && s.goRead(func() { s.deliver(item{msg: reply}) }) {
			return nil
		}
	}
	if callID.IsZero() {
		msg := ""
		if rpcErr != nil {
			msg = rpcErr.Message
		}
		s.log.Warn("the server refused a message; dropped", "message", what, "status", resp.Status, "error", msg)
		return nil
	}
	detail := ""
	if rpcErr != nil {
		detail = ": " + rpcErr.Message
	}
	return fmt.Errorf("POST %s (%s): %s%s", s.display, what, resp.Status, detail)
}

// readJSON delivers the one message of a JSON reply.
func (s *Stream) readJSON(resp *http.Response, callID jsonrpc.ID) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(s.max)+1))
	switch {
	case s.ctx.Err() != nil:
		return
	case err != nil:
		s.replyLost(callID, "reading the reply failed: "+err.Error())
		return
	case len(body) > s.max:
		s.deliver(item{err: jsonrpc.ErrMessageTooLarge})
		s.replyLost(callID, "the reply exceeds the message size limit")
		return
	case len(bytes.TrimSpace(body)) == 0:
		s.replyLost(callID, "the server answered with an empty body")
		return
	}
	_, listen := s.inspect(body)
	if s.deliver(item{msg: body}) && listen {
		s.startListening()
	}
}

// inspect looks at a message from the server. The initialize result sets
// the protocol version, and from then on the broker's messages wait until the
// event stream has been tried (see awaitListening), so that the stream is
// open when the server learns that the session is initialized; listen
// reports that the caller must start it (startListening) once it has handed
// the result over, so that nothing from the stream overtakes the result.
func (s *Stream) inspect(msg []byte) (m *jsonrpc.Message, listen bool) {
	m, err := jsonrpc.Decode(msg)
	if err != nil {
		return nil, false
	}
	if !m.IsResponse() || m.Error != nil {
		return m, false
	}
	s.mu.Lock()
	if s.initID.IsZero() || m.ID != s.initID || s.listening != nil {
		s.mu.Unlock()
		return m, false
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Result, &res)
	if versionPattern.MatchString(res.ProtocolVersion) {
		s.version = res.ProtocolVersion
	}
	s.listening = make(chan struct{})
	s.mu.Unlock()
	return m, true
}

// startListening opens the standalone event stream in the background.
func (s *Stream) startListening() {
	if !s.goRead(s.listen) {
		s.settleListening()
	}
}

// versionPattern is what a protocol version must look like to go in a header.
var versionPattern = regexp.MustCompile(`^[0-9A-Za-z._-]{1,64}$`)

// initPending reports whether the initialize result is still to come.
func (s *Stream) initPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listening == nil
}

// awaitListening holds a message back until the event stream has been tried,
// so that a server that sends its first request as soon as it is told the
// session is initialized has a stream to send it on. Bounded by the response
// timeout.
func (s *Stream) awaitListening() {
	s.mu.Lock()
	ch := s.listening
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
		return
	default:
	}
	t := time.NewTimer(s.respTimeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-s.ctx.Done():
	case <-t.C:
	}
}

func (s *Stream) settleListening() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening != nil && !s.listenDone {
		s.listenDone = true
		close(s.listening)
	}
}

// listen opens the standalone event stream and follows it for the session's
// life.
func (s *Stream) listen() {
	er := newEventReader(s.max)
	resp, stop := s.openEvents(er, true)
	s.settleListening()
	if stop {
		return
	}
	if resp != nil {
		s.log.Debug("event stream open", "url", s.display)
	}
	s.followWith(er, resp, "")
}

// follow reads the event stream of a POST's response until the reply to
// callID comes.
func (s *Stream) follow(resp *http.Response, callID jsonrpc.ID) {
	s.followWith(newEventReader(s.max), resp, callID)
}

// followWith reads an event stream, resuming it with Last-Event-ID when it
// breaks: the standalone stream (callID zero) for the session's life, a
// POST's stream until its reply. A standalone stream without event ids is
// opened afresh (what the server sent meanwhile may be lost); a POST's stream
// without them cannot be resumed, and its request gets an error reply.
func (s *Stream) followWith(er *eventReader, resp *http.Response, callID jsonrpc.ID) {
	standalone := callID.IsZero()
	failures := 0
	for {
		if resp != nil {
			answered, progressed := s.consume(resp, er, callID)
			if answered || s.isClosed() {
				return // (a server ends its streams when Close ends the session)
			}
			if progressed {
				failures = 0
			}
		}
		if !standalone && er.lastID == "" {
			s.replyLost(callID, "the server ended the reply's event stream before the reply, without an event id to resume it from")
			return
		}
		failures++
		if failures > s.maxRetries {
			if standalone {
				s.fail(fmt.Errorf("the event stream from %s broke and %d attempts to reopen it failed", s.display, s.maxRetries))
			} else {
				s.replyLost(callID, fmt.Sprintf("the reply's event stream broke and %d attempts to resume it failed", s.maxRetries))
			}
			return
		}
		wait := s.backoff(failures, er.retry)
		if resp != nil {
			s.log.Info("event stream ended; reconnecting", "resume", er.lastID != "", "wait", wait)
		}
		if !s.sleep(wait) {
			return
		}
		var stop bool
		resp, stop = s.openEvents(er, standalone)
		if stop {
			if !standalone && s.ctx.Err() == nil && s.failure() == nil {
				s.replyLost(callID, "the server refused to resume the reply's event stream")
			}
			return
		}
	}
}

// consume reads one response body of an event stream. It reports whether
// the stream is done with (the reply to callID came, or the Stream closed)
// and whether it made progress (a message, or a new event id).
func (s *Stream) consume(resp *http.Response, er *eventReader, callID jsonrpc.ID) (done, progressed bool) {
	defer resp.Body.Close()
	er.reset(resp.Body)
	lastID := er.lastID
	opened := time.Now()
	defer func() {
		// A stream that stayed open a while worked, events or not (a server
		// or proxy may end idle streams): its end is no failure in a row.
		progressed = progressed || time.Since(opened) >= healthyStream
	}()
	for {
		ev, err := er.next()
		if er.lastID != lastID {
			lastID, progressed = er.lastID, true
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && s.ctx.Err() == nil {
				s.log.Debug("event stream broke", "error", err)
			}
			return s.ctx.Err() != nil, progressed
		}
		if ev.name != "message" {
			continue
		}
		if ev.tooLarge {
			progressed = true
			if !s.deliver(item{err: jsonrpc.ErrMessageTooLarge}) {
				return true, progressed
			}
			continue
		}
		if len(bytes.TrimSpace(ev.data)) == 0 {
			continue
		}
		progressed = true
		var m *jsonrpc.Message
		listen := false
		if !callID.IsZero() || s.initPending() {
			m, listen = s.inspect(ev.data)
		}
		if !s.deliver(item{msg: ev.data}) {
			return true, progressed
		}
		if listen {
			s.startListening()
		}
		if m != nil && m.IsResponse() && m.ID == callID {
			return true, progressed
		}
	}
}

// openEvents GETs an event stream: the standalone one, or (with er.lastID)
// the resumption of a broken one. It returns the response to read, or nil to
// try again later, or stop when there is nothing more to try.
func (s *Stream) openEvents(er *eventReader, standalone bool) (resp *http.Response, stop bool) {
	req, err := s.newRequest(http.MethodGet, nil)
	if err != nil {
		s.fail(err)
		return nil, true
	}
	req.Header.Set("Accept", "text/event-stream")
	if er.lastID != "" {
		req.Header.Set(headerLastEventID, er.lastID)
	}
	resp, err = s.do(req)
	if err != nil {
		if s.ctx.Err() != nil {
			return nil, true
		}
		s.log.Warn("cannot open the event stream", "error", err)
		return nil, false
	}
	s.noteSession(resp)
	code := resp.StatusCode
	if code >= 200 && code <= 299 && mediaType(resp) == "text/event-stream" {
		return resp, false
	}
	discard(resp)
	switch {
	case code == http.StatusNotFound && s.SessionID() != "":
		s.fail(ErrSessionExpired)
		return nil, true
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		s.fail(fmt.Errorf("GET %s: %s: the server refused the credentials (see the remote headers)", s.display, resp.Status))
		return nil, true
	case transientStatus(code):
		return nil, false
	case !standalone:
		return nil, true
	case code == http.StatusMethodNotAllowed:
		s.log.Warn("the server offers no event stream (405 Method Not Allowed): it cannot send requests of its own outside a reply", "url", s.display)
		return nil, true
	case code == http.StatusBadRequest && er.lastID != "":
		s.log.Warn("the server refused to resume the event stream; opening a new one (what it sent meanwhile may be lost)")
		er.lastID = ""
		return nil, false
	default:
		s.log.Warn("the server offers no event stream; it cannot send requests of its own outside a reply",
			"status", resp.Status, "contentType", mediaType(resp))
		return nil, true
	}
}

// replyLost answers the broker's own request callID with an error, when the
// server's reply can no longer come.
func (s *Stream) replyLost(callID jsonrpc.ID, why string) {
	if callID.IsZero() || s.ctx.Err() != nil {
		return
	}
	s.log.Warn("the reply to a request was lost", "reason", why)
	reply, err := json.Marshal(map[string]any{"jsonrpc": jsonrpc.Version, "id": callID,
		"error": jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "transport: " + why}})
	if err == nil {
		s.deliver(item{msg: reply})
	}
}

// newRequest makes a request to the endpoint with the session's headers.
func (s *Stream) newRequest(method string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(s.ctx, method, s.endpoint, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", method, s.display, redactURLError(err))
	}
	for name, values := range s.headers {
		req.Header[name] = append([]string(nil), values...)
	}
	s.mu.Lock()
	sid, version := s.sessionID, s.version
	s.mu.Unlock()
	if sid != "" {
		req.Header.Set(headerSessionID, sid)
	}
	if version != "" {
		req.Header.Set(headerProtocolVersion, version)
	}
	return req, nil
}

// do sends a request; errors name the method and the loggable URL only.
func (s *Stream) do(req *http.Request) (*http.Response, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, s.display, redactURLError(err))
	}
	return resp, nil
}

// noteSession records the session id the server assigned (the first one:
// a server does not change it within a session).
func (s *Stream) noteSession(resp *http.Response) {
	sid := resp.Header.Get(headerSessionID)
	if sid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessionID == "" && validHeaderValue(sid) {
		s.sessionID = sid
	}
}

// isClosed reports whether Close has begun.
func (s *Stream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// goRead runs f on a goroutine that Close waits for; false once closed.
func (s *Stream) goRead(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// deliver hands one Read result over; false once closed.
func (s *Stream) deliver(it item) bool {
	select {
	case s.incoming <- it:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// fail breaks the stream: Read returns err once what came before is read.
// It is logged here too, since it is mostly found in the background (on the
// event stream) and the session may end on another symptom first (a write to
// a connection that already ended).
func (s *Stream) fail(err error) {
	if s.ctx.Err() != nil {
		return
	}
	s.failOnce.Do(func() {
		s.log.Error("the connection to the server broke", "error", err)
		s.failErr = err
		close(s.failed)
	})
}

func (s *Stream) failure() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
		return nil
	}
}

// backoff is the wait before retry number n (from 1): the server's retry
// time when it gave one, else the retry delay doubled with each failure.
func (s *Stream) backoff(n int, serverRetry time.Duration) time.Duration {
	if serverRetry > 0 {
		return min(serverRetry, maxRetryDelay)
	}
	d := s.retryDelay
	for i := 1; i < n && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// sleep waits d; false when the Stream closed meanwhile.
func (s *Stream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// Close ends the session: DELETE with the session id (when the server gave
// one and has not already dropped it; bounded by the close timeout), then
// every stream and pending request is cut. Read then returns io.EOF.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		sid := s.sessionID
		s.mu.Unlock()
		if sid != "" && !errors.Is(s.failure(), ErrSessionExpired) {
			s.deleteSession()
		}
		s.cancel()
		s.wg.Wait()
		if s.ownClient {
			s.client.CloseIdleConnections()
		}
	})
	return nil
}

// deleteSession tells the server the session is over. A server that does not
// allow it (405) or no longer knows the session is fine.
func (s *Stream) deleteSession() {
	ctx, cancel := context.WithTimeout(context.Background(), s.closeTimeout)
	defer cancel()
	req, err := s.newRequest(http.MethodDelete, nil)
	if err != nil {
		return
	}
	resp, err := s.do(req.WithContext(ctx))
	if err != nil {
		s.log.Debug("ending the session failed", "error", err)
		return
	}
	discard(resp)
	s.log.Debug("session ended on the server", "status", resp.Status)
}

// reservedHeaders are set by the transport itself.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true, "Transfer-Encoding": true,
	"Connection": true, headerSessionID: true, headerProtocolVersion: true, headerLastEventID: true,
}

// CheckHeader reports whether an extra header may be sent as it is. The error
// names the header, never its value.
func CheckHeader(name, value string) error {
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fmt.Errorf("header %q: not a valid header name", name)
	}
	if reservedHeaders[http.CanonicalHeaderKey(name)] {
		return fmt.Errorf("header %s: set by the transport itself; it cannot be configured", http.CanonicalHeaderKey(name))
	}
	if !validHeaderValue(value) {
		return fmt.Errorf("header %s: its value has a control character (a line break?)", http.CanonicalHeaderKey(name))
	}
	return nil
}

// isTokenChar reports whether r may appear in a header name (RFC 9110 token).
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// validHeaderValue reports whether v has no control characters but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// CertPool reads a PEM file of CA certificates (one or more) for WithRootCAs.
func CertPool(file string) (*x509.CertPool, error) {
	pemData, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
}

// displayURL is u without user info, query and fragment, for logs and errors
// (a query often carries a token).
func displayURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.ForceQuery = "", false
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// redactURLError drops the URL (with its query and user info) from a
// *url.Error, keeping what went wrong.
func redactURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// notSent reports whether a request certainly did not reach the server (the
// connection could not be made), so that sending it again is safe.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// transientStatus reports a status worth retrying after a wait.
func transientStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter is a response's Retry-After in seconds (0 when absent), capped.
func retryAfter(resp *http.Response) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryDelay)
}

// mediaType is the response's Content-Type without parameters, lower case.
func mediaType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
	}
	return mt
}

// discard closes a body after reading a little of it, so that the
// connection can be reused when the rest is short.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// errorBody returns the JSON-RPC error in an HTTP error response's body, if
// it holds one.
func errorBody(body []byte) *jsonrpc.Error {
	var r struct {
		Error *struct {
			Code    *int            `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.Error == nil || r.Error.Code == nil {
		return nil
	}
	e := &jsonrpc.Error{Code: *r.Error.Code, Message: r.Error.Message}
	if len(r.Error.Data) > 0 {
		e.Data = r.Error.Data
	}
	return e
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
