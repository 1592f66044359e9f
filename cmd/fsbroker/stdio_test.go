// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// supported are the protocol versions of PROTOCOL.md section 2.
var supported = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// The MCP lifecycle in the client role, for every supported version: the
// broker's first line is initialize offering the newest version with its
// capabilities; after the server's result it sends notifications/initialized
// and answers roots/list with the symlink-resolved root.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	for _, version := range supported {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			target := realDir(t, filepath.Join(dir, "target-dir"))
			link := filepath.Join(dir, "proj")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			p := startBroker(t, "", "stdio", "--root", link)

			init := p.AwaitRequest("initialize")
			if init.Seq != 0 {
				t.Errorf("initialize is message %d on stdout, want the first", init.Seq)
			}
			var params struct {
				ProtocolVersion string `json:"protocolVersion"`
				ClientInfo      struct {
					Name    string `json:"name"`
					Version string `json:"version"`
				} `json:"clientInfo"`
				Capabilities struct {
					Roots struct {
						ListChanged         *bool `json:"listChanged"`
						FilesystemBrokering *bool `json:"filesystemBrokering"`
					} `json:"roots"`
				} `json:"capabilities"`
			}
			if err := json.Unmarshal(init.Params, &params); err != nil {
				t.Fatalf("initialize params %s: %v", init.Params, err)
			}
			if params.ProtocolVersion != "2025-11-25" {
				t.Errorf("protocolVersion = %q, want 2025-11-25 (the newest supported)", params.ProtocolVersion)
			}
			if params.ClientInfo.Name != "fsbroker" || params.ClientInfo.Version == "" {
				t.Errorf("clientInfo = %+v, want name fsbroker and a version", params.ClientInfo)
			}
			if c := params.Capabilities.Roots; c.ListChanged == nil || !*c.ListChanged ||
				c.FilesystemBrokering == nil || !*c.FilesystemBrokering {
				t.Errorf("capabilities = %s, want roots.listChanged and roots.filesystemBrokering true", init.Params)
			}

			p.replyInitialize(init, version)
			n := p.Await("notifications/initialized", func(m *message) bool { return m.Method == "notifications/initialized" })
			if len(n.ID) != 0 {
				t.Errorf("notifications/initialized carries an id: %s", n.Raw)
			}

			roots := p.listRoots(1)
			if len(roots) != 1 {
				t.Fatalf("roots/list = %+v, want one root", roots)
			}
			if got := fileURIPath(t, roots[0].URI); got != target {
				t.Errorf("root uri %q names %q, want the link's target %q", roots[0].URI, got, target)
			}
			if roots[0].Name != "proj" {
				t.Errorf("root name = %q, want %q (the name given on the command line)", roots[0].Name, "proj")
			}
			p.ping("after roots/list")
			p.waitLog(regexp.MustCompile(`session initialized: .*protocolVersion=` + regexp.QuoteMeta(version)))

			p.closeStdin()
			if code := p.waitExit(); code != 0 {
				t.Errorf("exit status after EOF = %d, want 0", code)
			}
			if !strings.Contains(p.log(), "session ended") {
				t.Errorf("log does not say the session ended")
			}
		})
	}
}

// A server that answers initialize with a version the broker does not speak,
// or with an error, gets the session closed: exit status 1 and a log line
// that says why; notifications/initialized is never sent.
func TestInitializeRefused(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2026-07-28", "1999-01-01"} {
		t.Run("version "+version, func(t *testing.T) {
			t.Parallel()
			p := startBroker(t, "", "stdio", "--root", t.TempDir())
			p.replyInitialize(p.AwaitRequest("initialize"), version)
			if code := p.waitExit(); code != 1 {
				t.Errorf("exit status = %d, want 1", code)
			}
			if !regexp.MustCompile(`(?i)not supported.*` + regexp.QuoteMeta(version)).MatchString(p.log()) {
				t.Errorf("no log line naming the unsupported version %s", version)
			}
			if p.Has(func(m *message) bool { return m.Method == "notifications/initialized" }) {
				t.Error("notifications/initialized sent to a server with an unsupported version")
			}
		})
	}
	t.Run("error reply", func(t *testing.T) {
		t.Parallel()
		p := startBroker(t, "", "stdio", "--root", t.TempDir())
		init := p.AwaitRequest("initialize")
		p.Send(map[string]any{"jsonrpc": "2.0", "id": init.ID,
			"error": map[string]any{"code": -32603, "message": "cli-test refuses"}})
		if code := p.waitExit(); code != 1 {
			t.Errorf("exit status = %d, want 1", code)
		}
		if !strings.Contains(p.log(), "cli-test refuses") {
			t.Errorf("log does not give the server's error message")
		}
		if p.Has(func(m *message) bool { return m.Method == "notifications/initialized" }) {
			t.Error("notifications/initialized sent after an error reply")
		}
	})
	t.Run("EOF before the reply", func(t *testing.T) {
		t.Parallel()
		p := startBroker(t, "", "stdio", "--root", t.TempDir())
		p.AwaitRequest("initialize")
		p.closeStdin()
		if code := p.waitExit(); code != 1 {
			t.Errorf("exit status = %d, want 1", code)
		}
		if !strings.Contains(p.log(), "before answering initialize") {
			t.Errorf("log does not say the server left before answering initialize")
		}
	})
}

