package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesMethodsOverStdio drives every files/* method through the real
// binary: a read-only and a writable root, the pipeline end to end, and the
// broker's own state directory.
func TestFilesMethodsOverStdio(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ro, rw, state := filepath.Join(base, "ro"), filepath.Join(base, "rw"), filepath.Join(base, "state")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "a.txt"), []byte("read me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBroker(t, "", "stdio", "--root", ro, "--root", rw+":rw", "--state-dir", state)
	p.handshake("2025-11-25")

	ok := func(id any, method string, params map[string]any) map[string]any {
		t.Helper()
		r := p.call(id, method, params)
		if r.Error != nil {
			t.Fatalf("%s %v: error %s", method, params, r.raw)
		}
		var res map[string]any
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	fail := func(id any, method string, params map[string]any, code string) {
		t.Helper()
		r := p.call(id, method, params)
		if r.Error == nil || !strings.Contains(string(r.Error.Data), `"code":"`+code+`"`) {
			t.Fatalf("%s %v = %s, want %s", method, params, r.raw, code)
		}
	}

	if res := ok(1, "files/read", map[string]any{"path": "ro/a.txt"}); res["content"] != "read me\n" {
		t.Errorf("read = %v", res)
	}
	fail(2, "files/write", map[string]any{"path": "ro/a.txt", "content": "no"}, "PERMISSION_DENIED")
	fail(3, "files/read", map[string]any{"path": "ro/../rw"}, "PERMISSION_DENIED")
	if res := ok(4, "fs.write", map[string]any{"path": "rw/dir/b.txt", "content": "bee", "createParents": true}); res["created"] != true {
		t.Errorf("write = %v", res)
	}
	if res := ok(5, "files/list", map[string]any{"path": "rw", "recursive": true}); len(res["entries"].([]any)) != 2 {
		t.Errorf("list = %v", res)
	}
	ok(6, "files/create", map[string]any{"path": "rw/empty", "type": "file"})
	ok(7, "files/rename", map[string]any{"oldPath": "rw/empty", "newPath": "rw/dir/empty"})
	watchID := ok(8, "files/watch", map[string]any{"path": "rw/dir"})["watchId"]
	ok(9, "files/delete", map[string]any{"path": "rw/dir/empty"})
	change := p.await("a change event", func(m *message) bool { return m.isNotification("notifications/files/changed") })
	if !strings.Contains(string(change.Params), `"path":"rw/dir/empty"`) || !strings.Contains(string(change.Params), `"event":"deleted"`) {
		t.Errorf("change = %s", change.Params)
	}
	ok(10, "files/unwatch", map[string]any{"watchId": watchID})
	fail(11, "files/delete", map[string]any{"path": "rw/dir"}, "IO_ERROR")
	ok(12, "files/delete", map[string]any{"path": "rw/dir", "recursive": true})
	if ents, _ := os.ReadDir(rw); len(ents) != 0 {
		t.Errorf("rw holds %d entries after the recursive delete", len(ents))
	}
	if _, err := os.Stat(filepath.Join(state, "locks")); err != nil {
		t.Errorf("the state directory has no locks: %v", err)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
