// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
)

// A Go host embeds the broker as fsbroker does: it opens a runtime from a
// Config (the roots, the state directory; here the built-in policies and
// an audit trail in the state directory), starts a session over a message
// stream to its MCP server (here a pair of pipes, played by a few lines of
// this example), and closes the runtime at the end. While the session runs,
// the runtime brings it what changes around it: here another process on the
// state directory (fsbroker grants revoke, played by a grants.Store of its
// own) blocks the pre-approved root, and the server is told at once and
// refused from then on.
func Example() {
	ctx := context.Background()
	project, _ := os.MkdirTemp("", "project")
	defer os.RemoveAll(project)
	_ = os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello, world"), 0o644)
	state, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(state)

	rt, err := runtime.Open(ctx, runtime.Config{
		StateDir: state,
		Roots:    []roots.Spec{{Path: project, Mount: "project", Preapproved: true}},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	// The stream between the broker and the server.
	brokerIn, serverOut := io.Pipe()
	serverIn, brokerOut := io.Pipe()
	sess, err := rt.NewSession(jsonrpc.NewLineStream(brokerIn, brokerOut, 0), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, sess) }()

	// The server's side: answer initialize, then read a file.
	server := &exampleServer{in: bufio.NewReader(serverIn), out: serverOut}
	init := server.next()
	server.send(map[string]any{"jsonrpc": "2.0", "id": init.ID, "result": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"serverInfo": map[string]any{"name": "example", "version": "1.0.0"},
	}})
	server.next() // notifications/initialized
	server.read(1, "project/hello.txt")

	// Another process takes the pre-approval away from every server.
	other, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer other.Close()
	if _, _, err := other.Block(grants.Block{Server: grants.AllServers, By: "the example"}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("told:", server.next().Method)
	server.read(2, "project/hello.txt")

	serverOut.Close() // the server goes away: the session ends
	fmt.Println("session ended:", <-done)
	// Output:
	// project/hello.txt: "hello, world"
	// told: notifications/roots/list_changed
	// project/hello.txt: PERMISSION_DENIED
	// session ended: <nil>
}

// exampleServer plays the MCP server's side of the example.
type exampleServer struct {
	in  *bufio.Reader
	out io.Writer
}

type exampleMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result struct {
		Content string `json:"content"`
	} `json:"result"`
	Error *struct {
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

// read sends files/read of path and prints the reply.
func (s *exampleServer) read(id int, path string) {
	s.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "files/read", "params": map[string]any{"path": path}})
	reply := s.next()
	if reply.Error != nil {
		fmt.Printf("%s: %s\n", path, reply.Error.Data.Code)
		return
	}
	fmt.Printf("%s: %q\n", path, reply.Result.Content)
}

func (s *exampleServer) send(v any) {
	b, _ := json.Marshal(v)
	_, _ = s.out.Write(append(b, '\n'))
}

func (s *exampleServer) next() exampleMessage {
	line, _ := s.in.ReadBytes('\n')
	var m exampleMessage
	_ = json.Unmarshal(line, &m)
	return m
}
