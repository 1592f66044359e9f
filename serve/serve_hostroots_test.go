// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// rootsHostInit is the initialize params of a host that declares roots.
const rootsHostInit = `{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"roots-host","version":"1"}}`

// scriptedRoots is a host's answer to roots/list, which the test changes as
// it goes: a result, or an error, after a delay.
type scriptedRoots struct {
	mu     sync.Mutex
	result any
	err    *jsonrpc.Error
	delay  time.Duration
	asked  int
}

// answer makes the host answer with result (or err).
func (r *scriptedRoots) answer(result any, err *jsonrpc.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result, r.err = result, err
}

// handler answers roots/list as scripted.
func (r *scriptedRoots) handler(*mcppeer.Message) (any, *jsonrpc.Error) {
	r.mu.Lock()
	result, err, delay := r.result, r.err, r.delay
	r.asked++
	r.mu.Unlock()
	time.Sleep(delay)
	return result, err
}

// times returns how many roots/list requests came.
func (r *scriptedRoots) times() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
}

// rootsResult is a roots/list result naming dirs.
func rootsResult(dirs ...string) map[string]any {
	list := []map[string]string{}
	for _, d := range dirs {
		list = append(list, map[string]string{"uri": roots.FileURI(d), "name": filepath.Base(d)})
	}
	return map[string]any{"roots": list}
}

// rootsTree is an operator's writable root ws (a, a/deeper, b inside), a
// read-only root other, and a directory hostonly that only a host names.
type rootsTree struct {
	ws, other, hostonly, state string
}

func newRootsTree(t *testing.T) rootsTree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := rootsTree{ws: filepath.Join(base, "ws"), other: filepath.Join(base, "other"),
		hostonly: filepath.Join(base, "hostonly"), state: filepath.Join(base, "state")}
	for p, content := range map[string]string{
		filepath.Join(rt.ws, "a", "f.txt"):           "a\n",
		filepath.Join(rt.ws, "a", "deeper", "g.txt"): "g\n",
		filepath.Join(rt.ws, "b", "f.txt"):           "b\n",
		filepath.Join(rt.other, "o.txt"):             "o\n",
		filepath.Join(rt.hostonly, "h.txt"):          "h\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// start runs fsbroker serve on the tree for a host that answers roots/list
// with r, approving what consent may approve.
func (rt rootsTree) start(t *testing.T, init string, r *scriptedRoots, flags ...string) *referenceClient {
	t.Helper()
	var opts []mcppeer.Option
	if r != nil {
		opts = append(opts, mcppeer.WithHandler("roots/list", r.handler))
	}
	return startServeWith(t, rt.state, serveHost{init: init, opts: opts},
		append([]string{"--root", rt.ws + ":rw", "--root", rt.other, "--consent", "auto"}, flags...)...)
}

// allowedDirs is what list_allowed_directories lists.
func allowedDirs(p *referenceClient) []string {
	return allowedLines(p.call("list_allowed_directories", map[string]any{}))
}

// allowedLines are the directories of a list_allowed_directories result.
func allowedLines(res map[string]any) []string {
	return strings.Split(resultText(res), "\n")[1:]
}

// requireAllowed requires that list_allowed_directories lists dirs, waiting
// (bounded) for an answer of the host's to apply.
func requireAllowed(t *testing.T, p *referenceClient, dirs ...string) {
	t.Helper()
	awaitAllowed(t, func() []string { return allowedDirs(p) }, dirs...)
}

// awaitAllowed waits (bounded) until list lists dirs.
func awaitAllowed(t *testing.T, list func() []string, dirs ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = list(); slices.Equal(got, dirs) || len(dirs) == 0 && slices.Equal(got, []string{""}) {
			return
		}
	}
	t.Fatalf("allowed directories %q, want %q", got, dirs)
}

// requireRead requires that read_text_file of path answers content.
func requireRead(t *testing.T, p *referenceClient, path, content string) {
	t.Helper()
	if res := p.call("read_text_file", map[string]any{"path": path}); res["isError"] == true || resultText(res) != content {
		t.Fatalf("read_text_file %s: %v, want %q", path, res, content)
	}
}

