// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// WithForwardAudit has the Router record every request the host sends
// through to the server in trail: a forward record (the method, the tool's
// name for tools/call, the keyed digest of the arguments, never their
// content) before the request is passed on, and an outcome record when its
// reply comes back, it is cancelled, or the session ends without one. A
// request whose forward record cannot be written is not passed on: the host
// gets an internal error (IO_ERROR, "audit unavailable"). serverID is the
// operator's pinned identity of the server; "" records the name the server
// declares in its initialize result. The records carry the id of the
// Router's broker session (SessionFunc), as its session_start record does.
//
// trail is guarded (audit.Guard over a sink that digests arguments, such as
// an audit.Writer): its deadline bounds every record, so that a trail that
// stops answering holds a host request at most that long, and it is then
// refused; after that the guard refuses each record at once until the stuck
// append returns.
func WithForwardAudit(trail *audit.Guarded, serverID string) Option {
	return func(r *Router) { r.fwd = &forwardAudit{trail: trail, pinned: serverID} }
}

// forwardAudit is the Router's record of forwarded requests.
type forwardAudit struct {
	trail     *audit.Guarded
	pinned    string
	sessionID string // the sessionId of the records: the Router's broker session's
	next      atomic.Uint64
	server    atomic.Pointer[serverIdentity]
}

// serverIdentity is what the server's initialize result, or a result's
// _meta, said about it.
type serverIdentity struct {
	name, protocolVersion string
}

// forwarded is a host request's forward record, kept until its outcome.
type forwarded struct {
	id    string
	start time.Time
	tool  string
}

// newSessionID returns a random id for the broker session of one Router,
// of the form broker.NewSession gives its sessions: 16 hex digits.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// maxToolName is the longest tool name a record keeps.
const maxToolName = 256

// reasonForwardUnrecorded is why a request whose forward record could not
// be written was not passed on.
const reasonForwardUnrecorded = "audit unavailable: the request was not passed to the server, since its record could not be written"

// record appends rec with the Router's identity members, under a context
// that does not end with the Router: the guard's deadline bounds it
// (audit.Guarded gives the append, and the sink's context, that deadline).
func (f *forwardAudit) record(rec audit.Record) error {
	rec.Transport, rec.SessionID = "wrap", f.sessionID
	rec.Server = f.pinned
	if id := f.server.Load(); id != nil {
		if rec.Server == "" {
			rec.Server = id.name
		}
		if rec.ProtocolVersion == "" {
			rec.ProtocolVersion = id.protocolVersion
		}
	}
	_, err := f.trail.Append(context.Background(), rec)
	return err
}

// learnServer takes the server's initialize result.
func (f *forwardAudit) learnServer(result json.RawMessage) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if json.Unmarshal(result, &r) == nil {
		f.server.Store(&serverIdentity{name: r.ServerInfo.Name, protocolVersion: r.ProtocolVersion})
	}
}

// forward writes the forward record of a host request (detail: what else to
// say of it) and returns what its outcome record needs, or the error that
// keeps it from the server.
func (f *forwardAudit) forward(msg *jsonrpc.Message, detail string) (forwarded, error) {
	rec := audit.Record{Kind: audit.KindForward, Method: shortMethod(msg.Method), Detail: detail}
	fw := forwarded{id: fmt.Sprintf("fwd-%s-%d", f.sessionID, f.next.Add(1)), start: time.Now()}
	rec.DecisionID = fw.id
	args, tool := forwardedArguments(msg.Method, msg.Params)
	if tool != "" {
		fw.tool = tool
		rec.Tool = tool
	}
	if len(args) > 0 {
		d, err := f.trail.ArgumentsDigest(args)
		if err != nil {
			return fw, fmt.Errorf("digest the arguments: %w", err)
		}
		rec.ArgsDigest = d
	}
	rec.ProtocolVersion = modern.ProtocolVersion(msg.Params)
	if err := f.record(rec); err != nil {
		return fw, err
	}
	return fw, nil
}

// outcome returns the outcome record of a forwarded request, for record:
// its reply (reply nil: outcome, with no reply, says what became of it).
func (f *forwardAudit) outcome(method string, fw forwarded, reply *jsonrpc.Message, outcome string) audit.Record {
	rec := audit.Record{Kind: audit.KindOutcome, DecisionID: fw.id, Method: shortMethod(method), Tool: fw.tool,
		DurationUs: time.Since(fw.start).Microseconds(), Outcome: outcome}
	if reply != nil {
		rec.Outcome = replyOutcome(reply)
		if reply.Error != nil {
			rec.Code = strconv.Itoa(reply.Error.Code)
		}
	}
	return rec
}

// The outcomes of forwarded requests, besides "ok".
const (
	outcomeError         = "error"          // a JSON-RPC error reply (its code in the record's code)
	outcomeToolError     = "tool_error"     // a tools/call result with isError true
	outcomeInputRequired = "input_required" // an InputRequiredResult (protocol 2026-07-28)
	outcomeCancelled     = "cancelled"      // the host cancelled it
	outcomeUnanswered    = "unanswered"     // the session ended before the server answered
)

// replyOutcome is the outcome a reply records. Members are read by their
// exact names, as JSON and MCP name them (a result's "IsError" or
// "RESULTTYPE" is not its isError or resultType), and a name given twice
// counts as its last occurrence, as the host's JSON parser reads it.
func replyOutcome(reply *jsonrpc.Message) string {
	if reply.Error != nil {
		return outcomeError
	}
	var members map[string]json.RawMessage     // map keys match exactly; a struct's fields would not
	_ = json.Unmarshal(reply.Result, &members) // a result that is not an object is "ok"
	var isError bool
	var resultType string
	switch {
	case json.Unmarshal(members["resultType"], &resultType) == nil && resultType == modern.ResultTypeInputRequired:
		return outcomeInputRequired
	case json.Unmarshal(members["isError"], &isError) == nil && isError:
		return outcomeToolError
	}
	return "ok"
}

// forwardedArguments returns what a request's arguments digest is taken
// over, and the tool a tools/call names: params.arguments for tools/call and
// prompts/get, else params without _meta (nil when nothing is left).
func forwardedArguments(method string, params json.RawMessage) (args json.RawMessage, tool string) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		if len(params) > 0 && string(params) != "null" {
			return params, "" // params that are not an object are digested as they are
		}
		return nil, ""
	}
	switch method {
	case "tools/call", "prompts/get":
		if method == "tools/call" {
			var name string
			if json.Unmarshal(p["name"], &name) == nil {
				tool = shortText(name, maxToolName)
			}
		}
		return p["arguments"], tool
	}
	delete(p, "_meta")
	if len(p) == 0 {
		return nil, ""
	}
	return mustMarshal(p), ""
}

// shortText is s cut to at most n bytes of valid UTF-8.
func shortText(s string, n int) string {
	if len(s) <= n {
		return strings.ToValidUTF8(s, "")
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// forwardRefused is the host's answer to a request whose forward record
// could not be written.
func forwardRefused(id jsonrpc.ID) []byte {
	return mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: id, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeInternalError, Message: reasonForwardUnrecorded,
		Data: map[string]string{"code": string(errcode.IOError), "reason": reasonForwardUnrecorded},
	}})
}
