// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// session is one HTTP session: the jsonrpc.RoutedStream its run reads and
// writes. Read returns the messages POSTed to it; WriteRouted sends a reply
// on the POST of its request, a message sent while handling a request on
// that request's POST when the client accepts an event stream there, and
// everything else on the standalone event stream (GET).
type session struct {
	srv        *Server
	id         string
	incoming   chan []byte   // POSTed messages, for Read (unbuffered)
	input      chan struct{} // closed when the session's input ends (Read: EOF)
	done       chan struct{} // closed when its run has returned
	standalone chan []byte   // messages for the standalone event stream
	bodySlots  chan struct{} // POST bodies being read or awaiting Read
	endOnce    sync.Once
	// stateless: the server's session for requests without sessions
	// (modern.go); what it sends outside a request goes nowhere.
	stateless bool

	mu             sync.Mutex
	version        string // the protocol version negotiated ("" before)
	exchanges      map[jsonrpc.ID]*exchange
	standaloneOpen bool
	active         int         // POSTs in progress
	lastActive     time.Time   // when a POST last ended, or a message went out on the event stream
	idleTimer      *time.Timer // ends the session once idle for the idle timeout
}

var _ jsonrpc.RoutedStream = (*session)(nil)

// exchange is a POSTed request awaiting its reply: the POST's handler takes
// the messages for it from out until the reply, and closes gone when it
// stops taking them (the reply sent, the client gone, the session stopped).
type exchange struct {
	stream bool // the client accepts an event stream on this POST
	out    chan outgoing
	gone   chan struct{}
	// reply, when set, rewrites the reply before it is sent and gives its
	// HTTP status (a stateless request's: its client's id restored).
	reply func([]byte) ([]byte, int)
	// message, when set, rewrites the other messages sent on the POST (a
	// stateless subscriptions/listen's notifications: its client's id
	// restored as their subscription id).
	message func([]byte) []byte
}

// outgoing is a message for an exchange.
type outgoing struct {
	msg   []byte
	reply bool
}

func newSession(srv *Server, id string) *session {
	sess := &session{
		srv:        srv,
		id:         id,
		incoming:   make(chan []byte),
		input:      make(chan struct{}),
		done:       make(chan struct{}),
		standalone: make(chan []byte, standaloneBacklog),
		bodySlots:  make(chan struct{}, bodySlots),
		exchanges:  map[jsonrpc.ID]*exchange{},
		lastActive: time.Now(),
	}
	sess.idleTimer = time.AfterFunc(srv.cfg.IdleTimeout, sess.expire)
	return sess
}

// Read returns the next POSTed message, or io.EOF once the session's input
// ended (DELETE, idle expiry, the server closing).
func (sess *session) Read() ([]byte, error) {
	select {
	case msg := <-sess.incoming:
		return msg, nil
	case <-sess.input:
		return nil, io.EOF
	}
}

// Write sends a message that belongs to no request of the client's.
func (sess *session) Write(msg []byte) error { return sess.WriteRouted(msg, "", false) }

// WriteRouted routes msg (see session). It never fails: a message with
// nowhere to go (its POST gone, the session ended, the standalone backlog
// full) is dropped, as the transport allows, and the session goes on.
func (sess *session) WriteRouted(msg []byte, id jsonrpc.ID, reply bool) error {
	var ex *exchange
	if !id.IsZero() {
		sess.mu.Lock()
		ex = sess.exchanges[id]
		if reply && ex != nil {
			delete(sess.exchanges, id)
		}
		sess.mu.Unlock()
	}
	if ex != nil && (reply || ex.stream) {
		select {
		case ex.out <- outgoing{msg, reply}:
			return nil
		case <-ex.gone:
		}
	}
	if reply {
		sess.srv.log.Debug("dropped a reply: the client's request is gone", "id", string(id))
		return nil
	}
	if sess.stateless {
		// No event stream: a message outside a request reaches no one.
		sess.srv.log.Debug("dropped a message sent outside a request: requests without sessions have no event stream")
		return nil
	}
	select {
	case <-sess.input:
		return nil
	default:
	}
	select {
	case sess.standalone <- msg:
	default:
		sess.srv.log.Warn("dropped a message for the session's event stream: its backlog is full", "max", standaloneBacklog)
	}
	return nil
}

