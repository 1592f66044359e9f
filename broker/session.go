// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package broker runs fsbroker's MCP sessions: the broker is the MCP client,
// the program that wants files is the MCP server. A Session negotiates the
// protocol with the server, answers its roots/list and files/* requests, and
// sends it notifications. It is a front end of the request corridor
// (package corridor): its method handlers decode and validate the params and
// hand the corridor a typed request, which runs the pipeline of
// docs/protocol.md section 1.
//
// A Session runs over any jsonrpc.Stream, so the same code serves a server on
// this process's stdio, a child process, or a remote transport.
//
// # Using the broker from a Go host
//
// A Go MCP host serves one server's roots/list and files/* with NewSession
// and Run: give it a jsonrpc.Stream to the server (jsonrpc.NewLineStream over
// the server's stdio, or any transport that yields whole JSON-RPC messages),
// the roots (WithRoots), an executor (WithExecutor), a decision stage
// (WithDecider: engine.Decider over an engine.Engine with the built-in
// policies.FS or the admin's own) and an audit trail (WithAudit: an
// audit.Sink, such as an audit.Writer, written under a deadline). The session
// fails closed: without a decider it refuses every request, and without a
// trail every audited one, unless the host passes WithoutAuditTrail. The rest
// is optional and each piece is the same the fsbroker command uses:
// WithConsent (a consent.Provider and a grants.Store), WithUsage,
// WithLimiter, WithWatchHub, WithLimits, WithServerID. The session sends
// initialize, then answers the server's requests until the stream ends; the
// host keeps the process-wide pieces (executor, hub, grant store, audit
// writer) and shares them between sessions. See the package example.
package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/schema"
)

// supportedVersions are the protocol versions the broker speaks, newest first.
// (2026-07-28 forbids server-initiated requests, so it is not offered.)
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// StatelessVersion is protocol revision 2026-07-28, which has no initialize
// handshake and no requests from the server (they come inside an
// InputRequiredResult instead). A session accepts it only under fsbroker
// wrap (WithStatelessVersion), whose Router answers the session's initialize
// itself and feeds it the roots/list requests it takes out of the server's
// InputRequiredResults.
const StatelessVersion = modern.Version

// SupportedVersions returns the protocol versions the broker speaks, newest
// first; the first is the one offered in initialize.
func SupportedVersions() []string { return slices.Clone(supportedVersions) }

// DefaultInitTimeout bounds the wait for the server's initialize result.
const DefaultInitTimeout = 30 * time.Second

// VersionError is returned by Run when the server answered initialize with a
// protocol version the broker does not support.
type VersionError struct {
	Got string
}

// Error implements the error interface.
func (e *VersionError) Error() string {
	return fmt.Sprintf("server answered initialize with unsupported protocol version %q (supported: %v)", e.Got, supportedVersions)
}

// ServerInfo is what the server declared about itself in initialize.
type ServerInfo struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	ProtocolVersion string `json:"-"`
}

// Option configures a Session.
type Option func(*Session)

// WithLogger sets the session's logger (stderr in the CLI; never the protocol
// stream).
func WithLogger(l hclog.Logger) Option { return func(s *Session) { s.log = l } }

// WithRoots sets the source of the current roots. It is called for every
// roots/list, so a set swapped in by a config reload is seen at once.
func WithRoots(current func() *roots.Set) Option { return func(s *Session) { s.roots = current } }

// WithValidator sets the params validator (compiled once and shared between
// sessions). Without it NewSession compiles its own.
func WithValidator(v *schema.Validator) Option { return func(s *Session) { s.validator = v } }

// WithVersion sets the broker version sent in clientInfo.
func WithVersion(v string) Option { return func(s *Session) { s.version = v } }

// WithInitTimeout bounds the wait for the server's initialize result.
func WithInitTimeout(d time.Duration) Option {
	return func(s *Session) {
		if d > 0 {
			s.initTimeout = d
		}
	}
}

// WithPingInterval makes the broker ping the server at this interval once the
// session is initialized, logging a server that stops answering. Zero (the
// default) disables it.
func WithPingInterval(d time.Duration) Option { return func(s *Session) { s.pingInterval = d } }

