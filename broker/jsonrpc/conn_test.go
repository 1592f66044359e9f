// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// testPeer is the other side of a Conn served over two real OS pipes: the
// test writes raw lines to the Conn's input and reads its output.
type testPeer struct {
	in     *os.File // the peer writes here; the Conn reads
	out    *os.File // the peer reads here; the Conn writes
	br     *bufio.Reader
	stream *LineStream // the Conn's side
}

func newTestPeer(t testing.TB, maxMessageBytes int) *testPeer {
	t.Helper()
	connIn, peerW := pipe(t)
	peerR, connOut := pipe(t)
	return &testPeer{
		in:     peerW,
		out:    peerR,
		br:     bufio.NewReaderSize(peerR, 1<<20),
		stream: NewLineStream(connIn, connOut, maxMessageBytes),
	}
}

// send writes one raw line.
func (p *testPeer) send(t testing.TB, line string) {
	t.Helper()
	if _, err := p.in.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("peer write: %v", err)
	}
}

// request sends a request with a JSON id and params (nil: none).
func (p *testPeer) request(t testing.TB, id, method string, params any) {
	t.Helper()
	line := `{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method)
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		line += `,"params":` + string(b)
	}
	p.send(t, line+"}")
}

// closeInput ends the Conn's input (end of file).
func (p *testPeer) closeInput() { _ = p.in.Close() }

// wireMsg is one message read from the Conn.
type wireMsg struct {
	raw    string
	fields map[string]json.RawMessage

	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (m *wireMsg) has(key string) bool { _, ok := m.fields[key]; return ok }

// read reads and decodes the Conn's next line, failing the test after wait.
func (p *testPeer) read(t testing.TB) *wireMsg {
	t.Helper()
	m, err := p.tryRead()
	if err != nil {
		t.Fatalf("peer read: %v", err)
	}
	return m
}

func (p *testPeer) tryRead() (*wireMsg, error) {
	if err := p.out.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return nil, err
	}
	line, err := p.br.ReadBytes('\n')
	if err != nil {
		if len(line) > 0 {
			return nil, fmt.Errorf("unterminated line %q: %w", line, err)
		}
		return nil, err
	}
	m := &wireMsg{raw: string(line)}
	if err := json.Unmarshal(line, &m.fields); err != nil {
		return nil, fmt.Errorf("the Conn wrote invalid JSON %q: %v", line, err)
	}
	if err := json.Unmarshal(line, m); err != nil {
		return nil, fmt.Errorf("the Conn wrote a malformed message %q: %v", line, err)
	}
	if v := string(m.fields["jsonrpc"]); v != `"2.0"` {
		return nil, fmt.Errorf(`message %q has "jsonrpc" %s`, line, v)
	}
	if m.has("result") == m.has("error") && !m.has("method") {
		return nil, fmt.Errorf("reply %q has both or neither of result and error", line)
	}
	if m.has("error") && m.Error == nil {
		return nil, fmt.Errorf("reply %q has a null error", line)
	}
	return m, nil
}

// readRest reads every remaining line until the Conn's output is closed.
func (p *testPeer) readRest(t testing.TB) []*wireMsg {
	t.Helper()
	var out []*wireMsg
	for {
		m, err := p.tryRead()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("peer read: %v", err)
		}
		out = append(out, m)
	}
}

// expectResult reads the next line and checks it is a result for id.
func (p *testPeer) expectResult(t testing.TB, id, result string) *wireMsg {
	t.Helper()
	m := p.read(t)
	if string(m.ID) != id || m.Error != nil || compact(t, m.Result) != result {
		t.Fatalf("got %s, want result %s for id %s", m.raw, result, id)
	}
	return m
}

// expectError reads the next line and checks it is an error for id.
func (p *testPeer) expectError(t testing.TB, id string, code int) *wireMsg {
	t.Helper()
	m := p.read(t)
	if string(m.ID) != id || m.Error == nil || m.Error.Code != code || m.has("result") {
		t.Fatalf("got %s, want error %d for id %s", m.raw, code, id)
	}
	return m
}

func compact(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("invalid JSON %q: %v", raw, err)
	}
	return b.String()
}

// serving is one running Serve.
type serving struct {
	done chan struct{}
	err  error
}

// serve runs c.Serve(ctx). When the test ends the peer's input is closed and
// Serve is awaited.
func serve(t testing.TB, ctx context.Context, c *Conn, p *testPeer) *serving {
	t.Helper()
	s := &serving{done: make(chan struct{})}
	go func() {
		s.err = c.Serve(ctx)
		close(s.done)
	}()
	t.Cleanup(func() {
		p.closeInput()
		select {
		case <-s.done:
		case <-time.After(wait):
			t.Error("Serve did not return after end of input")
		}
	})
	return s
}

// wait waits for Serve to return and returns its error.
func (s *serving) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(wait):
		t.Fatal("Serve did not return")
		return nil
	}
}

// recv receives from ch, failing the test after wait.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// syncBuffer is a log destination safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// on is closed at the first write containing match.
	match string
	on    chan struct{}
	once  sync.Once
}

func newSyncBuffer(match string) *syncBuffer {
	return &syncBuffer{match: match, on: make(chan struct{})}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.match != "" && bytes.Contains(p, []byte(b.match)) {
		b.once.Do(func() { close(b.on) })
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func bufferLogger(b *syncBuffer, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: b, Level: level})
}

func nullLogger() Option { return WithLogger(hclog.NewNullLogger()) }

// echo answers every request with its params (or {} without params).
func echo(_ context.Context, req *Message) (any, error) {
	if req.Params == nil {
		return nil, nil
	}
	return req.Params, nil
}

// TestConnPipelined sends 1,000 requests without waiting and checks that each
// is answered exactly once, with its own id and its own params echoed.
func TestConnPipelined(t *testing.T) {
	const n = 1000
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	serve(t, context.Background(), c, p)

	idOf := func(i int) string {
		if i%2 == 0 {
			return strconv.Itoa(i)
		}
		return strconv.Quote("s-" + strconv.Itoa(i))
	}
	want := make(map[string]string, n)
	for i := range n {
		want[idOf(i)] = fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("p", i%300))
	}
	writeErr := make(chan error, 1)
	go func() { // the pipe holds only 64 KiB: write while replies are read
		var err error
		for i := range n {
			line := `{"jsonrpc":"2.0","id":` + idOf(i) + `,"method":"echo","params":` + want[idOf(i)] + "}\n"
			if _, err = p.in.Write([]byte(line)); err != nil {
				break
			}
		}
		writeErr <- err
	}()
	seen := make(map[string]bool, n)
	for range n {
		m := p.read(t)
		id := string(m.ID)
		w, ok := want[id]
		if !ok {
			t.Fatalf("reply for unknown id: %s", m.raw)
		}
		if seen[id] {
			t.Fatalf("second reply for id %s", id)
		}
		seen[id] = true
		if got := compact(t, m.Result); got != w {
			t.Fatalf("id %s: result %s, want %s", id, got, w)
		}
	}
	if err := recv(t, writeErr, "the writer"); err != nil {
		t.Fatal(err)
	}
}

// TestConnRepliesOutOfOrder: a slow request does not hold back the reply to a
// later fast one.
func TestConnRepliesOutOfOrder(t *testing.T) {
	p := newTestPeer(t, 0)
	releaseA := make(chan struct{})
	startedA := make(chan struct{})
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "slow" {
			close(startedA)
			<-releaseA
			return map[string]string{"who": "A"}, nil
		}
		return map[string]string{"who": "B"}, nil
	}, nil, nullLogger())
	serve(t, context.Background(), c, p)

	p.request(t, `"A"`, "slow", nil)
	recv(t, startedA, "request A to start")
	p.request(t, `"B"`, "fast", nil)
	p.expectResult(t, `"B"`, `{"who":"B"}`)
	close(releaseA)
	p.expectResult(t, `"A"`, `{"who":"A"}`)
}

// TestConnAnswersDecodeErrors sends every kind of bad message on one
// connection and checks each answer and that the next request is still served.
func TestConnAnswersDecodeErrors(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	serve(t, context.Background(), c, p)

	tests := []struct {
		name string
		line string
		code int
		id   string
	}{
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,`, CodeParseError, "null"},
		{"garbage", `hello world`, CodeParseError, "null"},
		{"invalid array", `[1,`, CodeParseError, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"echo"}]`, CodeInvalidRequest, "null"},
		{"empty batch", `[]`, CodeInvalidRequest, "null"},
		{"JSON null", `null`, CodeInvalidRequest, "null"},
		{"number", `12`, CodeInvalidRequest, "null"},
		{"string", `"x"`, CodeInvalidRequest, "null"},
		{"true", `true`, CodeInvalidRequest, "null"},
		{"empty object", `{}`, CodeInvalidRequest, "null"},
		{"missing jsonrpc", `{"id":5,"method":"echo"}`, CodeInvalidRequest, "5"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"v","method":"echo"}`, CodeInvalidRequest, `"v"`},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":6,"method":"echo"}`, CodeInvalidRequest, "6"},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"echo"}`, CodeInvalidRequest, "null"},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"echo"}`, CodeInvalidRequest, "null"},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"echo"}`, CodeInvalidRequest, "null"},
		{"id array", `{"jsonrpc":"2.0","id":[],"method":"echo"}`, CodeInvalidRequest, "null"},
		{"method number", `{"jsonrpc":"2.0","id":7,"method":1}`, CodeInvalidRequest, "7"},
		{"method empty", `{"jsonrpc":"2.0","id":8,"method":""}`, CodeInvalidRequest, "8"},
		{"Method capitalised", `{"jsonrpc":"2.0","id":9,"Method":"echo"}`, CodeInvalidRequest, "9"},
		{"method and result", `{"jsonrpc":"2.0","id":10,"method":"echo","result":{}}`, CodeInvalidRequest, "10"},
		{"too deep", `{"jsonrpc":"2.0","id":11,"method":"echo","params":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, CodeParseError, "null"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.send(t, tt.line)
			m := p.expectError(t, tt.id, tt.code)
			if m.Error.Message == "" {
				t.Errorf("empty error message: %s", m.raw)
			}
			after := strconv.Quote("after-" + strconv.Itoa(i))
			p.request(t, after, "echo", map[string]int{"i": i})
			p.expectResult(t, after, fmt.Sprintf(`{"i":%d}`, i))
		})
	}
}

// TestConnDropsMalformedReplies: a message shaped as a reply (no method, a
// result or an error) is never answered, even when malformed, or two peers
// could answer each other's errors forever; the connection goes on.
func TestConnDropsMalformedReplies(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	serve(t, context.Background(), c, p)
	for i, line := range []string{
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"1.0","id":5,"result":{}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":"x"}}`,
	} {
		p.send(t, line)
		after := strconv.Quote("after-" + strconv.Itoa(i))
		p.request(t, after, "echo", map[string]int{"i": i})
		// The next message on the wire is the echo: nothing was sent for the reply.
		p.expectResult(t, after, fmt.Sprintf(`{"i":%d}`, i))
	}
}

