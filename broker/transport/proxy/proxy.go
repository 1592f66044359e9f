// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package proxy puts the broker between an MCP host and the MCP server it
// talks to (fsbroker wrap). The host speaks to the Router as if it were the
// server; the Router forwards every message both ways unchanged, except:
//
//   - the host's initialize gets the roots capability
//     {"listChanged": true, "filesystemBrokering": true} added before it
//     reaches the server;
//   - the server's roots/list and files/* requests (and their fs.* aliases)
//     are answered by the broker's own session, through the whole pipeline
//     (schema, canonicalization, consent, policy, audit, limits); the host
//     never sees these methods in any form: sent as notifications they are
//     dropped, and with a null id, in a batch or in a line the Router cannot
//     read exactly as the host would they are refused;
//   - the other way, the host's notifications/files/changed, its replies
//     to requests the session is answering, and its replies to the Router's
//     own requests (roots/list, elicitation/create), a second or a late one
//     included, are dropped: the server hears of file changes, and gets
//     answers to its roots/list and files/*, from the broker only;
//   - the roots that session serves are the operator's roots narrowed by the
//     host's (see Narrow): when the host declares the roots capability the
//     Router asks it for its roots once it is initialized, and again on its
//     notifications/roots/list_changed, which it does not pass on: the server
//     gets a notifications/roots/list_changed when, and only when, the roots
//     it can see changed.
//
// With --consent elicit the session's consent provider asks the host through
// the Router (ElicitForm: elicitation/create in form mode), whose reply, late
// or not, never reaches the server.
//
// On protocol 2026-07-28 (see mrtr.go) the server asks inside an
// InputRequiredResult: the Router answers its roots/list through the
// session, passes the rest to the host under a requestState of its own, and
// merges its roots into the host's retry; a host's inputs that answer
// nothing it was asked never reach the server.
//
// With WithForwardAudit, every request the host sends through to the server
// is recorded before it is passed on (a forward record: method, tool, a keyed
// digest of the arguments, never their content), and its reply by an outcome
// record; a request whose record cannot be written is refused, not passed on.
// The trail is an audit.Guarded, which gives every append its deadline: a
// trail that stops answering holds a host request at most that long (it is
// then refused), and holds nothing else: the host's replies are routed as
// they come, not behind a request waiting for its record, and outcome records
// are written off the server's reader, after its reply has gone to the host.
//
// # How
//
// The broker's session (a broker.Session, unchanged: the same code serves a
// server on stdio or a child process) runs over an in-memory stream pair; the
// Router holds the other end. It is started once the server has answered the
// host's initialize, and its own initialize request is answered by the Router
// with the server's real result, so the session knows the server's identity
// and protocol version exactly as under connect. Its notifications/initialized
// is dropped (the host sends its own), and so is anything it would say before
// the server has been told the session is initialized (a roots list_changed
// from a config reload, say). Its pings go to the server and their replies
// come back to it.
//
// Three readers (host, server, session) route each message as it comes,
// except the host's requests and notifications: a goroutine of their own
// passes them on in order, each request after its forward record. Another
// goroutine feeds the session, in order, the server's requests for it,
// holding them until the session is initialized and the host's roots are known
// (bounded by WithHostRootsTimeout). Until the host's notifications/initialized
// has been passed to the server, the Router itself answers a roots/list or
// files/* request with NOT_INITIALIZED, as the broker does on stdio.
//
// # Request ids
//
// Requests toward one peer come from two senders (toward the server: the host
// and the session; toward the host: the server and the Router). Every request
// keeps its sender's id unless a request with that id (of either sender) is
// in flight toward the same peer, or the id is in the Router's namespace
// ("fsbroker-wrap-"); then it travels under a fresh id, and its reply, and any
// cancellation of it, is translated back. The Router's own requests always
// get a fresh id. Fresh ids are the prefix and 128 random bits, never reused:
// no peer can predict or hold one, so a reply reaches only the request that
// went out under its id (a server cannot have the person's answer to its own
// form taken for the answer to the broker's consent question). No peer ever
// sees two requests in flight with one id, whatever ids the host and the
// server choose, and in the usual case nothing is renamed at all.
//
// # Cancellation and progress
//
// notifications/cancelled and notifications/progress pass through. A
// cancellation from the server of a request the session is answering goes to
// the session (which then sends no reply), never to the host.
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// DefaultHostRootsTimeout bounds the wait for the host's answer to roots/list.
// Until it comes, the session's requests wait; after it, no root is visible
// until the host answers (fail closed).
const DefaultHostRootsTimeout = 10 * time.Second

// idPrefix starts the ids of the requests the Router sends, or renames.
const idPrefix = "fsbroker-wrap-"

// View narrows the operator's roots: given the source of the operator's
// current roots, it returns the source of the roots the session serves.
type View func(operator func() *roots.Set) func() *roots.Set

// SessionFunc runs the broker's session, in the MCP client role, over stream
// until ctx ends (then it returns nil) or the session fails. The session must
// take its roots through view, so that the host's roots narrow them, and
// have the id id (broker.WithSessionID): the Router's forward records carry
// it too, so that the trail's records of one wrapped session share one
// sessionId.
type SessionFunc func(ctx context.Context, stream jsonrpc.Stream, view View, id string) error