// WithTransport names how the server is reached, for the policy input
// ("stdio", "child", "http", "wrap"); default "stdio".
func WithTransport(t string) Option { return func(s *Session) { s.transport = t } }

// WithSessionID sets the session's id, the sessionId of its records and the
// start of its decision ids (by default 16 random hex digits; "" keeps the
// default). fsbroker wrap gives the session the id its forward records carry.
func WithSessionID(id string) Option {
	return func(s *Session) {
		if id != "" {
			s.id = id
		}
	}
}

// WithServerID pins the server's identity (the operator's name for it, which
// a server cannot choose, unlike the name it declares).
func WithServerID(id string) Option { return func(s *Session) { s.pinnedID = id } }

// WithStatelessVersion lets the session accept StatelessVersion in the
// initialize result it gets: for fsbroker wrap only, where that result comes
// from the Router (a server on 2026-07-28 answers no initialize of the
// broker's and sends it no request).
func WithStatelessVersion() Option { return func(s *Session) { s.statelessOK = true } }

// WithConnOptions passes options to the session's JSON-RPC connection
// (in-flight bound, shutdown timeout).
func WithConnOptions(opts ...jsonrpc.Option) Option {
	return func(s *Session) { s.connOpts = append(s.connOpts, opts...) }
}

// Session is one MCP session with one server.
type Session struct {
	stream       jsonrpc.Stream
	conn         *jsonrpc.Conn
	log          hclog.Logger
	roots        func() *roots.Set
	validator    *schema.Validator
	version      string
	initTimeout  time.Duration
	pingInterval time.Duration
	connOpts     []jsonrpc.Option
	methods      map[string]method
	corridor     *corridor.Corridor
	corridorOpts []corridor.Option // the corridor's parts, as the options gave them
	limits       corridor.Limits
	maxWatches   int
	id           string
	transport    string
	pinnedID     string
	limiter      *Limiter
	// startRecorded is closed once the session_start record is written.
	startRecorded chan struct{}

	initialized atomic.Bool
	infoMu      sync.Mutex
	info        ServerInfo

	// statelessOK: an initialize result with StatelessVersion is accepted
	// (WithStatelessVersion).
	statelessOK bool

	// confinementNote is added to the session_start record (WithConfinementNote).
	confinementNote string
}

// NewSession returns a session over stream. Run starts it.
func NewSession(stream jsonrpc.Stream, opts ...Option) (*Session, error) {
	s := &Session{
		stream:      stream,
		log:         hclog.NewNullLogger(),
		roots:       func() *roots.Set { return nil },
		version:     "dev",
		initTimeout: DefaultInitTimeout,
		transport:   "stdio",

		startRecorded: make(chan struct{}),
	}
	var idBytes [8]byte
	if _, err := rand.Read(idBytes[:]); err != nil {
		return nil, fmt.Errorf("session id: %w", err)
	}
	s.id = hex.EncodeToString(idBytes[:])
	for _, o := range opts {
		o(s)
	}
	limits := s.limits
	if s.maxWatches > 0 {
		limits.MaxWatches = s.maxWatches
	}
	s.corridor = corridor.New(append([]corridor.Option{corridor.WithLogger(s.log), corridor.WithRoots(s.roots),
		corridor.WithLimits(limits)}, s.corridorOpts...)...)
	if s.validator == nil {
		v, err := schema.New()
		if err != nil {
			return nil, fmt.Errorf("compile params schemas: %w", err)
		}
		s.validator = v
	}
	s.methods = s.methodTable()
	connOpts := append([]jsonrpc.Option{jsonrpc.WithLogger(s.log)}, s.connOpts...)
	s.conn = jsonrpc.NewConn(stream, s.handleRequest, s.handleNotification, connOpts...)
	return s, nil
}