// TestConnDoesNotAnswerErrorReplyWithNullID: the peer's error reply to a
// message it could not read ({"id": null, "error": ...}) is a response and
// must never be answered, or two peers answer each other's errors forever.
func TestConnDoesNotAnswerErrorReplyWithNullID(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	serve(t, context.Background(), c, p)

	p.send(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
	// Decode errors are answered synchronously on the read loop, so any answer
	// to the line above would come before the reply to this request.
	p.request(t, `"next"`, "echo", nil)
	p.expectResult(t, `"next"`, `{}`)
}

// TestConnOversizedMessage: a line over the limit is answered -32600 with id
// null and the session goes on; a line at the limit is served.
func TestConnOversizedMessage(t *testing.T) {
	const limit = 4096
	p := newTestPeer(t, limit)
	c := NewConn(p.stream, echo, nil, nullLogger())
	serve(t, context.Background(), c, p)

	line := func(id string, size int) string {
		head := `{"jsonrpc":"2.0","id":` + id + `,"method":"echo","params":{"pad":"`
		tail := `"}}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	p.send(t, line("1", limit+1))
	m := p.expectError(t, "null", CodeInvalidRequest)
	if !strings.Contains(m.Error.Message, "size limit") {
		t.Errorf("message %q does not name the size limit", m.Error.Message)
	}
	p.send(t, line("2", 10*limit))
	p.expectError(t, "null", CodeInvalidRequest)

	at := line("3", limit)
	p.send(t, at)
	m = p.read(t)
	if string(m.ID) != "3" || m.Error != nil {
		t.Fatalf("message at the limit not served: %.100s", m.raw)
	}
	p.request(t, "4", "echo", nil)
	p.expectResult(t, "4", `{}`)
}

// TestConnHandlerErrors covers what each kind of handler outcome puts on the
// wire, that Go error text (which may name host paths) never reaches the peer,
// and that the connection keeps serving after each.
func TestConnHandlerErrors(t *testing.T) {
	const secret = "/secret/host/path"
	p := newTestPeer(t, 0)
	logs := newSyncBuffer("")
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		switch req.Method {
		case "plain error":
			return nil, fmt.Errorf("open %s/x.txt: permission denied", secret)
		case "rpc error":
			return nil, &Error{Code: CodeInvalidParams, Message: "invalid params", Data: map[string]any{"errors": []any{}}}
		case "wrapped rpc error":
			return nil, fmt.Errorf("stat %s: %w", secret, &Error{Code: -32001, Message: "file not found", Data: map[string]string{"code": "FILE_NOT_FOUND"}})
		case "rpc error without data":
			return nil, &Error{Code: -32601, Message: "method not found: x"}
		case "unencodable data":
			return nil, &Error{Code: -32004, Message: "io error", Data: make(chan int)}
		case "panic string":
			panic("cannot read " + secret)
		case "panic error":
			panic(fmt.Errorf("cannot read %s", secret))
		case "panic nil pointer":
			var m map[string]int
			m["x"]++ // a runtime panic
			return nil, nil
		case "unencodable result":
			return make(chan int), nil
		case "invalid raw result":
			return json.RawMessage(`{"unterminated":`), nil
		case "nil result":
			return nil, nil
		case "empty map result":
			return map[string]any{}, nil
		case "raw result":
			return json.RawMessage(`{"a":[1,2]}`), nil
		case "string result":
			return "text", nil
		}
		return nil, errors.New("unexpected method")
	}, nil, WithLogger(bufferLogger(logs, hclog.Error)))
	serve(t, context.Background(), c, p)

	tests := []struct {
		method string
		code   int    // 0: a result
		msg    string // error message, or the compact result
		data   string // compact error data; "" = absent
		logged bool   // the Go error text is logged for the operator
	}{
		{"plain error", CodeInternalError, "internal error", "", true},
		{"rpc error", CodeInvalidParams, "invalid params", `{"errors":[]}`, false},
		{"wrapped rpc error", -32001, "file not found", `{"code":"FILE_NOT_FOUND"}`, false},
		{"rpc error without data", -32601, "method not found: x", "", false},
		{"unencodable data", -32004, "io error", "", false},
		{"panic string", CodeInternalError, "internal error", "", true},
		{"panic error", CodeInternalError, "internal error", "", true},
		{"panic nil pointer", CodeInternalError, "internal error", "", false},
		{"unencodable result", CodeInternalError, "internal error", "", false},
		{"invalid raw result", CodeInternalError, "internal error", "", false},
		{"nil result", 0, `{}`, "", false},
		{"empty map result", 0, `{}`, "", false},
		{"raw result", 0, `{"a":[1,2]}`, "", false},
		{"string result", 0, `"text"`, "", false},
	}
	for i, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			id := strconv.Itoa(100 + i)
			p.request(t, id, tt.method, nil)
			m := p.read(t)
			if string(m.ID) != id {
				t.Fatalf("reply %s, want id %s", m.raw, id)
			}
			if strings.Contains(m.raw, secret) {
				t.Errorf("the host path reached the wire: %s", m.raw)
			}
			if tt.code == 0 {
				if m.Error != nil || compact(t, m.Result) != tt.msg {
					t.Errorf("reply %s, want result %s", m.raw, tt.msg)
				}
			} else {
				if m.Error == nil || m.Error.Code != tt.code || m.Error.Message != tt.msg || m.has("result") {
					t.Fatalf("reply %s, want error %d %q", m.raw, tt.code, tt.msg)
				}
				if got := compact(t, m.Error.Data); got != tt.data {
					t.Errorf("error data %s, want %q", got, tt.data)
				}
			}
			// The connection keeps serving.
			p.request(t, `"ok"`, "nil result", nil)
			p.expectResult(t, `"ok"`, `{}`)
		})
	}
	if !strings.Contains(logs.String(), secret) {
		t.Errorf("the operator's log does not show the handler's error: %q", logs.String())
	}
}

// TestConnTypedNilError: a handler returning a nil *Error as a non-nil error
// (a classic Go slip) must still produce a valid error reply.
func TestConnTypedNilError(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		var e *Error
		return nil, e
	}, nil, nullLogger())
	serve(t, context.Background(), c, p)
	p.request(t, "1", "x", nil)
	p.expectError(t, "1", CodeInternalError)
}

// TestConnWithoutHandlers: requests are answered "method not found" and
// notifications are dropped without a reply.
func TestConnWithoutHandlers(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, nil, nil, nullLogger())
	serve(t, context.Background(), c, p)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.request(t, `"q"`, "files/read", map[string]string{"path": "a"})
	m := p.expectError(t, `"q"`, CodeMethodNotFound)
	if !strings.Contains(m.Error.Message, "files/read") {
		t.Errorf("message %q does not name the method", m.Error.Message)
	}
}

// TestConnDuplicateID: a second request with the id of one still in progress
// is refused with -32600 and that id; the first one still gets its reply.
func TestConnDuplicateID(t *testing.T) {
	p := newTestPeer(t, 0)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "slow" {
			started <- struct{}{}
			<-release
			return "first", nil
		}
		return "other", nil
	}, nil, nullLogger())
	serve(t, context.Background(), c, p)

	p.request(t, "7", "slow", nil)
	recv(t, started, "the first request to start")
	p.request(t, "7", "fast", nil)
	m := p.expectError(t, "7", CodeInvalidRequest)
	if !strings.Contains(m.Error.Message, "in progress") {
		t.Errorf("message %q", m.Error.Message)
	}
	// The same id as a string is another id.
	p.request(t, `"7"`, "fast", nil)
	p.expectResult(t, `"7"`, `"other"`)
	close(release)
	p.expectResult(t, "7", `"first"`)
	// Once answered, the id may be used again.
	p.request(t, "7", "fast", nil)
	p.expectResult(t, "7", `"other"`)
}

// readCall reads a request this side sent with Call and checks its shape.
func readCall(t *testing.T, p *testPeer, prefix, method string) *wireMsg {
	t.Helper()
	m := p.read(t)
	if m.Method != method || m.has("result") || m.has("error") {
		t.Fatalf("read %s, want a %s request", m.raw, method)
	}
	var id string
	if err := json.Unmarshal(m.ID, &id); err != nil || !strings.HasPrefix(id, prefix) {
		t.Fatalf("request id %s is not a string starting with %q", m.ID, prefix)
	}
	return m
}

func TestConnCall(t *testing.T) {
	type result struct {
		Roots []string `json:"roots"`
	}
	tests := []struct {
		name   string
		reply  string // the reply's members after id
		target bool   // decode into a result
		check  func(t *testing.T, err error, got result)
	}{
		{"result decoded", `"result":{"roots":["a","b"],"extra":1}`, true, func(t *testing.T, err error, got result) {
			if err != nil || strings.Join(got.Roots, ",") != "a,b" {
				t.Errorf("Call = %v, %+v", err, got)
			}
		}},
		{"result ignored without a target", `"result":{"roots":["a"]}`, false, func(t *testing.T, err error, _ result) {
			if err != nil {
				t.Errorf("Call = %v", err)
			}
		}},
		{"result of the wrong shape", `"result":{"roots":"a"}`, true, func(t *testing.T, err error, _ result) {
			var rpcErr *Error
			if err == nil || errors.As(err, &rpcErr) {
				t.Errorf("Call = %v, want a decode error", err)
			}
		}},
		{"error with data", `"error":{"code":-32002,"message":"denied","data":{"code":"PERMISSION_DENIED","reason":"policy"}}`, true, func(t *testing.T, err error, _ result) {
			var rpcErr *Error
			if !errors.As(err, &rpcErr) {
				t.Fatalf("Call = %T %v, want *Error", err, err)
			}
			if rpcErr.Code != -32002 || rpcErr.Message != "denied" {
				t.Errorf("error = %+v", rpcErr)
			}
			raw, ok := rpcErr.Data.(json.RawMessage)
			if !ok {
				t.Fatalf("Data is %T, want json.RawMessage", rpcErr.Data)
			}
			if compact(t, raw) != `{"code":"PERMISSION_DENIED","reason":"policy"}` {
				t.Errorf("Data = %s", raw)
			}
		}},
		{"error without data", `"error":{"code":-32601,"message":"method not found"}`, true, func(t *testing.T, err error, _ result) {
			var rpcErr *Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != -32601 || rpcErr.Data != nil {
				t.Errorf("Call = %#v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPeer(t, 0)
			c := NewConn(p.stream, nil, nil, nullLogger())
			serve(t, context.Background(), c, p)

			var got result
			errc := make(chan error, 1)
			go func() {
				var target any
				if tt.target {
					target = &got
				}
				errc <- c.Call(context.Background(), "roots/list", map[string]int{"x": 1}, target)
			}()
			m := readCall(t, p, "fsbroker-", "roots/list")
			if compact(t, m.Params) != `{"x":1}` {
				t.Errorf("params = %s", m.Params)
			}
			p.send(t, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,`+tt.reply+`}`)
			err := recv(t, errc, "Call to return")
			tt.check(t, err, got)
		})
	}
}