// BrokerSession returns a SessionFunc that runs a broker.Session with opts
// and the operator's roots from operator (narrowed by the host's), with the
// transport named "wrap" in policy input and audit records.
func BrokerSession(operator func() *roots.Set, opts ...broker.Option) SessionFunc {
	return func(ctx context.Context, stream jsonrpc.Stream, view View, id string) error {
		all := append(append([]broker.Option(nil), opts...), broker.WithRoots(view(operator)), broker.WithTransport("wrap"),
			broker.WithStatelessVersion(), broker.WithSessionID(id))
		s, err := broker.NewSession(stream, all...)
		if err != nil {
			return err
		}
		return s.Run(ctx)
	}
}

// Option configures a Router.
type Option func(*Router)

// WithLogger sets the Router's logger.
func WithLogger(l hclog.Logger) Option { return func(r *Router) { r.log = l } }

// WithHostRootsTimeout bounds the wait for the host's answer to roots/list
// (default DefaultHostRootsTimeout).
func WithHostRootsTimeout(d time.Duration) Option {
	return func(r *Router) {
		if d > 0 {
			r.rootsTimeout = d
		}
	}
}

// Router routes messages between a host, a server and the broker's session.
type Router struct {
	host, server jsonrpc.Stream
	sessEnd      *memStream // the session's end of the pair
	end          *memStream // the Router's end
	run          SessionFunc
	log          hclog.Logger
	rootsTimeout time.Duration
	sessionID    string        // the broker session's id, which the forward records carry too
	fwd          *forwardAudit // nil: forwarded requests are not recorded

	hostRoots atomic.Pointer[roots.HostRoots] // nil: the host declared no roots
	operator  atomic.Pointer[func() *roots.Set]
	cache     atomic.Pointer[viewCache]

	mu                sync.Mutex
	toServer          *idTable
	toHost            *idTable
	atSession         map[jsonrpc.ID]bool                    // server requests the session is answering
	fromRouter        map[jsonrpc.ID]chan<- *jsonrpc.Message // the router's requests to the session
	states            map[string]*pendingInputs              // InputRequiredResults awaiting the host's retry, by token
	stateOrder        []string                               // their tokens, oldest first
	stateBytes        int                                    // the bytes they hold (pendingInputs.size)
	stateless         bool                                   // the session serves a server on 2026-07-28
	initSeen          bool                                   // the host's initialize went by
	hostHasRoots      bool                                   // ... and declared the roots capability
	initResult        json.RawMessage                        // the server's initialize result
	negotiated        string                                 // ... and the protocol version in it
	hostElicits       bool                                   // the host declared elicitation with form mode
	sessionStarted    bool
	sessionReadyShut  bool
	serverInitialized bool // the host's notifications/initialized went to the server
	rootsKnown        bool // rootsReady is closed
	rootsAsked        uint64
	sessionAsked      uint64 // the router's roots/list requests to the session
	rootsApplied      uint64
	rootsTimer        *time.Timer
	closing           bool

	runCtx       context.Context
	sessCancel   context.CancelFunc
	sessionReady chan struct{} // closed once the session is initialized
	rootsReady   chan struct{} // closed once the host's roots are known (or will not be)
	hostDone     chan struct{}
	hostOnce     sync.Once
	hostQueue    chan hostMessage // the host's requests and notifications, in order (closed when its input ends)
	hostEnd      string           // why the host's input ended: written before hostQueue is closed

	outcomeMu      sync.Mutex
	outcomeWriters int            // outcome records being written off the readers
	outcomesClosed bool           // shutdown: outcome records are written by their caller
	outcomesDone   sync.WaitGroup // the outcome records being written
	toSession      chan []byte
	sessDone       chan struct{}
	sessErr        error
}

type viewCache struct {
	operator *roots.Set
	host     *roots.HostRoots
	view     *roots.Set
}

// New returns a Router between host (the MCP host's stream: this process's
// stdio under fsbroker wrap) and server (the MCP server's), which answers the
// server's roots/list and files/* requests with the session run starts.
func New(host, server jsonrpc.Stream, run SessionFunc, opts ...Option) *Router {
	sessEnd, end := streamPair()
	r := &Router{
		host: host, server: server, sessEnd: sessEnd, end: end, run: run,
		log:          hclog.NewNullLogger(),
		rootsTimeout: DefaultHostRootsTimeout,
		toServer:     newIDTable(idPrefix),
		toHost:       newIDTable(idPrefix),
		atSession:    make(map[jsonrpc.ID]bool),
		fromRouter:   make(map[jsonrpc.ID]chan<- *jsonrpc.Message),
		states:       make(map[string]*pendingInputs),
		sessionReady: make(chan struct{}),
		rootsReady:   make(chan struct{}),
		hostDone:     make(chan struct{}),
		hostQueue:    make(chan hostMessage, hostQueueSize),
		toSession:    make(chan []byte, 256),
		sessDone:     make(chan struct{}),
	}
	for _, o := range opts {
		o(r)
	}
	r.sessionID = newSessionID()
	if r.fwd != nil {
		r.fwd.sessionID = r.sessionID
	}
	return r
}

// HostDone is closed when the host's input has ended (or the host can no
// longer be written to). The server is still served until its output ends;
// the caller stops it (closing its input first).
func (r *Router) HostDone() <-chan struct{} { return r.hostDone }

// HostRoots returns the host's roots as last known: nil when the host
// declared no roots capability.
func (r *Router) HostRoots() *roots.HostRoots { return r.hostRoots.Load() }