// Close ends the session's input.
func (sess *session) Close() error {
	sess.endInput()
	return nil
}

// endInput ends the session's input once.
func (sess *session) endInput() {
	sess.endOnce.Do(func() {
		close(sess.input)
		sess.idleTimer.Stop()
	})
}

// deliver hands a POSTed message to the session's run; false when the
// session's input ended first or the client went away.
func (sess *session) deliver(ctx context.Context, msg []byte) bool {
	select {
	case sess.incoming <- msg:
		return true
	case <-sess.input:
	case <-ctx.Done():
	}
	return false
}

// register records a POSTed request awaiting its reply; nil and the HTTP
// status when its id is already awaiting one (400) or too many are (429).
func (sess *session) register(id jsonrpc.ID, stream bool) (*exchange, int) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if _, dup := sess.exchanges[id]; dup {
		return nil, http.StatusBadRequest
	}
	if len(sess.exchanges) >= maxPendingRequests {
		return nil, http.StatusTooManyRequests
	}
	ex := &exchange{stream: stream, out: make(chan outgoing), gone: make(chan struct{})}
	sess.exchanges[id] = ex
	return ex, 0
}

// unregister forgets a request that never reached the session.
func (sess *session) unregister(id jsonrpc.ID, ex *exchange) {
	sess.mu.Lock()
	if sess.exchanges[id] == ex {
		delete(sess.exchanges, id)
	}
	sess.mu.Unlock()
}

// cancelled forgets the request a notifications/cancelled names: no reply
// is owed to it any more (a late one is dropped), and its id is free again.
func (sess *session) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	id, err := jsonrpc.ParseID(p.RequestID)
	if err != nil {
		return
	}
	sess.mu.Lock()
	delete(sess.exchanges, id)
	sess.mu.Unlock()
}

// negotiated is the session's protocol version ("" before initialize).
func (sess *session) negotiated() string {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.version
}

// busy counts a POST in progress: the session is not idle.
func (sess *session) busy() {
	sess.mu.Lock()
	sess.active++
	sess.lastActive = time.Now()
	sess.mu.Unlock()
}

// idle ends what busy counted; the idle timeout runs again from now when
// nothing is in progress.
func (sess *session) idle() {
	sess.mu.Lock()
	sess.active--
	sess.lastActive = time.Now()
	if sess.active == 0 {
		sess.idleTimer.Reset(sess.srv.cfg.IdleTimeout)
	}
	sess.mu.Unlock()
}

// sent counts a message sent on the standalone event stream as activity:
// a host that receives notifications there keeps its session. Keep-alive
// comments do not count, nor does the stream being open.
func (sess *session) sent() {
	sess.mu.Lock()
	sess.lastActive = time.Now()
	sess.mu.Unlock()
}

// expire ends the session when it has been idle for the idle timeout: no
// POST in progress, and none ended nor any message sent on the event
// stream since. An open GET does not count; otherwise whoever holds the
// sessions' event streams would keep every session slot for good.
func (sess *session) expire() {
	select {
	case <-sess.input:
		return // ended already
	default:
	}
	sess.mu.Lock()
	if sess.active > 0 {
		sess.mu.Unlock()
		return // idle restarts the timer
	}
	if rest := sess.srv.cfg.IdleTimeout - time.Since(sess.lastActive); rest > 0 {
		sess.idleTimer.Reset(rest)
		sess.mu.Unlock()
		return
	}
	sess.mu.Unlock()
	sess.srv.log.Info("ended an idle session", "idle_timeout", sess.srv.cfg.IdleTimeout)
	sess.srv.end(sess)
}

// attachStandalone claims the standalone event stream; false when a GET
// holds it already.
func (sess *session) attachStandalone() bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.standaloneOpen {
		return false
	}
	sess.standaloneOpen = true
	return true
}

// detachStandalone releases the standalone event stream.
func (sess *session) detachStandalone() {
	sess.mu.Lock()
	sess.standaloneOpen = false
	sess.mu.Unlock()
}

