// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// Protocol revision 2026-07-28 over Streamable HTTP (the revision's
// basic/transports/streamable-http): no sessions, no GET stream, every
// request a POST of its own that names its revision in the
// MCP-Protocol-Version header and in its params' _meta, with the headers
// Mcp-Method and Mcp-Name mirroring its body. The server serves every such
// request, whichever connection it comes on, with one session of its own
// (the stateless session: a jsonrpc.RoutedStream like an HTTP session's,
// created at the first such request and ended by Close), so that what the
// caller's session keeps across requests (fsbroker serve's requestState
// key) holds for every client of the token. Each request's id is replaced
// by one of the server's on its way in, and restored in its reply, so that
// clients that use the same ids never meet.

// Header names of the revision (canonical form).
const (
	headerMethod = "Mcp-Method"
	headerName   = "Mcp-Name"
)

// CodeHeaderMismatch is the revision's HeaderMismatch error: the HTTP
// headers do not match the body, or a required one is missing or malformed.
const CodeHeaderMismatch = -32020

// MaxStatelessRequests bounds the requests without sessions awaiting their
// replies at once, over the whole server (429 beyond). The stateless
// session serves every client of the server, so its caller runs each
// request it is given at once, up to this many (Stateless): a request that
// waits (for the person's consent) then never holds another client's.
const MaxStatelessRequests = maxPendingRequests

// MaxStatelessBytes bounds the bytes of the requests without sessions
// awaiting their replies, and of their replies not yet read by their
// clients, at once, over the whole server (429 beyond): the memory the
// clients of the stateless session hold with requests that wait and with
// replies they do not read. Its caller lets the session hold twice as much (Stateless), so that
// the session never stops reading, for every client, because of requests
// this bound admitted (one whose client went away leaves it at once, and
// the session when the cancellation stops it).
const MaxStatelessBytes = 256 << 20

// Stateless reports whether stream is the server's stateless session,
// which serves the requests of every client without sessions
// (Config.ModernVersions), for Config.NewSession.
func Stateless(stream jsonrpc.RoutedStream) bool {
	sess, ok := stream.(*session)
	return ok && sess.stateless
}

// maxModernBodies bounds the bodies of stateless requests read or waiting
// for the stateless session, over the whole server.
const maxModernBodies = 4 * bodySlots

// The marks around a header value carried as base64 (=?base64?B64?=).
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// modernVersion returns the version r's MCP-Protocol-Version header names
// when it is one the server serves without a session, else "".
func (s *Server) modernVersion(r *http.Request) string {
	if v := r.Header.Get(headerProtocolVersion); slices.Contains(s.cfg.ModernVersions, v) {
		return v
	}
	return ""
}

