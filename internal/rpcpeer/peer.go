// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package rpcpeer plays one side of a JSON-RPC 2.0 session over a real
// connection (a process's pipes, os.Pipe pairs) and checks the other side:
// it keeps every line the other side writes, matches replies to requests by
// id, answers the other side's requests with handlers as they come, and
// waits for a message up to a bound, returning an error that carries the
// session's transcript when none comes.
//
// Framing is broker/jsonrpc's LineStream and validation its Decode, so a
// peer reads the wire as the broker does, except that it keeps the blank
// lines the broker would skip (they are not messages either) and holds the
// other side to one rule the broker's tolerant reader does not: a reply
// carries an id member. The peer accepts what it reads as it is, malformed
// lines included (a test of a broker's refusals sees them); RequireValid
// keeps a line that is not one JSON-RPC 2.0 message out of the waits and
// lists it under Problems instead.
//
// It does not import package testing: `fsbroker conformance` runs it
// outside `go test`, and internal/mcppeer puts the tests' layer (a failed
// wait fails the test) on top of it.
package rpcpeer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// DefaultWait bounds each wait for a message. It catches a peer that never
// answers; it does not measure speed.
const DefaultWait = 10 * time.Second

// transcriptTail is how many lines of the transcript a WaitError shows.
const transcriptTail = 60

// transcriptLine is the most of one line a transcript keeps.
const transcriptLine = 400

// Handler answers one request of the other side: its result (nil means
// {}), or an error to reply with instead.
type Handler func(req *Message) (result any, err *jsonrpc.Error)

// MethodNotFound is a Handler that answers any request with JSON-RPC's
// "Method not found" (-32601), as a program does that implements none of
// the other side's requests.
func MethodNotFound(*Message) (any, *jsonrpc.Error) {
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
}

// Option configures a Peer.
type Option func(*Peer)

// WithWait sets the bound of each wait (DefaultWait).
func WithWait(d time.Duration) Option {
	return func(p *Peer) {
		if d > 0 {
			p.wait = d
		}
	}
}

// RequireValid makes the peer hold the other side to JSON-RPC 2.0: a line
// that is not one message is not offered to waits and is listed by
// Problems.
func RequireValid() Option { return func(p *Peer) { p.requireValid = true } }

// WithHandler answers the other side's requests for method with h, from the
// peer's reader as they arrive. An answered request is taken (no wait
// returns it, but All lists it) unless the peer has OfferAnswered.
func WithHandler(method string, h Handler) Option {
	return func(p *Peer) { p.handlers[method] = h }
}

// WithFallback answers, with h, every request of the other side for a
// method that has no handler of its own (MethodNotFound, say), as
// WithHandler does.
func WithFallback(h Handler) Option { return func(p *Peer) { p.fallback = h } }

// OfferAnswered keeps the requests a handler answered offered to waits, so
// that a check can still expect them (a broker's pings, answered and
// counted).
func OfferAnswered() Option { return func(p *Peer) { p.offerAnswered = true } }

// OnAnswerFailure calls f, from the peer's reader, when the answer of a
// handler cannot be encoded or written; without it such a failure is only
// in the transcript.
func OnAnswerFailure(f func(req *Message, err error)) Option {
	return func(p *Peer) { p.onAnswerFailure = f }
}

// Peer is one side of a JSON-RPC session.
type Peer struct {
	name            string
	stream          jsonrpc.Stream
	wait            time.Duration
	requireValid    bool
	offerAnswered   bool
	handlers        map[string]Handler
	fallback        Handler
	onAnswerFailure func(req *Message, err error)

	mu         sync.Mutex
	msgs       []*Message
	taken      []bool
	problems   []string      // lines refused under RequireValid
	transcript []string      // both ways, clipped
	changed    chan struct{} // closed and replaced when msgs grows or the input ends
	ended      bool
	readErr    error // why the input ended, if not at its end
	done       chan struct{}
}