// TestServeHostRootsOnlyNarrow: a host that declares roots is asked for
// them after notifications/initialized, and its roots narrow the
// operator's: a host root inside a writable operator root narrows it to
// that subtree, still writable; a host root outside every operator root
// (hostonly) gives nothing; the rest of the operator root, the other root,
// and the whole tree through a listing are refused, nothing written outside.
// notifications/roots/list_changed narrows further, and takes effect.
func TestServeHostRootsOnlyNarrow(t *testing.T) {
	rt := newRootsTree(t)
	r := &scriptedRoots{}
	r.answer(rootsResult(filepath.Join(rt.ws, "a"), rt.hostonly), nil)
	p := rt.start(t, rootsHostInit, r)

	requireAllowed(t, p, filepath.Join(rt.ws, "a"))
	requireRead(t, p, filepath.Join(rt.ws, "a", "f.txt"), "a\n")
	requireRead(t, p, "ws/a/deeper/g.txt", "g\n")
	if res := p.call("write_file", map[string]any{"path": filepath.Join(rt.ws, "a", "new.txt"), "content": "x"}); res["isError"] == true {
		t.Fatalf("a write in the narrowed writable root: %v", res)
	}
	for _, path := range []string{
		filepath.Join(rt.ws, "b", "f.txt"), "ws/b/f.txt", filepath.Join(rt.ws, "a", "..", "b", "f.txt"),
		filepath.Join(rt.other, "o.txt"), filepath.Join(rt.hostonly, "h.txt"),
	} {
		requireRefused(t, p.call("read_text_file", map[string]any{"path": path}), "PERMISSION_DENIED")
	}
	requireRefused(t, p.call("list_directory", map[string]any{"path": rt.ws}), "PERMISSION_DENIED")
	requireRefused(t, p.call("directory_tree", map[string]any{"path": rt.ws}), "PERMISSION_DENIED")
	requireRefused(t, p.call("get_file_info", map[string]any{"path": rt.ws}), "PERMISSION_DENIED")
	requireRefused(t, p.call("write_file", map[string]any{"path": filepath.Join(rt.ws, "b", "planted.txt"), "content": "x"}), "PERMISSION_DENIED")
	requireRefused(t, p.call("move_file", map[string]any{"source": filepath.Join(rt.ws, "a", "new.txt"),
		"destination": filepath.Join(rt.ws, "b", "moved.txt")}), "PERMISSION_DENIED")
	requireRefused(t, p.call("write_file", map[string]any{"path": filepath.Join(rt.hostonly, "planted.txt"), "content": "x"}), "PERMISSION_DENIED")
	for _, path := range []string{filepath.Join(rt.ws, "b", "planted.txt"), filepath.Join(rt.ws, "b", "moved.txt"), filepath.Join(rt.hostonly, "planted.txt")} {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s: a refused call touched it (%v)", path, err)
		}
	}

	r.answer(rootsResult(filepath.Join(rt.ws, "a", "deeper")), nil)
	p.Notify("notifications/roots/list_changed", nil)
	requireAllowed(t, p, filepath.Join(rt.ws, "a", "deeper"))
	requireRead(t, p, filepath.Join(rt.ws, "a", "deeper", "g.txt"), "g\n")
	requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(rt.ws, "a", "f.txt")}), "PERMISSION_DENIED")
}

// TestServeHostRootsFailClosed: a host's answer with no usable root (an
// empty list, a directory disjoint from every operator root, only URIs that
// are not file://, an answer that cannot be read, an error) leaves nothing
// accessible, never the operator's full set; so does an error answer to a
// later roots/list after a good one.
func TestServeHostRootsFailClosed(t *testing.T) {
	rt := newRootsTree(t)
	for name, answer := range map[string]func(*scriptedRoots){
		"empty list": func(r *scriptedRoots) { r.answer(rootsResult(), nil) },
		"disjoint":   func(r *scriptedRoots) { r.answer(rootsResult(rt.hostonly), nil) },
		"not file URIs": func(r *scriptedRoots) {
			r.answer(map[string]any{"roots": []map[string]string{{"uri": "https://example.com" + rt.ws}}}, nil)
		},
		"unreadable":     func(r *scriptedRoots) { r.answer(map[string]any{"roots": "all of them"}, nil) },
		"an error":       func(r *scriptedRoots) { r.answer(nil, &jsonrpc.Error{Code: -32603, Message: "no roots here"}) },
		"no roots array": func(r *scriptedRoots) { r.answer(map[string]any{}, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			r := &scriptedRoots{}
			answer(r)
			p := rt.start(t, rootsHostInit, r)
			requireAllowed(t, p)
			for _, path := range []string{filepath.Join(rt.ws, "a", "f.txt"), filepath.Join(rt.other, "o.txt"), "ws/b/f.txt"} {
				requireRefused(t, p.call("read_text_file", map[string]any{"path": path}), "PERMISSION_DENIED")
			}
		})
	}
	t.Run("an error after a good answer", func(t *testing.T) {
		r := &scriptedRoots{}
		r.answer(rootsResult(rt.ws), nil)
		p := rt.start(t, rootsHostInit, r)
		requireRead(t, p, filepath.Join(rt.ws, "b", "f.txt"), "b\n")
		r.answer(nil, &jsonrpc.Error{Code: -32603, Message: "gone"})
		p.Notify("notifications/roots/list_changed", nil)
		requireAllowed(t, p)
		requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(rt.ws, "b", "f.txt")}), "PERMISSION_DENIED")
	})
}

// TestServeHostRootsAwaitTheFirstAnswer: a call the host makes right after
// notifications/initialized, before its answer to roots/list, waits for it
// and is served under the host's roots: neither refused nor served under
// the operator's full set.
func TestServeHostRootsAwaitTheFirstAnswer(t *testing.T) {
	rt := newRootsTree(t)
	r := &scriptedRoots{delay: 500 * time.Millisecond}
	r.answer(rootsResult(filepath.Join(rt.ws, "a")), nil)
	p := rt.start(t, rootsHostInit, r)
	requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(rt.other, "o.txt")}), "PERMISSION_DENIED")
	requireRead(t, p, filepath.Join(rt.ws, "a", "f.txt"), "a\n")
}

