// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// SupportedVersions are the protocol versions fsbroker serve answers
// initialize with, newest first (docs/protocol.md section 8). A client
// asking for another one gets the newest. Protocol 2026-07-28, which has no
// initialize, is served besides (modern.go).
var SupportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// FrontEnd is the front end's name in the policy input (input.frontEnd.name).
const FrontEnd = "serve"

// Config is what a Session runs with.
type Config struct {
	// Corridor is the session's corridor (runtime.NewCorridor); the session
	// closes it when it ends.
	Corridor *corridor.Corridor
	// Roots returns the operator's roots now.
	Roots func() *roots.Set
	// Log is the session's logger (nil: none).
	Log hclog.Logger
	// PinnedID is the host's identity when the operator pinned it; else
	// the host's declared clientInfo.name is its identity.
	PinnedID string
	// Version is fsbroker's version, sent as serverInfo.version.
	Version string
	// Transport is how the host reaches the session ("stdio").
	Transport string
	// MaxReadBytes is the most bytes one read of the corridor asks for;
	// larger files are read in chunks of it.
	MaxReadBytes int64
	// ConnOptions configure the JSON-RPC connection.
	ConnOptions []jsonrpc.Option
	// HostRootsTimeout bounds the wait for the host's answer to roots/list
	// (DefaultHostRootsTimeout).
	HostRootsTimeout time.Duration
	// WatchGrants, when set, watches the grants for changes made by any
	// process on the state directory (runtime.Runtime.WatchGrants) for as
	// long as the session runs, so that a revocation ends the host's
	// watches (GrantsChanged).
	WatchGrants func(ctx context.Context, changed func(server string)) error
	// Now is the session's clock, for the expiry of the requestStates of
	// protocol 2026-07-28 (nil: time.Now).
	Now func() time.Time
	// StateTTL is how long such a requestState stays good
	// (DefaultStateTTL).
	StateTTL time.Duration
}

// Session is one MCP session of fsbroker serve: fsbroker is the server, the
// host the client. It answers initialize, ping, tools/list, tools/call and
// the resources methods (resources.go, subscriptions.go);
// every tool call is decoded and validated here (DecodeCall, DecodeArgs),
// then goes through the corridor as the host's requests, and its result is
// built with this package's builders.
type Session struct {
	cfg  Config
	conn *jsonrpc.Conn
	log  hclog.Logger
	id   string

	ctx        context.Context // ends when Run returns
	cancel     context.CancelFunc
	background sync.WaitGroup // the session's own goroutines (roots/list)
	host       hostRoots
	sealer     *stateSealer // requestStates (protocol 2026-07-28) and resources/list cursors

	mu              sync.Mutex
	initialized     bool
	clientName      string
	clientVersion   string
	protocolVersion string
	hostElicits     bool // the host declared elicitation with form mode
	// modernStart is the caller of the session's first request of protocol
	// 2026-07-28, when no initialize came before it: the session's start and
	// end are recorded under it.
	modernStart *corridor.Caller

	resources resourceState // the resources methods' state (resources.go)
}