// New starts a peer named name (it names the other side in errors: "no X
// from NAME") on stream, and reads it until its input ends. The caller owns
// the stream and closes it.
func New(name string, stream jsonrpc.Stream, opts ...Option) *Peer {
	p := &Peer{name: name, stream: stream, wait: DefaultWait, handlers: map[string]Handler{},
		changed: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	go p.read()
	return p
}

// Name is the name of the other side, as given to New.
func (p *Peer) Name() string { return p.name }

// lineReader is a stream that can return every line as it came, blank
// ones included (jsonrpc.LineStream).
type lineReader interface {
	ReadLine() ([]byte, error)
}

// read keeps every line of the input until it ends, answering the requests
// the peer has handlers for.
func (p *Peer) read() {
	defer close(p.done)
	readLine := p.stream.Read
	if ls, ok := p.stream.(lineReader); ok {
		readLine = ls.ReadLine // blank lines are the other side's too
	}
	for {
		line, err := readLine()
		switch {
		case errors.Is(err, jsonrpc.ErrMessageTooLarge):
			p.receive(&Message{Raw: "(a line over the size limit)", Problem: err.Error()}, nil)
			continue
		case err != nil:
			p.mu.Lock()
			p.ended = true
			if !errors.Is(err, io.EOF) {
				p.readErr = err
			}
			p.note("< (end of input)")
			p.signal()
			p.mu.Unlock()
			return
		}
		m := parse(line)
		h := p.handlerFor(m)
		p.receive(m, h)
		if h != nil {
			p.answer(m, h)
		}
	}
}

// handlerFor returns the handler that answers m, nil when m is not a valid
// request or the peer has none for it.
func (p *Peer) handlerFor(m *Message) Handler {
	if m.Problem != "" || !m.IsRequest(m.Method) {
		return nil
	}
	if h := p.handlers[m.Method]; h != nil {
		return h
	}
	return p.fallback
}

// receive records m, which h answers when not nil, and wakes the waits.
func (p *Peer) receive(m *Message, h Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.note("< " + m.Raw)
	if m.Problem != "" && p.requireValid {
		p.problems = append(p.problems, fmt.Sprintf("%s: %s", m.Problem, clip(m.Raw, 200)))
		p.signal()
		return
	}
	m.Seq = len(p.msgs)
	p.msgs = append(p.msgs, m)
	p.taken = append(p.taken, h != nil && !p.offerAnswered)
	p.signal()
}

// answer replies to req with its handler's answer, from the reader.
func (p *Peer) answer(req *Message, h Handler) {
	result, rpcErr := h(req)
	var err error
	if rpcErr != nil {
		err = p.ReplyError(req, rpcErr)
	} else {
		if result == nil {
			result = struct{}{}
		}
		err = p.Reply(req, result)
	}
	if err != nil && p.onAnswerFailure != nil {
		p.onAnswerFailure(req, fmt.Errorf("answer %s's %s: %w", p.name, req.Method, err))
	}
}

// signal wakes the waits; p.mu is held.
func (p *Peer) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// note adds a line to the transcript; p.mu is held.
func (p *Peer) note(line string) {
	p.transcript = append(p.transcript, clip(line, transcriptLine))
}

// Note adds a line of the caller's own to the transcript, such as "> (end
// of input)" when it closes its side.
func (p *Peer) Note(line string) {
	p.mu.Lock()
	p.note(line)
	p.mu.Unlock()
}

// Write sends line as it is (it must not hold a newline).
func (p *Peer) Write(line []byte) error {
	p.Note("> " + string(line))
	if err := p.stream.Write(line); err != nil {
		return fmt.Errorf("write to %s: %w", p.name, err)
	}
	return nil
}

// Send writes v, encoded as JSON, as one line.
func (p *Peer) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a message to %s: %w", p.name, err)
	}
	return p.Write(b)
}

// Notify sends the notification method with params (none when nil).
func (p *Peer) Notify(method string, params any) error {
	n := map[string]any{"jsonrpc": jsonrpc.Version, "method": method}
	if params != nil {
		n["params"] = params
	}
	return p.Send(n)
}

// Request sends the request method with id and params (none when nil), and
// returns the id's JSON text, for AwaitReply.
func (p *Peer) Request(id any, method string, params any) (string, error) {
	idText, err := json.Marshal(id)
	if err != nil {
		return "", fmt.Errorf("encode the id %v: %w", id, err)
	}
	req := map[string]any{"jsonrpc": jsonrpc.Version, "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	return string(idText), p.Send(req)
}

// Call sends a request and returns its reply.
func (p *Peer) Call(id any, method string, params any) (*Message, error) {
	idText, err := p.Request(id, method, params)
	if err != nil {
		return nil, err
	}
	return p.Await(fmt.Sprintf("reply to %s (id %s)", method, idText), func(m *Message) bool { return m.IsReplyTo(idText) })
}

// Reply answers the other side's request req with result.
func (p *Peer) Reply(req *Message, result any) error {
	return p.Send(map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "result": result})
}

// ReplyError answers the other side's request req with an error.
func (p *Peer) ReplyError(req *Message, e *jsonrpc.Error) error {
	return p.Send(map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "error": e})
}

