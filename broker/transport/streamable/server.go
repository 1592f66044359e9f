// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package streamable is the server side of MCP's Streamable HTTP transport
// (protocol revisions 2025-03-26 to 2025-11-25, basic/transports, and
// 2026-07-28 without sessions: modern.go): one MCP endpoint, /mcp, whose
// HTTP sessions each become a jsonrpc.RoutedStream for a session of the
// caller's (fsbroker serve runs a serve.Session on each):
//
//   - POST carries one JSON-RPC message. A request is answered on its own
//     POST: as application/json, or as an event stream (text/event-stream)
//     when the session sends requests or notifications while handling it
//     (elicitation/create, roots/list) and the client accepts one; a
//     notification or a reply gets 202 Accepted.
//   - GET opens the session's standalone event stream, which carries what
//     the session sends outside any request (notifications/resources/updated,
//     its own requests); DELETE ends the session.
//   - initialize, POSTed without a session id, opens a session: its id
//     (Mcp-Session-Id, 130 random bits) comes with the result and is required
//     on every later request; an unknown or ended one gets 404, a missing one
//     400, an MCP-Protocol-Version header naming a version the session did not
//     negotiate 400, one naming no version served 400 with
//     UnsupportedProtocolVersionError (-32022).
//   - A POST whose MCP-Protocol-Version header names a revision without
//     sessions (Config.ModernVersions: 2026-07-28) is served on its own, by
//     one session of the server's for all such requests (modern.go).
//   - Every request must carry the server's bearer token (Authorization:
//     Bearer TOKEN, compared in constant time): without it, or with another,
//     it gets 401 with WWW-Authenticate: Bearer before anything else of it
//     is looked at, its body never read, no slot taken, no session opened.
//   - Defenses: an Origin header that is not a loopback origin gets 403 (DNS
//     rebinding; the MCP text requires the check), and so does a Host header
//     that does not name this machine when the server listens on loopback
//     only; bodies over the message size limit get 413; a body that finds no
//     free slot to be read in within a few seconds gets 503; sessions are
//     bounded in number (503 beyond) and end after an idle time (an open
//     event stream alone does not keep one); Close ends them all.
//
// The official Go SDK's StreamableServerTransport was the first choice. It
// does not fit: it routes a message the server sends while handling a
// request to that request's POST only when the message's context carries an
// unexported key that only the SDK's own ServerSession sets, so every
// elicitation/create and roots/list of fsbroker's session would go to the
// standalone stream (and be lost without one); it also checks each request
// against the SDK's method table and answers some itself with HTTP errors,
// before fsbroker's session (and its audit trail) sees them.
package streamable

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// EndpointPath is the path of the MCP endpoint.
const EndpointPath = "/mcp"

// Defaults of a Server.
const (
	// DefaultMaxSessions bounds the sessions open at once.
	DefaultMaxSessions = 16
	// DefaultIdleTimeout ends a session with no POST in progress and none
	// ended, and no message sent on its event stream, for that long (an open
	// event stream with nothing on it does not keep a session, as in the
	// official Go SDK's server: a host keeps a quiet session with ping).
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultKeepAlive is how often an event stream with nothing to send
	// carries an SSE comment, so that proxies keep it and a client that went
	// away is noticed.
	DefaultKeepAlive = 25 * time.Second
)

const (
	// maxPendingRequests bounds the requests of one session awaiting their
	// replies (429 beyond).
	maxPendingRequests = 256
	// standaloneBacklog bounds the messages waiting for the standalone event
	// stream (while none is open, or a slow one); more are dropped, logged.
	standaloneBacklog = 256
	// bodySlots bounds the POST bodies of one session being read or waiting
	// for the session to take them, and bodies read before a session exists
	// (initialize) over the whole server: with the message size limit, they
	// bound the memory a client can hold.
	bodySlots = 4
	// bodyReadTimeout bounds reading one POST body.
	bodyReadTimeout = time.Minute
	// slotWait bounds the wait of a POST for a body slot: beyond, 503 with
	// Retry-After, its body unread.
	slotWait = 10 * time.Second
	// refusalLogInterval spaces the log lines about requests refused for
	// want of the token, which anyone who reaches the port can send.
	refusalLogInterval = 10 * time.Second
	// writeTimeout bounds writing one message to a client.
	writeTimeout = time.Minute
)

// Header names of the transport (canonical form).
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
)

