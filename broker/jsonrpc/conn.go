// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/semaphore"
)

// ErrClosed is returned by Call and Notify once the connection has ended.
var ErrClosed = errors.New("connection closed")

// RequestHandler answers one request. It returns the result (nil means {}) or
// an error: an *Error is sent as it is; any other error is logged and
// answered as a generic internal error, so that no Go error text (which may
// name host paths) reaches the peer.
//
// A request alone in flight runs on the connection's read loop itself (no
// goroutine hand-off); its handler may still block as long as it needs to:
// the reading passes to a new loop after half a millisecond, or at once when
// the handler calls Call with the request's context.
type RequestHandler func(ctx context.Context, req *Message) (any, error)

// NotificationHandler receives one notification. It runs on the read loop, so
// notifications are seen in order, and it must not block.
type NotificationHandler func(ctx context.Context, n *Message)

// Defaults for a Conn.
const (
	DefaultMaxInFlight     = 64
	DefaultMaxQueued       = 1024
	DefaultMaxQueuedBytes  = 64 << 20
	DefaultShutdownTimeout = 5 * time.Second
)

// Option configures a Conn.
type Option func(*Conn)

// WithLogger sets the logger for protocol errors and traffic traces.
func WithLogger(l hclog.Logger) Option { return func(c *Conn) { c.log = l } }

// WithMaxInFlight bounds the requests handled at once. Further requests wait
// for a slot in a bounded queue (see WithMaxQueued).
func WithMaxInFlight(n int) Option {
	return func(c *Conn) {
		if n > 0 {
			c.maxInFlight = n
		}
	}
}

// WithMaxQueued bounds the requests read but not yet finished (running or
// waiting for a slot), by count and by their total size in bytes. When either
// bound is reached the connection stops reading until a request finishes.
// Defaults: DefaultMaxQueued requests, DefaultMaxQueuedBytes bytes.
func WithMaxQueued(n int, bytes int64) Option {
	return func(c *Conn) {
		if n > 0 {
			c.maxQueued = n
		}
		if bytes > 0 {
			c.maxQueuedBytes = bytes
		}
	}
}

// WithShutdownTimeout bounds how long Serve waits for in-flight requests to
// finish after the input ends or its context is cancelled. When it passes,
// the remaining handlers' contexts are cancelled.
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *Conn) {
		if d > 0 {
			c.shutdownTimeout = d
		}
	}
}

// WithIDPrefix sets the prefix of the string ids of requests this side sends,
// so that they are recognisable and never collide with another party's ids.
func WithIDPrefix(p string) Option { return func(c *Conn) { c.idPrefix = p } }

// WithCancelNotification makes Call tell the peer when it stops waiting for
// the reply to one of its requests because the call's context ended (a time
// limit, a cancellation): it sends the notification method with
// params(id, ctx's error), where the request went (RoutedStream). MCP's is
// notifications/cancelled {requestId, reason}. A reply that comes after is
// dropped, as any reply to no pending request is.
func WithCancelNotification(method string, params func(id ID, cause error) any) Option {
	return func(c *Conn) { c.cancelMethod, c.cancelParams = method, params }
}

// Conn is one JSON-RPC connection over a Stream. It serves the peer's requests
// with a RequestHandler and lets this side send its own requests (Call) and
// notifications (Notify).
type Conn struct {
	stream          Stream
	routed          RoutedStream // stream, when it routes messages by request (else nil)
	onRequest       RequestHandler
	onNotification  NotificationHandler
	log             hclog.Logger
	maxInFlight     int
	maxQueued       int
	maxQueuedBytes  int64
	shutdownTimeout time.Duration
	idPrefix        string
	cancelMethod    string                       // WithCancelNotification
	cancelParams    func(id ID, cause error) any // WithCancelNotification
	handOverAfter   time.Duration                // inlineHandOver; tests set it longer

	nextID atomic.Uint64

	mu       sync.Mutex
	pending  map[ID]chan *Message      // our requests awaiting a reply
	inflight map[ID]context.CancelFunc // the peer's requests being handled
	canceled map[ID]bool               // the peer's requests it cancelled
	done     chan struct{}             // closed when the connection ends
	doneErr  error

	draining     chan struct{} // closed when Serve stops taking requests (Draining)
	drainingOnce sync.Once

	jobs    chan func()  // hands a request to an idle worker (unbuffered)
	idle    atomic.Int32 // workers waiting on jobs
	replies sync.Pool    // of *[]byte: reply buffers (writeAppended)
}

