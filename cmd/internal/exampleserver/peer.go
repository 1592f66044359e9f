// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package exampleserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// SupportedVersions are the MCP protocol versions the scripted server
// accepts; it answers initialize with the client's version when it is one of
// them, else with the newest.
var SupportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// errSessionEnded is the client closing the session (stdin at EOF, DELETE).
var errSessionEnded = errors.New("the client ended the session")

// errTimedOut is a bounded wait that ended without the message.
var errTimedOut = errors.New("timed out")

// transport carries whole JSON-RPC messages between the scripted server and
// its client.
type transport interface {
	// incoming delivers the client's messages, one JSON text each.
	incoming() <-chan []byte
	// ended is closed once the client has ended the session; what incoming
	// delivered before still counts.
	ended() <-chan struct{}
	// send delivers one message to the client.
	send(msg []byte) error
}

// message is a JSON-RPC message from the client.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object; fsbroker's brokered errors carry the
// string code, the reason and the audit id in data.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Code       string `json:"code"`
		Reason     string `json:"reason"`
		DecisionID string `json:"decisionId"`
	} `json:"data"`
}

// isRequest reports whether m is a request (a method and an id).
func (m *message) isRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// isNotification reports whether m is the notification method.
func (m *message) isNotification(method string) bool {
	return m.Method == method && len(m.ID) == 0
}

// peer plays a script as the server side of one MCP session.
type peer struct {
	t         transport
	report    io.Writer
	eventWait time.Duration
	transport string // named in the report

	seq                     int
	events                  []string // change events not reported yet
	allowed, denied, failed int      // requests, by outcome
	eventCount              int
}

// play does the lifecycle and then sends each step, reporting as it goes.
func (p *peer) play(ctx context.Context, script string, steps []Step) error {
	version, err := p.handshake(ctx)
	if err != nil {
		return err
	}
	exe, _ := os.Executable()
	fmt.Fprintf(p.report, "example-server (pid %d, %s): initialized over %s, protocol %s; the %q script's requests, one a line:\n",
		os.Getpid(), exe, p.transport, version, script)
	for _, st := range steps {
		p.seq++
		id := p.seq
		req := map[string]any{"jsonrpc": "2.0", "id": id, "method": st.Method}
		if st.Params != nil {
			req["params"] = st.Params
		}
		if err := p.send(req); err != nil {
			return fmt.Errorf("send request %d (%s): %w", id, st.Method, err)
		}
		reply, err := p.awaitReply(ctx, id)
		if err != nil {
			return fmt.Errorf("wait for the reply to request %d (%s): %w", id, st.Method, err)
		}
		fmt.Fprintf(p.report, "%2d. %-48s -> %s\n", id, st.Method+" "+target(st), p.outcome(st, reply))
		if st.AwaitEvent && reply.Error == nil {
			if err := p.awaitEvent(ctx); err != nil {
				return fmt.Errorf("wait for a change event after request %d: %w", id, err)
			}
		}
		p.reportEvents()
	}
	fmt.Fprintf(p.report, "example-server: the script is done: %d requests, %d allowed, %d denied, %d failed; %d change event(s)\n",
		len(steps), p.allowed, p.denied, p.failed, p.eventCount)
	return nil
}

// handshake answers initialize and waits for notifications/initialized,
// answering ping on the way. It returns the protocol version agreed on.
func (p *peer) handshake(ctx context.Context) (string, error) {
	version := ""
	for version == "" {
		m, err := p.next(ctx, nil)
		if err != nil {
			return "", fmt.Errorf("wait for initialize: %w", err)
		}
		switch {
		case m.isRequest() && m.Method == "initialize":
			var params struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(m.Params, &params)
			version = SupportedVersions[0]
			if slices.Contains(SupportedVersions, params.ProtocolVersion) {
				version = params.ProtocolVersion
			}
			err = p.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
				"protocolVersion": version,
				"capabilities":    map[string]any{},
				"serverInfo":      map[string]any{"name": ServerName, "version": "1.0.0"},
			}})
		case m.isRequest() && m.Method != "ping":
			err = p.send(errorReply(m.ID, -32600, "the session is not initialized yet"))
		default:
			err = p.handle(m)
		}
		if err != nil {
			return "", fmt.Errorf("initialize: %w", err)
		}
	}
	for {
		m, err := p.next(ctx, nil)
		if err != nil {
			return "", fmt.Errorf("wait for notifications/initialized: %w", err)
		}
		if m.isNotification("notifications/initialized") {
			return version, nil
		}
		if err := p.handle(m); err != nil {
			return "", err
		}
	}
}