// Config is what a Server runs with.
type Config struct {
	// Token is the bearer token every request must carry in its
	// Authorization header; required. See CheckToken for its syntax.
	Token string
	// NewSession starts a session over stream and returns the function that
	// serves it until the stream's input ends (nil) or ctx is cancelled. It
	// must not close the stream: the Server does once run returns.
	NewSession func(stream jsonrpc.RoutedStream) (run func(ctx context.Context) error, err error)
	// Versions are the protocol versions the sessions negotiate: an
	// MCP-Protocol-Version header naming another is refused.
	Versions []string
	// ModernVersions are the protocol versions served without sessions
	// (2026-07-28): a POST naming one in MCP-Protocol-Version is served by
	// the server's stateless session, whatever Mcp-Session-Id it carries
	// (modern.go). None: such a request is refused as an unsupported version.
	ModernVersions []string
	// MaxMessageBytes bounds a POST body (<= 0: jsonrpc.DefaultMaxMessageBytes).
	MaxMessageBytes int
	// MaxSessions bounds the sessions open at once (<= 0: DefaultMaxSessions).
	MaxSessions int
	// IdleTimeout ends an idle session (<= 0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// KeepAlive is the interval of SSE comments (<= 0: DefaultKeepAlive).
	KeepAlive time.Duration
	// LoopbackOnly says the server listens on loopback addresses only: a
	// request whose Host header names another host is refused.
	LoopbackOnly bool
	// Log is the transport's logger (nil: none). Session ids are never logged.
	Log hclog.Logger
}

// Server is the MCP endpoint, an http.Handler. Close ends its sessions.
type Server struct {
	cfg       Config
	log       hclog.Logger
	runCtx    context.Context // the sessions' runs; cancelled by Close
	cancelRun context.CancelFunc
	initSlots chan struct{} // bodies read before a session exists
	tokenSum  [sha256.Size]byte
	slotWait  time.Duration // tests shorten it

	refused        atomic.Int64  // requests refused for want of the token
	modernSeq      atomic.Uint64 // the ids given to stateless requests
	modernSlots    chan struct{} // bodies of stateless requests
	statelessBytes atomic.Int64  // the bytes of stateless requests awaiting their replies
	// maxStatelessBytes bounds statelessBytes (MaxStatelessBytes; tests
	// lower it).
	maxStatelessBytes int64
	lastRefusalLog    atomic.Int64 // when one was last logged (Unix nanoseconds)

	mu       sync.Mutex
	sessions map[string]*session // open sessions by id
	// stateless serves the requests of ModernVersions (nil before the
	// first, and after it stopped).
	stateless *session
	running   int // sessions whose run has not returned
	closing   bool
	runs      sync.WaitGroup
}

// NewServer returns the endpoint cfg describes.
func NewServer(cfg Config) (*Server, error) {
	if cfg.NewSession == nil || len(cfg.Versions) == 0 {
		return nil, errors.New("streamable: a server needs NewSession and Versions")
	}
	if err := CheckToken(cfg.Token); err != nil {
		return nil, fmt.Errorf("streamable: %w", err)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = jsonrpc.DefaultMaxMessageBytes
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Log, runCtx: ctx, cancelRun: cancel, tokenSum: sha256.Sum256([]byte(cfg.Token)),
		slotWait: slotWait, initSlots: make(chan struct{}, bodySlots), modernSlots: make(chan struct{}, maxModernBodies),
		maxStatelessBytes: MaxStatelessBytes,
		sessions:          map[string]*session{}}, nil
}

// Close ends every session (their requests in flight get the session's
// shutdown time to be answered) and waits until each has stopped, or ctx
// ends. Afterwards no session opens.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	open := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		open = append(open, sess)
	}
	stateless := s.stateless
	s.mu.Unlock()
	for _, sess := range open {
		s.end(sess)
	}
	if stateless != nil {
		stateless.endInput()
	}
	s.cancelRun()
	stopped := make(chan struct{})
	go func() { s.runs.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("streamable: sessions still stopping: %w", ctx.Err())
	}
}

// ServeHTTP serves the MCP endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != EndpointPath {
		http.NotFound(w, r)
		return
	}
	if !s.authenticated(w, r) {
		return
	}
	if s.cfg.LoopbackOnly && !IsLoopbackHost(hostOnly(r.Host)) {
		// DNS rebinding: a name that resolves to 127.0.0.1 is still not this
		// machine's name.
		refuseUnread(w, http.StatusForbidden, "Host "+r.Host+" is not this machine")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !IsLoopbackOrigin(origin) {
		refuseUnread(w, http.StatusForbidden, "Origin "+origin+" is not allowed")
		return
	}
	if version := s.modernVersion(r); version != "" {
		s.serveModern(w, r, version)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		s.get(w, r)
	case http.MethodDelete:
		if sess := s.lookup(w, r); sess != nil {
			s.end(sess)
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest, "method "+r.Method+" not allowed")
	}
}

