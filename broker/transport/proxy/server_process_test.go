// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/transport/child"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// scriptedServerArg, as this test binary's first argument, makes it a
// scripted MCP server (see scriptedServer); the next two arguments name the
// file of lines it sends once initialized and the file it writes what it
// receives to.
const scriptedServerArg = "fsbroker-proxy-scripted-server"

func init() {
	if len(os.Args) == 4 && os.Args[1] == scriptedServerArg {
		os.Exit(scriptedServer(os.Args[2], os.Args[3]))
	}
}

// scriptedServer is a raw MCP server on stdin and stdout. It appends each
// line it receives to the file received, answers initialize, and once
// initialized sends the lines of the script file, then the notification
// x/server-done. It exits when its input ends.
func scriptedServer(script, received string) int {
	lines, err := os.ReadFile(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripted server:", err)
		return 2
	}
	got, err := os.OpenFile(received, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripted server:", err)
		return 2
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if _, err := got.Write(append(line, '\n')); err != nil {
				fmt.Fprintln(os.Stderr, "scripted server:", err)
				return 2
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(line, &m)
			switch m.Method {
			case "initialize":
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"scripted","version":"1"}}}`+"\n", m.ID)
			case "notifications/initialized":
				os.Stdout.Write(lines)
				fmt.Println(`{"jsonrpc":"2.0","method":"x/server-done"}`)
			}
		}
		if err != nil {
			return 0
		}
	}
}

// serverProcess is the scripted server running as a child process.
type serverProcess struct {
	proc     *child.Process
	received string // the file of the lines it received
}

// startScriptedServer starts the scripted server with script (one JSON-RPC
// line each) and returns it with its stream.
func startScriptedServer(t *testing.T, script []string) (*serverProcess, jsonrpc.Stream) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(file, []byte(strings.Join(script, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	received := filepath.Join(t.TempDir(), "received")
	proc, err := child.Start(os.Args[0], []string{scriptedServerArg, file, received}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop(time.Second) })
	return &serverProcess{proc: proc, received: received}, jsonrpc.NewLineStream(proc.Stdout(), proc.Stdin(), 0)
}

// receivedUpTo waits until the server has received a line that holds want,
// and returns the lines it received until then.
func (s *serverProcess) receivedUpTo(t *testing.T, want string) []string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		b, err := os.ReadFile(s.received)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var lines []string
		for line := range strings.Lines(string(b)) {
			lines = append(lines, line)
			if strings.Contains(line, want) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not receive %s; it received:\n%s", want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWrapServerNeverPassesBrokeredMethodsToTheHost: a real server process
// sends the broker's methods as notifications (files/*, their fs.* aliases,
// roots/list, an escaped spelling) and as requests with a null id; none
// reaches the host, and none is carried out. The other way, a reply of the
// host's to a request the broker is answering, and a files/changed
// notification of the host's, never reach the server.
func TestWrapServerNeverPassesBrokeredMethodsToTheHost(t *testing.T) {
	params := map[string]string{
		"files/read":    `{"path":"a/hello.txt"}`,
		"files/write":   `{"path":"a/written.txt","content":"x"}`,
		"files/list":    `{"path":"a"}`,
		"files/create":  `{"path":"a/created","type":"directory"}`,
		"files/delete":  `{"path":"a/hello.txt"}`,
		"files/rename":  `{"oldPath":"a/hello.txt","newPath":"a/renamed.txt"}`,
		"files/watch":   `{"path":"a"}`,
		"files/consent": `{"message":"may I?","requestedPaths":["b"]}`,
		"roots/list":    `{}`,
	}
	var script []string
	for method, p := range params {
		script = append(script, fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s}`, method, p))
		if alias, ok := strings.CutPrefix(method, "files/"); ok {
			script = append(script, fmt.Sprintf(`{"jsonrpc":"2.0","method":"fs.%s","params":%s}`, alias, p))
		}
	}
	script = append(script,
		`{"jsonrpc":"2.0","method":"files\/delete","params":{"path":"a/hello.txt"}}`,
		`{"jsonrpc":"2.0","method":"\u0072oots/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"files/read","params":{"path":"a/hello.txt"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"fs.write","params":{"path":"a/written.txt","content":"x"}}`,
		// A request the broker answers slowly (the consent provider waits).
		`{"jsonrpc":"2.0","id":"held","method":"files/consent","params":{"message":"may I?","requestedPaths":["a/hello.txt"]}}`,
	)
	srv, stream := startScriptedServer(t, script)
	f := newRouterFixture(t, stream, nil, nil, nil)
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "host", "version": "1"}}})
	f.host.Await("initialize result", func(m *mcppeer.Message) bool { return m.IsReplyTo("1") })
	f.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	f.host.Await("the server's last line", func(m *mcppeer.Message) bool { return m.IsNotification("x/server-done") })
	select {
	case <-f.consent.asked:
	case <-time.After(waitLimit):
		t.Fatal("the held files/consent did not reach the broker's session")
	}

	// The host answers the request the broker holds, and reports a change.
	f.host.SendRaw(`{"jsonrpc":"2.0","id":"held","result":{"granted":["a/hello.txt"],"denied":[]}}`)
	f.host.SendRaw(`{"jsonrpc":"2.0","method":"notifications/files/changed","params":{"watchId":"w1","path":"a/hello.txt","type":"deleted","timestamp":"2025-01-01T00:00:00Z"}}`)
	f.host.SendRaw(`{"jsonrpc":"2.0","method":"x/host-done"}`)
	got := srv.receivedUpTo(t, "x/host-done")

	for _, m := range f.host.All() {
		if m.Method != "x/server-done" && !m.IsReplyTo("1") {
			t.Errorf("the host received %s", m.Raw)
		}
	}
	refusals := 0
	for _, line := range got {
		if strings.Contains(line, `"held"`) || strings.Contains(line, "files/changed") {
			t.Errorf("the server received the host's %s", strings.TrimSpace(line))
		}
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`) {
			refusals++
		}
	}
	if refusals != 3 {
		t.Errorf("the server got %d refusals (-32600, id null) of its requests with a null id, want 3; it received:\n%s",
			refusals, strings.Join(got, ""))
	}
	for _, name := range []string{"written.txt", "created", "renamed.txt"} {
		if _, err := os.Lstat(filepath.Join(f.base, "ws/a", name)); err == nil {
			t.Errorf("a notification was carried out: a/%s exists", name)
		}
	}
	if _, err := os.Stat(filepath.Join(f.base, "ws/a/hello.txt")); err != nil {
		t.Errorf("a notification was carried out: %v", err)
	}
}
