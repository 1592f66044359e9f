// Package mcppeer is the tests' one peer for the MCP protocol: it plays
// either side of a session (the server a broker session serves, or the host
// that a wrapping broker stands in front of) over a real connection, such as
// the pipes of a real fsbroker process or os.Pipe pairs to a broker session
// in the test's own process.
//
// A Peer reads every line the other side writes, in the background, and
// keeps it: a test sends requests, notifications, replies and raw lines,
// and waits, up to a bound, for the first message not yet taken that
// matches (a reply by id, a request or notification by method, anything);
// Handle answers the other side's requests as they come (ping, roots/list,
// files/* when the peer is the host). Each wait that ends without the
// message fails the test with the transcript of the session, both ways. The
// peer accepts what it reads as it is, malformed lines included (a test of
// the broker's refusals sees them); RequireValid makes a line that is not
// one JSON-RPC 2.0 message fail the test instead.
//
// Framing is broker/jsonrpc's LineStream and validation its Decode: the
// peer reads the wire as the broker does, except that it keeps the blank
// lines the broker would skip (they are not messages either). Only tests import this
// package; the broker never does.
package mcppeer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// DefaultWait bounds each wait for a message. It catches a peer that never
// answers; it does not measure speed.
const DefaultWait = 10 * time.Second

// transcriptTail is how many lines of the transcript a failure shows.
const transcriptTail = 60

// transcriptLine is the most of one line a transcript keeps.
const transcriptLine = 400

// Handler answers one request of the other side: its result (nil means
// {}), or an error to reply with instead.
type Handler func(req *Message) (result any, err *jsonrpc.Error)

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
// that is not one message is not offered to waits, and fails the test
// (listed at the test's end, or by Problems).
func RequireValid() Option { return func(p *Peer) { p.requireValid = true } }

// WithHandler answers the other side's requests for method with h, from the
// peer's reader as they arrive. An answered request is taken: no wait
// returns it, but All still lists it.
func WithHandler(method string, h Handler) Option {
	return func(p *Peer) { p.handlers[method] = h }
}

// Peer is one side of an MCP session, driven by a test.
type Peer struct {
	t            testing.TB
	name         string
	stream       jsonrpc.Stream
	wait         time.Duration
	requireValid bool
	handlers     map[string]Handler

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

// New starts a peer named name (it names the other side in failures: "no X
// from NAME") on stream, and reads it until its input ends. The caller owns
// the stream and closes it. When the test has failed, the transcript goes
// to the test's log at its end.
func New(t testing.TB, name string, stream jsonrpc.Stream, opts ...Option) *Peer {
	p := &Peer{t: t, name: name, stream: stream, wait: DefaultWait, handlers: map[string]Handler{},
		changed: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	go p.read()
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
	return a, b
}

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
			p.receive(&Message{Raw: "(a line over the size limit)", Problem: err.Error()})
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
		p.receive(m)
		if h := p.handlers[m.Method]; h != nil && m.Problem == "" && m.IsRequest(m.Method) {
			p.answer(m, h)
		}
	}
}

// receive records m and wakes the waits.
func (p *Peer) receive(m *Message) {
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
	p.taken = append(p.taken, p.handlers[m.Method] != nil && m.Problem == "" && m.IsRequest(m.Method))
	p.signal()
}

// answer replies to req with its handler's answer, from the reader.
func (p *Peer) answer(req *Message, h Handler) {
	result, rpcErr := h(req)
	var v any
	if rpcErr != nil {
		v = map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "error": rpcErr}
	} else {
		if result == nil {
			result = struct{}{}
		}
		v = map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "result": result}
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = p.Write(b)
	}
	if err != nil {
		p.t.Errorf("answer %s's %s: %v", p.name, req.Method, err)
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

// Write sends line as it is (it must not hold a newline) and returns why
// it could not: for a goroutine of the test, which must not fail it.
func (p *Peer) Write(line []byte) error {
	p.mu.Lock()
	p.note("> " + string(line))
	p.mu.Unlock()
	if err := p.stream.Write(line); err != nil {
		return fmt.Errorf("write to %s: %w", p.name, err)
	}
	return nil
}

// SendRaw writes line as it is (it must not hold a newline), failing the
// test when it cannot be written.
func (p *Peer) SendRaw(line string) {
	p.t.Helper()
	if err := p.Write([]byte(line)); err != nil {
		p.t.Fatal(err)
	}
}

// Send writes v, encoded as JSON, as one line.
func (p *Peer) Send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatalf("encode a message to %s: %v", p.name, err)
	}
	p.SendRaw(string(b))
}