// TestConnCallTimeout: a Call whose ctx ends leaves no pending entry, and the
// reply that comes later is only logged (never answered).
func TestConnCallTimeout(t *testing.T) {
	p := newTestPeer(t, 0)
	logs := newSyncBuffer("")
	c := NewConn(p.stream, echo, nil, WithLogger(bufferLogger(logs, hclog.Warn)))
	serve(t, context.Background(), c, p)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := c.Call(ctx, "ping", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call = %v, want context.DeadlineExceeded", err)
	}
	c.mu.Lock()
	pending := len(c.pending)
	c.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d pending entries after the Call gave up", pending)
	}
	m := readCall(t, p, "fsbroker-", "ping")
	if m.has("params") {
		t.Errorf("ping without params sent params: %s", m.raw)
	}
	p.send(t, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)
	p.send(t, `{"jsonrpc":"2.0","id":"fsbroker-999","error":{"code":1,"message":"stray"}}`)
	// Messages are dispatched in order: once this is answered, the late
	// replies have been handled, and nothing was sent for them.
	p.request(t, `"after"`, "echo", nil)
	p.expectResult(t, `"after"`, `{}`)
	if n := strings.Count(logs.String(), "no pending request"); n != 2 {
		t.Errorf("late replies logged %d times, want 2; log:\n%s", n, logs.String())
	}
}