// serveModern serves a request of a revision without sessions: POST only
// (GET and DELETE are 405: the revision has no event stream and no session
// to end); an Mcp-Session-Id header is ignored and none is sent.
func (s *Server) serveModern(w http.ResponseWriter, r *http.Request, version string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest,
			"method "+r.Method+" not allowed: protocol "+version+" has no sessions and no event stream; POST each request")
		return
	}
	jsonOK, streamOK, ok := checkPostHeaders(w, r)
	if !ok {
		return
	}
	msg, body, release, ok := s.readMessage(w, r, s.modernSlots)
	if !ok {
		return
	}
	defer release()
	if !msg.IsRequest() {
		// The revision defines no notification from the client over this
		// transport (closing a stream cancels its request), and a client
		// sends no replies: accepted, and nothing reaches the session.
		s.log.Debug("ignored a message that is no request, on protocol "+version, "method", msg.Method)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if reason := mismatchedHeaders(r, msg, version); reason != "" {
		writeJSON(w, http.StatusBadRequest, errorBody(msg.ID, CodeHeaderMismatch, "Header mismatch: "+reason))
		return
	}
	if msg.Method == methodListen && !streamOK {
		writeJSON(w, http.StatusNotAcceptable, errorBody(msg.ID, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: "+methodListen+" answers with an event stream; accept text/event-stream"))
		return
	}
	if msg.Method == "initialize" {
		writeJSON(w, http.StatusNotFound, errorBody(msg.ID, jsonrpc.CodeMethodNotFound, "Method not found: protocol "+version+
			" has no initialize (an earlier revision's initialize is sent without MCP-Protocol-Version "+version+")"))
		return
	}
	sess := s.statelessSession(w)
	if sess == nil {
		return
	}
	inner := jsonrpc.StringID("http-" + strconv.FormatUint(s.modernSeq.Add(1), 10))
	renamed, err := withID(body, inner)
	if err != nil {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "not a JSON-RPC request")
		return
	}
	weight := int64(len(renamed))
	if !s.admitStatelessBytes(weight) {
		writeJSON(w, http.StatusTooManyRequests, errorBody(msg.ID, jsonrpc.CodeInvalidRequest,
			"too many bytes of requests await their replies"))
		return
	}
	defer s.statelessBytes.Add(-weight)
	ex, status := sess.register(inner, streamOK)
	if ex == nil {
		writeJSON(w, status, errorBody(msg.ID, jsonrpc.CodeInvalidRequest, "too many requests await their replies"))
		return
	}
	outer := msg.ID
	var replyBytes int64
	// Only a listen's messages name their request in _meta: the others
	// (a large resources/read among them) are not scanned and copied again.
	listen := msg.Method == methodListen
	if listen {
		ex.message = func(msg []byte) []byte { return restoreSubscriptionID(msg, inner, outer) }
	}
	ex.reply = func(reply []byte) ([]byte, int) {
		restored, status := restoreID(reply, inner, outer)
		if listen {
			restored = restoreSubscriptionID(restored, inner, outer)
		}
		// Held until its client has read it (writeTimeout at most): its
		// bytes count against the bound until the POST ends.
		replyBytes = int64(len(restored))
		s.statelessBytes.Add(replyBytes)
		return restored, status
	}
	defer func() { s.statelessBytes.Add(-replyBytes) }()
	defer close(ex.gone)
	if !sess.deliver(r.Context(), renamed) {
		sess.unregister(inner, ex)
		s.ended(w, r, outer)
		return
	}
	release()
	if !sess.respond(w, r, ex, jsonOK, false) {
		sess.unregister(inner, ex)
		if r.Context().Err() != nil {
			s.cancelStateless(sess, inner)
		}
	}
}

// admitStatelessBytes counts n more bytes of stateless requests awaiting
// their replies, unless that would pass the server's bound.
func (s *Server) admitStatelessBytes(n int64) bool {
	for {
		held := s.statelessBytes.Load()
		if held+n > s.maxStatelessBytes {
			return false
		}
		if s.statelessBytes.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// cancelStateless tells the stateless session that the client of its
// request inner closed the request's stream, which the revision makes its
// cancellation (basic/patterns/cancellation): the session gets
// notifications/cancelled for inner, an id no client can name, so that it
// stops the request and sends nothing more for it.
func (s *Server) cancelStateless(sess *session, inner jsonrpc.ID) {
	msg, err := json.Marshal(map[string]any{"jsonrpc": jsonrpc.Version, "method": "notifications/cancelled",
		"params": map[string]any{"requestId": inner, "reason": "the client closed the request's stream"}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.runCtx, s.slotWait)
	defer cancel()
	if !sess.deliver(ctx, msg) {
		s.log.Debug("could not cancel a request whose client went away: the session is busy or ended")
	}
}

// statelessSession returns the server's stateless session, starting it at
// the first request; nil, the request answered, when the server is closing
// or the session cannot start.
func (s *Server) statelessSession(w http.ResponseWriter) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		writeError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "the server is shutting down")
		return nil
	}
	if s.stateless != nil {
		return s.stateless
	}
	sess := newSession(s, "")
	sess.stateless = true
	sess.idleTimer.Stop() // it serves every client: it ends with the server
	run, err := s.cfg.NewSession(sess)
	if err != nil {
		s.log.Error("cannot start the session of protocol "+strings.Join(s.cfg.ModernVersions, ", "), "error", err)
		writeError(w, http.StatusInternalServerError, "", jsonrpc.CodeInternalError, "cannot start a session")
		return nil
	}
	s.stateless = sess
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		if err := run(s.runCtx); err != nil {
			s.log.Warn("the session of requests without sessions failed", "error", err)
		}
		s.mu.Lock()
		if s.stateless == sess {
			s.stateless = nil // the next request starts another
		}
		s.mu.Unlock()
		sess.endInput()
		close(sess.done)
	}()
	return sess
}

// mismatchedHeaders checks the headers that mirror a request's body
// (basic/transports/streamable-http, "Server Validation"): MCP-Protocol-Version
// must be the _meta's protocol version, Mcp-Method the method, and Mcp-Name
// (base64 when sent as =?base64?...?=) params.name of tools/call and
// prompts/get, params.uri of resources/read. Each must be sent once. It
// returns why they do not match, or "".
func mismatchedHeaders(r *http.Request, msg *jsonrpc.Message, version string) string {
	if got := modern.ProtocolVersion(msg.Params); got != version {
		return fmt.Sprintf("%s header value %q does not match body value %q (params._meta[%q])",
			headerProtocolVersion, version, got, modern.MetaProtocolVersion)
	}
	if len(r.Header.Values(headerProtocolVersion)) != 1 {
		return headerProtocolVersion + " is sent more than once"
	}
	method, reason := singleHeader(r, headerMethod)
	if reason != "" {
		return reason
	}
	if method != msg.Method {
		return fmt.Sprintf("%s header value %q does not match body value %q", headerMethod, method, msg.Method)
	}
	var member string
	switch msg.Method {
	case "tools/call", "prompts/get":
		member = "name"
	case "resources/read":
		member = "uri"
	default:
		if len(r.Header.Values(headerName)) > 0 {
			return headerName + " is sent for " + msg.Method + ", which has none"
		}
		return ""
	}
	var params map[string]json.RawMessage
	_ = json.Unmarshal(msg.Params, &params)
	var want string
	if json.Unmarshal(params[member], &want) != nil {
		// No name in the body: the request is malformed, and the session
		// says so; a header naming something is still a mismatch.
		if len(r.Header.Values(headerName)) > 0 {
			return headerName + " is sent, but params." + member + " is not a string"
		}
		return ""
	}
	sent, reason := singleHeader(r, headerName)
	if reason != "" {
		return reason
	}
	name, err := decodeHeaderValue(sent)
	if err != nil {
		return headerName + ": " + err.Error()
	}
	if name != want {
		return fmt.Sprintf("%s header value %q does not match body value %q", headerName, name, want)
	}
	return ""
}