// Run negotiates the session and serves the server until its input ends
// (nil), ctx is cancelled (nil, after in-flight requests finish up to the
// shutdown timeout), or something fails: the server's initialize result is an
// error or has an unsupported version (*VersionError), the server does not
// answer in time, or the stream breaks. Run does not close the stream.
func (s *Session) Run(ctx context.Context) error {
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	defer s.corridor.Close() // staged writes and watches end with the session
	served := make(chan error, 1)
	go func() { served <- s.conn.Serve(serveCtx) }()

	if err := s.initialize(ctx); err != nil {
		stopServing()
		<-served
		if ctx.Err() != nil {
			return nil // stopped by the operator during the handshake: a clean end
		}
		return err
	}
	if s.pingInterval > 0 {
		go s.keepAlive(serveCtx)
	}
	err := <-served
	detail := "ended"
	if err != nil {
		detail = "ended: " + err.Error()
	}
	if s.limiter != nil {
		if n := s.limiter.flushSuppressed(s.StateKey()); n > 0 {
			detail += fmt.Sprintf("; %d rate-limit refusals of this server not recorded one by one", n)
		}
	}
	s.recordSession(ctx, audit.KindSessionEnd, detail)
	return err
}

// initialize performs the MCP handshake in the client role.
func (s *Session) initialize(ctx context.Context) error {
	params := map[string]any{
		"protocolVersion": supportedVersions[0],
		"capabilities": map[string]any{
			"roots": map[string]any{"listChanged": true, "filesystemBrokering": true},
		},
		"clientInfo": map[string]any{"name": "fsbroker", "version": s.version},
	}
	var result struct {
		ProtocolVersion string     `json:"protocolVersion"`
		ServerInfo      ServerInfo `json:"serverInfo"`
	}
	callCtx, cancel := context.WithTimeout(ctx, s.initTimeout)
	defer cancel()
	s.log.Debug("sending initialize", "protocolVersion", supportedVersions[0])
	if err := s.conn.Call(callCtx, "initialize", params, &result); err != nil {
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			return fmt.Errorf("server refused initialize: %s (code %d)", rpcErr.Message, rpcErr.Code)
		case errors.Is(err, jsonrpc.ErrClosed):
			return errors.New("server closed the connection before answering initialize")
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return fmt.Errorf("server did not answer initialize within %s", s.initTimeout)
		default:
			return fmt.Errorf("initialize: %w", err)
		}
	}
	if !slices.Contains(supportedVersions, result.ProtocolVersion) && !(s.statelessOK && result.ProtocolVersion == StatelessVersion) {
		return &VersionError{Got: result.ProtocolVersion}
	}
	info := result.ServerInfo
	info.ProtocolVersion = result.ProtocolVersion
	s.infoMu.Lock()
	s.info = info
	s.infoMu.Unlock()

	// Mark the session initialized before the notification leaves, so that a
	// server reacting to it at once is never told NOT_INITIALIZED.
	s.initialized.Store(true)
	err := s.conn.Notify("notifications/initialized", nil)
	// The session's start is in the trail before any of its decisions: audited
	// requests wait for it (handleRequest).
	s.recordSession(ctx, audit.KindSessionStart, "server "+corridor.Truncate(info.Name, 128)+" "+corridor.Truncate(info.Version, 64))
	close(s.startRecorded)
	if err != nil {
		return fmt.Errorf("send initialized notification: %w", err)
	}
	s.log.Info("session initialized", "server", info.Name, "serverVersion", info.Version,
		"protocolVersion", info.ProtocolVersion, "roots", s.roots().Len())
	return nil
}

// Server returns what the server declared in initialize (zero before).
func (s *Session) Server() ServerInfo {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.info
}

// Ping sends ping to the server and waits for its reply.
func (s *Session) Ping(ctx context.Context) error {
	return s.conn.Call(ctx, "ping", nil, nil)
}

func (s *Session) keepAlive(ctx context.Context) {
	t := time.NewTicker(s.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, s.pingInterval)
			if err := s.Ping(pctx); err != nil && ctx.Err() == nil {
				s.log.Warn("server did not answer ping", "error", err)
			}
			cancel()
		}
	}
}

// RootsChanged tells the server that its roots changed
// (notifications/roots/list_changed). Before initialization it does nothing:
// the server has not listed roots yet.
func (s *Session) RootsChanged() error {
	if !s.initialized.Load() {
		return nil
	}
	s.log.Info("roots changed; notifying the server")
	return s.conn.Notify("notifications/roots/list_changed", nil)
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.conn.Done() }