// view is the View handed to the session.
func (r *Router) view(operator func() *roots.Set) func() *roots.Set {
	r.operator.Store(&operator)
	return func() *roots.Set { return r.narrowed(operator()) }
}

// narrowed returns op narrowed by the host's current roots, computed once
// per pair of sets.
func (r *Router) narrowed(op *roots.Set) *roots.Set {
	h := r.hostRoots.Load()
	if c := r.cache.Load(); c != nil && c.operator == op && c.host == h {
		return c.view
	}
	v := roots.Narrow(op, h)
	r.cache.Store(&viewCache{operator: op, host: h, view: v})
	return v
}

// current returns the roots the session serves now, or nil (and false) before
// the session has asked for them.
func (r *Router) current() (*roots.Set, bool) {
	op := r.operator.Load()
	if op == nil {
		return nil, false
	}
	return r.narrowed((*op)()), true
}

// Run routes messages until the server's output ends (nil), ctx is cancelled
// (nil), reading from the server fails, or the session fails (its error). The
// end of the host's input does not end Run: the server's remaining output is
// still passed on while the caller stops it (see HostDone). Run does not
// close the host's or the server's stream.
func (r *Router) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	r.runCtx = ctx
	r.mu.Unlock()
	serverDone := make(chan error, 1)
	go r.readHost()
	go r.forwardHost()
	go func() { serverDone <- r.readServer() }()

	var err error
	select {
	case <-ctx.Done():
		r.log.Debug("stopping: shutdown requested")
	case err = <-serverDone:
		if err == nil {
			r.log.Debug("the server's output ended")
		}
	case <-r.sessDone:
		err = r.sessErr
		if err == nil {
			err = errors.New("the broker session ended on its own")
		}
	}
	if serr := r.shutdown(); err == nil {
		err = serr
	}
	return err
}

// shutdown stops the session (letting its requests in flight finish, as its
// connection's shutdown timeout allows) and closes the in-memory pair.
func (r *Router) shutdown() error {
	r.mu.Lock()
	r.closing = true
	started, cancel := r.sessionStarted, r.sessCancel
	if r.rootsTimer != nil {
		r.rootsTimer.Stop()
	}
	unanswered := r.toServer.settleAll(host)
	r.mu.Unlock()
	for _, req := range unanswered {
		r.recordOutcome(req, nil, outcomeUnanswered)
	}
	r.outcomeMu.Lock()
	r.outcomesClosed = true
	r.outcomeMu.Unlock()
	r.outcomesDone.Wait() // each bounded by the trail's deadline
	var err error
	if started {
		cancel()
		<-r.sessDone
		err = r.sessErr
	}
	_ = r.end.Close()
	_ = r.sessEnd.Close()
	return err
}

// markHostDone records that the host is gone.
func (r *Router) markHostDone(why string) {
	r.hostOnce.Do(func() {
		r.log.Info(why)
		close(r.hostDone)
	})
}

// hostMessage is a message of the host's as its reader decoded it (msg nil
// and err set when it did not decode), in a buffer of its own.
type hostMessage struct {
	raw []byte
	msg *jsonrpc.Message
	err error
}

// hostQueueSize bounds the host's requests and notifications waiting behind
// one whose forward record is being written; past it the host's reader
// waits too (each record is bounded by the trail's deadline).
const hostQueueSize = 256

// readHost reads the host's messages: a reply is routed at once (it needs no
// record, and may be what a request of the broker's session waits for), the
// rest is queued for forwardHost, in order.
func (r *Router) readHost() {
	why := ""
	defer func() {
		r.hostEnd = why
		close(r.hostQueue)
	}()
	for {
		line, err := r.host.Read()
		switch {
		case errors.Is(err, jsonrpc.ErrMessageTooLarge):
			r.log.Warn("refused an oversized message from the host")
			r.writeHost(tooLarge)
			continue
		case errors.Is(err, io.EOF):
			why = "the host closed its input"
			return
		case err != nil:
			why = "reading from the host failed: " + err.Error()
			return
		}
		raw := append([]byte(nil), line...) // the stream reuses its buffer; a decoded message points into raw
		msg, err := jsonrpc.Decode(raw)
		if err == nil && !msg.IsRequest() && !msg.IsNotification() {
			r.hostReply(msg, raw)
			continue
		}
		r.hostQueue <- hostMessage{raw: raw, msg: msg, err: err}
	}
}

// forwardHost routes the host's requests and notifications in the order they
// came, each request after its forward record, until the host's input ends;
// then the host is done.
func (r *Router) forwardHost() {
	for m := range r.hostQueue {
		r.fromHost(m)
	}
	r.markHostDone(r.hostEnd)
}