// Before notifications/initialized, only ping is answered; any other request
// gets -32600 NOT_INITIALIZED, and the session goes on.
func TestRequestsBeforeInitialized(t *testing.T) {
	t.Parallel()
	dir := realDir(t, filepath.Join(t.TempDir(), "data"))
	p := startBroker(t, "", "stdio", "--root", dir)
	init := p.AwaitRequest("initialize")

	p.ping(1)
	for i, method := range []string{"roots/list", "no/such/method", "files/read"} {
		r := p.Call(10+i, method, nil)
		if r.Error == nil || r.Error.Code != -32600 {
			t.Fatalf("%s before initialization answered %s, want error -32600", method, r.Raw)
		}
		if d := dataOf(t, r); d.Code != "NOT_INITIALIZED" {
			t.Errorf("%s before initialization: data.code = %q, want NOT_INITIALIZED", method, d.Code)
		}
	}

	p.replyInitialize(init, "2025-11-25")
	p.Await("notifications/initialized", func(m *message) bool { return m.IsNotification("notifications/initialized") })
	if roots := p.listRoots(2); len(roots) != 1 || fileURIPath(t, roots[0].URI) != dir {
		t.Errorf("roots/list after initialization = %+v, want %s", roots, dir)
	}
	p.ping(3)
}

