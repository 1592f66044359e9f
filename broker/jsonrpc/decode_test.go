// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// wantMsg is what an accepted message must decode to. Params, Result and
// Error.Data are compared as compact JSON text; empty means absent.
type wantMsg struct {
	id     ID
	method string
	params string
	result string
	err    *Error // Data: the expected compact JSON text as a string, or nil
	kind   string // "request", "notification" or "response"
}

func TestDecodeAccepts(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		in   string
		want wantMsg
	}{
		{"request with string id", `{"jsonrpc":"2.0","id":"abc","method":"files/read","params":{"path":"p/a.txt"}}`,
			wantMsg{id: `"abc"`, method: "files/read", params: `{"path":"p/a.txt"}`, kind: "request"}},
		{"request with number id", `{"jsonrpc":"2.0","id":7,"method":"ping"}`,
			wantMsg{id: `7`, method: "ping", kind: "request"}},
		{"request with zero id", `{"jsonrpc":"2.0","id":0,"method":"ping"}`,
			wantMsg{id: `0`, method: "ping", kind: "request"}},
		{"negative id kept as raw text", `{"jsonrpc":"2.0","id":-12,"method":"ping"}`,
			wantMsg{id: `-12`, method: "ping", kind: "request"}},
		{"float id kept as raw text", `{"jsonrpc":"2.0","id":1.50,"method":"ping"}`,
			wantMsg{id: `1.50`, method: "ping", kind: "request"}},
		{"exponent id kept as raw text", `{"jsonrpc":"2.0","id":1E+2,"method":"ping"}`,
			wantMsg{id: `1E+2`, method: "ping", kind: "request"}},
		{"huge id kept as raw text", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
			wantMsg{id: `123456789012345678901234567890`, method: "ping", kind: "request"}},
		{"empty string id is an id", `{"jsonrpc":"2.0","id":"","method":"ping"}`,
			wantMsg{id: `""`, method: "ping", kind: "request"}},
		{"string id with escapes is normalised", `{"jsonrpc":"2.0","id":"\u0061b","method":"ping"}`,
			wantMsg{id: `"ab"`, method: "ping", kind: "request"}},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`,
			wantMsg{id: `1`, method: "m", params: `[1,2]`, kind: "request"}},
		{"params null is dropped", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`,
			wantMsg{id: `1`, method: "m", kind: "request"}},
		{"params null with spaces is dropped", `{"jsonrpc":"2.0","id":1,"method":"m","params" :  null }`,
			wantMsg{id: `1`, method: "m", kind: "request"}},
		{"unknown members ignored", `{"jsonrpc":"2.0","id":1,"method":"m","extra":{"x":[1]},"_meta":true}`,
			wantMsg{id: `1`, method: "m", kind: "request"}},
		{"whitespace around everything", " \t{ \"jsonrpc\" : \"2.0\" , \"id\" : 3 , \"method\" : \"m\" }\r ",
			wantMsg{id: `3`, method: "m", kind: "request"}},
		{"unicode method", `{"jsonrpc":"2.0","id":1,"method":"files/\u00e9t\u00e9"}`,
			wantMsg{id: `1`, method: "files/été", kind: "request"}},
		{"deep but allowed params nesting", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + deep(9000) + `}`,
			wantMsg{id: `1`, method: "m", params: deep(9000), kind: "request"}},

		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			wantMsg{method: "notifications/initialized", kind: "notification"}},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
			wantMsg{method: "notifications/cancelled", params: `{"requestId":3}`, kind: "notification"}},

		{"result response", `{"jsonrpc":"2.0","id":"fsbroker-1","result":{"ok":true}}`,
			wantMsg{id: `"fsbroker-1"`, result: `{"ok":true}`, kind: "response"}},
		{"result response with null result", `{"jsonrpc":"2.0","id":4,"result":null}`,
			wantMsg{id: `4`, result: `null`, kind: "response"}},
		{"error response without data", `{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found"}}`,
			wantMsg{id: `5`, err: &Error{Code: -32601, Message: "method not found"}, kind: "response"}},
		{"error response with data", `{"jsonrpc":"2.0","id":"x","error":{"code":-32002,"message":"denied","data":{"code":"PERMISSION_DENIED"}}}`,
			wantMsg{id: `"x"`, err: &Error{Code: -32002, Message: "denied", Data: `{"code":"PERMISSION_DENIED"}`}, kind: "response"}},
		{"error response with null data keeps it raw", `{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"m","data":null}}`,
			wantMsg{id: `6`, err: &Error{Code: 1, Message: "m", Data: `null`}, kind: "response"}},
		{"error reply without id gets NullID", `{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}`,
			wantMsg{id: NullID, err: &Error{Code: -32700, Message: "Parse error"}, kind: "response"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatalf("Decode: unexpected error %v", err)
			}
			checkMessage(t, m, tt.want)
		})
	}
}