// NewConn returns a connection that answers requests with onRequest and passes
// notifications to onNotification (either may be nil: requests are then
// answered "method not found", notifications dropped).
func NewConn(stream Stream, onRequest RequestHandler, onNotification NotificationHandler, opts ...Option) *Conn {
	c := &Conn{
		stream:          stream,
		onRequest:       onRequest,
		onNotification:  onNotification,
		log:             hclog.NewNullLogger(),
		maxInFlight:     DefaultMaxInFlight,
		maxQueued:       DefaultMaxQueued,
		maxQueuedBytes:  DefaultMaxQueuedBytes,
		shutdownTimeout: DefaultShutdownTimeout,
		idPrefix:        "fsbroker-",
		handOverAfter:   inlineHandOver,
		pending:         make(map[ID]chan *Message),
		inflight:        make(map[ID]context.CancelFunc),
		canceled:        make(map[ID]bool),
		done:            make(chan struct{}),
		draining:        make(chan struct{}),
		jobs:            make(chan func()),
	}
	c.routed, _ = stream.(RoutedStream)
	for _, o := range opts {
		o(c)
	}
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Draining is closed when Serve stops taking requests (the input ended,
// the stream broke, or Serve's context ended) and starts waiting for those
// in flight: a request that runs until its peer cancels it (MCP's
// subscriptions/listen) ends then, so that the drain need not wait the
// shutdown timeout for it.
func (c *Conn) Draining() <-chan struct{} { return c.draining }

// finish ends the connection once, recording why.
func (c *Conn) finish(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.doneErr = err
	close(c.done)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// inlineHandOver is how long a request may run on the read loop before
// another goroutine takes over the reading (see Conn.runInline).
const inlineHandOver = 500 * time.Microsecond

// serveState is the state one Serve call shares with its read loop and its
// requests.
type serveState struct {
	ctx         context.Context // Serve's: its end stops the reading
	handlerCtx  context.Context // the requests' parent: cancelled only when draining fails
	sem         chan struct{}   // a slot per request running
	queue       chan struct{}   // a place per request read and not yet finished
	queuedBytes *semaphore.Weighted
	readEnd     chan error               // the read loop's end: nil at end of input (buffered, one send)
	turn        atomic.Pointer[readTurn] // the request last run on the read loop
	watchdog    *time.Timer              // hands the reading over from a long one (watch)

	mu      sync.Mutex
	stopped bool // no request starts any more (Serve is draining)
	wg      sync.WaitGroup
}

// begin counts a request that is about to start; false once Serve drains.
func (s *serveState) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	return true
}

// stop lets no further request begin.
func (s *serveState) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// Serve reads and dispatches messages until the input ends, the stream fails
// or ctx is cancelled. It then stops reading, waits up to the shutdown
// timeout for in-flight requests to be answered, cancels any that remain, and
// returns: nil after end of input or cancellation, otherwise the error. It
// does not close the stream; the caller does, which also unblocks a pending
// Read.
func (c *Conn) Serve(ctx context.Context) error {
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	s := &serveState{
		ctx:         ctx,
		handlerCtx:  handlerCtx,
		sem:         make(chan struct{}, c.maxInFlight),
		queue:       make(chan struct{}, c.maxQueued),
		queuedBytes: semaphore.NewWeighted(c.maxQueuedBytes),
		readEnd:     make(chan error, 1),
	}
	s.watchdog = time.AfterFunc(time.Hour, s.watch)
	s.watchdog.Stop()
	defer s.watchdog.Stop()
	go c.readLoop(s)

	var serveErr error
	select {
	case <-ctx.Done():
		c.log.Debug("stopping: shutdown requested")
	case <-c.done:
	case serveErr = <-s.readEnd:
	}
	s.stop()
	c.drainingOnce.Do(func() { close(c.draining) })

	// Drain: let in-flight requests finish, up to the deadline.
	drained := make(chan struct{})
	go func() { s.wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(c.shutdownTimeout):
		c.log.Warn("shutdown deadline passed; cancelling in-flight requests", "timeout", c.shutdownTimeout)
		cancelHandlers()
		select {
		case <-drained:
		case <-time.After(time.Second):
			c.log.Error("in-flight requests did not stop after cancellation")
		}
	}
	c.finish(serveErr)
	if serveErr == nil {
		c.mu.Lock()
		serveErr = c.doneErr
		c.mu.Unlock()
	}
	return serveErr
}

// readLoop is the only reader of the stream at any time: it reads and
// dispatches messages in order until the input ends, the stream fails, Serve
// stops, or it has handed the reading over to a new read loop while it runs a
// request itself (runInline).
func (c *Conn) readLoop(s *serveState) {
	for {
		raw, err := c.stream.Read()
		if s.ctx.Err() != nil {
			return // Serve has stopped reading; what was read is dropped
		}
		select {
		case <-c.done:
			return
		default:
		}
		switch {
		case err != nil && !errors.Is(err, ErrMessageTooLarge):
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.readEnd <- err
			return
		case err != nil:
			c.log.Warn("refused an oversized message")
			c.replyError(NullID, &Error{Code: CodeInvalidRequest, Message: "invalid request: message exceeds the size limit"})
		default:
			if !c.dispatch(s, raw) {
				return
			}
		}
	}
}

// dispatch handles one raw message: a reply goes to its Call, a notification
// to its handler, a request to a worker that waits for one of the
// maxInFlight slots, or to this read loop itself (runInline). Reading stops
// only while the queue of waiting requests is full (by count or by bytes), so
// replies and cancellations keep flowing while every slot is busy, and a
// flood is still held back. It returns false when this read loop must end:
// shutdown requested while the queue was full, or the reading handed over.
func (c *Conn) dispatch(s *serveState, raw []byte) bool {
	msg, err := Decode(raw)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			if de.Response {
				c.log.Warn("dropped a malformed reply from the peer", "reason", de.Err.Message)
				return true
			}
			c.log.Debug("refused a malformed message", "code", de.Err.Code, "reason", de.Err.Message)
			c.replyError(de.ID, de.Err)
		}
		return true
	}
	switch {
	case msg.IsResponse():
		c.deliver(msg)
		return true
	case msg.IsNotification():
		c.log.Trace("received notification", "method", msg.Method)
		if c.onNotification != nil {
			c.onNotification(s.handlerCtx, msg)
		}
		return true
	}

	// Take a place in the queue; only a full queue stops the reading.
	weight := min(int64(len(raw)), c.maxQueuedBytes)
	select {
	case s.queue <- struct{}{}:
	case <-s.ctx.Done():
		return false
	case <-c.done:
		return false
	}
	if err := s.queuedBytes.Acquire(s.ctx, weight); err != nil {
		<-s.queue
		return false
	}
	release := func() { s.queuedBytes.Release(weight); <-s.queue }
	if !s.begin() {
		release()
		return false
	}
	parent := s.handlerCtx
	if c.routed != nil {
		parent = context.WithValue(parent, handledRequestKey{}, msg.ID)
	}
	reqCtx, cancel := context.WithCancel(parent)
	c.mu.Lock()
	if _, dup := c.inflight[msg.ID]; dup {
		c.mu.Unlock()
		cancel()
		release()
		s.wg.Done()
		c.replyError(msg.ID, &Error{Code: CodeInvalidRequest, Message: "invalid request: a request with this id is still in progress"})
		return true
	}
	c.inflight[msg.ID] = cancel
	alone := len(c.inflight) == 1
	c.mu.Unlock()

	if alone && c.canRunInline(s) {
		return c.runInline(s, reqCtx, msg, release)
	}
	c.spawn(func() {
		defer s.wg.Done()
		defer release()
		select { // wait for a free request slot
		case s.sem <- struct{}{}:
			defer func() { <-s.sem }()
		case <-reqCtx.Done():
			// Cancelled by the peer, or the session is ending: never run.
		}
		c.handle(reqCtx, msg)
	})
	return true
}