// streamStandalone sends the standalone stream's messages on a GET until the
// client goes away or the session's input ends.
func (sess *session) streamStandalone(w http.ResponseWriter, r *http.Request) {
	ev := newEventWriter(w)
	if ev.start() != nil {
		return
	}
	keepAlive := time.NewTicker(sess.srv.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case msg := <-sess.standalone:
			if err = ev.message(msg); err == nil {
				sess.sent()
			}
		case <-keepAlive.C:
			err = ev.comment()
		case <-r.Context().Done():
			return
		case <-sess.input:
			return
		}
		if err != nil {
			return
		}
	}
}

// respond answers a POSTed request from its exchange: the reply alone as
// application/json when the client accepts it and nothing else came first,
// else an event stream with what the session sent while handling the
// request, the reply last. An initialize answered with an error ends the
// session it opened; one answered with a result sets its version. It
// reports whether the reply came.
func (sess *session) respond(w http.ResponseWriter, r *http.Request, ex *exchange, jsonOK, initialize bool) (replied bool) {
	ev := newEventWriter(w)
	var tick <-chan time.Time
	if ex.stream {
		keepAlive := time.NewTicker(sess.srv.cfg.KeepAlive)
		defer keepAlive.Stop()
		tick = keepAlive.C
	}
	for {
		var err error
		select {
		case o := <-ex.out:
			if !o.reply {
				msg := o.msg
				if ex.message != nil {
					msg = ex.message(msg)
				}
				if err = ev.start(); err == nil {
					err = ev.message(msg)
				}
				break
			}
			if initialize {
				sess.initialized(o.msg, w, ev.started)
			}
			msg, status := o.msg, http.StatusOK
			if ex.reply != nil {
				msg, status = ex.reply(msg)
			}
			switch {
			case ev.started || !jsonOK:
				if err = ev.start(); err == nil {
					_ = ev.message(msg)
				}
			default:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_ = ev.write(msg)
			}
			return true
		case <-tick:
			// A long request (a consent question, a large tree): the stream
			// starts, so that proxies and the client see it alive.
			if err = ev.start(); err == nil {
				err = ev.comment()
			}
		case <-r.Context().Done():
			return false
		case <-sess.done:
			if !ev.started {
				sess.srv.ended(w, r, "")
			}
			return false
		}
		if err != nil {
			return false
		}
	}
}

// initialized looks at the reply to initialize: an error ends the session
// (its id is withdrawn when the headers are not sent yet); a result sets
// the session's version.
func (sess *session) initialized(reply []byte, w http.ResponseWriter, headersSent bool) {
	msg, err := jsonrpc.Decode(reply)
	if err != nil || msg.Error != nil {
		if !headersSent {
			w.Header().Del(headerSessionID)
		}
		sess.srv.end(sess)
		return
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(msg.Result, &res)
	sess.mu.Lock()
	sess.version = res.ProtocolVersion
	sess.mu.Unlock()
}

// eventWriter writes a response: one JSON body, or server-sent events, each
// write under writeTimeout and flushed.
type eventWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the event stream's headers are sent
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	return &eventWriter{w: w, rc: http.NewResponseController(w)}
}

// start sends the event stream's headers, once.
func (e *eventWriter) start() error {
	if e.started {
		return nil
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies pass each event at once (the revision's basic/transports)
	e.w.WriteHeader(http.StatusOK)
	return e.rc.Flush()
}

// message sends one message as a "message" event: one data line, or one
// per line of msg (the JSON-RPC connection writes none), without copying
// msg, which may be a large reply.
func (e *eventWriter) message(msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		var b []byte
		for line := range bytes.Lines(msg) {
			b = append(append(append(b, "data: "...), bytes.TrimRight(line, "\r\n")...), '\n')
		}
		msg = bytes.TrimSuffix(bytes.TrimPrefix(b, []byte("data: ")), []byte("\n"))
	}
	_ = e.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	for _, part := range [][]byte{[]byte("event: message\ndata: "), msg, []byte("\n\n")} {
		if _, err := e.w.Write(part); err != nil {
			return err
		}
	}
	return e.rc.Flush()
}

// comment sends an SSE comment, which clients ignore.
func (e *eventWriter) comment() error { return e.write([]byte(": keep-alive\n\n")) }

// write writes b and flushes it, within writeTimeout.
func (e *eventWriter) write(b []byte) error {
	_ = e.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.rc.Flush()
}
