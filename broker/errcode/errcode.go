// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package errcode is the vocabulary of brokered failures: the string codes of
// the MCP filesystem draft (docs/protocol.md section 4), their JSON-RPC numbers,
// and a typed error that every stage returns so that the broker can turn it
// into a JSON-RPC error without knowing which stage failed.
package errcode

import (
	"errors"
	"fmt"
)

// Code is a brokered failure's string code, sent in the error's data.code.
type Code string

// The codes of docs/protocol.md section 4.
const (
	FileNotFound        Code = "FILE_NOT_FOUND"
	PermissionDenied    Code = "PERMISSION_DENIED"
	InvalidPath         Code = "INVALID_PATH"
	IOError             Code = "IO_ERROR"
	Timeout             Code = "TIMEOUT"
	ConcurrencyConflict Code = "CONCURRENCY_CONFLICT"
	QuotaExceeded       Code = "QUOTA_EXCEEDED"
	InvalidParams       Code = "INVALID_PARAMS"
	NotInitialized      Code = "NOT_INITIALIZED"
)

// rpcCodes maps each code to its JSON-RPC error number.
var rpcCodes = map[Code]int{
	FileNotFound:        -32001,
	PermissionDenied:    -32002,
	InvalidPath:         -32003,
	IOError:             -32004,
	Timeout:             -32005,
	ConcurrencyConflict: -32006,
	QuotaExceeded:       -32007,
	InvalidParams:       -32602,
	NotInitialized:      -32600,
}

// Codes returns every code, in the order of docs/protocol.md section 4.
func Codes() []Code {
	return []Code{FileNotFound, PermissionDenied, InvalidPath, IOError, Timeout,
		ConcurrencyConflict, QuotaExceeded, InvalidParams, NotInitialized}
}

// RPC returns the JSON-RPC error number of c; an unknown code is an internal
// error (-32603).
func (c Code) RPC() int {
	if n, ok := rpcCodes[c]; ok {
		return n
	}
	return -32603
}

// Error is a brokered failure: its code, a human reason that is safe to send
// to the server (never file content, never a host path outside the roots),
// optional details that go into the reply's data (such as "errno" or
// "errors"), the id of the request's audit record (data.decisionId) once the
// request pipeline recorded it, and the underlying cause, kept for logs only.
type Error struct {
	Code       Code
	Reason     string
	Details    map[string]any
	DecisionID string
	Err        error
}

// New returns an Error with a code and a reason.
func New(code Code, reason string) *Error { return &Error{Code: code, Reason: reason} }

// Wrap returns an Error with a code and a reason that keeps err as its cause.
func Wrap(code Code, reason string, err error) *Error {
	return &Error{Code: code, Reason: reason, Err: err}
}

// With returns e with one more detail set; it changes e in place.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = make(map[string]any, 2)
	}
	e.Details[key] = value
	return e
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Reason)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Of returns the code of err when it is (or wraps) an *Error, else "".
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// messages are the short JSON-RPC messages of each code; the detail is in
// data.reason.
var messages = map[Code]string{
	FileNotFound:        "file not found",
	PermissionDenied:    "permission denied",
	InvalidPath:         "invalid path",
	IOError:             "I/O error",
	Timeout:             "timeout",
	ConcurrencyConflict: "concurrency conflict",
	QuotaExceeded:       "quota exceeded",
	InvalidParams:       "invalid params",
	NotInitialized:      "not initialized",
}

// Message is the short JSON-RPC error message of c ("permission denied");
// the detail goes in data.reason.
func (c Code) Message() string {
	if m, ok := messages[c]; ok {
		return m
	}
	return "internal error"
}

// RPCData is the data member of the JSON-RPC error that reports e: its
// details, code, reason and, for an audited request, decisionId
// (docs/protocol.md section 4). Every front end sends the same shape.
func (e *Error) RPCData() map[string]any {
	data := make(map[string]any, len(e.Details)+3)
	for k, v := range e.Details {
		data[k] = v
	}
	data["code"] = string(e.Code)
	data["reason"] = e.Reason
	if e.DecisionID != "" {
		data["decisionId"] = e.DecisionID
	}
	return data
}