// TryAwait takes the first message not yet taken that matches, waiting up
// to d. It returns nil when none came in time, the input ended first, or
// ctx ended.
func (p *Peer) TryAwait(ctx context.Context, d time.Duration, match func(*Message) bool) *Message {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		for i, m := range p.msgs {
			if !p.taken[i] && match(m) {
				p.taken[i] = true
				p.mu.Unlock()
				return m
			}
		}
		changed, ended := p.changed, p.ended
		p.mu.Unlock()
		if ended {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// WaitError is the error of a wait that ended without what it waited for.
type WaitError struct {
	// Condition says what did not come: "no reply to id 7 from NAME", "not
	// three replies from NAME".
	Condition string
	// Why is "within 10s", or "before its output ended" (with the read
	// error, if the input did not end at its end).
	Why string
	// Transcript is the end of the session, both ways.
	Transcript string
}

// Error implements the error interface.
func (e *WaitError) Error() string {
	return fmt.Sprintf("%s %s; the session:\n%s", e.Condition, e.Why, e.Transcript)
}

// waitError describes a failed wait for condition.
func (p *Peer) waitError(condition string) *WaitError {
	why := fmt.Sprintf("within %s", p.wait)
	p.mu.Lock()
	if p.ended {
		why = "before its output ended"
		if p.readErr != nil {
			why += fmt.Sprintf(" (%v)", p.readErr)
		}
	}
	p.mu.Unlock()
	return &WaitError{Condition: condition, Why: why, Transcript: p.Transcript(transcriptTail)}
}

// Await is TryAwait with the peer's wait; when no message matching comes it
// returns a *WaitError, in which what names the message.
func (p *Peer) Await(what string, match func(*Message) bool) (*Message, error) {
	if m := p.TryAwait(context.Background(), p.wait, match); m != nil {
		return m, nil
	}
	return nil, p.waitError(fmt.Sprintf("no %s from %s", what, p.name))
}

// WaitFor waits, up to the peer's wait, until holds is true of every
// message received so far (taken or not); when it does not come true it
// returns a *WaitError, in which what names the condition.
func (p *Peer) WaitFor(what string, holds func(all []*Message) bool) error {
	timer := time.NewTimer(p.wait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		changed, ended := p.changed, p.ended
		p.mu.Unlock()
		if holds(p.All()) {
			return nil
		}
		if !ended {
			select {
			case <-changed:
				continue
			case <-timer.C:
			}
		}
		return p.waitError(fmt.Sprintf("not %s from %s", what, p.name))
	}
}

// Next takes the next message not yet taken, whatever it is.
func (p *Peer) Next() (*Message, error) {
	return p.Await("message", func(*Message) bool { return true })
}

// AwaitRequest takes the next request for method.
func (p *Peer) AwaitRequest(method string) (*Message, error) {
	return p.Await(method+" request", func(m *Message) bool { return m.IsRequest(method) })
}

// AwaitNotification takes the next notification of method.
func (p *Peer) AwaitNotification(method string) (*Message, error) {
	return p.Await(method, func(m *Message) bool { return m.IsNotification(method) })
}

// AwaitReply takes the reply to the request whose id has the JSON text id.
func (p *Peer) AwaitReply(id string) (*Message, error) {
	return p.Await("reply to id "+id, func(m *Message) bool { return m.IsReplyTo(id) })
}

// All returns every message received so far, taken or not.
func (p *Peer) All() []*Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Message(nil), p.msgs...)
}

// Pending returns the messages not yet taken that match, without taking
// them.
func (p *Peer) Pending(match func(*Message) bool) []*Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Message
	for i, m := range p.msgs {
		if !p.taken[i] && match(m) {
			out = append(out, m)
		}
	}
	return out
}

// Has reports whether a message received so far, taken or not, matches.
func (p *Peer) Has(match func(*Message) bool) bool {
	for _, m := range p.All() {
		if match(m) {
			return true
		}
	}
	return false
}

// Problems returns the lines refused under RequireValid, each with why.
func (p *Peer) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Done is closed once the peer's input has ended.
func (p *Peer) Done() <-chan struct{} { return p.done }

// TranscriptLines returns the session both ways, one line each ("> "
// sent, "< " received), the last n lines only when n > 0 (after a line
// saying how many came before).
func (p *Peer) TranscriptLines(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := p.transcript
	if n > 0 && len(lines) > n {
		return append([]string{fmt.Sprintf("(%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return append([]string(nil), lines...)
}

// Transcript is TranscriptLines joined into one text.
func (p *Peer) Transcript(n int) string {
	return strings.Join(p.TranscriptLines(n), "\n")
}
