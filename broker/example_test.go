// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/internal/rpcpeer"
	"github.com/fsbroker/fsbroker/policies"
)

// A Go MCP host serves one server's roots/list and files/* through the broker: the host gives
// the session a message stream to the server (here a pair of pipes, the server played by
// internal/rpcpeer; in a host, the server's stdio or any MCP transport), the roots, an executor,
// the built-in policies and an audit trail (a session given no decider refuses every request,
// and one given no trail every audited request, unless the host says broker.WithoutAuditTrail).
// The session sends initialize, then answers the server's requests through the whole pipeline.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A project the operator lets every server read.
	project, _ := os.MkdirTemp("", "project")
	defer os.RemoveAll(project)
	_ = os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello, world"), 0o644)
	set, err := roots.New([]roots.Spec{{Path: project, Mount: "project", Preapproved: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	state, _ := os.MkdirTemp("", "state")
	defer os.RemoveAll(state)
	x, err := executor.New(state)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	policy, err := engine.New(ctx, engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		fmt.Println(err)
		return
	}
	// The audit trail: segment files under state/audit, keys under state.
	trail, err := audit.Open(filepath.Join(state, "audit"), audit.WithStateDir(state))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer trail.Close()

	// The stream between the broker and the server.
	brokerIn, serverOut := io.Pipe()
	serverIn, brokerOut := io.Pipe()
	sess, err := broker.NewSession(jsonrpc.NewLineStream(brokerIn, brokerOut, 0),
		broker.WithRoots(func() *roots.Set { return set }),
		broker.WithExecutor(x),
		broker.WithDecider(engine.Decider{Engine: policy}),
		broker.WithAudit(trail, false),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()

	// The server's side, played by the project's test peer: answer initialize, then read a
	// file and try a secret.
	serverStream := jsonrpc.NewLineStream(serverIn, serverOut, 0)
	defer serverStream.Close()
	server := rpcpeer.New("broker", serverStream)
	init, err := server.AwaitRequest("initialize")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = server.Reply(init, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"serverInfo": map[string]any{"name": "example", "version": "1.0.0"}})
	if _, err := server.AwaitNotification("notifications/initialized"); err != nil {
		fmt.Println(err)
		return
	}
	for id, path := range []string{"project/hello.txt", "project/../../etc/passwd"} {
		reply, err := server.Call(id+1, "files/read", map[string]any{"path": path})
		if err != nil {
			fmt.Println(err)
			return
		}
		if reply.Error != nil {
			var refusal struct{ Code, Reason string }
			_ = json.Unmarshal(reply.Error.Data, &refusal)
			fmt.Printf("%s: %s (%s)\n", path, refusal.Code, refusal.Reason)
			continue
		}
		var read struct{ Content string }
		_ = json.Unmarshal(reply.Result, &read)
		fmt.Printf("%s: %q\n", path, read.Content)
	}

	serverOut.Close() // the server goes away: the session ends
	fmt.Println("session ended:", <-done)
	// Output:
	// project/hello.txt: "hello, world"
	// project/../../etc/passwd: PERMISSION_DENIED (the path climbs above its root)
	// session ended: <nil>
}