// TestConnCallEndsWithConn: a Call waiting for a reply returns ErrClosed when
// the connection ends, and Call and Notify after the end return ErrClosed.
func TestConnCallEndsWithConn(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, nil, nil, nullLogger())
	s := serve(t, context.Background(), c, p)

	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "ping", nil, nil) }()
	readCall(t, p, "fsbroker-", "ping")
	p.closeInput()
	if err := s.wait(t); err != nil {
		t.Fatalf("Serve = %v, want nil at end of input", err)
	}
	if err := recv(t, errc, "the pending Call"); !errors.Is(err, ErrClosed) {
		t.Errorf("pending Call = %v, want ErrClosed", err)
	}
	recv(t, c.Done(), "Done")
	if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after the end = %v, want ErrClosed", err)
	}
	if err := c.Notify("notifications/roots/list_changed", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after the end = %v, want ErrClosed", err)
	}
	c.mu.Lock()
	pending := len(c.pending)
	c.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d pending entries after the end", pending)
	}
}

// TestConnCallIDs: concurrent Calls send unique string ids with the prefix,
// and each gets its own reply even when replies come in reverse order.
func TestConnCallIDs(t *testing.T) {
	const n = 50
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, nil, nil, nullLogger(), WithIDPrefix("test-"))
	serve(t, context.Background(), c, p)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var got struct{ I int }
			if err := c.Call(context.Background(), "echo", map[string]int{"i": i}, &got); err != nil {
				errs <- err
				return
			}
			if got.I != i {
				errs <- fmt.Errorf("Call %d got the reply of %d", i, got.I)
			}
		})
	}
	seen := make(map[string]bool)
	var reqs []*wireMsg
	for range n {
		m := readCall(t, p, "test-", "echo")
		if seen[string(m.ID)] {
			t.Fatalf("id %s sent twice", m.ID)
		}
		seen[string(m.ID)] = true
		reqs = append(reqs, m)
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		p.send(t, `{"jsonrpc":"2.0","id":`+string(reqs[i].ID)+`,"result":`+string(reqs[i].Params)+`}`)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done, "all Calls")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConnNotify(t *testing.T) {
	tests := []struct {
		name   string
		params any
		want   string // compact params; "" = absent
	}{
		{"without params", nil, ""},
		{"with params", map[string]any{"watchId": "w1", "event": "created"}, `{"event":"created","watchId":"w1"}`},
		{"raw params", json.RawMessage(`{"a":1}`), `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPeer(t, 0)
			c := NewConn(p.stream, nil, nil, nullLogger())
			serve(t, context.Background(), c, p)
			if err := c.Notify("notifications/files/changed", tt.params); err != nil {
				t.Fatal(err)
			}
			m := p.read(t)
			if m.has("id") || m.Method != "notifications/files/changed" || compact(t, m.Params) != tt.want {
				t.Errorf("notification %s", m.raw)
			}
		})
	}
	t.Run("unencodable params", func(t *testing.T) {
		p := newTestPeer(t, 0)
		c := NewConn(p.stream, nil, nil, nullLogger())
		serve(t, context.Background(), c, p)
		if err := c.Notify("x", make(chan int)); err == nil {
			t.Error("Notify with unencodable params succeeded")
		}
		if err := c.Call(context.Background(), "x", make(chan int), nil); err == nil {
			t.Error("Call with unencodable params succeeded")
		}
		// Neither wrote anything, and the connection is still usable.
		if err := c.Notify("y", nil); err != nil {
			t.Fatal(err)
		}
		if m := p.read(t); m.Method != "y" {
			t.Errorf("first message %s, want the y notification", m.raw)
		}
	})
}

// TestConnNotificationsInOrder: notifications reach the handler in order and
// before a request that follows them.
func TestConnNotificationsInOrder(t *testing.T) {
	const n = 200
	p := newTestPeer(t, 0)
	var mu sync.Mutex
	var got []int
	c := NewConn(p.stream, echo, func(ctx context.Context, m *Message) {
		var params struct{ I int }
		if err := json.Unmarshal(m.Params, &params); err != nil {
			t.Errorf("notification params %s: %v", m.Params, err)
		}
		mu.Lock()
		got = append(got, params.I)
		mu.Unlock()
	}, nullLogger())
	serve(t, context.Background(), c, p)
	for i := range n {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"i":%d}}`, i))
	}
	p.request(t, "1", "echo", nil)
	p.expectResult(t, "1", `{}`) // no reply was written for any notification
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d notifications handled, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("notification %d handled at position %d", v, i)
		}
	}
}

