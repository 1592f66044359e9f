// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// These tests run the real fsbroker serve, built from ./cmd/fsbroker, over
// real pipes, with the real policies and a real audit trail.

var (
	buildOnce  sync.Once
	brokerBin  string
	buildError error
)

// brokerBinary builds fsbroker once for the package's tests, into a
// directory removed when the first test that asked for it ends (the
// binary stays open to the processes that run it).
func brokerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fsbroker-serve-test-")
		if err != nil {
			buildError = err
			return
		}
		brokerBin = filepath.Join(dir, "fsbroker")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = "go"
		}
		out, err := exec.Command(goTool, "build", "-o", brokerBin, "github.com/fsbroker/fsbroker/cmd/fsbroker").CombinedOutput()
		if err != nil {
			buildError = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildError != nil {
		t.Fatal(buildError)
	}
	return brokerBin
}

// TestMain removes the built broker after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if brokerBin != "" {
		_ = os.RemoveAll(filepath.Dir(brokerBin))
	}
	os.Exit(code)
}

// startServe runs fsbroker serve with its state (grants, audit trail) in
// stateDir and the given flags, initialized.
func startServe(t *testing.T, stateDir string, flags ...string) *referenceClient {
	t.Helper()
	return startServeWith(t, stateDir, serveHost{init: testClientInit}, flags...)
}

// serveHost is how the test's host plays its side of a session with
// fsbroker serve.
type serveHost struct {
	init   string           // its initialize params
	opts   []mcppeer.Option // its handlers of fsbroker's requests
	stderr io.Writer        // also gets fsbroker's log, when set
}

// startServeWith is startServe with the host h.
func startServeWith(t *testing.T, stateDir string, h serveHost, flags ...string) *referenceClient {
	t.Helper()
	args := append([]string{"serve", "--state-dir", stateDir, "--log-level", "warn"}, flags...)
	cmd := exec.Command(brokerBinary(t), args...)
	// A session of its own: no controlling terminal, so that no consent
	// prompt can open one, however the tests are run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stderr = os.Stderr
	if h.stderr != nil {
		cmd.Stderr = io.MultiWriter(os.Stderr, h.stderr)
	}
	return startServerAs(t, "fsbroker serve", cmd, h.init, h.opts...)
}

// call sends tools/call and returns its result, decoded; a JSON-RPC error
// fails the test.
func (p *referenceClient) call(tool string, args map[string]any) map[string]any {
	p.t.Helper()
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		p.t.Fatal(err)
	}
	resp := p.request("tools/call", params)
	if resp.Error != nil {
		p.t.Fatalf("%s %v: JSON-RPC error %+v", tool, args, resp.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(resp.Result, &out); err != nil {
		p.t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// resultText is the text of a tool result's first content item.
func resultText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	item, _ := content[0].(map[string]any)
	text, _ := item["text"].(string)
	return text
}

// writeDifferentialTree writes the differential tree under root, with
// links/ holding a link to a file of the root, one to a file outside it
// (beside root) and a dangling one.
func writeDifferentialTree(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		"a.txt":           "alpha\nbeta\ngamma\ndelta\n",
		"b.md":            "# title\n\nbody\n",
		"sub/c.txt":       "c\n",
		"sub/deep/d.txt":  "d\n",
		"sub/deep/e.go":   "package e\n",
		"edit.txt":        "one\ntwo\nthree\n",
		"big.txt":         strings.Repeat("0123456789abcdef", 4096),
		"space name.txt":  "spaced\n",
		"empty/.keep":     "",
		"move/source.txt": "moving\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// One modification time for every entry, so that get_file_info's
	// modified dates are the same on every copy of the tree.
	if err := os.Mkdir(filepath.Join(root, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, at, at)
	})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(root), "outside.txt")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"in.txt": "../a.txt", "out.txt": outside, "dangling.txt": "nothing.txt"} {
		if err := os.Symlink(target, filepath.Join(root, "links", name)); err != nil {
			t.Fatal(err)
		}
	}
}