// readServer routes the server's messages until its output ends (nil) or
// reading fails.
func (r *Router) readServer() error {
	for {
		raw, err := r.server.Read()
		switch {
		case errors.Is(err, jsonrpc.ErrMessageTooLarge):
			r.log.Warn("refused an oversized message from the server")
			r.writeServer(tooLarge)
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		r.fromServer(raw)
	}
}

var tooLarge = mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: jsonrpc.NullID,
	Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: message exceeds the size limit"}})

// fromHost routes one message of the host's.
//
// A request reaches the server only as the Router read it, after its forward
// record: a batch, or a message that does not decode strictly (an escaped
// "2.0", say), is answered by the Router with the JSON-RPC error the server
// would have given, never passed on; else a request could reach the server
// with no forward record. Only a reply-shaped message the Router cannot read
// goes to the server as it is (a reply is not recorded).
func (r *Router) fromHost(m hostMessage) {
	raw, msg, err := m.raw, m.msg, m.err
	if err != nil {
		switch de := asDecodeError(err); {
		case isBatch(raw):
			r.log.Warn("refused a batch from the host: the server gets one request at a time, each after its forward record")
			r.writeHost(batchRefused)
		case de.Response:
			r.writeServer(raw) // the server reads it as it would unwrapped
		default:
			r.log.Warn("refused a message from the host that cannot be passed on as it was read", "error", de.Err.Message)
			r.writeHost(refusal(de))
		}
		return
	}
	switch {
	case msg.IsRequest():
		if msg.Method == "initialize" {
			raw = r.amendInitialize(raw, msg.Params)
		}
		if amended, changed := amendModernRequest(raw, msg.Params); changed {
			if m, err := jsonrpc.Decode(amended); err == nil {
				raw, msg = amended, m
			}
		}
		if hasRetryMembers(msg.Params) {
			// It may wait for the session's roots: not on the host's reader.
			own := append([]byte(nil), raw...)
			retry, _ := jsonrpc.Decode(own)
			go r.hostRetry(retry, own)
			return
		}
		r.forwardRequest(msg, raw)
	case msg.IsNotification():
		switch msg.Method {
		case "notifications/initialized":
			r.hostInitialized(raw)
		case "notifications/roots/list_changed":
			r.hostRootsChanged()
		case "notifications/cancelled":
			out, req, ok := r.cancelled(r.toServer, host, raw, msg.Params)
			if ok {
				r.recordOutcome(req, nil, outcomeCancelled)
			}
			r.writeServer(out)
		case "notifications/files/changed":
			// Change events are the broker's to send (from the watches it
			// set up); the server never takes the host's for them.
			r.log.Debug("dropped a files/changed notification of the host's: only the broker reports file changes")
		default:
			r.writeServer(raw)
		}
	}
}

// hostReply routes a reply of the host's: to the server request, or the
// request of the Router's, that it answers.
func (r *Router) hostReply(msg *jsonrpc.Message, raw []byte) {
	r.mu.Lock()
	req, ok := r.toHost.settle(msg.ID)
	forged := !ok && r.atSession[msg.ID]
	// Only the Router sends the host ids of its namespace (a server's
	// request with such an id is renamed): a reply under one that awaits
	// nothing answers a request of the Router's a second time, or late.
	stale := !ok && r.toHost.inNamespace(msg.ID)
	r.mu.Unlock()
	switch {
	case forged:
		// The host was never sent that request: the broker answers it.
		r.log.Debug("dropped a reply of the host's to a request the broker is answering", "id", string(msg.ID))
	case stale:
		r.log.Info("dropped a reply of the host's to a request of fsbroker's that awaits no reply "+
			"(answered already, or given up): it is never passed to the server", "id", shortMethod(string(msg.ID)))
	case !ok:
		r.writeServer(raw)
	case req.from == router && req.reply != nil:
		req.reply <- msg
	case req.from == router:
		r.hostRootsAnswered(req.gen, msg)
	default:
		r.writeServer(withID(raw, msg.ID, req.id))
	}
}

// forwardRequest passes a request of the host's on to the server, after its
// forward record.
func (r *Router) forwardRequest(msg *jsonrpc.Message, raw []byte) {
	req := inFlight{from: host, id: msg.ID, method: msg.Method}
	switch msg.Method {
	case "tools/call", "resources/read", "prompts/get": // may be answered with an InputRequiredResult
		req.params = decodeParams(msg.Params)
	}
	if !r.recordForward(&req, msg, "") {
		return
	}
	r.mu.Lock()
	wire := r.toServer.assign(req)
	r.mu.Unlock()
	if wire != msg.ID {
		r.log.Debug("a host request's id is in use toward the server; renamed", "id", string(msg.ID), "as", string(wire))
	}
	r.writeServer(withID(raw, msg.ID, wire))
}

// recordForward writes the forward record of msg, sent for the host's
// request req (detail: what else to say of it), when forwarded requests are
// recorded. It returns false when the record cannot be written: the host
// then has its error reply, and msg must not reach the server.
func (r *Router) recordForward(req *inFlight, msg *jsonrpc.Message, detail string) bool {
	if r.fwd == nil {
		return true
	}
	fw, err := r.fwd.forward(msg, detail)
	if err != nil {
		r.log.Error("a request was not passed to the server: its forward record cannot be written",
			"method", shortMethod(msg.Method), "error", err)
		r.writeHost(forwardRefused(req.id))
		return false
	}
	req.fwd = fw
	return true
}

// fromServer routes one message of the server's.
//
// Only what the Router can read exactly as the host will goes to the host: a
// message that does not decode strictly, or that has a member twice (a host
// reading the first "method" could see another request than the one the
// Router read), is answered by the Router with the JSON-RPC error the host
// would have given, never passed on; else a message the Router cannot read
// (an escaped "2.0", say) could carry roots/list or files/* to the host. A
// batch is passed on only when every element passes that test and none is
// the broker's to answer.
func (r *Router) fromServer(raw []byte) {
	msg, err := jsonrpc.Decode(raw)
	if err == nil && duplicateMembers(raw) {
		err = &jsonrpc.DecodeError{ID: jsonrpc.NullID, Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "invalid request: a member appears twice"}}
	}
	if err != nil {
		if isBatch(raw) {
			if batchForwardable(raw) {
				r.writeHost(raw)
				return
			}
			r.log.Warn("refused a batch from the server that could carry roots/list or files/* to the host")
			r.writeServer(batchRefused)
			return
		}
		r.refuseFromServer(err)
		return
	}
	switch {
	case msg.IsRequest():
		if Brokered(msg.Method) {
			r.requestForSession(msg, raw)
			return
		}
		r.mu.Lock()
		wire := r.toHost.assign(inFlight{from: server, id: msg.ID, method: msg.Method})
		r.mu.Unlock()
		if wire != msg.ID {
			r.log.Debug("a server request's id is in use toward the host; renamed", "id", string(msg.ID), "as", string(wire))
		}
		r.writeHost(withID(raw, msg.ID, wire))
	case msg.IsNotification():
		switch {
		case msg.Method == "notifications/cancelled":
			r.serverCancelled(raw, msg.Params)
		case Brokered(msg.Method):
			// Nothing answers a notification, and the host never sees the
			// broker's methods: dropped, as the broker ignores it on stdio.
			r.log.Debug("dropped a notification of the server's with a method the broker answers", "method", shortMethod(msg.Method))
		default:
			r.writeHost(raw)
		}
	default:
		r.mu.Lock()
		req, ok := r.toServer.settle(msg.ID)
		r.mu.Unlock()
		switch {
		case !ok:
			r.writeHost(raw)
		case req.from == session:
			if err := r.end.Write(withID(raw, msg.ID, req.id)); err != nil {
				r.log.Debug("cannot pass a reply to the session", "error", err)
			}
		default:
			if req.method == "initialize" && msg.Error == nil {
				if r.fwd != nil {
					r.fwd.learnServer(msg.Result)
				}
				// Before the host sees the result: the session must be
				// under way when the host's initialized lets the server ask.
				r.serverAnsweredInitialize(msg.Result)
			}
			r.recordOutcome(req, msg, "")
			if msg.Error == nil && isInputRequired(msg.Result) {
				// It may wait for the session's roots: not on the server's reader.
				go r.inputRequired(req, msg.ID, append([]byte(nil), raw...), append(json.RawMessage(nil), msg.Result...))
				return
			}
			r.writeHost(withID(raw, msg.ID, req.id))
		}
	}
}

