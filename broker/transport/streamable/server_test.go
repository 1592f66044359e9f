// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// These tests serve a real jsonrpc.Conn over the endpoint on a real socket
// (127.0.0.1:0) and drive it with raw HTTP requests, to see on which
// response each message travels, and with the official Go SDK's client.
// The Conn plays a small MCP server whose tool "ask" sends the client
// elicitation/create while it runs and "announce" a notification outside
// any request; fsbroker serve's sessions run on the endpoint the same way
// (cmd/fsbroker's TestServeHTTP* tests).

// waitLimit bounds each wait for something that should happen promptly.
const waitLimit = 20 * time.Second

// testEndpoint is a test server on 127.0.0.1:0: its URL, its token, and
// how many sessions it has opened.
type testEndpoint struct {
	url    string
	token  string
	srv    *Server
	opened atomic.Int64
}

// startEndpoint serves the test server on 127.0.0.1:0 with its own token;
// configure, when given, changes its Config first.
func startEndpoint(t *testing.T, configure ...func(*Config)) *testEndpoint {
	t.Helper()
	ep := &testEndpoint{token: NewToken()}
	cfg := Config{
		Token: ep.token,
		NewSession: func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			ep.opened.Add(1)
			var conn *jsonrpc.Conn
			conn = jsonrpc.NewConn(stream, func(ctx context.Context, req *jsonrpc.Message) (any, error) {
				return testServerHandle(ctx, conn, req)
			}, nil)
			return conn.Serve, nil
		},
		Versions:     []string{"2025-11-25", "2025-06-18"},
		LoopbackOnly: true,
	}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ep.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: waitLimit}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		_ = hs.Close()
	})
	ep.url = "http://" + ln.Addr().String() + EndpointPath
	return ep
}

// testServerHandle answers the test server's requests.
func testServerHandle(ctx context.Context, conn *jsonrpc.Conn, req *jsonrpc.Message) (any, error) {
	switch req.Method {
	case "initialize":
		return map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "endpoint-test", "version": "1"}}, nil
	case "ping":
		return nil, nil
	case "tools/list":
		schema := map[string]any{"type": "object"}
		return map[string]any{"tools": []any{
			map[string]any{"name": "ask", "inputSchema": schema},
			map[string]any{"name": "announce", "inputSchema": schema},
		}}, nil
	case "tools/call":
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		text := "announced"
		switch p.Name {
		case "ask":
			var res struct {
				Action string `json:"action"`
			}
			err := conn.Call(ctx, "elicitation/create", map[string]any{"message": "allow?",
				"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}, &res)
			if err != nil {
				return nil, err
			}
			text = res.Action
		case "announce":
			if err := conn.Notify("notifications/resources/updated", map[string]any{"uri": "file:///x"}); err != nil {
				return nil, err
			}
		}
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
}

// rawClient speaks to the endpoint with plain HTTP requests, with its
// token.
type rawClient struct {
	t       *testing.T
	url     string
	token   string
	session string
}

// newRawClient is a rawClient of ep.
func newRawClient(t *testing.T, ep *testEndpoint) *rawClient {
	return &rawClient{t: t, url: ep.url, token: ep.token}
}

// bearerTransport adds Authorization: Bearer TOKEN to each request, as a
// host configured with the header does.
type bearerTransport struct{ token string }

// RoundTrip sends a copy of req with the header.
func (bt bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+bt.token)
	return http.DefaultTransport.RoundTrip(req)
}