// differentialCalls are the allowed calls both servers answer, in order
// (the writes last); paths are relative to the tree's root.
var differentialCalls = []struct {
	tool string
	args map[string]any
}{
	{"list_allowed_directories", map[string]any{}},
	{"read_text_file", map[string]any{"path": "a.txt"}},
	{"read_text_file", map[string]any{"path": "a.txt", "head": 2}},
	{"read_text_file", map[string]any{"path": "a.txt", "tail": 2}},
	{"read_file", map[string]any{"path": "big.txt"}},
	{"read_multiple_files", map[string]any{"paths": []any{"a.txt", "sub/c.txt", "space name.txt"}}},
	{"list_directory", map[string]any{"path": ""}},
	{"list_directory", map[string]any{"path": "sub"}},
	{"list_directory_with_sizes", map[string]any{"path": ""}},
	{"list_directory_with_sizes", map[string]any{"path": "", "sortBy": "size"}},
	{"directory_tree", map[string]any{"path": ""}},
	{"directory_tree", map[string]any{"path": "sub", "excludePatterns": []any{"*.go"}}},
	{"search_files", map[string]any{"path": "", "pattern": "**/*.txt"}},
	{"search_files", map[string]any{"path": "sub", "pattern": "*.go"}},
	{"search_files", map[string]any{"path": "", "pattern": "*.txt", "excludePatterns": []any{"sub/**"}}},
	{"search_files", map[string]any{"path": "links", "pattern": "*"}},
	{"get_file_info", map[string]any{"path": "a.txt"}},
	{"get_file_info", map[string]any{"path": "space name.txt"}},
	{"get_file_info", map[string]any{"path": "sub"}},
	{"get_file_info", map[string]any{"path": ""}},
	{"write_file", map[string]any{"path": "new.txt", "content": "new file\n"}},
	{"read_text_file", map[string]any{"path": "new.txt"}},
	{"write_file", map[string]any{"path": "a.txt", "content": "replaced\n"}},
	{"edit_file", map[string]any{"path": "edit.txt", "edits": []any{map[string]any{"oldText": "two", "newText": "TWO"}}, "dryRun": true}},
	{"edit_file", map[string]any{"path": "edit.txt", "edits": []any{map[string]any{"oldText": "three", "newText": "3\n4"}}}},
	{"read_text_file", map[string]any{"path": "edit.txt"}},
	{"create_directory", map[string]any{"path": "made/deeper"}},
	{"create_directory", map[string]any{"path": "sub"}},
	{"move_file", map[string]any{"source": "move/source.txt", "destination": "move/target.txt"}},
	{"list_directory", map[string]any{"path": "move"}},
	{"list_directory", map[string]any{"path": ""}},
}

// TestServeMatchesReference runs the reference server, then fsbroker serve,
// each on a fresh copy of the same tree at the same place, through the same
// allowed calls of every tool wired so far, with absolute paths, and
// requires the same results.
func TestServeMatchesReference(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	run := func(start func() *referenceClient) []map[string]any {
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		writeDifferentialTree(t, root)
		p := start()
		out := make([]map[string]any, len(differentialCalls))
		for n, c := range differentialCalls {
			args := make(map[string]any, len(c.args))
			for k, v := range c.args {
				if s, ok := v.(string); ok && (k == "path" || k == "source" || k == "destination") {
					v = filepath.Join(root, s)
				}
				if list, ok := v.([]any); ok && k == "paths" {
					abs := make([]any, len(list))
					for i, s := range list {
						abs[i] = filepath.Join(root, s.(string))
					}
					v = abs
				}
				args[k] = v
			}
			out[n] = p.call(c.tool, args)
		}
		return out
	}
	want := run(func() *referenceClient { return startReference(t, root) })
	got := run(func() *referenceClient {
		return startServe(t, filepath.Join(base, "state"), "--root", root+":rw", "--consent", "auto")
	})
	for n, c := range differentialCalls {
		if c.tool == ToolGetFileInfo {
			// Birth and access times differ from copy to copy (and the
			// reference's own reads change access times): masked on both
			// sides; size, modified, type and permissions are compared.
			got[n], want[n] = maskVolatile(t, got[n]), maskVolatile(t, want[n])
		}
		if !reflect.DeepEqual(got[n], want[n]) {
			g, _ := json.Marshal(got[n])
			w, _ := json.Marshal(want[n])
			t.Errorf("%s %v:\nfsbroker serve: %s\nreference:      %s", c.tool, c.args, g, w)
		}
	}
}