// Brokered reports whether a request from the server is the broker's to
// answer: roots/list, files/* and the fs.* aliases.
func Brokered(method string) bool {
	c := broker.CanonicalMethod(method)
	return c == "roots/list" || strings.HasPrefix(c, "files/")
}

// shortMethod is a method name cut for the log.
func shortMethod(m string) string {
	const most = 64
	if len(m) <= most {
		return m
	}
	return strings.ToValidUTF8(m[:most], "") + "..."
}

// isBatch reports whether raw is a JSON array.
func isBatch(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

// batchForwardable reports whether a server's batch may go to the host as it
// is: every element a strictly decodable message without a repeated member,
// and none a request the broker answers.
func batchForwardable(raw []byte) bool {
	var batch []json.RawMessage
	if json.Unmarshal(raw, &batch) != nil || len(batch) == 0 {
		return false
	}
	for _, elem := range batch {
		msg, err := jsonrpc.Decode(elem)
		if err != nil || duplicateMembers(elem) {
			return false
		}
		if msg.Method != "" && Brokered(msg.Method) {
			return false
		}
	}
	return true
}

// duplicateMembers reports whether a JSON object has a member name twice at
// its top level (or is not an object that can be read member by member).
func duplicateMembers(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return true
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return true
		}
		name, ok := t.(string)
		if !ok || seen[name] {
			return true
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return true
		}
	}
	return false
}

// refuseFromServer answers a server message the Router will not pass on with
// the error a JSON-RPC peer gives (a parse error or an invalid request, id
// null when it cannot be read); a reply-shaped message is never answered.
func (r *Router) refuseFromServer(err error) {
	de := asDecodeError(err)
	r.log.Warn("refused a message from the server that cannot be passed on as it was read", "error", de.Err.Message)
	if !de.Response {
		r.writeServer(refusal(de))
	}
}

// asDecodeError returns err as a *jsonrpc.DecodeError (an invalid request
// with id null when it is none).
func asDecodeError(err error) *jsonrpc.DecodeError {
	var de *jsonrpc.DecodeError
	if !errors.As(err, &de) {
		de = &jsonrpc.DecodeError{ID: jsonrpc.NullID, Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}}
	}
	return de
}

// refusal is the error reply to a message that did not decode.
func refusal(de *jsonrpc.DecodeError) []byte {
	id := de.ID
	if id.IsZero() {
		id = jsonrpc.NullID
	}
	return mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: id, Error: de.Err})
}

var batchRefused = mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: jsonrpc.NullID,
	Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: batch requests are not supported: send one JSON object per line"}})