// NewSession returns a session over stream. Run serves it.
func NewSession(stream jsonrpc.Stream, cfg Config) (*Session, error) {
	if cfg.Corridor == nil || cfg.Roots == nil {
		return nil, errors.New("serve: a session needs a corridor and roots")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Transport == "" {
		cfg.Transport = "stdio"
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = corridor.DefaultMaxReadBytes
	}
	if cfg.HostRootsTimeout <= 0 {
		cfg.HostRootsTimeout = DefaultHostRootsTimeout
	}
	var idBytes [8]byte
	if _, err := rand.Read(idBytes[:]); err != nil {
		return nil, fmt.Errorf("serve: session id: %w", err)
	}
	sealer, err := newStateSealer(cfg.StateTTL, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, log: cfg.Log, id: hex.EncodeToString(idBytes[:]), sealer: sealer}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.host.ready = make(chan struct{})
	s.resources.subs.wake = make(chan struct{}, 1)
	cfg.Corridor.NarrowRoots(s.narrowRoots) // the host's roots only narrow
	opts := append([]jsonrpc.Option{jsonrpc.WithLogger(cfg.Log), jsonrpc.WithIDPrefix("fsbroker-"),
		jsonrpc.WithCancelNotification("notifications/cancelled", cancelledParams)}, cfg.ConnOptions...)
	s.conn = jsonrpc.NewConn(stream, s.handleRequest, s.handleNotification, opts...)
	return s, nil
}

// Run serves the host until its input ends (nil), ctx is cancelled (nil),
// or the stream breaks. It closes the corridor and records the session's
// end; it does not close the stream.
func (s *Session) Run(ctx context.Context) error {
	defer s.cfg.Corridor.Close()
	defer context.AfterFunc(ctx, s.cancel)()
	if s.cfg.WatchGrants != nil {
		if err := s.cfg.WatchGrants(s.ctx, s.GrantsChanged); err != nil {
			s.log.Warn("consent grants changed by other processes will not end the host's watches", "error", err)
		}
	}
	err := s.conn.Serve(ctx)
	s.cancel()
	s.background.Wait()
	detail := "ended"
	if err != nil {
		detail = "ended: " + err.Error()
	}
	if s.isInitialized() {
		s.cfg.Corridor.RecordSession(ctx, s.caller(""), audit.KindSessionEnd, detail)
	} else if start := s.modernStarted(); start != nil {
		s.cfg.Corridor.RecordSession(ctx, *start, audit.KindSessionEnd, detail)
	}
	return err
}

// cancelledParams are the params of the notifications/cancelled the session
// sends the host for a request of its own it no longer awaits: a consent
// question (elicitation/create) past its time limit or whose tool call
// ended, a roots/list past its time limit.
func cancelledParams(id jsonrpc.ID, cause error) any {
	reason := "fsbroker: the request was cancelled"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "fsbroker: no answer within the time limit"
	}
	return map[string]any{"requestId": id, "reason": reason}
}

// caller is the host as the corridor knows it, calling tool.
func (s *Session) caller(tool string) corridor.Caller {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := corridor.Caller{ID: s.cfg.PinnedID, Pinned: true, Name: s.clientName, Version: s.clientVersion,
		SessionID: s.id, ProtocolVersion: s.protocolVersion, Transport: s.cfg.Transport, FrontEnd: FrontEnd, Tool: tool}
	if c.ID == "" {
		c.ID, c.Pinned = s.clientName, false
	}
	return c
}

func (s *Session) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// handleRequest answers one request of the host: a request of protocol
// 2026-07-28 (per-request _meta) statelessly (modern.go), any other as the
// session negotiated in its initialize.
func (s *Session) handleRequest(ctx context.Context, req *jsonrpc.Message) (any, error) {
	if meta, isModern, err := s.routeModern(req); err != nil {
		return nil, err
	} else if isModern {
		return s.handleModern(ctx, req, meta)
	}
	switch req.Method {
	case "initialize":
		return s.initialize(ctx, req.Params)
	case "ping":
		return struct{}{}, nil
	}
	if !s.isInitialized() {
		e := errcode.New(errcode.NotInitialized, "initialize first")
		return nil, rpcError(e)
	}
	switch req.Method {
	case "tools/list":
		return ToolsListResult(), nil
	case "tools/call":
		return s.callTool(ctx, req.Params)
	case MethodResourcesList, MethodResourceTemplatesList, MethodResourcesRead, MethodResourcesSubscribe, MethodResourcesUnsubscribe:
		s.awaitHostRoots(ctx)
		return s.handleResources(consent.WithElicitor(ctx, s), req.Method, req.Params)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
}

// handleNotification takes the host's notifications; none needs an answer.
// Its roots are asked for after notifications/initialized and on
// notifications/roots/list_changed; notifications/cancelled stops the
// request it names (its context ends; no reply is sent).
func (s *Session) handleNotification(_ context.Context, n *jsonrpc.Message) {
	s.log.Trace("notification", "method", n.Method)
	switch n.Method {
	case "notifications/initialized", "notifications/roots/list_changed":
		s.askHostRoots(n.Method)
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(n.Params, &p) == nil && len(p.RequestID) > 0 {
			if id, err := jsonrpc.ParseID(p.RequestID); err == nil {
				s.conn.CancelRequest(id)
			}
		}
	}
}

// initializeParams are the members of initialize the session reads.
type initializeParams struct {
	ProtocolVersion string `json:"protocolVersion"`
	ClientInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
	Capabilities struct {
		Roots json.RawMessage `json:"roots"`
	} `json:"capabilities"`
}

// ReasonAlreadyInitialized is the refusal (data.reason) of an initialize
// in a session that has had one.
const ReasonAlreadyInitialized = "the session is initialized already; a second initialize changes nothing"

// initialize negotiates the version, takes the host's clientInfo as its
// identity, and records the session's start. A second initialize is
// refused and recorded (INVALID_PARAMS, ReasonAlreadyInitialized): the
// session goes on under its first identity, version and capabilities.
func (s *Session) initialize(ctx context.Context, params json.RawMessage) (any, error) {
	if s.isInitialized() {
		return nil, s.refuseSecondInitialize(ctx)
	}
	var p initializeParams
	if err := json.Unmarshal(params, &p); err != nil || p.ClientInfo.Name == "" {
		e := errcode.New(errcode.InvalidParams, "initialize needs params with clientInfo.name")
		return nil, rpcError(e)
	}
	version := SupportedVersions[0]
	for _, v := range SupportedVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	s.mu.Lock()
	if s.initialized { // another initialize came first
		s.mu.Unlock()
		return nil, s.refuseSecondInitialize(ctx)
	}
	s.initialized, s.clientName, s.clientVersion, s.protocolVersion = true, p.ClientInfo.Name, p.ClientInfo.Version, version
	s.hostElicits = consent.HostElicitsForms(params)
	elicits := s.hostElicits
	s.mu.Unlock()
	declaresRoots := capabilityDeclared(p.Capabilities.Roots)
	s.startHostRoots(declaresRoots)
	s.log.Info("the host", "name", p.ClientInfo.Name, "declaresRoots", declaresRoots, "consentFormsInItsUI", elicits)
	s.cfg.Corridor.RecordSession(ctx, s.caller(""), audit.KindSessionStart, "fsbroker serve")
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}, "resources": s.resourcesCapability()},
		"serverInfo":      map[string]any{"name": "fsbroker", "version": s.cfg.Version},
	}, nil
}

