// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decision

import (
	"encoding/json"
	"time"
)

// Input is the document every policy query receives. Its contract is
// schema/policy-input.json; a test holds the documents the pipeline builds
// to it.
type Input struct {
	Version   int             `json:"version"`
	Method    string          `json:"method"`
	Operation string          `json:"operation"`
	Server    InputServer     `json:"server"`
	Session   InputSession    `json:"session"`
	FrontEnd  *InputFrontEnd  `json:"frontEnd,omitempty"`
	Path      *InputPath      `json:"path,omitempty"`
	NewPath   *InputPath      `json:"newPath,omitempty"`
	Entries   []InputPath     `json:"entries,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"` // as sent, without content
	Bytes     int64           `json:"bytes"`
	Grants    []InputGrant    `json:"grants"`
	Usage     InputUsage      `json:"usage"`
	Time      InputTime       `json:"time"`
}

// InputServer identifies the server.
type InputServer struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Pinned  bool   `json:"pinned"`
}

// InputSession describes the session.
type InputSession struct {
	ID              string `json:"id"`
	ProtocolVersion string `json:"protocolVersion"`
	Transport       string `json:"transport"`
}

// InputFrontEnd says which front end took the request when it is not the
// client role's files/* session: "serve" (fsbroker serve) and the tool the
// host called. Absent for files/* and roots/list requests.
type InputFrontEnd struct {
	Name string `json:"name"`
	Tool string `json:"tool"`
}

// InputPath is one resolved path.
type InputPath struct {
	Requested string `json:"requested"`
	Canonical string `json:"canonical"`
	Root      string `json:"root"`
	Mount     string `json:"mount"`
	Relative  string `json:"relative"`
	MountPath string `json:"mountPath"`
	Writable  bool   `json:"writable"`
	Exists    bool   `json:"exists"`
	Type      string `json:"type"`
	Size      int64  `json:"size"`
	Nlink     uint64 `json:"nlink"`
	Hidden    bool   `json:"hidden"`
}

// InputGrant is one consent grant the server holds.
type InputGrant struct {
	Access  string `json:"access"`
	Path    string `json:"path"`
	Granted string `json:"granted"`
	Expires string `json:"expires"`
}

// InputUsage holds the server's usage counters.
type InputUsage struct {
	BytesWrittenToday int64 `json:"bytesWrittenToday"`
	Watches           int   `json:"watches"`
}

// InputTime is the time of the decision.
type InputTime struct {
	RFC3339  string `json:"rfc3339"`
	UnixNano int64  `json:"unixNano"`
}

// NewInputTime returns the time of a decision.
func NewInputTime(t time.Time) InputTime {
	t = t.UTC()
	return InputTime{RFC3339: t.Format(time.RFC3339Nano), UnixNano: t.UnixNano()}
}