// post sends body with the given Accept and returns the response (the
// caller closes its body).
func (c *rawClient) post(accept, body string) *http.Response {
	c.t.Helper()
	resp, err := c.send(accept, body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// send is post for any goroutine: it returns the error.
func (c *rawClient) send(accept, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set(headerSessionID, c.session)
		req.Header.Set(headerProtocolVersion, "2025-11-25")
	}
	return http.DefaultClient.Do(req)
}

// initialize opens a session.
func (c *rawClient) initialize() {
	c.t.Helper()
	resp := c.post("application/json, text/event-stream",
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(headerSessionID) == "" {
		c.t.Fatalf("initialize: %s, session id %q", resp.Status, resp.Header.Get(headerSessionID))
	}
	c.session = resp.Header.Get(headerSessionID)
	c.accepted(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// accepted POSTs a notification or a reply and requires 202.
func (c *rawClient) accepted(body string) {
	c.t.Helper()
	resp := c.post("application/json, text/event-stream", body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("POST %s: %s, want 202 Accepted", body, resp.Status)
	}
}

// listen opens the standalone event stream.
func (c *rawClient) listen() *events {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(headerSessionID, c.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		c.t.Fatalf("GET: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return readEvents(c.t, resp)
}

// events are the messages of an event stream, in order.
type events struct {
	msgs chan map[string]any
}

// readEvents reads resp's event stream until it ends.
func readEvents(t *testing.T, resp *http.Response) *events {
	ev := &events{msgs: make(chan map[string]any, 16)}
	go func() {
		defer close(ev.msgs)
		br := bufio.NewReader(resp.Body)
		var data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			case line == "" && data != "":
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Errorf("event data %q: %v", data, err)
				}
				ev.msgs <- m
				data = ""
			}
		}
	}()
	return ev
}

// next returns the stream's next message.
func (ev *events) next(t *testing.T, what string) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ev.msgs:
		if !ok {
			t.Fatalf("the event stream ended before %s", what)
		}
		return m
	case <-time.After(waitLimit):
		t.Fatalf("no %s within %s", what, waitLimit)
		return nil
	}
}

// ended requires the stream to end with nothing more.
func (ev *events) ended(t *testing.T) {
	t.Helper()
	select {
	case m, ok := <-ev.msgs:
		if ok {
			t.Fatalf("the event stream carried %v after the reply", m)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the event stream did not end after the reply")
	}
}

// resultText is the text of a tools/call reply's first content item.
func resultText(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	item, _ := content[0].(map[string]any)
	text, _ := item["text"].(string)
	return text
}

// answerElicitation requires m to be the server's elicitation/create and
// answers it with action.
func (c *rawClient) answerElicitation(m map[string]any, action string) {
	c.t.Helper()
	if m["method"] != "elicitation/create" || m["id"] == nil {
		c.t.Fatalf("got %v, want the server's elicitation/create request", m)
	}
	id, _ := json.Marshal(m["id"])
	c.accepted(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"` + action + `"}}`)
}

// TestHTTPRequestDuringACallTravelsOnItsPOST: a request the session sends
// while handling a tool call comes on that call's POST, which becomes an
// event stream: first the request, then, once the client answered it, the
// reply; then the stream ends. Nothing goes to the standalone stream.
func TestHTTPRequestDuringACallTravelsOnItsPOST(t *testing.T) {
	c := newRawClient(t, startEndpoint(t))
	c.initialize()
	standalone := c.listen()
	resp := c.post("application/json, text/event-stream", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("tools/call answered %s %s, want an event stream", resp.Status, ct)
	}
	call := readEvents(t, resp)
	c.answerElicitation(call.next(t, "the elicitation request"), "accept")
	if reply := call.next(t, "the reply"); reply["id"] != float64(1) || resultText(reply) != "accept" {
		t.Fatalf("reply %v, want id 1 with the text accept", reply)
	}
	call.ended(t)
	select {
	case m := <-standalone.msgs:
		t.Errorf("the standalone stream carried %v", m)
	default:
	}
}

// TestHTTPJSONOnlyClientGetsRequestsOnTheEventStream: a client that accepts
// only JSON on its POST gets the session's request on the standalone event
// stream, and the reply as application/json.
func TestHTTPJSONOnlyClientGetsRequestsOnTheEventStream(t *testing.T) {
	c := newRawClient(t, startEndpoint(t))
	c.initialize()
	standalone := c.listen()
	type response struct {
		*http.Response
		err error
	}
	replied := make(chan response, 1)
	go func() {
		resp, err := c.send("application/json", `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{}}}`)
		replied <- response{resp, err}
	}()
	c.answerElicitation(standalone.next(t, "the elicitation request"), "decline")
	var resp response
	select {
	case resp = <-replied:
	case <-time.After(waitLimit):
		t.Fatal("no reply to tools/call")
	}
	if resp.err != nil {
		t.Fatal(resp.err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var reply map[string]any
	if err := json.Unmarshal(body, &reply); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("reply %s %q: %v, want one JSON message", resp.Header.Get("Content-Type"), body, err)
	}
	if reply["id"] != "q" || resultText(reply) != "decline" {
		t.Errorf("reply %s, want id q with the text decline", body)
	}
}

// TestHTTPNotificationOutsideACallTravelsOnTheEventStream: a notification
// sent outside any request goes to the standalone stream, and the call's
// reply, with nothing else for its POST, is plain JSON.
func TestHTTPNotificationOutsideACallTravelsOnTheEventStream(t *testing.T) {
	c := newRawClient(t, startEndpoint(t))
	c.initialize()
	standalone := c.listen()
	resp := c.post("application/json, text/event-stream", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"announce","arguments":{}}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("tools/call answered as %s, want application/json", ct)
	}
	if m := standalone.next(t, "the notification"); m["method"] != "notifications/resources/updated" {
		t.Errorf("standalone stream carried %v, want notifications/resources/updated", m)
	}
}

// TestHTTPRefusesADuplicateRequestID: a request whose id is still awaiting
// its reply is refused with 400 and never reaches the session; the first
// one's reply still comes on its own POST.
func TestHTTPRefusesADuplicateRequestID(t *testing.T) {
	c := newRawClient(t, startEndpoint(t))
	c.initialize()
	first := c.post("application/json, text/event-stream", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	defer first.Body.Close()
	call := readEvents(t, first)
	ask := call.next(t, "the elicitation request")
	dup := c.post("application/json, text/event-stream", `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	body, _ := io.ReadAll(dup.Body)
	dup.Body.Close()
	if dup.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "still in progress") {
		t.Errorf("duplicate id: %s %s, want 400 still in progress", dup.Status, body)
	}
	c.answerElicitation(ask, "accept")
	if reply := call.next(t, "the reply"); reply["id"] != float64(5) || resultText(reply) != "accept" {
		t.Errorf("reply %v, want the tool call's", reply)
	}
}

// TestHTTPGoSDKClientAnswersElicitationOnThePOST: the official Go SDK client,
// with no standalone stream at all, gets the session's elicitation/create on
// its tool call's POST and answers it from its own handler.
func TestHTTPGoSDKClientAnswersElicitationOnThePOST(t *testing.T) {
	ep := startEndpoint(t)
	asked := make(chan string, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-host", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ep.url, DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{ep.token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "accept" {
		t.Errorf("tool result %q, want accept", text)
	}
	select {
	case msg := <-asked:
		if msg != "allow?" {
			t.Errorf("elicitation message %q", msg)
		}
	default:
		t.Error("the client's elicitation handler was not asked")
	}
}