// bufferedInput is a Stream that can tell how much input it has already read
// and not yet returned (LineStream: its buffer).
type bufferedInput interface {
	Buffered() int
}

// canRunInline reports whether the request just read, the only one in
// flight, may run on the read loop itself, and if so takes its slot. That is
// so when the peer has sent nothing more yet: a peer waiting for each reply,
// for which handing the request to a worker would only add a goroutine
// switch, and a wake-up of another thread, to every request. A peer with
// other requests in flight or already sent gets them handed to workers, to
// run side by side while the read loop reads on.
func (c *Conn) canRunInline(s *serveState) bool {
	b, ok := c.stream.(bufferedInput)
	if !ok || b.Buffered() > 0 {
		return false
	}
	select {
	case s.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// runInline runs a request on the read loop, holding the slot canRunInline
// took. Reading must not wait for it: if it is still running after
// inlineHandOver, or when its handler makes a Call of its own (which needs
// the reply read), a new read loop takes over, and this one ends with the
// request. It reports whether this read loop goes on reading.
func (c *Conn) runInline(s *serveState, reqCtx context.Context, msg *Message, release func()) bool {
	turn := &readTurn{resume: func() { c.readLoop(s) }}
	s.turn.Store(turn)
	s.watchdog.Reset(c.handOverAfter) // one timer for the session: cheaper than one per request
	c.handle(context.WithValue(reqCtx, readTurnKey{}, turn), msg)
	<-s.sem
	release()
	s.wg.Done()
	return turn.state.CompareAndSwap(turnRunning, turnFinished)
}

// watch is the session's watchdog timer firing: the request on the read loop,
// if one is still running, hands the reading over. (The timer is reset for
// every such request, not stopped after it: a late firing finds that request
// finished, or hands over for the next one a little early, which is harmless.)
func (s *serveState) watch() {
	if t := s.turn.Load(); t != nil {
		t.handOver()
	}
}

// A readTurn is a request running on the read loop: it ends either with the
// request (turnFinished: the loop reads on) or when the reading is handed
// over (turnHandedOver: a new loop reads), whichever comes first.
type readTurn struct {
	state  atomic.Int32
	resume func() // runs a new read loop
}

// The states of a readTurn.
const (
	turnRunning int32 = iota
	turnFinished
	turnHandedOver
)

// readTurnKey is the context key of a request's readTurn.
type readTurnKey struct{}

// handOver starts a new read loop, unless the request has finished or the
// reading was already handed over.
func (t *readTurn) handOver() {
	if t.state.CompareAndSwap(turnRunning, turnHandedOver) {
		go t.resume()
	}
}

// handOverReading hands the reading over if ctx is that of a request running
// on the read loop, which is about to wait for the peer.
func handOverReading(ctx context.Context) {
	if t, ok := ctx.Value(readTurnKey{}).(*readTurn); ok {
		t.handOver()
	}
}

// spawn runs a request's job on an idle worker, or on a new one when none is
// waiting. Finished workers wait for the next job (up to maxInFlight of them)
// until the connection ends, so a request runs on a stack that earlier
// requests already grew: a fresh goroutine per request spent about 8% of a
// small read growing and copying its stack (docs/performance.md).
func (c *Conn) spawn(job func()) {
	select {
	case c.jobs <- job:
	default:
		go c.work(job)
	}
}

// work runs job, then the jobs handed to it while it waits idle.
func (c *Conn) work(job func()) {
	maxIdle := int32(max(c.maxInFlight, 1))
	for {
		job()
		if c.idle.Add(1) > maxIdle {
			c.idle.Add(-1)
			return
		}
		select {
		case job = <-c.jobs:
			c.idle.Add(-1)
		case <-c.done:
			c.idle.Add(-1)
			return
		}
	}
}

// handle runs one request and sends its reply, unless the peer cancelled it.
func (c *Conn) handle(ctx context.Context, req *Message) {
	c.log.Trace("received request", "method", req.Method, "id", string(req.ID))
	var (
		result any
		err    error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("request handler panicked", "method", req.Method, "panic", fmt.Sprint(p))
				err = fmt.Errorf("handler panic: %v", p)
			}
		}()
		switch {
		case ctx.Err() != nil:
			err = &Error{Code: CodeInternalError, Message: "the session ended before the request could run"}
		case c.onRequest == nil:
			err = &Error{Code: CodeMethodNotFound, Message: "method not found: " + req.Method}
		default:
			result, err = c.onRequest(ctx, req)
		}
	}()

	c.mu.Lock()
	if cancel := c.inflight[req.ID]; cancel != nil {
		cancel()
	}
	delete(c.inflight, req.ID)
	canceled := c.canceled[req.ID]
	delete(c.canceled, req.ID)
	c.mu.Unlock()
	if canceled {
		c.log.Debug("request cancelled by the peer; not replying", "method", req.Method, "id", string(req.ID))
		return
	}

	if err != nil {
		var rpcErr *Error
		if !errors.As(err, &rpcErr) || rpcErr == nil {
			c.log.Error("request failed", "method", req.Method, "error", err)
			rpcErr = &Error{Code: CodeInternalError, Message: "internal error"}
		}
		c.replyError(req.ID, rpcErr)
		return
	}
	if a, ok := result.(ResultAppender); ok && !isNil(result) {
		c.writeAppended(req.ID, a)
		return
	}
	if isNil(result) {
		result = struct{}{}
	}
	data, merr := json.Marshal(resultResponse{JSONRPC: Version, ID: req.ID, Result: result})
	if merr != nil {
		c.log.Error("cannot encode result", "method", req.Method, "error", merr)
		c.replyError(req.ID, &Error{Code: CodeInternalError, Message: "internal error"})
		return
	}
	_ = c.write(data, req.ID, true)
}

