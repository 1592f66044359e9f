// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/schema"
)

// writeFiles writes files (slash-separated names relative to dir) into dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// replaceFile replaces a file the way editors that save atomically do: a temporary file in the
// same directory, then a rename over the old one.
func replaceFile(t testing.TB, file, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// policyDir writes a policy set into a new temporary directory and returns it.
func policyDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

// newTestEngine loads files from a temporary directory.
func newTestEngine(t testing.TB, files map[string]string, opts ...Option) *Engine {
	t.Helper()
	e, err := New(context.Background(), Source{Dir: policyDir(t, files)}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// basicSource is the policy set in testdata/basic.
func basicSource() Source {
	return Source{Dir: filepath.Join("testdata", "basic")}
}

// methods maps an operation to the method that causes it.
var methods = map[string]string{
	"read": "files/read", "list": "files/list", "watch": "files/watch", "write": "files/write",
	"create": "files/create", "delete": "files/delete", "rename": "files/rename", "visible": "files/list",
}

// pathDoc is one path of the policy input (the $defs/path of policy-input.json).
func pathDoc(mountPath string, writable bool) map[string]any {
	mount, rel, _ := strings.Cut(mountPath, "/")
	hidden := false
	for seg := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(seg, ".") {
			hidden = true
		}
	}
	return map[string]any{
		"requested": mountPath,
		"canonical": path.Join("/srv", mountPath),
		"root":      path.Join("/srv", mount),
		"mount":     mount,
		"relative":  rel,
		"mountPath": mountPath,
		"writable":  writable,
		"exists":    true,
		"type":      "file",
		"size":      1024,
		"nlink":     1,
		"hidden":    hidden,
	}
}

// grant is one consent grant of the policy input.
func grant(access, path string) map[string]any {
	return map[string]any{"access": access, "path": path, "granted": "2026-01-02T03:04:05Z", "expires": ""}
}

// testInput builds a policy input that satisfies policy-input.json: operation op on mountPath
// with the given grants. Tests check it against the schema.
func testInput(t testing.TB, op, mountPath string, writable bool, grants ...map[string]any) map[string]any {
	t.Helper()
	gs := make([]any, 0, len(grants))
	for _, g := range grants {
		gs = append(gs, g)
	}
	in := map[string]any{
		"version":   1,
		"method":    methods[op],
		"operation": op,
		"server":    map[string]any{"id": "example", "name": "example", "version": "1.0.0", "pinned": false},
		"session":   map[string]any{"id": "s1", "protocolVersion": "2025-06-18", "transport": "stdio"},
		"path":      pathDoc(mountPath, writable),
		"params":    map[string]any{"path": mountPath},
		"bytes":     0,
		"grants":    gs,
		"usage":     map[string]any{"bytesWrittenToday": 0, "watches": 0},
		"time":      map[string]any{"rfc3339": "2026-01-02T03:04:05.000000006Z", "unixNano": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()},
	}
	checkInput(t, in)
	return in
}

// visibleInput builds a batch input for Visible over entries.
func visibleInput(t testing.TB, entries ...string) map[string]any {
	t.Helper()
	in := testInput(t, "visible", "p", false)
	delete(in, "path")
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		list = append(list, pathDoc(e, false))
	}
	in["entries"] = list
	checkInput(t, in)
	return in
}

// checkInput fails the test when in does not satisfy policy-input.json.
func checkInput(t testing.TB, in map[string]any) {
	t.Helper()
	v, err := schema.New()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidatePolicyInput(doc); err != nil {
		t.Fatalf("test input does not satisfy the schema: %v", err)
	}
}

// waitReload waits for the next onReload call, at most 10 s.
func waitReload(t *testing.T, ch <-chan reloadEvent) reloadEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no reload within 10 s")
		return reloadEvent{}
	}
}

// reloadEvent is one onReload call.
type reloadEvent struct {
	revision string
	err      error
	at       time.Time
}

// watch starts e.Watch until the test ends and returns the channel of its onReload calls.
func watch(t *testing.T, e *Engine) <-chan reloadEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan reloadEvent, 16)
	done := make(chan error, 1)
	go func() {
		done <- e.Watch(ctx, func(rev string, err error) {
			ch <- reloadEvent{revision: rev, err: err, at: time.Now()}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	// fsnotify watches are added before Watch's loop starts; give no event a chance to be
	// missed by waiting until the watcher is set up.
	waitWatching(t, e)
	return ch
}

// waitWatching waits until e's watcher has been set up (Watch logs nothing observable, so the
// engine counts watchers in a test hook).
func waitWatching(t *testing.T, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.watching.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Watch did not start within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
