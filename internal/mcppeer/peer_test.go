// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package mcppeer

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// startConn runs the broker's own JSON-RPC connection on one end of real
// pipes, answering ping, and returns the other end for a peer.
func startConn(t *testing.T) (*jsonrpc.Conn, *jsonrpc.LineStream) {
	t.Helper()
	connSide, peerSide := Pipes(t)
	conn := jsonrpc.NewConn(connSide, func(_ context.Context, req *jsonrpc.Message) (any, error) {
		if req.Method == "ping" {
			return map[string]any{}, nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + req.Method,
			Data: map[string]string{"code": "NO_SUCH_METHOD"}}
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- conn.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = connSide.Close()
		<-served
	})
	return conn, peerSide
}

// The peer against the broker's connection: its calls get their replies by
// id, error data included; the connection's own request is answered by the
// peer's handler and never offered to a wait; its notification is.
func TestPeerBothWays(t *testing.T) {
	conn, s := startConn(t)
	p := New(t, "conn", s, RequireValid(), WithHandler("roots/list", func(req *Message) (any, *jsonrpc.Error) {
		return map[string]any{"roots": []any{}}, nil
	}))
	if r := p.Call("p1", "ping", nil); r.Error != nil || string(r.Result) != "{}" || r.Raw != `{"jsonrpc":"2.0","id":"p1","result":{}}` {
		t.Fatalf("ping answered %s", r.Raw)
	}
	r := p.Call(7, "x/unknown", map[string]any{"a": 1})
	if r.Error == nil || r.Error.Code != jsonrpc.CodeMethodNotFound || string(r.Error.Data) != `{"code":"NO_SUCH_METHOD"}` {
		t.Fatalf("x/unknown answered %s", r.Raw)
	}

	var got struct {
		Roots []any `json:"roots"`
	}
	if err := conn.Call(context.Background(), "roots/list", nil, &got); err != nil || got.Roots == nil {
		t.Fatalf("the connection's roots/list: %v, %+v", err, got)
	}
	if err := conn.Notify("notifications/x", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	n := p.AwaitNotification("notifications/x")
	if string(n.Params) != `{"n":1}` {
		t.Errorf("notification params %s", n.Params)
	}
	if m := p.TryAwait(0, func(m *Message) bool { return m.IsRequest("roots/list") }); m != nil {
		t.Errorf("a handled request was offered to a wait: %s", m.Raw)
	}
	if !p.Has(func(m *Message) bool { return m.IsRequest("roots/list") }) {
		t.Error("the handled request is not listed")
	}
	tr := p.Transcript(0)
	for _, want := range []string{`> {"id":"p1","jsonrpc":"2.0","method":"ping"}`, `< {"jsonrpc":"2.0","id":"p1","result":{}}`, `"method":"roots/list"`} {
		if !strings.Contains(tr, want) {
			t.Errorf("the transcript lacks %s:\n%s", want, tr)
		}
	}
}

// What is not one JSON-RPC message is kept with why (and its members where
// it has them), in order, for a test of refusals; under RequireValid it is
// not offered and fails the test.
func TestPeerMalformedLines(t *testing.T) {
	a, b := Pipes(t)
	p := New(t, "raw", b)
	for _, line := range []string{`[1,2]`, `{not json`, `{"jsonrpc":"2.0","id":"m","method":"x","result":1}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`} {
		if err := a.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	batch := p.Next()
	bad := p.Next()
	both := p.Next()
	refusal := p.AwaitReply("null")
	if batch.Raw != `[1,2]` || batch.Problem == "" || bad.Problem == "" || both.Problem == "" || both.Method != "x" || string(both.ID) != `"m"` {
		t.Errorf("malformed lines read as %+v, %+v, %+v", batch, bad, both)
	}
	if refusal.Problem != "" || refusal.Error == nil || refusal.Error.Code != -32700 || refusal.Seq != 3 {
		t.Errorf("the refusal read as %+v", refusal)
	}

	rec := &recorder{TB: t}
	c, d := Pipes(t)
	strict := New(rec, "strict", d, RequireValid())
	_ = c.Write([]byte(`{oops`))
	_ = c.Write([]byte(` `))
	_ = c.Write([]byte(`{"jsonrpc":"2.0","method":"ok"}`))
	if m := strict.AwaitNotification("ok"); m.Seq != 0 {
		t.Errorf("the valid message has Seq %d, want 0 (the refused line is not offered)", m.Seq)
	}
	if probs := strict.Problems(); len(probs) != 2 || !strings.Contains(probs[0], "{oops") || !strings.Contains(probs[1], "not valid JSON") {
		t.Errorf("problems %q", probs)
	}
}

// A wait that ends without its message fails the test with the transcript
// and says why: the time passed, or the other side's output ended.
func TestPeerAwaitFailsWithTranscript(t *testing.T) {
	a, b := Pipes(t)
	rec := &recorder{TB: t}
	p := New(rec, "quiet", b, WithWait(50*time.Millisecond))
	_ = a.Write([]byte(`{"jsonrpc":"2.0","method":"hello"}`))
	p.AwaitNotification("hello")
	rec.run(func() { p.AwaitReply(`"never"`) })
	if f := rec.fatal(); !strings.Contains(f, `no reply to id "never" from quiet within 50ms`) ||
		!strings.Contains(f, `< {"jsonrpc":"2.0","method":"hello"}`) {
		t.Errorf("failure %q", f)
	}
	_ = a.Close()
	<-p.Done()
	rec.run(func() { p.Next() })
	if f := rec.fatal(); !strings.Contains(f, "before its output ended") || !strings.Contains(f, "< (end of input)") {
		t.Errorf("failure %q", f)
	}
}

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine instead of the test, so a test can check how the peer fails.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	fatals []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) {} // Problems is checked instead

// run runs f on a goroutine of its own, which a Fatalf ends, and waits.
func (r *recorder) run(f func()) {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
}

// fatal returns the last failure recorded.
func (r *recorder) fatal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fatals) == 0 {
		return ""
	}
	return r.fatals[len(r.fatals)-1]
}