// authenticated reports whether r carries the server's bearer token, and
// otherwise answers it 401 (RFC 6750: WWW-Authenticate: Bearer, with
// error="invalid_token" when a token was given), without reading its body.
// The token is compared as a SHA-256 digest in constant time, so the time
// taken says nothing of how much of it matched, nor of its length.
func (s *Server) authenticated(w http.ResponseWriter, r *http.Request) bool {
	values := r.Header.Values("Authorization")
	var given string
	if len(values) == 1 {
		if scheme, token, ok := strings.Cut(values[0], " "); ok && strings.EqualFold(scheme, "Bearer") {
			given = strings.TrimLeft(token, " ")
		}
	}
	sum := sha256.Sum256([]byte(given))
	if given != "" && subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1 {
		return true
	}
	challenge := `Bearer realm="fsbroker"`
	if len(values) > 0 {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	refuseUnread(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer TOKEN, with the token in fsbroker serve --http's token file")
	s.logRefusal(r, len(values) > 0)
	return false
}

// logRefusal logs a request refused for want of the token, at most once per
// refusalLogInterval (with the count so far), so that a flood of them does
// not flood the log.
func (s *Server) logRefusal(r *http.Request, tokenGiven bool) {
	n := s.refused.Add(1)
	now := time.Now().UnixNano()
	last := s.lastRefusalLog.Load()
	if now-last < int64(refusalLogInterval) || !s.lastRefusalLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("refused an HTTP request without the bearer token", "remote", r.RemoteAddr,
		"method", r.Method, "tokenGiven", tokenGiven, "refusedSoFar", n)
}

// Token syntax: RFC 6750's b64token, at least MinTokenLength characters.
const (
	// MinTokenLength is the shortest token a Server takes: 32 characters
	// hold 128 bits or more in hex, base32 or base64.
	MinTokenLength = 32
	// maxTokenLength bounds a token, far below the header size limit.
	maxTokenLength = 1024
)

// CheckToken reports whether token can be a Server's bearer token: at least
// MinTokenLength and at most 1024 characters of RFC 6750's b64token (letters,
// digits, "-", ".", "_", "~", "+", "/", then "=" padding only at the end).
// It cannot measure randomness: a token must come from a random source
// (NewToken).
func CheckToken(token string) error {
	if len(token) < MinTokenLength || len(token) > maxTokenLength {
		return fmt.Errorf("a bearer token has %d to %d characters, not %d", MinTokenLength, maxTokenLength, len(token))
	}
	body := strings.TrimRight(token, "=")
	if body == "" {
		return errors.New("a bearer token is not only padding")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-._~+/", c) >= 0 {
			continue
		}
		return fmt.Errorf("a bearer token holds letters, digits and - . _ ~ + / (then = padding), not %q", c)
	}
	return nil
}

// NewToken returns a fresh bearer token: 32 bytes (256 bits) from
// crypto/rand, base64url without padding (43 characters).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// post takes one JSON-RPC message.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	jsonOK, streamOK, ok := checkPostHeaders(w, r)
	if !ok {
		return
	}
	var sess *session
	slots := s.initSlots
	if r.Header.Get(headerSessionID) != "" {
		if sess = s.lookup(w, r); sess == nil {
			return
		}
		sess.busy()
		defer sess.idle()
		slots = sess.bodySlots
	} else if v := r.Header.Get(headerProtocolVersion); v != "" && !slices.Contains(s.cfg.Versions, v) {
		s.unsupportedVersion(w, v)
		return
	}
	msg, body, release, ok := s.readMessage(w, r, slots)
	if !ok {
		return
	}
	defer release()
	if v := modern.ProtocolVersion(msg.Params); msg.IsRequest() && slices.Contains(s.cfg.ModernVersions, v) {
		// A request of a revision without sessions whose header does not
		// name it (serveModern takes those that do).
		writeJSON(w, http.StatusBadRequest, errorBody(msg.ID, CodeHeaderMismatch,
			"Header mismatch: "+headerProtocolVersion+" header value "+strconv.Quote(r.Header.Get(headerProtocolVersion))+
				" does not match body value "+strconv.Quote(v)))
		return
	}
	initialize := msg.IsRequest() && msg.Method == "initialize"
	if sess == nil {
		if !initialize {
			writeError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, headerSessionID+" is required (initialize first)")
			return
		}
		if sess = s.open(w); sess == nil {
			return
		}
		sess.busy()
		defer sess.idle()
		w.Header().Set(headerSessionID, sess.id)
	}

	if !msg.IsRequest() {
		if msg.Method == "notifications/cancelled" {
			sess.cancelled(msg.Params)
		}
		if sess.deliver(r.Context(), body) {
			release()
			w.WriteHeader(http.StatusAccepted)
		} else {
			s.ended(w, r, "")
		}
		return
	}
	ex, status := sess.register(msg.ID, streamOK)
	if ex == nil {
		code := jsonrpc.CodeInvalidRequest
		reason := "invalid request: a request with this id is still in progress"
		if status == http.StatusTooManyRequests {
			reason = "too many requests of this session await their replies"
		}
		writeJSON(w, status, errorBody(msg.ID, code, reason))
		return
	}
	defer close(ex.gone)
	if !sess.deliver(r.Context(), body) {
		sess.unregister(msg.ID, ex)
		s.ended(w, r, msg.ID)
		return
	}
	release()
	sess.respond(w, r, ex, jsonOK, initialize)
}

