// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// modernPost POSTs a request of protocol 2026-07-28 to ep with the headers
// the revision's transport requires (Mcp-Name when name is not "") and
// returns the status, the body and the Mcp-Session-Id sent back.
func modernPost(t *testing.T, ep *testEndpoint, id, method, name, params string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequest(http.MethodPost, ep.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+ep.token)
	req.Header.Set(headerProtocolVersion, "2026-07-28")
	req.Header.Set(headerMethod, method)
	if name != "" {
		req.Header.Set(headerName, name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get(headerSessionID)
}

// TestModernRequestsShareOneSession: requests of a revision without
// sessions, on separate connections, are served by one session of the
// server's, each answered on its POST as application/json under the
// client's own id (a string, a number, the same id twice), with no
// Mcp-Session-Id; a notification the session sends outside any request
// reaches no one (the revision has no event stream) and the reply still
// comes; an unknown method is 404 with -32601. After Close, 503.
func TestModernRequestsShareOneSession(t *testing.T) {
	ep := startEndpoint(t, func(c *Config) { c.ModernVersions = []string{"2026-07-28"} })
	for _, id := range []string{`"a"`, `5`, `5`} {
		status, body, session := modernPost(t, ep, id, "tools/call", "announce", `"name":"announce",`)
		if status != http.StatusOK || !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":`+id+`,"result":`) || !strings.Contains(body, "announced") {
			t.Fatalf("tools/call id %s: %d %s", id, status, body)
		}
		if session != "" {
			t.Fatalf("tools/call id %s: Mcp-Session-Id %q", id, session)
		}
		http.DefaultClient.CloseIdleConnections()
	}
	if n := ep.opened.Load(); n != 1 {
		t.Fatalf("%d sessions opened, want the one for requests without sessions", n)
	}
	status, body, _ := modernPost(t, ep, `9`, "resources/unknown", "", "")
	var reply struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
	}
	if status != http.StatusNotFound || json.Unmarshal([]byte(body), &reply) != nil || string(reply.ID) != "9" ||
		reply.Error == nil || reply.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("an unknown method: %d %s, want 404 with -32601 under id 9", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ep.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if status, body, _ := modernPost(t, ep, `10`, "tools/list", "", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d %s, want 503", status, body)
	}
}

// TestRestoreID: a reply comes back under the client's id, whether
// jsonrpc.Conn wrote it or it is in another member order, with the status
// the revision gives its error.
func TestRestoreID(t *testing.T) {
	inner, outer := jsonrpc.StringID("http-1"), jsonrpc.ID(`"client-7"`)
	for _, tc := range []struct {
		reply  string
		want   string
		status int
	}{
		{`{"jsonrpc":"2.0","id":"http-1","result":{"x":1}}`, `{"jsonrpc":"2.0","id":"client-7","result":{"x":1}}`, 200},
		{`{"jsonrpc":"2.0","id":"http-1","error":{"code":-32601,"message":"m"}}`, `{"jsonrpc":"2.0","id":"client-7","error":{"code":-32601,"message":"m"}}`, 404},
		{`{"jsonrpc":"2.0","id":"http-1","error":{"code":-32022,"message":"m"}}`, `{"jsonrpc":"2.0","id":"client-7","error":{"code":-32022,"message":"m"}}`, 400},
		{`{"jsonrpc":"2.0","id":"http-1","error":{"code":-32602,"message":"m"}}`, `{"jsonrpc":"2.0","id":"client-7","error":{"code":-32602,"message":"m"}}`, 200},
		{`{"id":"http-1","jsonrpc":"2.0","result":{}}`, `{"id":"client-7","jsonrpc":"2.0","result":{}}`, 200},
	} {
		got, status := restoreID([]byte(tc.reply), inner, outer)
		if string(got) != tc.want || status != tc.status {
			t.Errorf("%s: %s %d, want %s %d", tc.reply, got, status, tc.want, tc.status)
		}
	}
}

// TestDecodeHeaderValue: Mcp-Name as sent, or decoded from its base64
// form; a broken one is refused.
func TestDecodeHeaderValue(t *testing.T) {
	b64 := func(s string) string {
		return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
	}
	for sent, want := range map[string]string{"write_file": "write_file", b64("Hello, 世界"): "Hello, 世界",
		b64("=?base64?literal?="): "=?base64?literal?=", "=?base64?": "=?base64?"} {
		if got, err := decodeHeaderValue(sent); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", sent, got, err, want)
		}
	}
	for _, sent := range []string{"=?base64?%%%?=", b64("\xff\xfe")} {
		if got, err := decodeHeaderValue(sent); err == nil {
			t.Errorf("%q: %q, want an error", sent, got)
		}
	}
}