// The peer as the server of a broker session's lifecycle, against the
// broker's connection playing the client's part.
func TestPeerAcceptInitialize(t *testing.T) {
	conn, s := startConn(t)
	p := New(t, "client", s, RequireValid())
	type initResult struct {
		ProtocolVersion string         `json:"protocolVersion"`
		ServerInfo      Implementation `json:"serverInfo"`
	}
	got := make(chan initResult, 1)
	go func() {
		var r initResult
		if err := conn.Call(context.Background(), "initialize", map[string]any{"protocolVersion": "2025-11-25"}, &r); err != nil {
			t.Errorf("initialize: %v", err)
		}
		if err := conn.Notify("notifications/initialized", nil); err != nil {
			t.Errorf("initialized: %v", err)
		}
		got <- r
	}()
	init := p.AcceptInitialize("2025-06-18", Implementation{Name: "srv", Version: "3"})
	if !strings.Contains(string(init.Params), `"protocolVersion":"2025-11-25"`) {
		t.Errorf("initialize params %s", init.Params)
	}
	if r := <-got; r.ProtocolVersion != "2025-06-18" || r.ServerInfo != (Implementation{"srv", "3"}) {
		t.Errorf("initialize result %+v", r)
	}
}

// WaitFor returns once its condition holds over what came, and fails the
// test with the transcript when it does not in time.
func TestPeerWaitFor(t *testing.T) {
	a, b := Pipes(t)
	rec := &recorder{TB: t}
	p := New(rec, "counter", b, WithWait(100*time.Millisecond))
	three := func(all []*Message) bool { return len(all) >= 3 }
	go func() {
		for i := range 3 {
			_ = a.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"n/%d"}`, i)))
		}
	}()
	rec.run(func() { p.WaitFor("three messages", three) })
	if f := rec.fatal(); f != "" {
		t.Fatalf("WaitFor failed: %s", f)
	}
	rec.run(func() { p.WaitFor("four messages", func(all []*Message) bool { return len(all) >= 4 }) })
	if f := rec.fatal(); !strings.Contains(f, "not four messages from counter within 100ms") || !strings.Contains(f, `"method":"n/2"`) {
		t.Errorf("failure %q", f)
	}
}