// checkPostHeaders checks a POST's Content-Type (415 unless
// application/json) and Accept (406 without application/json or
// text/event-stream), and returns which replies the client accepts.
func checkPostHeaders(w http.ResponseWriter, r *http.Request) (jsonOK, streamOK, ok bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "", jsonrpc.CodeInvalidRequest, "Content-Type must be application/json")
		return false, false, false
	}
	jsonOK, streamOK = accepts(r.Header.Values("Accept"))
	if !jsonOK && !streamOK {
		writeError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Accept must include application/json or text/event-stream")
		return false, false, false
	}
	return jsonOK, streamOK, true
}

// takeSlot takes a body slot of slots for a POST, waiting at most the slot
// wait (then 503 with Retry-After, its body unread), and returns the
// function that gives it back (once; later calls do nothing).
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request, slots chan struct{}) (release func(), ok bool) {
	wait := time.NewTimer(s.slotWait)
	select {
	case slots <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		// Slow bodies hold every slot: this one is not read, and the client
		// tries again rather than queueing behind them.
		w.Header().Set("Retry-After", "1")
		refuseUnread(w, http.StatusServiceUnavailable, "busy: too many messages are being read; try again")
		return nil, false
	case <-r.Context().Done():
		wait.Stop()
		return nil, false
	}
	held := true
	return func() {
		if held {
			held = false
			<-slots
		}
	}, true
}

// readMessage reads a POST's message in a body slot of slots (takeSlot,
// readBody, decodeBody), or answers the POST; release gives the slot back
// (the caller calls it once the session took the message, and at the end).
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request, slots chan struct{}) (msg *jsonrpc.Message, body []byte, release func(), ok bool) {
	if release, ok = s.takeSlot(w, r, slots); !ok {
		return nil, nil, nil, false
	}
	if body, ok = s.readBody(w, r); ok {
		msg, ok = decodeBody(w, body)
	}
	if !ok {
		release()
		return nil, nil, nil, false
	}
	return msg, body, release, true
}

// decodeBody decodes a POST body as one JSON-RPC message, or answers 400.
func decodeBody(w http.ResponseWriter, body []byte) (*jsonrpc.Message, bool) {
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			writeJSON(w, http.StatusBadRequest, errorBody(de.ID, de.Err.Code, de.Err.Message))
		} else {
			writeError(w, http.StatusBadRequest, "", jsonrpc.CodeParseError, "not a JSON-RPC message")
		}
		return nil, false
	}
	return msg, true
}

// readBody reads a POST body under the size limit and a deadline; a body
// over the limit is answered 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := int64(s.cfg.MaxMessageBytes)
	tooLarge := func() ([]byte, bool) {
		writeError(w, http.StatusRequestEntityTooLarge, "", jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("invalid request: message exceeds the size limit (%d bytes)", limit))
		return nil, false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return tooLarge()
		}
		writeError(w, http.StatusBadRequest, "", jsonrpc.CodeParseError, "cannot read the message")
		return nil, false
	}
	return body, true
}

// get serves the session's standalone event stream.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if _, streamOK := accepts(r.Header.Values("Accept")); !streamOK {
		writeError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Accept must include text/event-stream")
		return
	}
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	if !sess.attachStandalone() {
		writeError(w, http.StatusConflict, "", jsonrpc.CodeInvalidRequest, "the session's event stream is already open")
		return
	}
	defer sess.detachStandalone()
	sess.streamStandalone(w, r)
}