// TestDecodeErrorReplyWithNullID is the standard JSON-RPC 2.0 shape of an
// error reply to a message the peer could not read ("id": null, section 5 of
// the JSON-RPC 2.0 specification). It must be accepted as a response: if it is
// refused, the Conn answers it with its own id-null error, and two such peers
// answer each other forever.
func TestDecodeErrorReplyWithNullID(t *testing.T) {
	m, err := Decode([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	checkMessage(t, m, wantMsg{id: NullID, err: &Error{Code: -32700, Message: "Parse error"}, kind: "response"})
}

func TestDecodeRejects(t *testing.T) {
	const (
		parse   = CodeParseError
		invalid = CodeInvalidRequest
	)
	tests := []struct {
		name   string
		in     string
		code   int
		id     ID
		substr string // in the message, when it matters
	}{
		{"invalid JSON", `{"jsonrpc":"2.0",`, parse, NullID, "parse error"},
		{"garbage", `hello`, parse, NullID, ""},
		{"truncated JSON", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":`, parse, NullID, ""},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"m"} x`, parse, NullID, ""},
		{"two objects on one line", `{"jsonrpc":"2.0","id":1,"method":"m"}{"jsonrpc":"2.0","id":2,"method":"m"}`, parse, NullID, ""},
		{"single quotes", `{'jsonrpc':'2.0'}`, parse, NullID, ""},
		{"empty input", ``, parse, NullID, ""},
		{"only whitespace", "  \t ", parse, NullID, ""},
		{"invalid array", `[1,`, parse, NullID, ""},
		{"too deeply nested params", `{"jsonrpc":"2.0","id":1,"method":"m","params":` +
			strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, parse, NullID, ""},
		{"10000 unclosed brackets", strings.Repeat("[", 10000), parse, NullID, ""},

		{"empty object", `{}`, invalid, NullID, `"jsonrpc"`},
		{"JSON null", `null`, invalid, NullID, "object"},
		{"number top level", `42`, invalid, NullID, "object"},
		{"string top level", `"{\"jsonrpc\":\"2.0\"}"`, invalid, NullID, "object"},
		{"true top level", `true`, invalid, NullID, "object"},
		{"batch array", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, invalid, NullID, "batch"},
		{"empty batch", `[]`, invalid, NullID, "batch"},

		{"missing jsonrpc keeps id", `{"id":9,"method":"m"}`, invalid, `9`, `"jsonrpc"`},
		{"jsonrpc 1.0 keeps string id", `{"jsonrpc":"1.0","id":"a","method":"m"}`, invalid, `"a"`, `"jsonrpc"`},
		{"jsonrpc as number keeps id", `{"jsonrpc":2.0,"id":10,"method":"m"}`, invalid, `10`, `"jsonrpc"`},
		{"jsonrpc null keeps id", `{"jsonrpc":null,"id":11,"method":"m"}`, invalid, `11`, `"jsonrpc"`},
		{"Jsonrpc is not jsonrpc", `{"Jsonrpc":"2.0","id":12,"method":"m"}`, invalid, `12`, `"jsonrpc"`},

		{"id null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, invalid, NullID, `"id"`},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"m"}`, invalid, NullID, `"id"`},
		{"id false", `{"jsonrpc":"2.0","id":false,"method":"m"}`, invalid, NullID, `"id"`},
		{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, invalid, NullID, `"id"`},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, invalid, NullID, `"id"`},
		{"bad id wins over bad version", `{"jsonrpc":"1.0","id":[1],"method":"m"}`, invalid, NullID, ""},

		{"method number", `{"jsonrpc":"2.0","id":1,"method":5}`, invalid, `1`, `"method"`},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, invalid, `1`, `"method"`},
		{"method object", `{"jsonrpc":"2.0","id":1,"method":{}}`, invalid, `1`, `"method"`},
		{"method empty", `{"jsonrpc":"2.0","id":1,"method":""}`, invalid, `1`, `"method"`},
		{"notification with empty method", `{"jsonrpc":"2.0","method":""}`, invalid, NullID, `"method"`},
		{"Method is not method", `{"jsonrpc":"2.0","id":13,"Method":"m"}`, invalid, `13`, "no method"},
		{"METHOD is not method", `{"jsonrpc":"2.0","id":"u","METHOD":"m"}`, invalid, `"u"`, "no method"},
		{"method and result", `{"jsonrpc":"2.0","id":2,"method":"m","result":{}}`, invalid, `2`, "both"},
		{"method and error", `{"jsonrpc":"2.0","id":3,"method":"m","error":{"code":1,"message":"x"}}`, invalid, `3`, "both"},
		{"result and error", `{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}`, invalid, `4`, "both"},
		{"result without id", `{"jsonrpc":"2.0","result":{}}`, invalid, NullID, "id"},
		{"result with null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, invalid, NullID, ""},
		{"Result is not result", `{"jsonrpc":"2.0","id":5,"Result":{}}`, invalid, `5`, "no method"},
		{"no method, result or error", `{"jsonrpc":"2.0","id":6}`, invalid, `6`, "no method"},
		{"error missing code", `{"jsonrpc":"2.0","id":7,"error":{"message":"x"}}`, invalid, `7`, `"error"`},
		{"error missing message", `{"jsonrpc":"2.0","id":8,"error":{"code":1}}`, invalid, `8`, `"error"`},
		{"error code not integer", `{"jsonrpc":"2.0","id":9,"error":{"code":1.5,"message":"x"}}`, invalid, `9`, `"error"`},
		{"error code string", `{"jsonrpc":"2.0","id":9,"error":{"code":"1","message":"x"}}`, invalid, `9`, `"error"`},
		{"error message number", `{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":2}}`, invalid, `9`, `"error"`},
		{"error null", `{"jsonrpc":"2.0","id":10,"error":null}`, invalid, `10`, `"error"`},
		{"error string", `{"jsonrpc":"2.0","id":10,"error":"boom"}`, invalid, `10`, `"error"`},
		{"error without id missing code", `{"jsonrpc":"2.0","error":{"message":"x"}}`, invalid, NullID, `"error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if m != nil {
				t.Fatalf("Decode returned a message %+v with error %v", m, err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode error = %T %v, want *DecodeError", err, err)
			}
			if de.Err == nil {
				t.Fatal("DecodeError without Err")
			}
			if de.Err.Code != tt.code {
				t.Errorf("code = %d, want %d (%s)", de.Err.Code, tt.code, de.Err.Message)
			}
			if de.ID != tt.id {
				t.Errorf("id = %q, want %q", de.ID, tt.id)
			}
			if !strings.Contains(de.Err.Message, tt.substr) {
				t.Errorf("message %q does not mention %q", de.Err.Message, tt.substr)
			}
			if de.Error() != de.Err.Message {
				t.Errorf("Error() = %q, want the message %q", de.Error(), de.Err.Message)
			}
			if de.Err.Data != nil {
				t.Errorf("a decode error carries data %v", de.Err.Data)
			}
		})
	}
}

// TestDecodeDoesNotAliasInput checks that a decoded message owns its bytes:
// the stream reuses its read buffer for the next message while handlers still
// hold the previous one.
func TestDecodeDoesNotAliasInput(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":"a","method":"m","params":{"k":"v"}}`)
	m, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	resp := []byte(`{"jsonrpc":"2.0","id":"b","result":{"k":"v"}}`)
	r, err := Decode(resp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'X'
	}
	for i := range resp {
		resp[i] = 'X'
	}
	if string(m.Params) != `{"k":"v"}` || m.Method != "m" || m.ID != `"a"` {
		t.Errorf("request changed with its input buffer: %+v", m)
	}
	if string(r.Result) != `{"k":"v"}` || r.ID != `"b"` {
		t.Errorf("response changed with its input buffer: %+v", r)
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		ok   bool
	}{
		{`1`, `1`, true},
		{` 1 `, `1`, true},
		{`-0`, `-0`, true},
		{`2.5e-3`, `2.5e-3`, true},
		{`"x"`, `"x"`, true},
		{`"\u00e9"`, `"é"`, true},
		{`""`, `""`, true},
		{`null`, ``, false},
		{`true`, ``, false},
		{`{}`, ``, false},
		{`[]`, ``, false},
		{``, ``, false},
		{`"unterminated`, ``, false},
		{`01`, ``, false},
		{`0`, `0`, true},
		{`1234567890123456789012345678901234567890`, `1234567890123456789012345678901234567890`, true},
		{`00`, ``, false},
		{`-`, ``, false},
		{`1.`, ``, false},
	}
	for _, tt := range tests {
		got, err := ParseID(json.RawMessage(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseID(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestIDMarshal(t *testing.T) {
	tests := []struct {
		id   ID
		want string
	}{
		{"", `null`},
		{NullID, `null`},
		{`7`, `7`},
		{StringID(`a"b`), `"a\"b"`},
		{StringID("fsbroker-1"), `"fsbroker-1"`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(struct {
			ID ID `json:"id"`
		}{tt.id})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"id":` + tt.want + `}`; string(b) != want {
			t.Errorf("marshal %q = %s, want %s", tt.id, b, want)
		}
	}
	if !ID("").IsZero() || NullID.IsZero() || StringID("").IsZero() {
		t.Error("IsZero: only the empty ID is zero")
	}
}

// checkMessage compares a decoded message with want.
func checkMessage(t *testing.T, m *Message, want wantMsg) {
	t.Helper()
	if m == nil {
		t.Fatal("nil message")
	}
	if m.ID != want.id {
		t.Errorf("ID = %q, want %q", m.ID, want.id)
	}
	if m.Method != want.method {
		t.Errorf("Method = %q, want %q", m.Method, want.method)
	}
	checkRaw(t, "Params", m.Params, want.params)
	checkRaw(t, "Result", m.Result, want.result)
	switch {
	case want.err == nil && m.Error != nil:
		t.Errorf("Error = %+v, want none", m.Error)
	case want.err != nil && m.Error == nil:
		t.Errorf("Error = nil, want %+v", want.err)
	case want.err != nil:
		if m.Error.Code != want.err.Code || m.Error.Message != want.err.Message {
			t.Errorf("Error = %d %q, want %d %q", m.Error.Code, m.Error.Message, want.err.Code, want.err.Message)
		}
		if want.err.Data == nil {
			if m.Error.Data != nil {
				t.Errorf("Error.Data = %#v, want nil", m.Error.Data)
			}
		} else {
			raw, ok := m.Error.Data.(json.RawMessage)
			if !ok {
				t.Fatalf("Error.Data is %T, want json.RawMessage", m.Error.Data)
			}
			checkRaw(t, "Error.Data", raw, want.err.Data.(string))
		}
	}
	kinds := map[string]bool{
		"request":      m.IsRequest(),
		"notification": m.IsNotification(),
		"response":     m.IsResponse(),
	}
	n := 0
	for k, v := range kinds {
		if v {
			n++
		}
		if v != (k == want.kind) {
			t.Errorf("Is%s = %v, want kind %s", k, v, want.kind)
		}
	}
	if n != 1 {
		t.Errorf("message is %d kinds at once: %v", n, kinds)
	}
}

func checkRaw(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	if want == "" {
		if got != nil {
			t.Errorf("%s = %s, want absent", what, got)
		}
		return
	}
	var g bytes.Buffer
	if err := json.Compact(&g, got); err != nil {
		t.Errorf("%s = %q is not valid JSON: %v", what, got, err)
		return
	}
	if g.String() != want {
		t.Errorf("%s = %.200s, want %.200s", what, g.String(), want)
	}
}