// maskVolatile is res with the volatile parts of its text masked
// (volatile: birth and access times, temporary file names).
func maskVolatile(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(volatile.ReplaceAllString(string(raw), "$1")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// attackTree is a read-only root with a secret and a link out, a writable
// root, and a file outside both.
type attackTree struct {
	ro, rw, outside, state string
}

func newAttackTree(t *testing.T) attackTree {
	t.Helper()
	base := t.TempDir()
	at := attackTree{ro: filepath.Join(base, "ro"), rw: filepath.Join(base, "rw"),
		outside: filepath.Join(base, "outside"), state: filepath.Join(base, "state")}
	for _, d := range []string{at.ro, at.rw, at.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string]string{
		filepath.Join(at.ro, "a.txt"):           "a\n",
		filepath.Join(at.ro, ".env"):            "API_KEY=hunter2\n",
		filepath.Join(at.outside, "secret.txt"): "outside secret\n",
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(at.outside, "secret.txt"), filepath.Join(at.ro, "link-out")); err != nil {
		t.Fatal(err)
	}
	return at
}

// start runs fsbroker serve on the tree, approving what consent may
// approve.
func (at attackTree) start(t *testing.T) *referenceClient {
	return startServe(t, at.state, "--root", at.ro, "--root", at.rw+":rw", "--consent", "auto")
}

// refusedRecord requires a refusing decision record of tool in the trail
// whose detail or paths mention name.
func (at attackTree) refusedRecord(t *testing.T, tool, name string) audit.Record {
	t.Helper()
	var seen []string
	for rec, err := range audit.Records(context.Background(), filepath.Join(at.state, "audit"), audit.Filter{Decision: "deny"}) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, fmt.Sprintf("%s %s %v %s", rec.Tool, rec.Code, rec.Paths, rec.Detail))
		if rec.Tool == tool && (strings.Contains(rec.Detail, name) || strings.Contains(strings.Join(rec.Paths, " "), name)) {
			return rec
		}
	}
	t.Fatalf("no refusing decision record of %s naming %q; refusals: %q", tool, name, seen)
	return audit.Record{}
}

// requireRefused requires an isError result whose text starts with prefix.
func requireRefused(t *testing.T, res map[string]any, prefix string) {
	t.Helper()
	if res["isError"] != true || !strings.HasPrefix(resultText(res), prefix) {
		t.Fatalf("result %v, want isError with text starting %q", res, prefix)
	}
	if strings.Contains(resultText(res), "hunter2") || strings.Contains(resultText(res), "outside secret") {
		t.Fatalf("the refusal leaks content: %q", resultText(res))
	}
}

// TestServeRefusesSecrets: a .env in a root the host may read is refused by
// the default policy's secrets rule, in a listing too, and the refusal is
// in the trail.
func TestServeRefusesSecrets(t *testing.T) {
	at := newAttackTree(t)
	p := at.start(t)
	if text := resultText(p.call("list_directory", map[string]any{"path": at.ro})); strings.Contains(text, ".env") || !strings.Contains(text, "a.txt") {
		t.Errorf("the listing shows the secret or misses a.txt: %q", text)
	}
	requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(at.ro, ".env")}), "PERMISSION_DENIED: secrets")
	requireRefused(t, p.call("read_text_file", map[string]any{"path": "ro/.env"}), "PERMISSION_DENIED: secrets")
	rec := at.refusedRecord(t, "read_text_file", ".env")
	if rec.Code != "PERMISSION_DENIED" || rec.Method != "read_text_file" || rec.Operation != "read" {
		t.Errorf("record %+v, want a PERMISSION_DENIED decision of read_text_file, a read", rec)
	}
}