// ResultAppender is a request result that writes its own JSON: AppendJSON
// appends the result's encoding, which must be valid JSON, to b. Conn
// writes the reply around it without encoding/json, into a buffer it reuses
// when the stream writes synchronously (a LineStream): a file's content is
// encoded once, straight into the message sent, and leaves no garbage.
type ResultAppender interface {
	AppendJSON(b []byte) []byte
}

// maxPooledReply is the largest reply buffer kept for reuse.
const maxPooledReply = 4 << 20

// writeAppended sends the reply to id with an appended result.
func (c *Conn) writeAppended(id ID, a ResultAppender) {
	_, reuse := c.stream.(*LineStream) // writes before returning; keeps nothing
	var bp *[]byte
	var b []byte
	if reuse {
		bp, _ = c.replies.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		b = (*bp)[:0]
	}
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if id.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, id...)
	}
	b = append(b, `,"result":`...)
	b = a.AppendJSON(b)
	b = append(b, '}')
	_ = c.write(b, id, true)
	if reuse && cap(b) <= maxPooledReply {
		*bp = b[:0]
		c.replies.Put(bp)
	}
}

// isNil reports whether a result is nil, a nil pointer included (both are
// answered {} rather than null).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// CancelRequest cancels the handling of the peer's request id (for the MCP
// notifications/cancelled notification). No reply is sent for it.
func (c *Conn) CancelRequest(id ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.inflight[id]; ok {
		c.canceled[id] = true
		cancel()
	}
}