// TestConnCancelRequest: the peer's notifications/cancelled, passed to
// CancelRequest, cancels the handler's ctx and no reply is ever sent for it.
func TestConnCancelRequest(t *testing.T) {
	p := newTestPeer(t, 0)
	started := make(chan struct{}, 1)
	ctxErr := make(chan error, 1)
	var c *Conn
	c = NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "slow" {
			started <- struct{}{}
			<-ctx.Done()
			ctxErr <- ctx.Err()
			return "must not be sent", nil
		}
		return "fast", nil
	}, func(ctx context.Context, n *Message) {
		if n.Method != "notifications/cancelled" {
			return
		}
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if err := json.Unmarshal(n.Params, &params); err != nil {
			t.Errorf("cancel params: %v", err)
			return
		}
		id, err := ParseID(params.RequestID)
		if err != nil {
			t.Errorf("cancel id: %v", err)
			return
		}
		c.CancelRequest(id)
	}, nullLogger())
	s := serve(t, context.Background(), c, p)

	// Cancelling an id that is not in progress does nothing, now or later.
	c.CancelRequest(StringID("unknown"))
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"early"}}`)
	p.request(t, `"early"`, "fast", nil)
	p.expectResult(t, `"early"`, `"fast"`)

	p.request(t, `"slow-1"`, "slow", nil)
	recv(t, started, "the slow request to start")
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user"}}`)
	if err := recv(t, ctxErr, "the handler's ctx to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx.Err() = %v, want context.Canceled", err)
	}
	p.request(t, `"fast-2"`, "fast", nil)
	p.expectResult(t, `"fast-2"`, `"fast"`)

	// End the session; Serve waits for the cancelled handler, so everything it
	// could have written is in the pipe once the output is closed.
	p.closeInput()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	if err := p.stream.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.readRest(t) {
		t.Errorf("unexpected message after the cancellation: %s", m.raw)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inflight) != 0 || len(c.canceled) != 0 {
		t.Errorf("leftover state: inflight %v, canceled %v", c.inflight, c.canceled)
	}
}