// requestForSession queues a server request for the session, or refuses it
// while the server has not been told the session is initialized.
func (r *Router) requestForSession(msg *jsonrpc.Message, raw []byte) {
	r.mu.Lock()
	closing := r.closing
	_, routers := r.fromRouter[msg.ID]
	ready := r.serverInitialized && r.sessionStarted && !closing && !routers
	if ready {
		r.atSession[msg.ID] = true
	}
	ctx := r.runCtx
	r.mu.Unlock()
	switch {
	case closing:
		r.writeServer(mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: msg.ID,
			Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the session ended before the request could run"}}))
		return
	case routers:
		r.writeServer(mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: msg.ID,
			Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: the id is in use"}}))
		return
	case !ready:
		r.writeServer(notInitialized(msg.ID))
		return
	}
	select {
	case r.toSession <- append([]byte(nil), raw...):
	case <-ctx.Done():
	}
}

func notInitialized(id jsonrpc.ID) []byte {
	return mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: id, Error: &jsonrpc.Error{
		Code: errcode.NotInitialized.RPC(), Message: "not initialized",
		Data: map[string]string{"code": string(errcode.NotInitialized),
			"reason": "the session is not initialized yet: only ping is answered before notifications/initialized"},
	}})
}

// cancelled returns a cancellation of a request from sender toward the peer
// of table, to pass on under the id the peer knows it by, and the request it
// cancels (ok false when none is in flight). The request is forgotten: its
// receiver should not answer it, and if it does, the reply goes on as it
// came.
func (r *Router) cancelled(table *idTable, sender party, raw []byte, params json.RawMessage) (out []byte, req inFlight, ok bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return raw, inFlight{}, false
	}
	id, err := jsonrpc.ParseID(p["requestId"])
	if err != nil {
		return raw, inFlight{}, false
	}
	r.mu.Lock()
	wire, ok := table.wireOf(sender, id)
	if ok {
		req, _ = table.settle(wire)
	}
	r.mu.Unlock()
	if !ok || wire == id {
		return raw, req, ok
	}
	p["requestId"] = json.RawMessage(wire)
	return withMember(raw, "params", mustMarshal(p)), req, true
}

// maxOutcomeWriters bounds the outcome records written at once off the
// readers; past it a reader writes its own (bounded by the trail's deadline).
const maxOutcomeWriters = 64

// recordOutcome writes the outcome record of a forwarded request, when it
// has a forward record: its reply, or (reply nil) what became of it. The
// record is written on a goroutine of its own, so that a trail that stops
// answering holds none of the messages that follow (shutdown waits for it);
// what it says is read from reply now, before reply's buffer is reused.
func (r *Router) recordOutcome(req inFlight, reply *jsonrpc.Message, outcome string) {
	if r.fwd == nil || req.fwd.id == "" {
		return
	}
	rec := r.fwd.outcome(req.method, req.fwd, reply, outcome)
	write := func() {
		if err := r.fwd.record(rec); err != nil {
			r.log.Error("cannot write the outcome record of a forwarded request", "method", shortMethod(req.method), "error", err)
		}
	}
	r.outcomeMu.Lock()
	async := !r.outcomesClosed && r.outcomeWriters < maxOutcomeWriters
	if async {
		r.outcomeWriters++
		r.outcomesDone.Add(1)
	}
	r.outcomeMu.Unlock()
	if !async {
		write()
		return
	}
	go func() {
		defer func() {
			r.outcomeMu.Lock()
			r.outcomeWriters--
			r.outcomeMu.Unlock()
			r.outcomesDone.Done()
		}()
		write()
	}()
}

// serverCancelled routes a cancellation from the server: to the session when
// it is answering the request, else to the host.
func (r *Router) serverCancelled(raw []byte, params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) == nil && len(p.RequestID) > 0 {
		if id, err := jsonrpc.ParseID(p.RequestID); err == nil {
			r.mu.Lock()
			mine := r.atSession[id]
			delete(r.atSession, id)
			ctx := r.runCtx
			r.mu.Unlock()
			if mine {
				select {
				case r.toSession <- append([]byte(nil), raw...):
				case <-ctx.Done():
				}
				return
			}
		}
	}
	out, _, _ := r.cancelled(r.toHost, server, raw, params)
	r.writeHost(out)
}

// amendInitialize adds the roots capability to the host's initialize, and
// notes whether the host declared roots of its own.
func (r *Router) amendInitialize(raw []byte, params json.RawMessage) []byte {
	amended, declared, ok := addRootsCapability(params)
	r.mu.Lock()
	first := !r.initSeen
	if first {
		r.initSeen = true
		r.hostHasRoots = ok && declared
		r.hostElicits = consent.HostElicitsForms(params)
		if r.hostHasRoots {
			r.hostRoots.Store(&roots.HostRoots{}) // nothing is visible until the host says what is
		} else {
			r.rootsKnown = true
			close(r.rootsReady)
		}
	}
	r.mu.Unlock()
	if first {
		r.log.Debug("the host's initialize", "declaresRoots", ok && declared)
	}
	if !ok {
		r.log.Warn("the host's initialize params are not an object; passed on unchanged")
		return raw
	}
	return withMember(raw, "params", amended)
}

