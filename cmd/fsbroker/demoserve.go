// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// demoServeCall is one tool call of `fsbroker demo --serve`: the tool, its
// arguments, and the target as the demo's line shows it.
type demoServeCall struct {
	tool   string
	args   map[string]any
	target string
}

// demoServeCalls are the calls of `fsbroker demo --serve`, in order: the
// requests the example server's demo script sends (the roots, a listing, a
// read, the secret, a write in the read-only root, a write in the writable
// one, a path climbing out of its root, a write over the size limit), as the
// tool calls of the reference filesystem server that a host would make.
// Paths are mount-relative, as the script's are; absolute paths inside a root
// work the same. The script's files/consent requests have no tool: under
// serve, a call that needs a grant asks the consent provider itself.
var demoServeCalls = []demoServeCall{
	{tool: "list_allowed_directories", args: map[string]any{}},
	{tool: "list_directory", args: map[string]any{"path": "project"}, target: "project"},
	{tool: "read_text_file", args: map[string]any{"path": "project/src/main.go"}, target: "project/src/main.go"},
	{tool: "read_text_file", args: map[string]any{"path": "project/.env"}, target: "project/.env"},
	{tool: "write_file", args: map[string]any{"path": "project/README.md", "content": "pwned"}, target: "project/README.md (5 bytes)"},
	{tool: "write_file", args: map[string]any{"path": "scratch/notes.md", "content": "# Notes\n"}, target: "scratch/notes.md (8 bytes)"},
	{tool: "read_text_file", args: map[string]any{"path": "project/../../etc/passwd"}, target: "project/../../etc/passwd"},
	{tool: "write_file", args: map[string]any{"path": "scratch/big.bin", "content": strings.Repeat("x", 2048)}, target: "scratch/big.bin (2048 bytes)"},
}

// demoServeHost is the client name the demo declares: the host's identity
// in fsbroker serve's grants and audit trail.
const demoServeHost = "fsbroker-demo"

// runDemoServe runs `fsbroker demo --serve`: fsbroker in the other role, as
// the filesystem MCP server a host runs. This executable is started as
// `fsbroker serve` (a separate process) on the demo's workspace, and the demo
// plays the host: it initializes the session and makes each call of
// demoServeCalls over the server's stdin and stdout, printing the call, the
// verdict (ALLOWED, DENIED for a refusal, an isError result, or FAILED for a
// JSON-RPC error) and the result's text; then the server's audit trail is
// shown and verified.
func runDemoServe(ctx context.Context, dir string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the fsbroker executable, to start fsbroker serve: %w", err)
	}
	ws, err := newDemoWorkspace(dir, stdout, stderr)
	if err != nil {
		return err
	}
	defer ws.cleanup()
	stdout, stderr, state := ws.stdout, ws.stderr, ws.state
	argv := []string{self, "serve", "--root", ws.project, "--root", ws.scratch + ":rw", "--state-dir", state,
		"--log-level", "error", "--max-write-bytes", "1024", "--consent", "auto"}

	fmt.Fprintf(stdout, "fsbroker demo --serve: fsbroker is the filesystem MCP server; the demo, the host calling it.\n")
	fmt.Fprintf(stdout, "  in %s: %s\n", ws.dir, demoDirNote(ws.kept))
	fmt.Fprintf(stdout, "  roots: project (read-only), scratch (writable), neither pre-approved; built-in policies\n")
	fmt.Fprintf(stdout, "  consent answered inside fsbroker serve by the auto provider (--consent auto), which approves\n")
	fmt.Fprintf(stdout, "  what a call needs and the policy lets be granted; audit trail in state/audit\n")

	srv, err := startDemoServer(ctx, argv, stderr)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(stdout, "  server: %s, pid %d: a separate process, which this demo (pid %d) started and calls "+
		"on its stdin and stdout as a host does\n\n", strings.Join(argv, " "), srv.cmd.Process.Pid, os.Getpid())

	version, err := srv.initialize()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "host %s: initialized fsbroker serve over stdio, protocol %s; its tool calls, one a line:\n",
		demoServeHost, version)
	counts := map[string]int{}
	for n, call := range demoServeCalls {
		verdict, detail, err := srv.call(n+2, call)
		if err != nil {
			return err
		}
		counts[verdict]++
		what := call.tool
		if call.target != "" {
			what += " " + call.target
		}
		fmt.Fprintf(stdout, "%2d. %-48s -> %-7s %s\n", n+1, what, verdict, detail)
	}
	fmt.Fprintf(stdout, "host %s: done: %d calls, %d allowed, %d denied, %d failed\n", demoServeHost,
		len(demoServeCalls), counts["ALLOWED"], counts["DENIED"], counts["FAILED"])
	if err := srv.end(); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\nThe audit trail of fsbroker serve (the tool a call named in place of its method; paths under %s; "+
		"fsbroker audit query --state-dir %s shows it whole):\n\n", ws.dir, state)
	if err := printDemoTrail(ctx, stdout, filepath.Join(state, "audit"), ws.dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nIs it intact? (fsbroker audit verify --state-dir %s)\n\n", state)
	return execute(ctx, []string{"audit", "verify", "--state-dir", state}, nil, stdout, stderr)
}