// TestConnMaxInFlight: with WithMaxInFlight(2), no more than 2 handlers ever
// run at once while 10 requests are waiting, and all 10 are answered.
func TestConnMaxInFlight(t *testing.T) {
	const (
		bound    = 2
		requests = 10
	)
	p := newTestPeer(t, 0)
	var running, maxRunning atomic.Int32
	started := make(chan struct{}, requests)
	release := make(chan struct{})
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		n := running.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return nil, nil
	}, nil, nullLogger(), WithMaxInFlight(bound))
	serve(t, context.Background(), c, p)

	for i := range requests {
		p.request(t, strconv.Itoa(i), "block", nil)
	}
	for range bound {
		recv(t, started, "a handler to start")
	}
	if n := running.Load(); n != bound {
		t.Fatalf("%d handlers running, want %d", n, bound)
	}
	close(release)
	seen := make(map[string]bool)
	for range requests {
		m := p.read(t)
		if m.Error != nil || seen[string(m.ID)] {
			t.Fatalf("unexpected reply %s", m.raw)
		}
		seen[string(m.ID)] = true
	}
	if m := maxRunning.Load(); m != bound {
		t.Errorf("at most %d handlers ran at once, want exactly %d", m, bound)
	}
}

// TestConnSaturatedStillReadsCancellations: when every request slot is taken,
// the peer's notifications/cancelled must still be read, or the requests it
// cancels (to free those slots) never end.
func TestConnSaturatedStillReadsCancellations(t *testing.T) {
	p := newTestPeer(t, 0)
	var c *Conn
	c = NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "slow" {
			<-ctx.Done()
		}
		return "done", nil
	}, func(ctx context.Context, n *Message) {
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(n.Params, &params)
		if id, err := ParseID(params.RequestID); err == nil {
			c.CancelRequest(id)
		}
	}, nullLogger(), WithMaxInFlight(1))
	serve(t, context.Background(), c, p)

	p.request(t, "1", "slow", nil)
	p.request(t, "2", "fast", nil) // waits for the only slot
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.expectResult(t, "2", `"done"`)
}

