// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestServeModernGoSDK drives the real fsbroker serve (--consent elicit)
// with the official Go SDK's client (go-sdk v1.8.0), which probes with
// server/discover and speaks protocol 2026-07-28 when the server does: it
// answers fsbroker's InputRequiredResults from its own roots and its
// elicitation handler (the person approving every path) and retries. A
// read in its root is served, one outside refused; a write and a
// resources/read go through, each after the form was shown. The same
// client pinned to 2025-11-25 initializes, and is asked roots/list and
// elicitation/create as requests, as before.
func TestServeModernGoSDK(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	writeFiles(t, ws, map[string]string{"notes.txt": "notes\n", "sub/in.txt": "in\n"})
	sub := filepath.Join(ws, "sub")

	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			state := filepath.Join(base, "state"+version)
			var forms, rootsRequests atomic.Int32
			client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-host", Version: "1.0.0"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					forms.Add(1)
					raw, err := json.Marshal(req.Params.RequestedSchema)
					if err != nil {
						return nil, err
					}
					var schema struct {
						Properties map[string]json.RawMessage `json:"properties"`
					}
					if err := json.Unmarshal(raw, &schema); err != nil {
						return nil, err
					}
					content := map[string]any{}
					for field := range schema.Properties {
						content[field] = true
					}
					return &mcp.ElicitResult{Action: "accept", Content: content}, nil
				}})
			client.AddRoots(&mcp.Root{URI: roots.FileURI(sub), Name: "sub"})
			client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "roots/list" {
						rootsRequests.Add(1)
					}
					return next(ctx, method, req)
				}
			})
			cmd := exec.Command(brokerBinary(t), "serve", "--state-dir", state, "--log-level", "warn",
				"--root", ws+":rw", "--consent", "elicit")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			cmd.Stderr = os.Stderr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer session.Close()
			want := version
			if want == "" {
				want = modern.Version
			}
			if got := session.InitializeResult().ProtocolVersion; got != want {
				t.Fatalf("protocol version %q, want %q", got, want)
			}

			call := func(what, tool string, args map[string]any) string {
				t.Helper()
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if len(res.Content) == 0 {
					t.Fatalf("%s: no content", what)
				}
				tc, _ := res.Content[0].(*mcp.TextContent)
				if tc == nil {
					t.Fatalf("%s: content %T", what, res.Content[0])
				}
				return tc.Text
			}
			if got := call("read inside", ToolReadTextFile, map[string]any{"path": filepath.Join(sub, "in.txt")}); got != "in\n" {
				t.Errorf("read inside the host's root: %q", got)
			}
			if got := call("read outside", ToolReadTextFile, map[string]any{"path": filepath.Join(ws, "notes.txt")}); !strings.HasPrefix(got, "PERMISSION_DENIED") {
				t.Errorf("read outside the host's root: %q", got)
			}
			call("write", ToolWriteFile, map[string]any{"path": filepath.Join(sub, "new.txt"), "content": "written"})
			if got, err := os.ReadFile(filepath.Join(sub, "new.txt")); err != nil || string(got) != "written" {
				t.Errorf("write: %q, %v", got, err)
			}
			writeFiles(t, sub, map[string]string{"res" + version + ".txt": "resource\n"})
			read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: FileURL(filepath.Join(sub, "res"+version+".txt"))})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "resource\n" {
				t.Errorf("resources/read: %+v, %v", read, err)
			}
			if forms.Load() < 3 {
				t.Errorf("%d consent forms shown, want one per file", forms.Load())
			}
			var hosts []string
			for _, g := range listGrants(t, state) {
				hosts = append(hosts, g.Server)
			}
			if len(hosts) == 0 || slices.ContainsFunc(hosts, func(h string) bool { return h != "go-sdk-host" }) {
				t.Errorf("grants of %q, want the host's", hosts)
			}
			// On 2026-07-28 the roots come inside InputRequiredResults, never as
			// a request of the server's.
			if n := rootsRequests.Load(); (version == "") != (n == 0) {
				t.Errorf("fsbroker sent roots/list %d times on %q", n, want)
			}
		})
	}
}
