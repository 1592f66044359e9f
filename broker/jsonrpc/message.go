// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package jsonrpc implements JSON-RPC 2.0 as MCP uses it: one JSON object per
// message, framed one per line on a byte stream, with request/response
// correlation, notifications in both directions and bounded concurrent
// handling of incoming requests.
//
// The package knows nothing of MCP methods: the caller supplies the handlers.
// Every malformed input is answered with a JSON-RPC error and never ends the
// connection.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// Version is the only JSON-RPC version accepted and sent.
const Version = "2.0"

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// ID is a request id as it appeared on the wire: the compact JSON text of a
// string or a number. The zero value means "no id" (a notification). Numbers
// keep their raw text and strings their decoded value, so a reply echoes the
// peer's id with the same JSON value.
type ID string

// NullID is the id of replies to messages whose id could not be read.
const NullID ID = "null"

// IsZero reports whether the id is absent.
func (id ID) IsZero() bool { return id == "" }

// MarshalJSON writes the id's raw JSON text, or null when absent.
func (id ID) MarshalJSON() ([]byte, error) {
	if id == "" {
		return []byte("null"), nil
	}
	return []byte(id), nil
}

// StringID returns the ID for a JSON string.
func StringID(s string) ID {
	b, _ := json.Marshal(s) // a string always marshals
	return ID(b)
}

// Error is a JSON-RPC error object. It is both what handlers return to make a
// specific error reply and what Call returns when the peer replied with an
// error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data is any JSON-encodable value on the way out; on the way in it is
	// the peer's data as json.RawMessage (nil when absent).
	Data any `json:"data,omitempty"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// Message is one decoded JSON-RPC message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID with Result or Error).
type Message struct {
	ID     ID
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// IsRequest reports whether m is a request that expects a reply.
func (m *Message) IsRequest() bool { return m.Method != "" && !m.ID.IsZero() }

// IsNotification reports whether m is a notification (no reply expected).
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID.IsZero() }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return m.Method == "" }

// DecodeError is the reply owed to a message that could not be accepted:
// the id to answer (NullID when it could not be read) and the error.
// Response is true when the message was shaped as a response (no method,
// with a result or an error): it must be logged, never answered, or two
// peers could answer each other's errors forever.
type DecodeError struct {
	ID       ID
	Err      *Error
	Response bool
}

// Error implements the error interface.
func (e *DecodeError) Error() string { return e.Err.Message }

// wireError is the shape of an error object read from the peer.
type wireError struct {
	Code    *int            `json:"code"`
	Message *string         `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Decode parses one message. It returns a *DecodeError for anything that is
// not a valid single JSON-RPC 2.0 message: invalid JSON is a parse error
// (-32700, id null); a batch (JSON array), a non-object, a wrong or missing
// "jsonrpc", a bad id or method, or a message that is neither request,
// notification nor response is an invalid request (-32600). Object keys are
// matched exactly (case-sensitively); unknown members are ignored.
func Decode(data []byte) (*Message, error) {
	fields, ok := splitMembers(data)
	if !ok {
		return nil, classifyUndecodable(data)
	}

	isResponse := fields.method == nil && (fields.result != nil || fields.error != nil)
	id := ID("")
	if raw := fields.id; raw != nil {
		if fields.error != nil && fields.method == nil && fields.result == nil && bytes.Equal(raw, []byte("null")) {
			// The peer's error reply to a message of ours it could not read.
			id = NullID
		} else {
			var err error
			if id, err = ParseID(raw); err != nil {
				return nil, markResponse(invalid(NullID, err.Error()), isResponse)
			}
		}
	}
	msg, err := decodeFields(fields, id)
	if err != nil {
		return nil, markResponse(err, isResponse)
	}
	return msg, nil
}

// members are the top-level members of a message that Decode looks at: each
// the JSON text of its value (within the message, without surrounding
// whitespace), nil when absent. Other members are ignored.
type members struct {
	jsonrpc, id, method, params, result, error json.RawMessage
}

// splitMembers returns the members of data, which must be a valid JSON
// object: ok is false for invalid JSON and for any other value. Names are
// compared after unescaping ("\u006dethod" is "method") and, as
// encoding/json does into a map, a later duplicate replaces an earlier one.
// The whole text is validated first, so the scan that follows only has to
// find where each member ends: it never decodes a value.
func splitMembers(data []byte) (m members, ok bool) {
	if !json.Valid(data) {
		return m, false
	}
	s := jsonx.ScanObject(data)
	for s.Next() {
		member := s.Member()
		name, ok := jsonx.UnquoteBytes(member.Name)
		if !ok {
			return members{}, false // not reached: the text is valid
		}
		var dst *json.RawMessage
		switch string(name) {
		case "jsonrpc":
			dst = &m.jsonrpc
		case "id":
			dst = &m.id
		case "method":
			dst = &m.method
		case "params":
			dst = &m.params
		case "result":
			dst = &m.result
		case "error":
			dst = &m.error
		}
		if dst != nil {
			*dst = member.Value
		}
	}
	if _, ok := s.End(); !ok {
		return members{}, false // valid JSON, but not an object
	}
	return m, true
}