// TestConnSaturatedStillReadsReplies: a handler that calls the peer while all
// slots are busy must get its reply.
func TestConnSaturatedStillReadsReplies(t *testing.T) {
	p := newTestPeer(t, 0)
	var c *Conn
	c = NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "asks back" {
			var answer string
			err := c.Call(ctx, "elicit", nil, &answer)
			return answer, err
		}
		return "plain", nil
	}, nil, nullLogger(), WithMaxInFlight(1))
	serve(t, context.Background(), c, p)

	p.request(t, "1", "asks back", nil)
	call := readCall(t, p, "fsbroker-", "elicit")
	p.request(t, "2", "plain", nil) // queued behind request 1
	p.send(t, `{"jsonrpc":"2.0","id":`+string(call.ID)+`,"result":"yes"}`)
	p.expectResult(t, "1", `"yes"`)
	p.expectResult(t, "2", `"plain"`)
}

// eofSignal is the real LineStream with a signal when Read reaches the end of
// input, so a test knows Serve has seen it.
type eofSignal struct {
	*LineStream
	eof  chan struct{}
	once sync.Once
}

func (s *eofSignal) Read() ([]byte, error) {
	msg, err := s.LineStream.Read()
	if errors.Is(err, io.EOF) {
		s.once.Do(func() { close(s.eof) })
	}
	return msg, err
}

// TestConnGracefulShutdown: Serve stops on ctx cancellation or end of input,
// lets the running handler finish with an uncancelled ctx, writes its reply,
// and only then returns nil.
func TestConnGracefulShutdown(t *testing.T) {
	for _, how := range []string{"ctx cancelled", "end of input"} {
		t.Run(how, func(t *testing.T) {
			p := newTestPeer(t, 0)
			stream := &eofSignal{LineStream: p.stream, eof: make(chan struct{})}
			logs := newSyncBuffer("shutdown requested")
			started := make(chan struct{}, 1)
			release := make(chan struct{})
			var handlerCtxErr error
			var finished atomic.Bool
			c := NewConn(stream, func(ctx context.Context, req *Message) (any, error) {
				started <- struct{}{}
				<-release
				handlerCtxErr = ctx.Err()
				finished.Store(true)
				return "finished", nil
			}, nil, WithLogger(bufferLogger(logs, hclog.Debug)), WithShutdownTimeout(time.Minute))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := serve(t, ctx, c, p)

			p.request(t, `"r"`, "work", nil)
			recv(t, started, "the handler to start")
			seen := logs.on // the loop logs this line when it stops on ctx
			if how == "ctx cancelled" {
				cancel()
			} else {
				p.closeInput()
				seen = stream.eof
			}
			// Release the handler only once Serve has stopped reading.
			go func() {
				select {
				case <-seen:
				case <-time.After(wait):
					t.Error("Serve did not see the shutdown")
				}
				close(release)
			}()
			if err := s.wait(t); err != nil {
				t.Fatalf("Serve = %v, want nil", err)
			}
			if !finished.Load() {
				t.Fatal("Serve returned before the handler finished")
			}
			if handlerCtxErr != nil {
				t.Errorf("handler ctx ended during a graceful shutdown: %v", handlerCtxErr)
			}
			recv(t, c.Done(), "Done")
			// Everything Serve wrote is in the pipe once the output is closed.
			if err := p.stream.Close(); err != nil {
				t.Fatal(err)
			}
			rest := p.readRest(t)
			if len(rest) != 1 || string(rest[0].ID) != `"r"` || compact(t, rest[0].Result) != `"finished"` {
				var lines []string
				for _, m := range rest {
					lines = append(lines, m.raw)
				}
				t.Errorf("output after shutdown = %q, want the one reply", lines)
			}
		})
	}
}

// TestConnShutdownTimeout: handlers still running when the shutdown timeout
// passes get their ctx cancelled, and Serve returns even if one never does.
func TestConnShutdownTimeout(t *testing.T) {
	p := newTestPeer(t, 0)
	started := make(chan string, 2)
	obedientErr := make(chan error, 1)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) }) // runs after Serve is awaited
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		started <- req.Method
		if req.Method == "obedient" {
			<-ctx.Done()
			obedientErr <- ctx.Err()
			return nil, ctx.Err()
		}
		<-stuck // ignores its ctx
		return nil, nil
	}, nil, nullLogger(), WithShutdownTimeout(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := serve(t, ctx, c, p)

	p.request(t, "1", "obedient", nil)
	p.request(t, "2", "stuck", nil)
	recv(t, started, "a handler to start")
	recv(t, started, "a handler to start")
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if err := recv(t, obedientErr, "the handler's ctx to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx.Err() = %v, want context.Canceled", err)
	}
	recv(t, c.Done(), "Done")
}