// singleHeader returns the one value of header name, or why there is not
// exactly one.
func singleHeader(r *http.Request, name string) (value, reason string) {
	switch values := r.Header.Values(name); len(values) {
	case 0:
		return "", name + " header is required"
	case 1:
		return values[0], ""
	default:
		return "", name + " header is sent more than once"
	}
}

// decodeHeaderValue returns a header value as sent, or decoded from its
// base64 form (=?base64?B64?=, standard alphabet, UTF-8).
func decodeHeaderValue(v string) (string, error) {
	if !strings.HasPrefix(v, base64Prefix) || !strings.HasSuffix(v, base64Suffix) || len(v) < len(base64Prefix)+len(base64Suffix) {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
	if err != nil || !utf8.Valid(b) {
		return "", errors.New("not valid base64 of UTF-8 text")
	}
	return string(b), nil
}

// withID returns the request body with its id replaced by id.
func withID(body []byte, id jsonrpc.ID) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("streamable: a request: %w", err)
	}
	members["id"] = json.RawMessage(id)
	return json.Marshal(members)
}

// restoreID returns the reply to the request renamed inner with the
// client's id outer again, and the HTTP status the revision gives it: 404
// for Method not found, 400 for its errors about the version, the headers
// and the client's capabilities, else 200. jsonrpc.Conn writes every reply
// starting with {"jsonrpc":"2.0","id":ID, which is replaced in place; any
// other reply is decoded and written again.
func restoreID(reply []byte, inner, outer jsonrpc.ID) ([]byte, int) {
	const head = `{"jsonrpc":"2.0","id":`
	var restored []byte
	if rest, ok := bytes.CutPrefix(reply, []byte(head+string(inner))); ok {
		restored = append(append([]byte(head), outer...), rest...)
		if !bytes.HasPrefix(rest, []byte(`,"error":`)) {
			return restored, http.StatusOK // a result: not decoded again
		}
	} else {
		var members map[string]json.RawMessage
		if json.Unmarshal(reply, &members) != nil {
			return errorBody(outer, jsonrpc.CodeInternalError, "internal error"), http.StatusInternalServerError
		}
		members["id"] = json.RawMessage(outer)
		restored, _ = json.Marshal(members)
	}
	status := http.StatusOK
	if msg, err := jsonrpc.Decode(restored); err == nil && msg.Error != nil {
		switch msg.Error.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case modern.CodeUnsupportedProtocolVersion, CodeHeaderMismatch, modern.CodeMissingRequiredClientCapability:
			status = http.StatusBadRequest
		}
	}
	return restored, status
}

// methodListen is the revision's request for a stream of notifications
// (basic/patterns/subscriptions): its response is an event stream, and its
// messages name it by its id.
const methodListen = "subscriptions/listen"

// restoreSubscriptionID returns msg, a message the session sent for the
// request renamed inner (a notification of its subscriptions/listen
// stream, or its final result), with the client's id outer in place of
// inner as its _meta's subscription id. The session writes the member
// compactly ("KEY":ID); a string value holding those bytes would have its
// quotes escaped, so nothing else matches.
func restoreSubscriptionID(msg []byte, inner, outer jsonrpc.ID) []byte {
	member := `"` + modern.MetaSubscriptionID + `":`
	return bytes.ReplaceAll(msg, []byte(member+string(inner)), []byte(member+string(outer)))
}

// unsupportedVersion answers a request whose MCP-Protocol-Version names no
// version the server serves: 400 with UnsupportedProtocolVersionError
// (-32022) listing them, which tells a client of a later revision that this
// server speaks one it can use.
func (s *Server) unsupportedVersion(w http.ResponseWriter, requested string) {
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsonrpc.ID     `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{jsonrpc.Version, jsonrpc.NullID, &jsonrpc.Error{Code: modern.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version",
		Data: map[string]any{"supported": slices.Concat(s.cfg.ModernVersions, s.cfg.Versions), "requested": requested}}})
	writeJSON(w, http.StatusBadRequest, b)
}