// markResponse flags a DecodeError for a response-shaped message.
func markResponse(err error, isResponse bool) error {
	if de, ok := err.(*DecodeError); ok {
		de.Response = isResponse
	}
	return err
}

// decodeFields builds the message from its members once the id is known.
func decodeFields(fields members, id ID) (*Message, error) {
	if !bytes.Equal(fields.jsonrpc, []byte(`"2.0"`)) {
		return nil, invalid(idOrNull(id), `"jsonrpc" must be "2.0"`)
	}

	msg := &Message{ID: id}
	rawMethod, hasMethod := fields.method, fields.method != nil
	rawResult, hasResult := fields.result, fields.result != nil
	rawError, hasError := fields.error, fields.error != nil
	switch {
	case hasMethod:
		if hasResult || hasError {
			return nil, invalid(idOrNull(id), "a message cannot carry both a method and a result or error")
		}
		if msg.Method = plainString(rawMethod); msg.Method == "" {
			if err := json.Unmarshal(rawMethod, &msg.Method); err != nil || msg.Method == "" {
				return nil, invalid(idOrNull(id), `"method" must be a non-empty string`)
			}
		}
		if p := fields.params; p != nil && !bytes.Equal(p, []byte("null")) {
			msg.Params = bytes.Clone(p) // the message outlives the read buffer
		}
	case hasResult && hasError:
		return nil, invalid(idOrNull(id), "a response cannot carry both result and error")
	case hasResult:
		if id.IsZero() {
			return nil, invalid(NullID, "a response must carry an id")
		}
		msg.Result = bytes.Clone(rawResult)
	case hasError:
		var we wireError
		if err := json.Unmarshal(rawError, &we); err != nil || we.Code == nil || we.Message == nil {
			return nil, invalid(idOrNull(id), `"error" must be an object with an integer "code" and a string "message"`)
		}
		msg.Error = &Error{Code: *we.Code, Message: *we.Message}
		if len(we.Data) > 0 {
			msg.Error.Data = we.Data
		}
		if id.IsZero() {
			// An error reply to a message of ours the peer could not read.
			msg.ID = NullID
		}
	default:
		return nil, invalid(idOrNull(id), "message has no method, result or error")
	}
	return msg, nil
}

// ParseID accepts a JSON string or number (MCP forbids null ids) and returns
// its compact text.
func ParseID(raw json.RawMessage) (ID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", fmt.Errorf(`"id" must be a string or a number`)
	}
	switch c := raw[0]; {
	case c == '"' && plainString(raw) != "" && !htmlSpecial(raw):
		return ID(raw), nil // what StringID would write again
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf(`"id" must be a string or a number`)
		}
		return StringID(s), nil
	case plainInteger(raw):
		return ID(raw), nil // what json.Number keeps of it
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf(`"id" must be a string or a number`)
		}
		return ID(n), nil
	default:
		return "", fmt.Errorf(`"id" must be a string or a number`)
	}
}

// plainInteger reports whether raw is a JSON number of digits alone, the
// ids most peers send: no sign, fraction or exponent, no leading zero.
func plainInteger(raw []byte) bool {
	if len(raw) == 0 || (raw[0] == '0' && len(raw) > 1) {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainString returns the value of the JSON string raw when it can be read
// without decoding: printable ASCII with no escape. It returns "" for any
// other text (escapes, other bytes, the empty string, not a string), which
// encoding/json must then decode: it replaces invalid UTF-8, for one.
func plainString(raw []byte) string {
	if len(raw) < 3 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return ""
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return ""
		}
	}
	return string(raw[1 : len(raw)-1])
}

// htmlSpecial reports whether raw holds a byte that encoding/json escapes
// when it writes a string (<, > and &).
func htmlSpecial(raw []byte) bool {
	return bytes.ContainsAny(raw, "<>&")
}

func classifyUndecodable(data []byte) error {
	if !json.Valid(data) {
		return &DecodeError{ID: NullID, Err: &Error{Code: CodeParseError, Message: "parse error: message is not valid JSON"}}
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		return invalid(NullID, "batch requests are not supported: send one JSON object per line")
	}
	return invalid(NullID, "message must be a JSON object")
}

func invalid(id ID, msg string) error {
	return &DecodeError{ID: id, Err: &Error{Code: CodeInvalidRequest, Message: "invalid request: " + msg}}
}

func idOrNull(id ID) ID {
	if id.IsZero() {
		return NullID
	}
	return id
}

// request and response are the wire shapes of outgoing messages.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      ID     `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type resultResponse struct {
	JSONRPC string `json:"jsonrpc"`
	ID      ID     `json:"id"`
	Result  any    `json:"result"`
}

type errorResponse struct {
	JSONRPC string `json:"jsonrpc"`
	ID      ID     `json:"id"`
	Error   *Error `json:"error"`
}
