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

// Conn is one JSON-RPC connection over a Stream. It serves the peer's requests
// with a RequestHandler and lets this side send its own requests (Call) and
// notifications (Notify).
type Conn struct {
	stream          Stream
	onRequest       RequestHandler
	onNotification  NotificationHandler
	log             hclog.Logger
	maxInFlight     int
	maxQueued       int
	maxQueuedBytes  int64
	shutdownTimeout time.Duration
	idPrefix        string

	nextID atomic.Uint64

	mu       sync.Mutex
	pending  map[ID]chan *Message      // our requests awaiting a reply
	inflight map[ID]context.CancelFunc // the peer's requests being handled
	canceled map[ID]bool               // the peer's requests it cancelled
	done     chan struct{}             // closed when the connection ends
	doneErr  error

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
		pending:         make(map[ID]chan *Message),
		inflight:        make(map[ID]context.CancelFunc),
		canceled:        make(map[ID]bool),
		done:            make(chan struct{}),
		jobs:            make(chan func()),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

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

// readResult is one Read from the stream, handed to the serve loop.
type readResult struct {
	msg []byte
	err error
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
	sem := make(chan struct{}, c.maxInFlight)
	queue := make(chan struct{}, c.maxQueued)
	queuedBytes := semaphore.NewWeighted(c.maxQueuedBytes)
	var wg sync.WaitGroup

	reads := make(chan readResult)
	next := make(chan struct{}, 1)
	go func() { // the only reader of the stream
		for {
			msg, err := c.stream.Read()
			select {
			case reads <- readResult{msg, err}:
			case <-c.done:
				return
			}
			if err != nil && !errors.Is(err, ErrMessageTooLarge) {
				return
			}
			select { // wait until the message is dispatched; the buffer is reused
			case <-next:
			case <-c.done:
				return
			}
		}
	}()

	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			c.log.Debug("stopping: shutdown requested")
			break loop
		case <-c.done:
			break loop
		case r := <-reads:
			if r.err != nil && !errors.Is(r.err, ErrMessageTooLarge) {
				if !errors.Is(r.err, io.EOF) {
					serveErr = r.err
				}
				break loop
			}
			if r.err != nil {
				c.log.Warn("refused an oversized message")
				c.replyError(NullID, &Error{Code: CodeInvalidRequest, Message: "invalid request: message exceeds the size limit"})
			} else if !c.dispatch(ctx, handlerCtx, r.msg, sem, queue, queuedBytes, &wg) {
				break loop
			}
			next <- struct{}{}
		}
	}

	// Drain: let in-flight requests finish, up to the deadline.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
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

// dispatch handles one raw message: a reply goes to its Call, a notification
// to its handler, a request to a goroutine that waits for one of the
// maxInFlight slots. Reading stops only while the queue of waiting requests
// is full (by count or by bytes), so replies and cancellations keep flowing
// while every slot is busy, and a flood is still held back. It returns false
// when the loop must stop (shutdown requested while the queue was full).
func (c *Conn) dispatch(ctx, handlerCtx context.Context, raw []byte, sem, queue chan struct{},
	queuedBytes *semaphore.Weighted, wg *sync.WaitGroup) bool {
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
	case msg.IsNotification():
		c.log.Trace("received notification", "method", msg.Method)
		if c.onNotification != nil {
			c.onNotification(handlerCtx, msg)
		}
	default:
		// Take a place in the queue; only a full queue stops the reading.
		weight := min(int64(len(raw)), c.maxQueuedBytes)
		select {
		case queue <- struct{}{}:
		case <-ctx.Done():
			return false
		case <-c.done:
			return false
		}
		if err := queuedBytes.Acquire(ctx, weight); err != nil {
			<-queue
			return false
		}
		reqCtx, cancel := context.WithCancel(handlerCtx)
		c.mu.Lock()
		if _, dup := c.inflight[msg.ID]; dup {
			c.mu.Unlock()
			cancel()
			queuedBytes.Release(weight)
			<-queue
			c.replyError(msg.ID, &Error{Code: CodeInvalidRequest, Message: "invalid request: a request with this id is still in progress"})
			return true
		}
		c.inflight[msg.ID] = cancel
		c.mu.Unlock()
		wg.Add(1)
		c.spawn(func() {
			defer wg.Done()
			defer func() { queuedBytes.Release(weight); <-queue }()
			select { // wait for a free request slot
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-reqCtx.Done():
				// Cancelled by the peer, or the session is ending: never run.
			}
			c.handle(reqCtx, msg)
		})
	}
	return true
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
	c.write(data)
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
	_ = c.write(b)
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

	if err := c.write(data); err != nil {
		c.forget(id)
		return fmt.Errorf("call %s: %w", method, err)
	}
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
		c.forget(id)
		return fmt.Errorf("call %s: %w", method, ctx.Err())
	}
}

func (c *Conn) forget(id ID) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	select {
	case <-c.done:
		return fmt.Errorf("notify %s: %w", method, ErrClosed)
	default:
	}
	data, err := json.Marshal(request{JSONRPC: Version, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("encode %s notification: %w", method, err)
	}
	return c.write(data)
}

func (c *Conn) replyError(id ID, e *Error) {
	data, err := json.Marshal(errorResponse{JSONRPC: Version, ID: id, Error: e})
	if err != nil {
		// Only a Data value that cannot be encoded gets here; drop it.
		c.log.Error("cannot encode error data", "error", err)
		data, _ = json.Marshal(errorResponse{JSONRPC: Version, ID: id, Error: &Error{Code: e.Code, Message: e.Message}})
	}
	_ = c.write(data)
}

// write sends one message; a failed write ends the connection, since the
// peer can no longer be told anything.
func (c *Conn) write(data []byte) error {
	if err := c.stream.Write(data); err != nil {
		c.log.Error("cannot write to the peer; ending the session", "error", err)
		c.finish(err)
		return err
	}
	return nil
}