// TestServeWithoutRootsCapability: a host that declares no roots is never
// asked for them (not even on a list_changed it sends anyway) and gets the
// operator's roots.
func TestServeWithoutRootsCapability(t *testing.T) {
	rt := newRootsTree(t)
	r := &scriptedRoots{}
	r.answer(rootsResult(), nil) // would leave nothing, if it were asked
	p := rt.start(t, testClientInit, r)
	p.Notify("notifications/roots/list_changed", nil)
	requireAllowed(t, p, rt.ws, rt.other)
	requireRead(t, p, filepath.Join(rt.ws, "b", "f.txt"), "b\n")
	requireRead(t, p, filepath.Join(rt.other, "o.txt"), "o\n")
	if n := r.times(); n != 0 {
		t.Errorf("the host was asked roots/list %d times", n)
	}
}

// writeRootsConfig replaces the config file with one listing dirs as roots
// (writable or not), in one rename, as the config watch expects an edit.
func writeRootsConfig(t *testing.T, config string, writable bool, dirs ...string) {
	t.Helper()
	text := "roots:\n"
	for _, d := range dirs {
		text += "  - path: " + d + "\n"
		if writable {
			text += "    writable: true\n"
		}
	}
	tmp := config + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, config); err != nil {
		t.Fatal(err)
	}
}

// TestServeHostRootsAfterAConfigReload: the operator's roots come from a
// config file that changes while the session runs; the host's roots still
// narrow the reloaded set: a root the operator adds shows only as far as
// the host allows it, and a root the operator removes is gone whatever the
// host says.
func TestServeHostRootsAfterAConfigReload(t *testing.T) {
	rt := newRootsTree(t)
	config := filepath.Join(filepath.Dir(rt.state), "fsbroker.yaml")
	writeConfig := func(dirs ...string) { writeRootsConfig(t, config, true, dirs...) }
	writeConfig(rt.ws)
	r := &scriptedRoots{}
	r.answer(rootsResult(filepath.Join(rt.ws, "a"), rt.hostonly), nil)
	p := startServeWith(t, rt.state, serveHost{init: rootsHostInit, opts: []mcppeer.Option{mcppeer.WithHandler("roots/list", r.handler)}},
		"--config", config, "--consent", "auto")
	requireAllowed(t, p, filepath.Join(rt.ws, "a"))

	writeConfig(rt.ws, rt.hostonly)
	requireAllowed(t, p, filepath.Join(rt.ws, "a"), rt.hostonly)
	requireRead(t, p, filepath.Join(rt.hostonly, "h.txt"), "h\n")
	requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(rt.ws, "b", "f.txt")}), "PERMISSION_DENIED")

	writeConfig(rt.hostonly)
	requireAllowed(t, p, rt.hostonly)
	requireRefused(t, p.call("read_text_file", map[string]any{"path": filepath.Join(rt.ws, "a", "f.txt")}), "PERMISSION_DENIED")
}

// TestServeHostRootsNarrowResources: resources follow the host's roots as
// the tools do. resources/list walks only the subtree a host root narrowed
// a root to (the root's own directory may not be listed, so walking it
// would show nothing), and resources/read outside it is refused.
func TestServeHostRootsNarrowResources(t *testing.T) {
	rt := newRootsTree(t)
	r := &scriptedRoots{}
	r.answer(rootsResult(filepath.Join(rt.ws, "a")), nil)
	p := rt.start(t, rootsHostInit, r)
	requireAllowed(t, p, filepath.Join(rt.ws, "a"))

	var list struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
		NextCursor string `json:"nextCursor"`
	}
	p.result(p.rpc("resources/list", map[string]any{}), &list)
	var got []string
	for _, res := range list.Resources {
		got = append(got, res.URI)
	}
	slices.Sort(got)
	want := []string{FileURL(filepath.Join(rt.ws, "a", "deeper", "g.txt")), FileURL(filepath.Join(rt.ws, "a", "f.txt"))}
	if !slices.Equal(got, want) || list.NextCursor != "" {
		t.Fatalf("resources/list under the host's roots: %q (next %q), want %q", got, list.NextCursor, want)
	}
	if resp := p.rpc("resources/read", map[string]any{"uri": FileURL(filepath.Join(rt.ws, "a", "f.txt"))}); resp.Error != nil {
		t.Fatalf("resources/read inside the host's roots: %s", resp.Raw)
	}
	for _, outside := range []string{filepath.Join(rt.ws, "b", "f.txt"), filepath.Join(rt.other, "o.txt")} {
		resp := p.rpc("resources/read", map[string]any{"uri": FileURL(outside)})
		if resp.Error == nil || !strings.Contains(string(resp.Raw), "PERMISSION_DENIED") {
			t.Fatalf("resources/read of %s outside the host's roots: %s", outside, resp.Raw)
		}
	}
}