// addRootsCapability returns params with capabilities.roots.listChanged and
// capabilities.roots.filesystemBrokering set, everything else kept, and
// whether the host declared the roots capability itself. ok is false when
// params cannot be amended (not an object).
func addRootsCapability(params json.RawMessage) (amended json.RawMessage, declared, ok bool) {
	p := map[string]json.RawMessage{}
	if len(params) > 0 {
		if json.Unmarshal(params, &p) != nil || p == nil {
			return nil, false, false
		}
	}
	caps := map[string]json.RawMessage{}
	if c, has := p["capabilities"]; has && string(c) != "null" {
		if json.Unmarshal(c, &caps) != nil || caps == nil {
			return nil, false, false
		}
	}
	rootsCap := map[string]json.RawMessage{}
	if rc, has := caps["roots"]; has {
		var m map[string]json.RawMessage
		if json.Unmarshal(rc, &m) == nil && m != nil {
			rootsCap, declared = m, true
		}
	}
	rootsCap["listChanged"] = json.RawMessage("true")
	rootsCap["filesystemBrokering"] = json.RawMessage("true")
	caps["roots"] = mustMarshal(rootsCap)
	p["capabilities"] = mustMarshal(caps)
	return mustMarshal(p), declared, true
}

// serverAnsweredInitialize takes the server's initialize result: the session starts
// (once), and its own initialize will be answered with this result.
func (r *Router) serverAnsweredInitialize(result json.RawMessage) {
	r.mu.Lock()
	if r.sessionStarted || r.closing {
		r.mu.Unlock()
		return
	}
	r.sessionStarted = true
	r.initResult = append(json.RawMessage(nil), result...)
	var negotiated struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(result, &negotiated) // the session itself refuses a result it cannot read
	r.negotiated = negotiated.ProtocolVersion
	r.stateless = negotiated.ProtocolVersion == broker.StatelessVersion
	// The session's consent provider may ask the host (--consent elicit).
	ctx, cancel := context.WithCancel(consent.WithElicitor(r.runCtx, r))
	r.sessCancel = cancel
	r.mu.Unlock()
	r.log.Debug("the server answered initialize; starting the broker session")
	go r.readSession()
	go r.feedSession(ctx)
	go func() {
		defer close(r.sessDone)
		r.sessErr = r.run(ctx, r.sessEnd, r.view, r.sessionID)
	}()
}

// feedSession passes the server's requests (and cancellations) to the
// session in order, each request once the session is initialized and the
// host's roots are known.
func (r *Router) feedSession(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case raw := <-r.toSession:
			for _, gate := range []chan struct{}{r.sessionReady, r.rootsReady} {
				select {
				case <-gate:
				case <-ctx.Done():
					return
				}
			}
			if err := r.end.Write(raw); err != nil {
				return
			}
		}
	}
}

// readSession routes the session's messages.
func (r *Router) readSession() {
	for {
		raw, err := r.end.Read()
		if err != nil {
			return
		}
		msg, err := jsonrpc.Decode(raw)
		if err != nil {
			r.log.Error("the broker session sent a malformed message", "error", err)
			continue
		}
		switch {
		case msg.IsRequest() && msg.Method == "initialize":
			r.mu.Lock()
			result := r.initResult
			r.mu.Unlock()
			reply := mustMarshal(resultReply{JSONRPC: jsonrpc.Version, ID: msg.ID, Result: result})
			if err := r.end.Write(reply); err != nil {
				return
			}
		case msg.IsRequest():
			r.mu.Lock()
			stateless := r.stateless
			r.mu.Unlock()
			if stateless && msg.Method == "ping" {
				// 2026-07-28 has no ping: the Router answers the session's.
				if err := r.end.Write(mustMarshal(resultReply{JSONRPC: jsonrpc.Version, ID: msg.ID, Result: json.RawMessage(`{}`)})); err != nil {
					return
				}
				continue
			}
			r.mu.Lock()
			wire := r.toServer.assign(inFlight{from: session, id: msg.ID, method: msg.Method})
			r.mu.Unlock()
			r.writeServer(withID(raw, msg.ID, wire))
		case msg.IsNotification():
			r.fromSessionNotification(msg, raw)
		default: // the session's reply to a server request, or to the Router's
			r.mu.Lock()
			mine, ok := r.fromRouter[msg.ID]
			delete(r.fromRouter, msg.ID)
			if !ok {
				delete(r.atSession, msg.ID)
			}
			r.mu.Unlock()
			if ok {
				mine <- msg
				continue
			}
			r.writeServer(raw)
		}
	}
}

func (r *Router) fromSessionNotification(msg *jsonrpc.Message, raw []byte) {
	switch msg.Method {
	case "notifications/initialized":
		r.mu.Lock()
		if !r.sessionReadyShut {
			r.sessionReadyShut = true
			close(r.sessionReady)
		}
		r.mu.Unlock()
	case "notifications/roots/list_changed":
		r.mu.Lock()
		ok, stateless := r.serverInitialized, r.stateless
		r.mu.Unlock()
		if stateless {
			r.log.Debug("2026-07-28 has no roots list_changed; the server gets the new roots when it asks")
			return
		}
		if !ok {
			r.log.Debug("the server is not initialized yet; its roots list_changed is not sent")
			return
		}
		r.writeServer(raw)
	case "notifications/files/changed":
		if !r.visibleChange(msg.Params) {
			r.log.Debug("a change event under a root the host no longer allows was withheld")
			return
		}
		r.writeServer(raw)
	default:
		r.writeServer(raw)
	}
}

// visibleChange reports whether a change event names a path under a root the
// session serves now: a watch set up before the host narrowed its roots
// reports nothing from a root the host took away.
func (r *Router) visibleChange(params json.RawMessage) bool {
	var p struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	set, ok := r.current()
	if !ok {
		return true
	}
	mount, _, _ := strings.Cut(p.Path, "/")
	_, visible := set.ByMount(mount)
	return visible
}

