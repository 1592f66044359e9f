// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package rpcpeer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// Message is one line the peer received, as written and as read.
type Message struct {
	// Seq is the message's position among those the peer offers to its
	// waits (All), from 0.
	Seq int
	// Raw is the line as received, without its line ending.
	Raw string
	// Problem says why Raw is not one JSON-RPC 2.0 message (the reason
	// jsonrpc.Decode gives); "" when it is one. The fields below are then
	// read leniently, as far as Raw is a JSON object at all.
	Problem string

	// ID is the JSON text of the id (`7`, `"a"`, `null`); nil when absent.
	ID json.RawMessage
	// Method is the method of a request or notification.
	Method string
	// Params, Result are the JSON texts of those members; nil when absent
	// (Params also when null).
	Params json.RawMessage
	Result json.RawMessage
	// Error is the error member of an error reply.
	Error *Error
}

// Error is a JSON-RPC error object as received.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// IsRequest reports whether m is a request (with an id that is not null)
// for method, which is not "".
func (m *Message) IsRequest(method string) bool {
	return method != "" && m.Method == method && len(m.ID) > 0 && string(m.ID) != "null"
}

// IsNotification reports whether m is a notification of method, which is
// not "".
func (m *Message) IsNotification(method string) bool {
	return method != "" && m.Method == method && len(m.ID) == 0
}

// IsReplyTo reports whether m answers the request whose id has the JSON
// text id (`7`, `"a"`, `null`).
func (m *Message) IsReplyTo(id string) bool {
	return m.Method == "" && string(m.ID) == id
}

// IsReply reports whether m is a reply (a result or an error, no method).
func (m *Message) IsReply() bool {
	return m.Problem == "" && m.Method == "" && len(m.ID) > 0
}

// parse reads one received line: strictly with jsonrpc.Decode, the broker's
// own reader, and leniently when that refuses it, so that a test can still
// match a refused line by its members or its text.
func parse(line []byte) *Message {
	m := &Message{Raw: string(line)}
	msg, err := jsonrpc.Decode(line)
	if err != nil {
		var de *jsonrpc.DecodeError
		if errors.As(err, &de) {
			m.Problem = de.Err.Message
		} else {
			m.Problem = err.Error()
		}
		parseLeniently(m, line)
		return m
	}
	if msg.Error != nil && !hasIDMember(line) {
		// Decode reads an error without an id as the reply to a line the
		// other side could not read; JSON-RPC 2.0 wants "id": null there.
		m.Problem = "an error reply without an id member"
		parseLeniently(m, line)
		return m
	}
	if !msg.ID.IsZero() {
		m.ID = json.RawMessage(msg.ID)
	}
	m.Method, m.Params, m.Result = msg.Method, msg.Params, msg.Result
	if e := msg.Error; e != nil {
		m.Error = &Error{Code: e.Code, Message: e.Message}
		if data, ok := e.Data.(json.RawMessage); ok {
			m.Error.Data = data
		}
	}
	return m
}

// hasIDMember reports whether the JSON object line has an id member, null
// included.
func hasIDMember(line []byte) bool {
	s := jsonx.ScanObject(line)
	for s.Next() {
		if name, ok := jsonx.Unquote(s.Member().Name); ok && name == "id" {
			return true
		}
	}
	return false
}

// parseLeniently fills what it can of m from a line jsonrpc.Decode refused.
func parseLeniently(m *Message, line []byte) {
	var loose struct {
		ID     json.RawMessage `json:"id"`
		Method any             `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &loose) != nil {
		return
	}
	m.ID = loose.ID
	m.Method, _ = loose.Method.(string)
	m.Params, m.Result = loose.Params, loose.Result
	if len(loose.Error) > 0 && !bytes.Equal(loose.Error, []byte("null")) {
		var e Error
		if json.Unmarshal(loose.Error, &e) == nil {
			m.Error = &e
		}
	}
}

// clip shortens s to at most n bytes (and an ellipsis) for a transcript
// line, with invalid UTF-8 replaced.
func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "\uFFFD") + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
