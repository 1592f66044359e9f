// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/npmtest"
)

// The differential harness: the reference filesystem server
// (@modelcontextprotocol/server-filesystem 2026.8.31 with SDK 1.32.2, from
// the lock file in testdata/refserver), run with node over stdio on a tree
// in t.TempDir() and driven by the tests' MCP peer. It checks that the
// captured transcripts the golden tests replay are still what the reference
// answers, and (serve_test.go) runs fsbroker serve beside it on the same
// tree.

// referenceServer is the npm project of the reference server.
var referenceServer = &npmtest.Project{
	Src:     "testdata/refserver",
	What:    "the reference filesystem MCP server",
	MinNode: 20,
	Marker:  "@modelcontextprotocol/server-filesystem/dist/index.js",
}

// referenceWait bounds each wait for the reference server's answer (node's
// start included): it catches a server that hangs, it does not measure speed.
const referenceWait = time.Minute

// referenceClient is the MCP client of the reference server: the tests'
// peer, answering the server's own requests (roots/list) with "Method not
// found", and the ids of its requests.
type referenceClient struct {
	*mcppeer.Peer
	t      *testing.T
	lastID int
}

// startReference runs the reference server with the given directory
// arguments, in the capture's environment (TZ=UTC, C.UTF-8), initialized.
func startReference(t *testing.T, dirs ...string) *referenceClient {
	t.Helper()
	node, dir := referenceServer.Installed(t)
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	sdk, err := os.ReadFile(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil || !strings.Contains(string(sdk), `"version": "1.32.2"`) {
		t.Fatalf("the reference's SDK is not 1.32.2 (%v)", err)
	}
	return startServer(t, "the reference server", exec.Command(node, append([]string{entry}, dirs...)...))
}

// testClientInit is the initialize params of the tests' MCP client: no
// capability.
const testClientInit = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fsbroker-serve-test","version":"0"}}`

// startServer runs cmd, an MCP server over stdio, in the capture's
// environment (TZ=UTC, C.UTF-8), and returns its client, initialized.
func startServer(t *testing.T, name string, cmd *exec.Cmd) *referenceClient {
	t.Helper()
	return startServerAs(t, name, cmd, testClientInit)
}

// startServerAs is startServer whose client sends init as its initialize
// params (no initialize when "": a client of protocol 2026-07-28) and
// answers the server's requests with opts' handlers (others with "Method
// not found").
func startServerAs(t *testing.T, name string, cmd *exec.Cmd, init string, opts ...mcppeer.Option) *referenceClient {
	t.Helper()
	cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	stdinR.Close()
	stdoutW.Close()
	stream := jsonrpc.NewLineStream(stdoutR, stdinW, 64<<20)
	t.Cleanup(func() {
		stdinW.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = stream.Close()
	})
	opts = append([]mcppeer.Option{mcppeer.RequireValid(), mcppeer.WithWait(referenceWait),
		mcppeer.WithFallback(mcppeer.MethodNotFound)}, opts...)
	p := &referenceClient{t: t, Peer: mcppeer.New(t, name, stream, opts...)}
	if init != "" { // a client of protocol 2026-07-28 sends no initialize
		p.request("initialize", json.RawMessage(init))
		p.Notify("notifications/initialized", nil)
	}
	return p
}

// request sends a request with the next id and returns its response.
func (p *referenceClient) request(method string, params json.RawMessage) *mcppeer.Message {
	p.t.Helper()
	p.lastID++
	return p.Call(p.lastID, method, params)
}

// writeReferenceTree writes capture.mjs's tree under base (base/root,
// base/root2, base/outside), with the session's own files.
func writeReferenceTree(t *testing.T, base, group string) {
	t.Helper()
	ft := newFixtureTree()
	for name, content := range groupFiles(group) {
		ft.files[name] = content
	}
	root := filepath.Join(base, "root")
	for _, d := range []string{root, filepath.Join(base, "root2"), filepath.Join(base, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d := range ft.dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range ft.files {
		mode := os.FileMode(0o644)
		if m, ok := ft.modes[name]; ok {
			mode = m
		}
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range ft.links {
		if err := os.Symlink(strings.Replace(target, "/tmp/fsref", base, 1), filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string]string{"outside/secret.txt": "secret\n", "root2/r2.txt": "r2\n"} {
		if err := os.WriteFile(filepath.Join(base, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	for _, name := range []string{"a.txt", "sub", "ro.txt"} {
		if err := os.Chtimes(filepath.Join(root, name), at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// volatile are the parts of a result that differ from run to run: birth and
// access times, and the temporary file names of a failed write.
var volatile = regexp.MustCompile(`(created|accessed): \w{3} \w{3} \d\d \d{4} \d\d:\d\d:\d\d GMT[+-]\d{4} \([^)]*\)|\.[0-9a-f]{32}\.tmp`)

// TestReferenceTranscriptsCurrent replays the captured sessions that the
// golden tests use against the reference server installed from the lock
// file, on the same tree in a temporary directory, and requires the same
// answers (paths moved to the temporary directory, volatile parts masked).
func TestReferenceTranscriptsCurrent(t *testing.T) {
	groups := loadTranscripts(t)
	calls := toolCalls(t, groups)
	replayed := 0
	for _, g := range groups {
		if !strings.HasPrefix(g.Group, "main") && !strings.HasPrefix(g.Group, "head/tail") &&
			!strings.HasPrefix(g.Group, "edit_file diff") && !strings.HasPrefix(g.Group, "search_files and") {
			continue
		}
		base := filepath.Join(t.TempDir(), "fsref")
		writeReferenceTree(t, base, g.Group)
		peer := startReference(t, filepath.Join(base, "root"))
		move := strings.NewReplacer("/tmp/fsref", base)
		for _, c := range calls {
			if c.group != g.Group {
				continue
			}
			for name, content := range filesBefore(g.Group, c.name) {
				if err := os.WriteFile(filepath.Join(base, "root", name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if strings.Contains(string(c.params), "~") {
				continue // the home directory differs
			}
			resp := peer.request("tools/call", json.RawMessage(move.Replace(string(c.params))))
			var got, want any
			if c.rpcError != "" {
				if resp.Error == nil || resp.Error.Message != c.rpcError {
					t.Errorf("%s: got %+v, want the error %q", c.name, resp.Error, c.rpcError)
				}
				replayed++
				continue
			}
			if err := json.Unmarshal([]byte(volatile.ReplaceAllString(string(resp.Result), "$1")), &got); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			wantText := volatile.ReplaceAllString(move.Replace(string(c.result)), "$1")
			if err := json.Unmarshal([]byte(wantText), &want); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s / %s: the reference now answers\n %s\nthe capture has\n %s", g.Group, c.name, resp.Result, wantText)
			}
			replayed++
		}
	}
	if replayed < 200 {
		t.Fatalf("only %d calls replayed", replayed)
	}
	t.Logf("%d calls replayed against the reference server", replayed)
}