// hostInitialized passes the host's notifications/initialized to the server
// and, when the host declared roots, asks the host for them.
func (r *Router) hostInitialized(raw []byte) {
	r.mu.Lock()
	first := !r.serverInitialized
	r.serverInitialized = true
	if first && !r.initSeen { // no initialize went by: no roots of the host's to wait for
		r.initSeen = true
		r.rootsKnown = true
		close(r.rootsReady)
	}
	ask := first && r.hostHasRoots
	if ask {
		r.rootsTimer = time.AfterFunc(r.rootsTimeout, r.hostRootsLate)
	}
	r.mu.Unlock()
	r.writeServer(raw)
	if ask {
		r.askHostRoots()
	}
}

// hostRootsChanged takes the host's notifications/roots/list_changed: the
// Router asks for the new roots; the server hears of it only if what it can
// see changes.
func (r *Router) hostRootsChanged() {
	r.mu.Lock()
	ok := r.serverInitialized && r.hostHasRoots
	r.mu.Unlock()
	if !ok {
		r.log.Debug("ignoring the host's roots list_changed: no roots of the host's are in use")
		return
	}
	r.askHostRoots()
}

// askHostRoots sends roots/list to the host.
func (r *Router) askHostRoots() {
	r.mu.Lock()
	r.rootsAsked++
	wire := r.toHost.assign(inFlight{from: router, method: "roots/list", gen: r.rootsAsked})
	r.mu.Unlock()
	r.log.Debug("asking the host for its roots", "id", string(wire))
	r.writeHost(mustMarshal(request{JSONRPC: jsonrpc.Version, ID: wire, Method: "roots/list"}))
}

// hostRootsLate fails closed when the host has not answered the first
// roots/list in time: the session's requests go on, and see no root.
func (r *Router) hostRootsLate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rootsKnown {
		return
	}
	r.rootsKnown = true
	close(r.rootsReady)
	r.log.Warn("the host did not answer roots/list in time; no root is visible until it does", "timeout", r.rootsTimeout)
}

// hostRootsAnswered takes the host's answer to the gen-th roots/list.
func (r *Router) hostRootsAnswered(gen uint64, msg *jsonrpc.Message) {
	next := &roots.HostRoots{}
	if msg.Error != nil {
		r.log.Warn("the host refused roots/list; no root is visible", "code", msg.Error.Code, "message", msg.Error.Message)
	} else if h, skipped, err := roots.ParseHostRoots(msg.Result); err != nil {
		r.log.Warn("the host's roots cannot be read; no root is visible", "error", err)
	} else {
		next = h
		for _, s := range skipped {
			r.log.Info("ignoring a root of the host's", "root", s)
		}
	}
	r.mu.Lock()
	if gen <= r.rootsApplied {
		r.mu.Unlock()
		r.log.Debug("ignoring an answer to an older roots/list")
		return
	}
	r.rootsApplied = gen
	op := r.operator.Load()
	prev := r.hostRoots.Load()
	r.hostRoots.Store(next)
	wasKnown := r.rootsKnown
	if !wasKnown {
		r.rootsKnown = true
		close(r.rootsReady)
	}
	serverInit := r.serverInitialized
	r.mu.Unlock()

	changed := true
	if op == nil { // the session has not started serving yet
		r.log.Info("the host's roots apply", "hostRoots", next.Len())
	} else {
		opSet := (*op)()
		after := roots.Narrow(opSet, next)
		changed = !roots.Narrow(opSet, prev).Equal(after)
		containing, outside := roots.Withheld(opSet, next)
		r.log.Info("the host's roots apply", "hostRoots", next.Len(), "visible", after.Len(), "of", opSet.Len())
		if len(containing) > 0 {
			r.log.Info("operator roots withheld: each contains a root of the host's, and the host allowed less than the whole root; "+
				"give fsbroker a root at the host's directory to serve it", "mounts", strings.Join(containing, ","))
		}
		if len(outside) > 0 {
			r.log.Debug("operator roots outside every root of the host's", "mounts", strings.Join(outside, ","))
		}
	}
	if wasKnown && changed && serverInit {
		r.log.Info("the host's roots changed what the server can see; notifying the server")
		r.writeServer(listChanged)
	}
}

var listChanged = mustMarshal(request{JSONRPC: jsonrpc.Version, Method: "notifications/roots/list_changed"})

func (r *Router) writeHost(msg []byte) {
	if err := r.host.Write(msg); err != nil {
		select {
		case <-r.hostDone:
		default:
			r.log.Warn("cannot write to the host", "error", err)
		}
		r.markHostDone("the host no longer reads")
	}
}

func (r *Router) writeServer(msg []byte) {
	if err := r.server.Write(msg); err != nil {
		r.log.Debug("cannot write to the server", "error", err)
	}
}

// Wire shapes of the messages the Router writes itself.
type request struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      jsonrpc.ID `json:"id,omitempty"`
	Method  string     `json:"method"`
}

type resultReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      jsonrpc.ID      `json:"id"`
	Result  json.RawMessage `json:"result"`
}

type errorReply struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsonrpc.ID     `json:"id"`
	Error   *jsonrpc.Error `json:"error"`
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("proxy: encode %T: %v", v, err))
	}
	return b
}
