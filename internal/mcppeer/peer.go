// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package mcppeer is the tests' one peer for the MCP protocol: it plays
// either side of a session (the server a broker session serves, the host
// that a wrapping broker stands in front of, or the client of another MCP
// server) over a real connection, such as the pipes of a real process or
// os.Pipe pairs to a broker session in the test's own process.
//
// It is internal/rpcpeer (which reads the wire as the broker does, keeps
// what the other side wrote, matches replies by id, answers the other
// side's requests and waits up to a bound) with the test's layer on top:
// each wait that ends without its message fails the test with the
// transcript of the session, both ways; a line that is not one JSON-RPC 2.0
// message under RequireValid fails it at its end; and the MCP lifecycle
// (initialize) is played in one call. Only tests import this package; the
// broker never does.
package mcppeer

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/rpcpeer"
)

// DefaultWait bounds each wait for a message (rpcpeer.DefaultWait).
const DefaultWait = rpcpeer.DefaultWait

// Message is one line the peer received, as written and as read.
type Message = rpcpeer.Message

// Error is a JSON-RPC error object as received.
type Error = rpcpeer.Error

// Handler answers one request of the other side: its result (nil means
// {}), or an error to reply with instead.
type Handler = rpcpeer.Handler

// Option configures a Peer.
type Option = rpcpeer.Option

// WithWait sets the bound of each wait (DefaultWait).
func WithWait(d time.Duration) Option { return rpcpeer.WithWait(d) }

// RequireValid makes the peer hold the other side to JSON-RPC 2.0: a line
// that is not one message is not offered to waits, and fails the test
// (listed at the test's end, or by Problems).
func RequireValid() Option { return rpcpeer.RequireValid() }

// WithHandler answers the other side's requests for method with h, from the
// peer's reader as they arrive. An answered request is taken: no wait
// returns it, but All still lists it.
func WithHandler(method string, h Handler) Option { return rpcpeer.WithHandler(method, h) }

// WithFallback answers, with h, every request of the other side for a
// method that has no handler of its own, as WithHandler does: MethodNotFound
// plays a client or host that implements none of them.
func WithFallback(h Handler) Option { return rpcpeer.WithFallback(h) }

// MethodNotFound is a Handler that answers with JSON-RPC's "Method not
// found" (-32601).
var MethodNotFound Handler = rpcpeer.MethodNotFound

// Peer is one side of an MCP session, driven by a test.
type Peer struct {
	t    testing.TB
	core *rpcpeer.Peer
}

// New starts a peer named name (it names the other side in failures: "no X
// from NAME") on stream, and reads it until its input ends. The caller owns
// the stream and closes it. A handler's answer that cannot be written fails
// the test; when the test has failed, the transcript goes to the test's log
// at its end.
func New(t testing.TB, name string, stream jsonrpc.Stream, opts ...Option) *Peer {
	opts = append(opts[:len(opts):len(opts)], rpcpeer.OnAnswerFailure(func(_ *Message, err error) { t.Errorf("%v", err) }))
	p := &Peer{t: t, core: rpcpeer.New(name, stream, opts...)}
	t.Cleanup(func() {
		for _, bad := range p.Problems() {
			t.Errorf("%s wrote a line that is not a JSON-RPC message: %s", name, bad)
		}
		if t.Failed() {
			t.Logf("session with %s:\n%s", name, p.Transcript(0))
		}
	})
	return p
}

// Pipes returns two line streams joined by real OS pipes: what one writes
// the other reads. Both are closed when the test ends.
func Pipes(t testing.TB) (a, b *jsonrpc.LineStream) {
	t.Helper()
	a, b, _ = PipesWithOutput(t)
	return a, b
}

// PipesWithOutput is Pipes that also returns the pipe b writes to, for a
// test that writes bytes b's line stream would not (several messages in one
// write, so that a reads them at once) or ends a's input by closing it
// while b still reads. It is closed with the streams when the test ends.
func PipesWithOutput(t testing.TB) (a, b *jsonrpc.LineStream, bOut *os.File) {
	t.Helper()
	toAR, toAW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	toBR, toBW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	a = jsonrpc.NewLineStream(toAR, toBW, 0)
	b = jsonrpc.NewLineStream(toBR, toAW, 0)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b, toAW
}

// check fails the test when err is not nil.
func (p *Peer) check(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("%v", err)
	}
}

// Write sends line as it is (it must not hold a newline) and returns why
// it could not: for a goroutine of the test, which must not fail it.
func (p *Peer) Write(line []byte) error { return p.core.Write(line) }

// Note adds a line of the test's own to the transcript, such as "> (end
// of input)" when it closes its side.
func (p *Peer) Note(line string) { p.core.Note(line) }