// lookup returns the session a request names, or answers it: 400 without a
// session id, 404 for an unknown or ended one, 400 for an MCP-Protocol-Version
// other than the session's.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *session {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		writeError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, headerSessionID+" is required (initialize first)")
		return nil
	}
	s.mu.Lock()
	sess := s.sessions[id]
	s.mu.Unlock()
	if sess == nil {
		writeError(w, http.StatusNotFound, "", jsonrpc.CodeInvalidRequest, "no such session (initialize again)")
		return nil
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" {
		if !slices.Contains(s.cfg.Versions, v) {
			writeError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "unsupported "+headerProtocolVersion+" "+v)
			return nil
		}
		if negotiated := sess.negotiated(); negotiated != "" && v != negotiated {
			writeError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest,
				headerProtocolVersion+" "+v+" is not the session's version "+negotiated)
			return nil
		}
	}
	return sess
}

// open starts a session, or answers 503 when the server is closing or full.
func (s *Server) open(w http.ResponseWriter) *session {
	s.mu.Lock()
	if s.closing || s.running >= s.cfg.MaxSessions {
		closing := s.closing
		s.mu.Unlock()
		reason := fmt.Sprintf("the server has %d sessions open, its limit: end one (DELETE) or try later", s.cfg.MaxSessions)
		if closing {
			reason = "the server is shutting down"
		} else {
			s.log.Warn("refused a session: the limit of open sessions is reached", "max", s.cfg.MaxSessions)
		}
		writeError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, reason)
		return nil
	}
	s.running++
	s.runs.Add(1)
	s.mu.Unlock()

	sess := newSession(s, rand.Text())
	run, err := s.cfg.NewSession(sess)
	if err != nil {
		s.log.Error("cannot start a session", "error", err)
		s.stopped()
		writeError(w, http.StatusInternalServerError, "", jsonrpc.CodeInternalError, "cannot start a session")
		return nil
	}
	s.mu.Lock()
	s.sessions[sess.id] = sess
	open := len(s.sessions)
	s.mu.Unlock()
	s.log.Debug("session opened", "open", open)
	go func() {
		defer s.stopped()
		err := run(s.runCtx)
		if err != nil {
			s.log.Warn("session failed", "error", err)
		}
		s.end(sess)
		close(sess.done)
		s.log.Debug("session stopped")
	}()
	return sess
}

// stopped counts a session's run as returned.
func (s *Server) stopped() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.runs.Done()
}

// end ends a session: its id is forgotten at once (later requests get 404)
// and its input ends, so that its run answers what is in flight and returns.
func (s *Server) end(sess *session) {
	s.mu.Lock()
	if s.sessions[sess.id] == sess {
		delete(s.sessions, sess.id)
	}
	s.mu.Unlock()
	sess.endInput()
}

// ended answers a request the session ended under: 404, as for an unknown
// session, unless the client went away first.
func (s *Server) ended(w http.ResponseWriter, r *http.Request, id jsonrpc.ID) {
	if r.Context().Err() != nil {
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody(id, jsonrpc.CodeInvalidRequest, "the session ended"))
}

// IsLoopbackHost reports whether host (a name or an IP address, without a
// port; brackets allowed) names this machine's loopback interface:
// "localhost" or a loopback address.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackOrigin reports whether an Origin header names a page served from
// this machine's loopback interface (http or https). "null" and every other
// origin are not.
func IsLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return IsLoopbackHost(u.Hostname())
}

// hostOnly is a Host header's host, without its port.
func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// accepts reads Accept headers: whether a JSON reply and an event stream are
// acceptable. No Accept header accepts both.
func accepts(values []string) (jsonOK, streamOK bool) {
	if len(values) == 0 {
		return true, true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "*/*":
				jsonOK, streamOK = true, true
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			}
		}
	}
	return jsonOK, streamOK
}

// errorBody is a JSON-RPC error response (id null when id is zero).
func errorBody(id jsonrpc.ID, code int, message string) []byte {
	if id.IsZero() {
		id = jsonrpc.NullID
	}
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsonrpc.ID     `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{jsonrpc.Version, id, &jsonrpc.Error{Code: code, Message: message}})
	return b
}

// refuseUnread answers a request whose body is not read with status and a
// JSON-RPC error body, and closes the connection after, its body still
// unread: a client whose body never comes holds nothing of the server's.
// (net/http would otherwise read what remains of the body, without a time
// limit, to reuse the connection; the read deadline ends that read.)
func refuseUnread(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Connection", "close")
	writeError(w, status, "", jsonrpc.CodeInvalidRequest, message)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// writeError answers with an HTTP status and a JSON-RPC error body.
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int, message string) {
	writeJSON(w, status, errorBody(id, code, message))
}

// writeJSON answers with an HTTP status and a JSON body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