// Bad input of every shape gets its JSON-RPC error, and the session goes on:
// each case is followed by a ping that must be answered.
func TestMalformedInputKeepsTheSession(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--root", t.TempDir())
	p.handshake("2025-11-25")

	// A 40 MiB line, over the 32 MiB default limit. It is written from a
	// goroutine: the broker reads (and drops) it while it arrives.
	big := make([]byte, 0, 40<<20+100)
	big = append(big, `{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"`...)
	for len(big) < 40<<20 {
		big = append(big, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...)
	}
	big = append(big, `"}}`...)

	cases := []struct {
		name     string
		line     []byte
		replyID  string // the id the error reply carries
		code     int
		dataCode string
		pointer  string // data.errors[0].pointer
	}{
		{name: "unparseable JSON", line: []byte(`{"jsonrpc":"2.0","id":1,"method":`), replyID: "null", code: -32700},
		{name: "not JSON at all", line: []byte(`hello broker`), replyID: "null", code: -32700},
		{name: "batch", line: []byte(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`), replyID: "null", code: -32600},
		{name: "empty batch", line: []byte(`[]`), replyID: "null", code: -32600},
		{name: "not an object", line: []byte(`42`), replyID: "null", code: -32600},
		{name: "wrong jsonrpc version", line: []byte(`{"jsonrpc":"1.0","id":3,"method":"ping"}`), replyID: "3", code: -32600},
		{name: "40 MiB line", line: big, replyID: "null", code: -32600},
		{name: "unknown method", line: []byte(`{"jsonrpc":"2.0","id":"u1","method":"no/such/method"}`), replyID: `"u1"`, code: -32601},
		{name: "roots/list with an unknown param", line: []byte(`{"jsonrpc":"2.0","id":4,"method":"roots/list","params":{"bogus":1}}`),
			replyID: "4", code: -32602, dataCode: "INVALID_PARAMS", pointer: "/bogus"},
	}
	for i, tc := range cases {
		var written chan error // the big line's write, when it has one
		if len(tc.line) > 1<<20 {
			written = make(chan error, 1)
			go func() {
				written <- p.Write(tc.line)
			}()
		} else {
			p.SendRaw(string(tc.line))
		}
		r := p.Await(tc.name+" error reply", func(m *message) bool { return m.IsReplyTo(tc.replyID) && m.Error != nil })
		if written != nil {
			// The broker answers once it has read the whole line.
			select {
			case err := <-written:
				if err != nil {
					t.Fatalf("%s: write: %v", tc.name, err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("%s: the write did not finish", tc.name)
			}
		}
		if r.Error.Code != tc.code {
			t.Errorf("%s: error code %d, want %d: %s", tc.name, r.Error.Code, tc.code, r.Raw)
		}
		if tc.dataCode != "" {
			d := dataOf(t, r)
			if d.Code != tc.dataCode {
				t.Errorf("%s: data.code = %q, want %q", tc.name, d.Code, tc.dataCode)
			}
			if len(d.Errors) == 0 || d.Errors[0].Pointer != tc.pointer {
				t.Errorf("%s: data.errors = %+v, want the first at %q", tc.name, d.Errors, tc.pointer)
			}
		}
		p.ping(fmt.Sprintf("after-%d", i))
	}
	// Nothing in the oversized line was acted on.
	if p.Has(func(m *message) bool { return m.IsReplyTo(`"big"`) }) {
		t.Error("the oversized ping was answered")
	}
	// Messages the broker does not act on get no reply; the session goes on.
	p.SendRaw(`{"jsonrpc":"2.0","method":"notifications/no-such-thing"}`)
	p.SendRaw(`{"jsonrpc":"2.0","id":"nobody-asked","result":{}}`)
	p.SendRaw(`   `)
	// A CRLF line ending is accepted.
	p.SendRaw(`{"jsonrpc":"2.0","id":"crlf","method":"ping"}` + "\r")
	if r := p.Await("reply to a CRLF line", func(m *message) bool { return m.IsReplyTo(`"crlf"`) }); r.Error != nil {
		t.Errorf("a CRLF-terminated ping answered %s", r.Raw)
	}
	p.ping("last")
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0", code)
	}
}

// With the most verbose logging, stdout still carries only protocol messages
// (every stdout line is checked by the test peer), and the log goes to stderr.
func TestStdoutCarriesOnlyProtocol(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--log-level", "trace", "--root", t.TempDir())
	init := p.AwaitRequest("initialize")
	p.ping("early")
	p.Call("early-roots", "roots/list", nil)
	p.replyInitialize(init, "2025-06-18")
	p.Await("notifications/initialized", func(m *message) bool { return m.IsNotification("notifications/initialized") })
	p.listRoots(1)
	p.SendRaw(`{oops`)
	p.Call(2, "files/nothing", map[string]any{"x": 1})
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
		"params": map[string]any{"level": "info", "logger": "peer", "data": "hello from the peer"}})
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": 99, "reason": "test"}})
	p.ping(3)
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0", code)
	}
	n := len(p.All())
	if n < 8 {
		t.Errorf("only %d messages on stdout", n)
	}
	for _, want := range []string{"[TRACE]", "hello from the peer"} {
		if !strings.Contains(p.log(), want) {
			t.Errorf("stderr has no %q", want)
		}
	}
}

// Ending a session: EOF on stdin and SIGTERM both end it cleanly (exit 0).
func TestSessionEnd(t *testing.T) {
	t.Parallel()
	t.Run("EOF", func(t *testing.T) {
		t.Parallel()
		p := startBroker(t, "", "stdio", "--root", t.TempDir())
		p.handshake("2025-11-25")
		p.closeStdin()
		if code := p.waitExit(); code != 0 {
			t.Errorf("exit status = %d, want 0", code)
		}
		if !strings.Contains(p.log(), "session ended") {
			t.Error(`log has no "session ended"`)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		p := startBroker(t, "", "stdio", "--root", t.TempDir())
		p.handshake("2025-11-25")
		p.ping(1)
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(); code != 0 {
			t.Errorf("exit status = %d, want 0", code)
		}
		if !strings.Contains(p.log(), "session ended") {
			t.Error(`log has no "session ended"`)
		}
	})
	t.Run("SIGTERM before initialize is answered", func(t *testing.T) {
		t.Parallel()
		p := startBroker(t, "", "stdio", "--root", t.TempDir())
		p.AwaitRequest("initialize") // the signal handler is installed before initialize is sent
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(); code != 0 {
			t.Errorf("exit status = %d, want 0 (a requested stop is a clean end)", code)
		}
		if strings.Contains(p.log(), "[ERROR]") {
			t.Error("a requested stop is logged as an error")
		}
	})
}

// --log-format json: every stderr line is a JSON object, through a whole
// session with errors in it.
func TestJSONLogFormat(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--log-format", "json", "--log-level", "debug", "--root", t.TempDir())
	p.handshake("2025-11-25")
	p.SendRaw(`not json`)
	p.Call(1, "no/such", nil)
	p.ping(2)
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status = %d, want 0", code)
	}
	lines := strings.Split(strings.TrimSuffix(p.log(), "\n"), "\n")
	if len(lines) < 3 {
		t.Errorf("only %d log lines", len(lines))
	}
	for _, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil || obj == nil {
			t.Errorf("log line is not a JSON object: %q", line)
		}
	}
	if !strings.Contains(p.log(), `"session ended"`) {
		t.Error(`log has no "session ended" message`)
	}
}

// A server that stops reading the broker's stdout (closes its end) while the
// broker has something to write: the session ends as a runtime failure, with
// a log line, not with a death by SIGPIPE.
func TestStdoutClosedByPeer(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--root", t.TempDir())
	p.handshake("2025-11-25")
	_ = p.stdout.Close()
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if code := p.waitExit(); code != 1 {
		t.Errorf("exit status = %d (%s), want 1", code, p.state)
	}
	if !strings.Contains(p.log(), "cannot write to the peer") {
		t.Error("log does not say the broker could not write to the server")
	}
}