// TestConnWriteFailure: when the peer stops reading (its read end closed), the
// failed reply ends the connection with the write error and closes Done.
func TestConnWriteFailure(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	s := serve(t, context.Background(), c, p)

	if err := p.out.Close(); err != nil {
		t.Fatal(err)
	}
	p.request(t, "1", "echo", nil)
	err := s.wait(t)
	if err == nil || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Serve = %v, want a broken pipe error", err)
	}
	recv(t, c.Done(), "Done")
	if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after a write failure = %v, want ErrClosed", err)
	}
}

// TestConnNotifyWriteFailure: a failed Notify also ends the connection.
func TestConnNotifyWriteFailure(t *testing.T) {
	p := newTestPeer(t, 0)
	c := NewConn(p.stream, echo, nil, nullLogger())
	s := serve(t, context.Background(), c, p)
	if err := p.out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Notify("notifications/roots/list_changed", nil); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Notify = %v, want a broken pipe error", err)
	}
	recv(t, c.Done(), "Done")
	if err := s.wait(t); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Serve = %v, want the write error", err)
	}
}

// onReadLoop reports whether a handler runs on the Conn's read loop (a
// request read while the peer had sent nothing more).
func onReadLoop(ctx context.Context) bool {
	_, ok := ctx.Value(readTurnKey{}).(*readTurn)
	return ok
}

// TestConnInlineRequestHandsOverReading: a request the read loop runs itself
// must not stop the reading. While it is blocked, the peer's next request is
// read and answered; then the first one finishes and is answered too.
func TestConnInlineRequestHandsOverReading(t *testing.T) {
	p := newTestPeer(t, 0)
	started, release := make(chan bool, 1), make(chan struct{})
	handler := func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "block" {
			started <- onReadLoop(ctx)
			<-release
			return "unblocked", nil
		}
		return "fast", nil
	}
	c := NewConn(p.stream, handler, nil, nullLogger())
	serve(t, context.Background(), c, p)

	p.request(t, "1", "block", nil)
	if inline := recv(t, started, "the blocking request to start"); !inline {
		t.Error("a request read while nothing else was waiting did not run on the read loop")
	}
	p.request(t, "2", "fast", nil)
	p.expectResult(t, "2", `"fast"`)
	close(release)
	p.expectResult(t, "1", `"unblocked"`)
	// The connection reads on after both.
	p.request(t, "3", "fast", nil)
	p.expectResult(t, "3", `"fast"`)
}

// TestConnInlineRequestCallsThePeer: a request running on the read loop that
// calls the peer gets the peer's reply at once: the Call hands the reading
// over instead of waiting for the timer (set here to an hour).
func TestConnInlineRequestCallsThePeer(t *testing.T) {
	p := newTestPeer(t, 0)
	var c *Conn
	handler := func(ctx context.Context, req *Message) (any, error) {
		if !onReadLoop(ctx) {
			return nil, &Error{Code: CodeInternalError, Message: "not on the read loop"}
		}
		var answer string
		if err := c.Call(ctx, "question", nil, &answer); err != nil {
			return nil, err
		}
		return answer, nil
	}
	c = NewConn(p.stream, handler, nil, nullLogger())
	c.handOverAfter = time.Hour
	serve(t, context.Background(), c, p)

	for i, id := range []string{"1", "2"} {
		p.request(t, id, "ask", nil)
		m := readCall(t, p, "fsbroker-", "question")
		p.send(t, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":"answer `+strconv.Itoa(i)+`"}`)
		p.expectResult(t, id, `"answer `+strconv.Itoa(i)+`"`)
	}
}

// TestConnPipelinedRequestsRunSideBySide: requests the peer sent together
// are handed to workers, so the first can wait for the last to start.
func TestConnPipelinedRequestsRunSideBySide(t *testing.T) {
	p := newTestPeer(t, 0)
	lastStarted := make(chan struct{})
	handler := func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "last" {
			close(lastStarted)
			return "last", nil
		}
		select {
		case <-lastStarted:
			return "first", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := NewConn(p.stream, handler, nil, nullLogger())
	c.handOverAfter = time.Hour // only handing to workers can make this pass
	serve(t, context.Background(), c, p)

	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"first"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"last"}`)
	got := map[string]string{}
	for range 2 {
		m := p.read(t)
		got[string(m.ID)] = compact(t, m.Result)
	}
	if got["1"] != `"first"` || got["2"] != `"last"` {
		t.Errorf("replies = %v", got)
	}
}

// TestConnRequestsBesideOthersGoToWorkers: while one request is in flight,
// the next ones run on workers, never on the read loop, so that the reading
// (and so the requests after them) does not wait for them.
func TestConnRequestsBesideOthersGoToWorkers(t *testing.T) {
	p := newTestPeer(t, 0)
	release := make(chan struct{})
	handler := func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "block" {
			<-release
			return "released", nil
		}
		return onReadLoop(ctx), nil
	}
	c := NewConn(p.stream, handler, nil, nullLogger())
	serve(t, context.Background(), c, p)

	// Sent together, so that "block" goes to a worker and the read loop is free.
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"block"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"where"}`)
	p.expectResult(t, "2", "false")
	p.request(t, "3", "where", nil)
	p.expectResult(t, "3", "false")
	close(release)
	p.expectResult(t, "1", `"released"`)
	// Alone again: on the read loop.
	p.request(t, "4", "where", nil)
	p.expectResult(t, "4", "true")
}