// next returns the client's next message, or an error once the session has
// ended, ctx is done or timeout fires (a nil timeout never does).
func (p *peer) next(ctx context.Context, timeout <-chan time.Time) (*message, error) {
	for {
		var raw []byte
		select {
		case raw = <-p.t.incoming():
		case <-p.t.ended():
			// What came before the end still counts.
			select {
			case raw = <-p.t.incoming():
			default:
				return nil, errSessionEnded
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, errTimedOut
		}
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			fmt.Fprintf(p.report, "example-server: ignored a message that is not a JSON object: %v\n", err)
			continue
		}
		return &m, nil
	}
}

// awaitReply returns the client's reply to request id, handling what else
// comes first.
func (p *peer) awaitReply(ctx context.Context, id int) (*message, error) {
	want := fmt.Sprint(id)
	for {
		m, err := p.next(ctx, nil)
		if err != nil {
			return nil, err
		}
		if m.Method == "" && string(m.ID) == want {
			return m, nil
		}
		if err := p.handle(m); err != nil {
			return nil, err
		}
	}
}

// awaitEvent waits up to the event wait for a change event, unless one came
// already. No event in time is reported, not an error: events are the
// client's to send.
func (p *peer) awaitEvent(ctx context.Context) error {
	timer := time.NewTimer(p.eventWait)
	defer timer.Stop()
	for len(p.events) == 0 {
		m, err := p.next(ctx, timer.C)
		if errors.Is(err, errTimedOut) {
			fmt.Fprintf(p.report, "    (no change event came within %s)\n", p.eventWait)
			return nil
		}
		if err != nil {
			return err
		}
		if err := p.handle(m); err != nil {
			return err
		}
	}
	return nil
}

// serveUntilEnd answers the client (ping) after the script, until it ends the
// session or ctx ends.
func (p *peer) serveUntilEnd(ctx context.Context) error {
	fmt.Fprintln(p.report, "example-server: waiting for the client to end the session")
	for {
		m, err := p.next(ctx, nil)
		if errors.Is(err, errSessionEnded) {
			p.reportEvents()
			fmt.Fprintln(p.report, "example-server: the client ended the session")
			return nil
		}
		if err != nil {
			fmt.Fprintln(p.report, "example-server: stopped")
			return nil
		}
		if err := p.handle(m); err != nil {
			return err
		}
		p.reportEvents()
	}
}

// handle answers what the client sends besides the replies the script waits
// for: ping gets {}, any other request "method not found"; change events are
// kept to be reported after the current step; other notifications (such as
// notifications/roots/list_changed, which fsbroker sends when consent changes
// what the server may see, at a moment of its own) and stray replies are
// ignored.
func (p *peer) handle(m *message) error {
	switch {
	case m.isRequest() && m.Method == "ping":
		return p.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}})
	case m.isRequest():
		return p.send(errorReply(m.ID, -32601, "method not found: "+m.Method))
	case m.isNotification("notifications/files/changed"):
		var ev struct {
			Path  string `json:"path"`
			Event string `json:"event"`
		}
		if json.Unmarshal(m.Params, &ev) == nil {
			p.events = append(p.events, ev.Event+" "+ev.Path)
			p.eventCount++
		}
	}
	return nil
}