// deliver hands a response to the Call waiting for it.
func (c *Conn) deliver(msg *Message) {
	c.mu.Lock()
	ch, ok := c.pending[msg.ID]
	delete(c.pending, msg.ID)
	c.mu.Unlock()
	if !ok {
		if msg.Error != nil {
			c.log.Warn("peer sent an error reply to no pending request", "id", string(msg.ID), "code", msg.Error.Code, "message", msg.Error.Message)
		} else {
			c.log.Warn("peer sent a reply to no pending request", "id", string(msg.ID))
		}
		return
	}
	ch <- msg // buffered: never blocks
}

// Call sends a request and waits for its reply, ctx's end or the connection's
// end. A reply with an error is returned as *Error. The result is decoded into
// result unless result is nil.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	id := StringID(c.idPrefix + strconv.FormatUint(c.nextID.Add(1), 10))
	data, err := json.Marshal(request{JSONRPC: Version, ID: id, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("encode %s request: %w", method, err)
	}
	ch := make(chan *Message, 1)
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return fmt.Errorf("call %s: %w", method, ErrClosed)
	default:
	}
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.write(data, handledRequest(ctx), false); err != nil {
		c.forget(id)
		return fmt.Errorf("call %s: %w", method, err)
	}
	handOverReading(ctx) // the reply must be read while this waits
	select {
	case reply, ok := <-ch:
		if !ok {
			return fmt.Errorf("call %s: %w", method, ErrClosed)
		}
		if reply.Error != nil {
			return reply.Error
		}
		if result != nil {
			if err := json.Unmarshal(reply.Result, result); err != nil {
				return fmt.Errorf("decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		if c.forget(id) && c.cancelMethod != "" {
			c.notifyCancelled(ctx, id)
		}
		return fmt.Errorf("call %s: %w", method, ctx.Err())
	}
}

// forget stops waiting for the reply to id, and reports whether it was
// still awaited.
func (c *Conn) forget(id ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pending := c.pending[id]
	delete(c.pending, id)
	return pending
}

// notifyCancelled tells the peer that the request id, sent by a Call under
// ctx, is no longer awaited (WithCancelNotification).
func (c *Conn) notifyCancelled(ctx context.Context, id ID) {
	select {
	case <-c.done:
		return
	default:
	}
	data, err := json.Marshal(request{JSONRPC: Version, Method: c.cancelMethod, Params: c.cancelParams(id, ctx.Err())})
	if err != nil {
		c.log.Error("cannot encode the cancellation of a request", "method", c.cancelMethod, "error", err)
		return
	}
	_ = c.write(data, handledRequest(ctx), false)
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	return c.NotifyWithin(context.Background(), method, params)
}

// NotifyWithin sends a notification that belongs to the peer's request
// whose handler ctx is (over a RoutedStream, it travels with that
// request's reply: MCP's subscriptions/listen stream); with any other
// context it is Notify.
func (c *Conn) NotifyWithin(ctx context.Context, method string, params any) error {
	select {
	case <-c.done:
		return fmt.Errorf("notify %s: %w", method, ErrClosed)
	default:
	}
	data, err := json.Marshal(request{JSONRPC: Version, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("encode %s notification: %w", method, err)
	}
	return c.write(data, handledRequest(ctx), false)
}

func (c *Conn) replyError(id ID, e *Error) {
	data, err := json.Marshal(errorResponse{JSONRPC: Version, ID: id, Error: e})
	if err != nil {
		// Only a Data value that cannot be encoded gets here; drop it.
		c.log.Error("cannot encode error data", "error", err)
		data, _ = json.Marshal(errorResponse{JSONRPC: Version, ID: id, Error: &Error{Code: e.Code, Message: e.Message}})
	}
	_ = c.write(data, id, true)
}

// write sends one message, which belongs to the peer's request id (see
// RoutedStream); a failed write ends the connection, since the peer can no
// longer be told anything.
func (c *Conn) write(data []byte, id ID, reply bool) error {
	var err error
	if c.routed != nil {
		err = c.routed.WriteRouted(data, id, reply)
	} else {
		err = c.stream.Write(data)
	}
	if err != nil {
		c.log.Error("cannot write to the peer; ending the session", "error", err)
		c.finish(err)
		return err
	}
	return nil
}
