package broker_test

import (
	"bufio"
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
	"github.com/fsbroker/fsbroker/policies"
)

// A Go MCP host serves one server's roots/list and files/* through the broker: the host gives
// the session a message stream to the server (here a pair of pipes, played by a few lines of
// this example; in a host, the server's stdio or any MCP transport), the roots, an executor,
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

	// The server's side: answer initialize, then read a file and try a secret.
	server := &exampleServer{in: bufio.NewReader(serverIn), out: serverOut}
	init := server.next()
	server.send(map[string]any{"jsonrpc": "2.0", "id": init.ID, "result": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"serverInfo": map[string]any{"name": "example", "version": "1.0.0"},
	}})
	server.next() // notifications/initialized
	for id, path := range []string{"project/hello.txt", "project/../../etc/passwd"} {
		server.send(map[string]any{"jsonrpc": "2.0", "id": id + 1, "method": "files/read", "params": map[string]any{"path": path}})
		reply := server.next()
		if reply.Error != nil {
			fmt.Printf("%s: %s (%s)\n", path, reply.Error.Data.Code, reply.Error.Data.Reason)
			continue
		}
		fmt.Printf("%s: %q\n", path, reply.Result.Content)
	}

	serverOut.Close() // the server goes away: the session ends
	fmt.Println("session ended:", <-done)
	// Output:
	// project/hello.txt: "hello, world"
	// project/../../etc/passwd: PERMISSION_DENIED (the path climbs above its root)
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
			Code   string `json:"code"`
			Reason string `json:"reason"`
		} `json:"data"`
	} `json:"error"`
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