// reportEvents writes the change events received since the last call.
func (p *peer) reportEvents() {
	for _, e := range p.events {
		fmt.Fprintf(p.report, "    notifications/files/changed: %s\n", e)
	}
	p.events = nil
}

// send marshals v and hands it to the transport.
func (p *peer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a message: %w", err)
	}
	return p.t.send(b)
}

// errorReply is a JSON-RPC error response.
func errorReply(id json.RawMessage, code int, msg string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
}

// target describes what a step's request is about, in a few words: its path
// (or paths, and the access asked for), and a write's size.
func target(st Step) string {
	p := st.Params
	var t string
	switch {
	case p["path"] != nil:
		t = fmt.Sprint(p["path"])
	case p["oldPath"] != nil:
		t = fmt.Sprintf("%v -> %v", p["oldPath"], p["newPath"])
	case p["requestedPaths"] != nil:
		access, _ := p["access"].(string)
		if access == "" {
			access = "read"
		}
		t = access + ": " + strings.Join(stringsOf(p["requestedPaths"]), " ")
	}
	if c, ok := p["content"].(string); ok {
		t += fmt.Sprintf(" (%d bytes)", len(c))
	}
	return t
}

// stringsOf returns v's strings when v is a list of them.
func stringsOf(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// outcome describes the client's answer to a step: ALLOWED and what came of
// it; DENIED with the error's code and reason when the client refused it
// (permission, quota, a malformed request); FAILED when it was allowed but
// the operation failed (FILE_NOT_FOUND, IO_ERROR, ...) or the error has no
// fsbroker code. It counts each.
func (p *peer) outcome(st Step, reply *message) string {
	if e := reply.Error; e != nil {
		switch e.Data.Code {
		case "PERMISSION_DENIED", "QUOTA_EXCEEDED", "INVALID_PATH", "INVALID_PARAMS", "NOT_INITIALIZED":
			p.denied++
			return fmt.Sprintf("DENIED  %s: %s", e.Data.Code, e.Data.Reason)
		case "":
			p.failed++
			return fmt.Sprintf("FAILED  %d: %s", e.Code, e.Message)
		}
		p.failed++
		return fmt.Sprintf("FAILED  %s: %s", e.Data.Code, e.Data.Reason)
	}
	p.allowed++
	return "ALLOWED " + summarize(st, reply.Result)
}

// summarize describes a successful result in a few words.
func summarize(st Step, result json.RawMessage) string {
	var r struct {
		Roots         []struct{ URI string }  `json:"roots"`
		Entries       []struct{ Path string } `json:"entries"`
		Length        int                     `json:"length"`
		Size          int64                   `json:"size"`
		Granted       bool                    `json:"granted"`
		ApprovedPaths []string                `json:"approvedPaths"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return fmt.Sprintf("an unreadable result (%v)", err)
	}
	switch st.Method {
	case "roots/list":
		uris := make([]string, 0, len(r.Roots))
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return "roots: " + strings.Join(uris, ", ")
	case "files/list":
		paths := make([]string, 0, len(r.Entries))
		for _, e := range r.Entries {
			paths = append(paths, e.Path)
		}
		return "entries: " + strings.Join(paths, ", ")
	case "files/read":
		return fmt.Sprintf("%d bytes read", r.Length)
	case "files/write":
		return fmt.Sprintf("written, now %d bytes", r.Size)
	case "files/watch":
		return "watching"
	case "files/consent":
		var refused []string
		for _, want := range stringsOf(st.Params["requestedPaths"]) {
			if !slices.Contains(r.ApprovedPaths, want) {
				refused = append(refused, want)
			}
		}
		s := "nothing approved"
		if r.Granted {
			s = "approved: " + strings.Join(r.ApprovedPaths, ", ")
		}
		if len(refused) > 0 {
			s += "; not approved: " + strings.Join(refused, ", ")
		}
		return s
	}
	return string(result)
}
