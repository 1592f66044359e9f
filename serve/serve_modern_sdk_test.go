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

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/testfs"
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

// TestServeModernGoSDKListen drives the real fsbroker serve with the
// official Go SDK's client on protocol 2026-07-28 (a client that declares
// no roots): its Subscribe sends subscriptions/listen, and the changes of
// the file on disk reach its ResourceUpdatedHandler; a subscription to
// .env is refused (the SDK does not wait for the listen's reply) and a
// change of it never reaches the handler. After a real fsbroker grants
// revoke of the file's grant, a change of it is never announced, while the
// other subscription goes on; Unsubscribe ends its listen. The trail holds
// each listen's decisions.
func TestServeModernGoSDKListen(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	writeFiles(t, ws, map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".env": "API_KEY=hunter2\n"})
	approve := newApprovals(t, base, "ws/a.txt", "ws/b.txt")
	updated := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-listener", Version: "1.0.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{}, // no roots: a listen cannot ask for them
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}})
	cmd := exec.Command(brokerBinary(t), "serve", "--state-dir", state, "--log-level", "warn", "--root", ws, "--consent", approve.spec())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer session.Close()
	if v := session.InitializeResult().ProtocolVersion; v != modern.Version {
		t.Fatalf("protocol version %q", v)
	}
	if caps := session.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("server/discover's resources capability: %+v", caps.Resources)
	}
	a, b, env := FileURL(filepath.Join(ws, "a.txt")), FileURL(filepath.Join(ws, "b.txt")), FileURL(filepath.Join(ws, ".env"))
	await := func(want string) {
		t.Helper()
		select {
		case got := <-updated:
			if got != want {
				t.Fatalf("an update of %s, want one of %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no update of %s within 10 s", want)
		}
	}
	for _, uri := range []string{a, b, env} {
		if err := session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	// The listens are fire-and-forget in the SDK: the trail says when both
	// watches stand.
	for deadline := time.Now().Add(10 * time.Second); len(records(t, state, audit.Filter{Tool: MethodSubscriptionsListen, Decision: "allow"})) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listens' watches were never decided")
		}
	}
	testfs.WriteFile(t, filepath.Join(ws, ".env"), "API_KEY=changed\n")
	testfs.WriteFile(t, filepath.Join(ws, "a.txt"), "changed\n")
	await(a)
	envPath := filepath.Join(ws, ".env")
	if allowed := records(t, state, audit.Filter{Tool: MethodSubscriptionsListen, Decision: "allow", PathPrefix: envPath}); len(allowed) != 0 {
		t.Errorf("the .env listen was allowed: %+v", allowed)
	}
	if denied := records(t, state, audit.Filter{Tool: MethodSubscriptionsListen, Decision: "deny", PathPrefix: envPath}); len(denied) == 0 {
		t.Error("no refusal of the .env listen in the trail")
	}

	approve.set("ws/b.txt")
	revoke := exec.Command(brokerBinary(t), "grants", "revoke", "--state-dir", state, "--path", "ws/a.txt")
	if out, err := revoke.CombinedOutput(); err != nil {
		t.Fatalf("fsbroker grants revoke: %v\n%s", err, out)
	}
	// The session has seen the revocation once a read of a.txt is refused.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: a}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revocation was never seen")
		}
	}
	testfs.WriteFile(t, filepath.Join(ws, "a.txt"), "changed after the revocation\n")
	testfs.WriteFile(t, filepath.Join(ws, "b.txt"), "changed\n")
	await(b)
	if err := session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: b}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	testfs.WriteFile(t, filepath.Join(ws, "b.txt"), "changed after the unsubscribe\n")
	testfs.WriteFile(t, filepath.Join(ws, "a.txt"), "changed a third time\n")
	select {
	case got := <-updated:
		t.Errorf("an update of %s after the revocation and the unsubscribe", got)
	case <-time.After(500 * time.Millisecond):
	}
}