// demoServer is the fsbroker serve process of `fsbroker demo --serve`, and
// the demo's end of its stdin and stdout.
type demoServer struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	waited bool
}

// startDemoServer starts argv (fsbroker serve) with its stderr on stderr.
func startDemoServer(ctx context.Context, argv []string, stderr io.Writer) (*demoServer, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start fsbroker serve: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start fsbroker serve: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fsbroker serve: %w", err)
	}
	return &demoServer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// request sends the request method with params and id, and returns its
// reply's result, or the JSON-RPC error as an error of its own kind.
func (s *demoServer) request(id int, method string, params any) (json.RawMessage, *demoRPCError, error) {
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, nil, fmt.Errorf("fsbroker serve: %s: %w", method, err)
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		return nil, nil, fmt.Errorf("fsbroker serve: sending %s: %w", method, err)
	}
	for {
		b, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, nil, fmt.Errorf("fsbroker serve: waiting for the answer to %s: %w", method, err)
		}
		var reply struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *demoRPCError   `json:"error"`
		}
		if err := json.Unmarshal(b, &reply); err != nil {
			return nil, nil, fmt.Errorf("fsbroker serve: not a JSON-RPC message: %.200q", b)
		}
		if reply.Method != "" || string(reply.ID) != strconv.Itoa(id) {
			continue // a notification or a request of the server: not the answer
		}
		return reply.Result, reply.Error, nil
	}
}

// demoRPCError is a JSON-RPC error of fsbroker serve.
type demoRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// initialize opens the session as a host does and returns the protocol
// version fsbroker serve answered.
func (s *demoServer) initialize() (string, error) {
	res, rpcErr, err := s.request(1, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": demoServeHost, "version": brokerVersion()},
	})
	if err != nil {
		return "", err
	}
	if rpcErr != nil {
		return "", fmt.Errorf("fsbroker serve refused initialize: %d %s", rpcErr.Code, rpcErr.Message)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil || init.ProtocolVersion == "" {
		return "", fmt.Errorf("fsbroker serve: an initialize result without a protocol version: %.200s", res)
	}
	if _, err := s.in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		return "", fmt.Errorf("fsbroker serve: sending notifications/initialized: %w", err)
	}
	return init.ProtocolVersion, nil
}

// call makes one tool call and returns its verdict and what the demo's line
// shows of its answer.
func (s *demoServer) call(id int, c demoServeCall) (verdict, detail string, err error) {
	res, rpcErr, err := s.request(id, "tools/call", map[string]any{"name": c.tool, "arguments": c.args})
	if err != nil {
		return "", "", err
	}
	if rpcErr != nil {
		return "FAILED", fmt.Sprintf("JSON-RPC error %d: %s", rpcErr.Code, rpcErr.Message), nil
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		return "", "", fmt.Errorf("fsbroker serve: a %s result without content: %.200s", c.tool, res)
	}
	text := r.Content[0].Text
	if r.IsError {
		return "DENIED", text, nil
	}
	return "ALLOWED", demoResultText(c.tool, text), nil
}

// demoResultText is what a demo line shows of a successful result's text:
// a file read, its size and content quoted (shortened); anything else, its
// lines joined with ", " (a heading line ending in ":" with a space).
func demoResultText(tool, text string) string {
	if tool == "read_text_file" {
		const most = 40
		shown := text
		if len(shown) > most {
			shown = shown[:most] + "..."
		}
		return fmt.Sprintf("%d bytes: %q", len(text), shown)
	}
	return strings.ReplaceAll(strings.ReplaceAll(text, ":\n", ": "), "\n", ", ")
}

// end closes fsbroker serve's stdin, as a host ends the session, and waits
// for it to exit; an exit status other than 0 is an error.
func (s *demoServer) end() error {
	s.in.Close()
	s.waited = true
	if err := s.cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("fsbroker serve ended the demo's session with %v", exit)
		}
		return fmt.Errorf("fsbroker serve: %w", err)
	}
	return nil
}

// stop ends the server when the demo stops early.
func (s *demoServer) stop() {
	if s.waited {
		return
	}
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}