// Notify sends the notification method with params (none when nil).
func (p *Peer) Notify(method string, params any) {
	p.t.Helper()
	n := map[string]any{"jsonrpc": jsonrpc.Version, "method": method}
	if params != nil {
		n["params"] = params
	}
	p.Send(n)
}

// Request sends the request method with id and params (none when nil), and
// returns the id's JSON text, for AwaitReply.
func (p *Peer) Request(id any, method string, params any) string {
	p.t.Helper()
	req := map[string]any{"jsonrpc": jsonrpc.Version, "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	p.Send(req)
	idText, err := json.Marshal(id)
	if err != nil {
		p.t.Fatalf("encode the id %v: %v", id, err)
	}
	return string(idText)
}

// Call sends a request and returns its reply.
func (p *Peer) Call(id any, method string, params any) *Message {
	p.t.Helper()
	idText := p.Request(id, method, params)
	return p.Await(fmt.Sprintf("reply to %s (id %s)", method, idText), func(m *Message) bool { return m.IsReplyTo(idText) })
}

// Reply answers the other side's request req with result.
func (p *Peer) Reply(req *Message, result any) {
	p.t.Helper()
	p.Send(map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "result": result})
}

// ReplyError answers the other side's request req with an error.
func (p *Peer) ReplyError(req *Message, e *jsonrpc.Error) {
	p.t.Helper()
	p.Send(map[string]any{"jsonrpc": jsonrpc.Version, "id": req.ID, "error": e})
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
		}
	}
}

// Await is TryAwait with the peer's wait that fails the test, with the
// transcript, when no message matching comes; what names the message for
// the failure.
func (p *Peer) Await(what string, match func(*Message) bool) *Message {
	p.t.Helper()
	m := p.TryAwait(p.wait, match)
	if m == nil {
		why := fmt.Sprintf("within %s", p.wait)
		p.mu.Lock()
		if p.ended {
			why = "before its output ended"
			if p.readErr != nil {
				why += fmt.Sprintf(" (%v)", p.readErr)
			}
		}
		p.mu.Unlock()
		p.t.Fatalf("no %s from %s %s; the session:\n%s", what, p.name, why, p.Transcript(transcriptTail))
	}
	return m
}

// WaitFor waits, up to the peer's wait, until holds is true of every
// message received so far (taken or not), and fails the test, with the
// transcript, when it is not; what names the condition for the failure.
func (p *Peer) WaitFor(what string, holds func(all []*Message) bool) {
	p.t.Helper()
	timer := time.NewTimer(p.wait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		changed, ended := p.changed, p.ended
		p.mu.Unlock()
		if holds(p.All()) {
			return
		}
		why := fmt.Sprintf("within %s", p.wait)
		if ended {
			why = "before its output ended"
		} else {
			select {
			case <-changed:
				continue
			case <-timer.C:
			}
		}
		p.t.Fatalf("not %s from %s %s; the session:\n%s", what, p.name, why, p.Transcript(transcriptTail))
	}
}

// Next takes the next message not yet taken, whatever it is.
func (p *Peer) Next() *Message {
	p.t.Helper()
	return p.Await("message", func(*Message) bool { return true })
}

// AwaitRequest takes the next request for method.
func (p *Peer) AwaitRequest(method string) *Message {
	p.t.Helper()
	return p.Await(method+" request", func(m *Message) bool { return m.IsRequest(method) })
}

// AwaitNotification takes the next notification of method.
func (p *Peer) AwaitNotification(method string) *Message {
	p.t.Helper()
	return p.Await(method, func(m *Message) bool { return m.IsNotification(method) })
}

// AwaitReply takes the reply to the request whose id has the JSON text id.
func (p *Peer) AwaitReply(id string) *Message {
	p.t.Helper()
	return p.Await("reply to id "+id, func(m *Message) bool { return m.IsReplyTo(id) })
}

// All returns every message received so far, taken or not.
func (p *Peer) All() []*Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Message(nil), p.msgs...)
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

// Transcript returns the session both ways, one line each ("> " sent, "< "
// received), the last n lines only when n > 0.
func (p *Peer) Transcript(n int) string {
	p.mu.Lock()
	lines := p.transcript
	if n > 0 && len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	s := strings.Join(lines, "\n")
	p.mu.Unlock()
	return s
}