// SendRaw writes line as it is (it must not hold a newline), failing the
// test when it cannot be written.
func (p *Peer) SendRaw(line string) {
	p.t.Helper()
	p.check(p.core.Write([]byte(line)))
}

// Send writes v, encoded as JSON, as one line.
func (p *Peer) Send(v any) {
	p.t.Helper()
	p.check(p.core.Send(v))
}

// Notify sends the notification method with params (none when nil).
func (p *Peer) Notify(method string, params any) {
	p.t.Helper()
	p.check(p.core.Notify(method, params))
}

// Request sends the request method with id and params (none when nil), and
// returns the id's JSON text, for AwaitReply.
func (p *Peer) Request(id any, method string, params any) string {
	p.t.Helper()
	idText, err := p.core.Request(id, method, params)
	p.check(err)
	return idText
}

// Call sends a request and returns its reply.
func (p *Peer) Call(id any, method string, params any) *Message {
	p.t.Helper()
	m, err := p.core.Call(id, method, params)
	p.check(err)
	return m
}

// Reply answers the other side's request req with result.
func (p *Peer) Reply(req *Message, result any) {
	p.t.Helper()
	p.check(p.core.Reply(req, result))
}

// ReplyError answers the other side's request req with an error.
func (p *Peer) ReplyError(req *Message, e *jsonrpc.Error) {
	p.t.Helper()
	p.check(p.core.ReplyError(req, e))
}

// Implementation names a program in an initialize exchange (serverInfo,
// clientInfo).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ReplyInitialize answers the initialize request init as an MCP server
// that speaks version, has no capabilities and is named info.
func (p *Peer) ReplyInitialize(init *Message, version string, info Implementation) {
	p.t.Helper()
	p.Reply(init, map[string]any{"protocolVersion": version, "capabilities": map[string]any{}, "serverInfo": info})
}

// AcceptInitialize plays the server's side of the MCP lifecycle: it takes
// the other side's initialize request, answers it (ReplyInitialize), waits
// for notifications/initialized, and returns the request.
func (p *Peer) AcceptInitialize(version string, info Implementation) *Message {
	p.t.Helper()
	init := p.AwaitRequest("initialize")
	p.ReplyInitialize(init, version, info)
	p.AwaitNotification("notifications/initialized")
	return init
}

// TryAwait takes the first message not yet taken that matches, waiting up
// to d. It returns nil when none came in time or the input ended first.
func (p *Peer) TryAwait(d time.Duration, match func(*Message) bool) *Message {
	return p.core.TryAwait(context.Background(), d, match)
}

// Await takes the first message not yet taken that matches, waiting up to
// the peer's wait, and fails the test, with the transcript, when none
// comes; what names the message for the failure.
func (p *Peer) Await(what string, match func(*Message) bool) *Message {
	p.t.Helper()
	m, err := p.core.Await(what, match)
	p.check(err)
	return m
}

// WaitFor waits, up to the peer's wait, until holds is true of every
// message received so far (taken or not), and fails the test, with the
// transcript, when it is not; what names the condition for the failure.
func (p *Peer) WaitFor(what string, holds func(all []*Message) bool) {
	p.t.Helper()
	p.check(p.core.WaitFor(what, holds))
}

// Next takes the next message not yet taken, whatever it is.
func (p *Peer) Next() *Message {
	p.t.Helper()
	m, err := p.core.Next()
	p.check(err)
	return m
}

// AwaitRequest takes the next request for method.
func (p *Peer) AwaitRequest(method string) *Message {
	p.t.Helper()
	m, err := p.core.AwaitRequest(method)
	p.check(err)
	return m
}

// AwaitNotification takes the next notification of method.
func (p *Peer) AwaitNotification(method string) *Message {
	p.t.Helper()
	m, err := p.core.AwaitNotification(method)
	p.check(err)
	return m
}

// AwaitReply takes the reply to the request whose id has the JSON text id.
func (p *Peer) AwaitReply(id string) *Message {
	p.t.Helper()
	m, err := p.core.AwaitReply(id)
	p.check(err)
	return m
}

// All returns every message received so far, taken or not.
func (p *Peer) All() []*Message { return p.core.All() }

// Has reports whether a message received so far, taken or not, matches.
func (p *Peer) Has(match func(*Message) bool) bool { return p.core.Has(match) }

// Problems returns the lines refused under RequireValid, each with why.
func (p *Peer) Problems() []string { return p.core.Problems() }

// Done is closed once the peer's input has ended.
func (p *Peer) Done() <-chan struct{} { return p.core.Done() }

// Transcript returns the session both ways, one line each ("> " sent, "< "
// received), the last n lines only when n > 0.
func (p *Peer) Transcript(n int) string { return p.core.Transcript(n) }
