// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/schema"
)

// method is one entry of the method table: the requests a server may send.
type method struct {
	// beforeInit is true for the methods allowed before initialization
	// (only ping).
	beforeInit bool
	// audited is true for the methods that are decided, and so leave a
	// decision record (and an outcome record when allowed) in the audit
	// trail: roots/list and files/*, but files/unwatch (it only ends what
	// files/watch started).
	audited bool
	handle  func(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error)
}

// aliases maps the draft's fs.* spellings to the canonical method names.
// They are resolved before anything else, so a request is validated, decided
// and audited under its canonical name.
var aliases = map[string]string{
	"fs.read":    "files/read",
	"fs.write":   "files/write",
	"fs.list":    "files/list",
	"fs.create":  "files/create",
	"fs.delete":  "files/delete",
	"fs.rename":  "files/rename",
	"fs.watch":   "files/watch",
	"fs.consent": "files/consent",
}

// CanonicalMethod returns the canonical name of a method (fs.read ->
// files/read); other names are returned unchanged.
func CanonicalMethod(name string) string {
	if c, ok := aliases[name]; ok {
		return c
	}
	return name
}

func (s *Session) methodTable() map[string]method {
	m := map[string]method{
		"ping":       {beforeInit: true, handle: func(context.Context, corridor.Caller, json.RawMessage) (any, error) { return struct{}{}, nil }},
		"roots/list": {audited: true, handle: s.listRoots},
	}
	s.fileMethods(m)
	return m
}

// handleRequest is the front of the pipeline: method resolution, the
// initialization gate, the rate limit and params validation, then the
// method's adapter onto the corridor.
func (s *Session) handleRequest(ctx context.Context, req *jsonrpc.Message) (any, error) {
	name := CanonicalMethod(req.Method)
	m, known := s.methods[name]
	if !s.initialized.Load() && !(known && m.beforeInit) {
		return nil, toRPC(errcode.New(errcode.NotInitialized,
			"the session is not initialized yet: only ping is answered before notifications/initialized"))
	}
	caller := s.caller()
	if s.limiter != nil && name != "ping" {
		// Every request but ping counts, unknown methods too (docs/protocol.md section 6):
		// a flood of them is held back like any other.
		release, refusal, record, suppressed := s.limiter.admit(caller.StateKey())
		if refusal != nil {
			var err error = refusal
			if record {
				err = s.corridor.RefuseRate(ctx, caller, corridor.Truncate(name, 128), refusal, suppressed)
			}
			return nil, toRPC(err)
		}
		defer release()
	}
	if !known {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + corridor.Truncate(req.Method, 128)}
	}
	if m.audited {
		// The session's start record comes first in the trail.
		select {
		case <-s.startRecorded:
		case <-ctx.Done():
			return nil, toRPC(errcode.New(errcode.Timeout, "the session is still starting"))
		}
	}
	result, err := s.handleKnown(ctx, caller, name, m, req)
	if err != nil {
		s.log.Debug("request failed", "method", name, "id", string(req.ID), "code", errcode.Of(err))
		return nil, toRPC(err)
	}
	s.log.Debug("request answered", "method", name, "id", string(req.ID))
	return result, nil
}

// handleKnown validates a known method's params and runs its adapter. An
// audited request refused here leaves its refusal record (refuse).
func (s *Session) handleKnown(ctx context.Context, caller corridor.Caller, name string, m method, req *jsonrpc.Message) (any, error) {
	err := checkText(req.Params)
	if err == nil {
		if err = s.validator.ValidateParams(name, req.Params); err != nil {
			var verr *schema.Error
			if !errors.As(err, &verr) {
				return nil, err // no schema for a method in the table: a programming error, answered as internal
			}
			err = errcode.New(errcode.InvalidParams, "params do not match the schema of "+name).With("errors", verr.Errors)
		}
	}
	if err != nil {
		if m.audited {
			return nil, s.refuse(ctx, caller, name, req.Params, err)
		}
		return nil, err
	}
	return m.handle(ctx, caller, req.Params)
}

// refuse has the corridor record an audited request the session refused
// before calling it, naming the paths its params give, and returns err with
// the record's decision id.
func (s *Session) refuse(ctx context.Context, caller corridor.Caller, method string, params json.RawMessage, err error) error {
	path, newPath := corridor.NamedPaths(params)
	return s.corridor.Refuse(ctx, caller, method, path, newPath, err)
}

// toRPC turns an error into the JSON-RPC error sent to the server. A
// brokered failure keeps its code, reason and details, plus the decision id
// of an audited request (data.decisionId); anything else is returned as it
// is (the connection answers it as a generic internal error and logs it).
func toRPC(err error) error {
	var e *errcode.Error
	if !errors.As(err, &e) {
		return err
	}
	return &jsonrpc.Error{Code: e.Code.RPC(), Message: e.Code.Message(), Data: e.RPCData()}
}

// rootEntry is one root as roots/list returns it.
type rootEntry struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// listRoots answers roots/list with the current roots that the policy lets
// this server see.
func (s *Session) listRoots(ctx context.Context, caller corridor.Caller, params json.RawMessage) (any, error) {
	r, err := s.corridor.Roots(ctx, caller, corridor.RootsRequest{Params: params})
	if err != nil {
		return nil, err
	}
	entries := make([]rootEntry, 0, len(r.Roots))
	for _, root := range r.Roots {
		entries = append(entries, rootEntry{URI: root.URI, Name: root.Name})
	}
	return map[string]any{"roots": entries}, nil
}

// handleNotification takes the server's notifications.
func (s *Session) handleNotification(_ context.Context, n *jsonrpc.Message) {
	switch n.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if err := json.Unmarshal(n.Params, &p); err != nil || len(p.RequestID) == 0 {
			s.log.Debug("ignoring a malformed cancellation")
			return
		}
		if id, err := jsonrpc.ParseID(p.RequestID); err == nil {
			s.log.Debug("server cancelled a request", "id", string(id), "reason", corridor.Truncate(p.Reason, 256))
			s.conn.CancelRequest(id)
		}
	case "notifications/message":
		s.logServerMessage(n.Params)
	default:
		s.log.Debug("ignoring notification", "method", corridor.Truncate(n.Method, 128))
	}
}

// logServerMessage writes an MCP log notification from the server to the
// broker's log, at the server's level.
func (s *Session) logServerMessage(params json.RawMessage) {
	var p struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		s.log.Debug("ignoring a malformed log notification")
		return
	}
	level := hclog.Info
	switch p.Level {
	case "debug":
		level = hclog.Debug
	case "notice", "info":
		level = hclog.Info
	case "warning":
		level = hclog.Warn
	case "error", "critical", "alert", "emergency":
		level = hclog.Error
	}
	s.log.Named("server").Log(level, corridor.Truncate(string(p.Data), 4096), "logger", corridor.Truncate(p.Logger, 128))
}