// refuseSecondInitialize records and refuses an initialize in a session
// that has had one.
func (s *Session) refuseSecondInitialize(ctx context.Context) error {
	s.log.Warn("refused a second initialize: the session keeps its identity and version")
	return s.refuse(ctx, s.caller(""), "initialize", "", errcode.New(errcode.InvalidParams, ReasonAlreadyInitialized))
}

// callTool runs one tools/call: a malformed envelope, an unknown tool or
// arguments that fail the tool's inputSchema are JSON-RPC errors (recorded
// with Corridor.Refuse); a request the corridor refuses or fails is an
// isError result whose text starts with its code.
func (s *Session) callTool(ctx context.Context, params json.RawMessage) (any, error) {
	name, args, rawArgs, err := DecodeToolCall(params)
	if err != nil {
		return nil, s.refuseCall(ctx, s.caller(name), err)
	}
	s.awaitHostRoots(ctx)
	res, err := s.runTool(consent.WithElicitor(ctx, s), s.caller(name), args, rawArgs)
	if err != nil {
		res = ErrorResult(refusalText(err))
	}
	return res.reply(), nil
}

// refuseCall records a tools/call refused before the corridor (a malformed
// envelope, an unknown tool, arguments that fail the tool's inputSchema)
// with Corridor.Refuse, and returns its JSON-RPC error.
func (s *Session) refuseCall(ctx context.Context, caller corridor.Caller, err error) error {
	var refusal *errcode.Error
	var argsErr *ArgumentsError
	var toolErr *UnknownToolError
	switch {
	case errors.As(err, &argsErr):
		refusal = argsErr.Errcode()
	case errors.As(err, &toolErr):
		refusal = toolErr.Errcode()
	default:
		refusal = errcode.Wrap(errcode.InvalidParams, "tools/call params", err)
	}
	return s.refuse(ctx, caller, "tools/call", "", refusal)
}

// rpcError is the JSON-RPC error of a brokered failure: its section 4
// number and message, and its data (code, reason, decisionId, details).
func rpcError(e *errcode.Error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: e.Code.RPC(), Message: e.Code.Message(), Data: e.RPCData()}
}

// refusalText is the text of an isError result: the code and the reason
// ("PERMISSION_DENIED: secrets: ..."), never the Go error underneath, which
// may name host paths.
func refusalText(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return string(e.Code) + ": " + e.Reason
	}
	return "INTERNAL_ERROR: the tool failed"
}