// TestServeRefusesWriteInReadOnlyRoot: write_file, edit_file,
// create_directory and move_file in a read-only root are refused and touch
// nothing; each refusal is in the trail.
func TestServeRefusesWriteInReadOnlyRoot(t *testing.T) {
	at := newAttackTree(t)
	p := at.start(t)
	requireRefused(t, p.call("write_file", map[string]any{"path": filepath.Join(at.ro, "new.txt"), "content": "x"}), "PERMISSION_DENIED: readonly")
	requireRefused(t, p.call("write_file", map[string]any{"path": filepath.Join(at.ro, "a.txt"), "content": "x"}), "PERMISSION_DENIED: readonly")
	requireRefused(t, p.call("edit_file", map[string]any{"path": filepath.Join(at.ro, "a.txt"),
		"edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}), "PERMISSION_DENIED: readonly")
	requireRefused(t, p.call("create_directory", map[string]any{"path": filepath.Join(at.ro, "dir")}), "PERMISSION_DENIED: readonly")
	requireRefused(t, p.call("move_file", map[string]any{"source": filepath.Join(at.ro, "a.txt"),
		"destination": filepath.Join(at.rw, "a.txt")}), "PERMISSION_DENIED")
	for _, name := range []string{"new.txt", "dir"} {
		if _, err := os.Lstat(filepath.Join(at.ro, name)); !os.IsNotExist(err) {
			t.Errorf("%s: a refused call touched the read-only root (%v)", name, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(at.ro, "a.txt")); err != nil || string(data) != "a\n" {
		t.Errorf("a.txt is now %q (%v)", data, err)
	}
	if _, err := os.Lstat(filepath.Join(at.rw, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused move reached the writable root (%v)", err)
	}
	for tool, name := range map[string]string{"write_file": "new.txt", "edit_file": "a.txt", "create_directory": "dir", "move_file": "a.txt"} {
		at.refusedRecord(t, tool, name)
	}
}

// TestServeRefusesPathsOutside: an absolute path outside every root, a
// sibling-prefix name, a climb out with .., and a symbolic link out of the
// root are refused, content never shown, each refusal in the trail.
func TestServeRefusesPathsOutside(t *testing.T) {
	at := newAttackTree(t)
	p := at.start(t)
	for _, path := range []string{
		filepath.Join(at.outside, "secret.txt"),
		at.ro + "_evil/x",
		filepath.Join(at.ro, "..", "outside", "secret.txt"),
		"ro/../outside/secret.txt",
		filepath.Join(at.ro, "link-out"),
	} {
		res := p.call("read_text_file", map[string]any{"path": path})
		requireRefused(t, res, "PERMISSION_DENIED")
	}
	res := p.call("write_file", map[string]any{"path": filepath.Join(at.rw, "..", "outside", "planted.txt"), "content": "x"})
	requireRefused(t, res, "PERMISSION_DENIED")
	if _, err := os.Lstat(filepath.Join(at.outside, "planted.txt")); !os.IsNotExist(err) {
		t.Errorf("a write outside the roots happened (%v)", err)
	}
	tree := resultText(p.call("directory_tree", map[string]any{"path": at.ro}))
	search := resultText(p.call("search_files", map[string]any{"path": at.ro, "pattern": "**/*secret*"}))
	for _, text := range []string{tree, search} {
		if strings.Contains(text, "secret.txt") || strings.Contains(text, at.outside) {
			t.Errorf("a walk shows what is outside: %q", text)
		}
	}
	at.refusedRecord(t, "read_text_file", "secret.txt")
	at.refusedRecord(t, "read_text_file", "link-out")
	at.refusedRecord(t, "write_file", "planted.txt")
}
