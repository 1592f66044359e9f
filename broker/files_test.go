// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// filesFixture is a read-only root "ro" and a writable root "rw" with a few
// files, served by a session with an executor.
type filesFixture struct {
	*peer
	ro, rw string
	next   atomic.Int64
}

// startFiles starts a session over the fixture's roots with opts after the
// tests' decider and no audit trail (startPeer).
func startFiles(t testing.TB, opts ...Option) *filesFixture {
	t.Helper()
	return startFilesWith(t, startPeer, opts...)
}

// startFilesWith starts a session over the fixture's roots with start.
func startFilesWith(t testing.TB, start func(testing.TB, *roots.Set, ...Option) *peer, opts ...Option) *filesFixture {
	t.Helper()
	base := t.TempDir()
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{ro, rw, filepath.Join(base, "outside")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ro, "a.txt"), "hello, wörld\n")
	write(filepath.Join(ro, ".env"), "SECRET=1\n")
	write(filepath.Join(base, "outside", "secret.txt"), "outside\n")
	if err := os.Symlink("../outside/secret.txt", filepath.Join(rw, "escape")); err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: ro, Mount: "ro", Preapproved: true}, {Path: rw, Mount: "rw", Writable: true, Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	p := start(t, set, append([]Option{WithExecutor(x)}, opts...)...)
	p.initialize("2025-11-25")
	return &filesFixture{peer: p, ro: ro, rw: rw}
}

// call sends a request and returns its result or error object.
func (f *filesFixture) call(method string, params any) (result map[string]any, code int, data map[string]any) {
	f.t.Helper()
	id := f.next.Add(1)
	b, err := json.Marshal(params)
	if err != nil {
		f.t.Fatal(err)
	}
	f.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, b))
	r := f.reply(fmt.Sprint(id))
	if r.Error != nil {
		c, _, d := errorOf(f.t, r)
		return nil, c, d
	}
	if err := json.Unmarshal(r.Result, &result); err != nil {
		f.t.Fatal(err)
	}
	return result, 0, nil
}

// mustFail checks that a call fails with a brokered code.
func (f *filesFixture) mustFail(method string, params any, rpc int, code string) map[string]any {
	f.t.Helper()
	res, c, data := f.call(method, params)
	if res != nil || c != rpc || data["code"] != code {
		f.t.Fatalf("%s %v = result %v, error %d %v; want %d %s", method, params, res, c, data, rpc, code)
	}
	return data
}

func TestFilesReadResultShape(t *testing.T) {
	f := startFiles(t)
	res, _, _ := f.call("files/read", map[string]any{"path": "ro/a.txt"})
	want := map[string]any{"content": "hello, wörld\n", "encoding": "utf-8", "size": float64(14), "offset": float64(0),
		"length": float64(14), "eof": true, "mimeType": "text/plain"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s = %v, want %v", k, res[k], v)
		}
	}
	if etag, _ := res["etag"].(string); etag == "" || len(res) != 8 {
		t.Errorf("result %v: want 8 fields with an etag", res)
	}
	// The three spellings and the alias read the same file.
	abs := filepath.Join(f.ro, "a.txt")
	for _, p := range []string{abs, "file://" + abs, "ro/./x/../a.txt"} {
		if r, _, _ := f.call("fs.read", map[string]any{"path": p}); r == nil || r["content"] != want["content"] {
			t.Errorf("read %s = %v", p, r)
		}
	}
	// base64, and a chunk that would split "ö" is shortened.
	r, _, _ := f.call("files/read", map[string]any{"path": "ro/a.txt", "encoding": "base64", "offset": 7, "length": 2})
	if b, _ := base64.StdEncoding.DecodeString(r["content"].(string)); string(b) != "w\xc3" || r["eof"] != false {
		t.Errorf("base64 chunk = %v", r)
	}
	r, _, _ = f.call("files/read", map[string]any{"path": "ro/a.txt", "offset": 7, "length": 2})
	if r["content"] != "w" || r["length"] != float64(1) {
		t.Errorf("utf-8 chunk ending inside a character = %v, want \"w\" with length 1", r)
	}
}

func TestFilesErrorsOverTheWire(t *testing.T) {
	f := startFiles(t, WithLimits(corridor.Limits{MaxReadBytes: 1024, MaxWriteBytes: 8}))
	cases := []struct {
		method string
		params map[string]any
		rpc    int
		code   string
	}{
		{"files/read", map[string]any{"path": "ro/missing"}, -32001, "FILE_NOT_FOUND"},
		{"files/read", map[string]any{"path": ""}, -32003, "INVALID_PATH"},
		{"files/read", map[string]any{"path": "ro/a\\b"}, -32003, "INVALID_PATH"},
		{"files/read", map[string]any{"path": "ro/../rw/x"}, -32002, "PERMISSION_DENIED"},
		{"files/read", map[string]any{"path": "nomount/a"}, -32002, "PERMISSION_DENIED"},
		{"files/read", map[string]any{"path": f.ro + "_evil/a.txt"}, -32002, "PERMISSION_DENIED"},
		{"files/read", map[string]any{"path": "rw/escape"}, -32002, "PERMISSION_DENIED"},
		{"files/read", map[string]any{"path": "ro"}, -32004, "IO_ERROR"},
		{"files/read", map[string]any{"path": "ro/a.txt", "length": 1025}, -32007, "QUOTA_EXCEEDED"},
		{"files/read", map[string]any{"path": 5}, -32602, "INVALID_PARAMS"},
		{"files/write", map[string]any{"path": "ro/new", "content": "x"}, -32002, "PERMISSION_DENIED"},
		{"files/write", map[string]any{"path": "rw/escape", "content": "x"}, -32002, "PERMISSION_DENIED"},
		{"files/write", map[string]any{"path": "rw/big", "content": "123456789"}, -32007, "QUOTA_EXCEEDED"},
		{"files/write", map[string]any{"path": "rw/x", "content": "!!", "encoding": "base64"}, -32602, "INVALID_PARAMS"},
		{"files/write", map[string]any{"path": "rw/nope", "content": "x", "create": false}, -32001, "FILE_NOT_FOUND"},
		{"files/write", map[string]any{"path": "rw/d/x", "content": "x"}, -32001, "FILE_NOT_FOUND"},
		{"files/write", map[string]any{"path": "rw/more", "content": "x", "offset": 5}, -32006, "CONCURRENCY_CONFLICT"},
		{"files/list", map[string]any{"path": "ro/a.txt"}, -32004, "IO_ERROR"},
		{"files/list", map[string]any{"path": "ro", "cursor": "garbage"}, -32602, "INVALID_PARAMS"},
		{"files/create", map[string]any{"path": "ro/new", "type": "file"}, -32002, "PERMISSION_DENIED"},
		{"files/delete", map[string]any{"path": "rw"}, -32002, "PERMISSION_DENIED"},
		{"files/delete", map[string]any{"path": "rw/missing"}, -32001, "FILE_NOT_FOUND"},
		{"files/rename", map[string]any{"oldPath": "rw/escape", "newPath": "ro/escape"}, -32002, "PERMISSION_DENIED"},
		{"files/rename", map[string]any{"oldPath": "rw", "newPath": "rw/x"}, -32002, "PERMISSION_DENIED"},
	}
	for _, c := range cases {
		f.mustFail(c.method, c.params, c.rpc, c.code)
	}
	// Nothing was created or touched outside the roots or in the read-only root.
	if b, _ := os.ReadFile(filepath.Join(filepath.Dir(f.ro), "outside", "secret.txt")); string(b) != "outside\n" {
		t.Errorf("the file outside the roots changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.ro, "new")); err == nil {
		t.Error("a file was created in the read-only root")
	}
	// The session still answers.
	if r, _, _ := f.call("ping", nil); r == nil {
		t.Error("the session stopped answering")
	}
}

func TestFilesWriteCreateListRenameDelete(t *testing.T) {
	f := startFiles(t)
	res, _, _ := f.call("files/write", map[string]any{"path": "rw/notes/today.md", "content": "# hi\n", "createParents": true})
	if res["path"] != "rw/notes/today.md" || res["size"] != float64(5) || res["created"] != true || res["etag"] == "" {
		t.Fatalf("write = %v", res)
	}
	etag := res["etag"].(string)
	f.mustFail("files/write", map[string]any{"path": "rw/notes/today.md", "content": "x", "ifNoneMatch": "*"}, -32006, "CONCURRENCY_CONFLICT")
	f.mustFail("files/write", map[string]any{"path": "rw/notes/today.md", "content": "x", "ifMatch": "nope"}, -32006, "CONCURRENCY_CONFLICT")
	res, _, _ = f.call("files/write", map[string]any{"path": "rw/notes/today.md", "content": "# hello\n", "ifMatch": etag})
	if res == nil || res["created"] != false || res["etag"] == etag {
		t.Fatalf("conditional write = %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(f.rw, "notes", "today.md")); string(b) != "# hello\n" {
		t.Errorf("content = %q", b)
	}

	res, _, _ = f.call("files/create", map[string]any{"path": "rw/a/b", "type": "directory", "parents": true})
	if res["path"] != "rw/a/b" || res["type"] != "directory" || res["created"] != true {
		t.Errorf("create = %v", res)
	}
	data := f.mustFail("files/create", map[string]any{"path": "rw/a/b", "type": "file"}, -32004, "IO_ERROR")
	if data["errno"] != "EEXIST" {
		t.Errorf("create existing: errno %v", data["errno"])
	}

	res, _, _ = f.call("files/list", map[string]any{"path": "rw", "recursive": true})
	var paths []string
	for _, e := range res["entries"].([]any) {
		m := e.(map[string]any)
		paths = append(paths, m["path"].(string))
		if m["type"] == "symlink" && m["size"] == float64(len("outside\n")) {
			t.Errorf("the link's target size leaked: %v", m)
		}
	}
	if got := strings.Join(paths, ","); got != "rw/a,rw/a/b,rw/escape,rw/notes,rw/notes/today.md" {
		t.Errorf("recursive list = %s", got)
	}

	res, _, _ = f.call("files/rename", map[string]any{"oldPath": "rw/notes/today.md", "newPath": "rw/a/b/today.md"})
	if res["oldPath"] != "rw/notes/today.md" || res["newPath"] != "rw/a/b/today.md" {
		t.Errorf("rename = %v", res)
	}
	data = f.mustFail("files/delete", map[string]any{"path": "rw/a"}, -32004, "IO_ERROR")
	if data["errno"] != "ENOTEMPTY" {
		t.Errorf("delete non-empty: errno %v", data["errno"])
	}
	res, _, _ = f.call("files/delete", map[string]any{"path": "rw/a", "recursive": true})
	if res["path"] != "rw/a" || res["deleted"] != true {
		t.Errorf("delete = %v", res)
	}
	// The link is deleted, never its target outside the root.
	if res, _, _ = f.call("files/delete", map[string]any{"path": "rw/escape"}); res == nil {
		t.Error("deleting the link itself was refused")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.ro), "outside", "secret.txt")); err != nil {
		t.Errorf("the link's target outside the root was touched: %v", err)
	}
}

func TestFilesListPagination(t *testing.T) {
	f := startFiles(t)
	for i := 0; i < 25; i++ {
		if err := os.WriteFile(filepath.Join(f.rw, fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cursor := ""
	for page := 0; page < 10; page++ {
		params := map[string]any{"path": "rw", "limit": 7}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, _, _ := f.call("files/list", params)
		for _, e := range res["entries"].([]any) {
			got = append(got, e.(map[string]any)["name"].(string))
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 26 || got[0] != "escape" || got[1] != "f00" || got[25] != "f24" {
		t.Errorf("pages = %v", got)
	}
}

func TestFilesStagedWrite(t *testing.T) {
	f := startFiles(t)
	res, _, _ := f.call("files/write", map[string]any{"path": "rw/big.bin", "content": "aaa", "final": false})
	if res["size"] != float64(3) || res["etag"] != "" {
		t.Fatalf("first chunk = %v", res)
	}
	if _, err := os.Stat(filepath.Join(f.rw, "big.bin")); err == nil {
		t.Fatal("the target exists before the final chunk")
	}
	f.mustFail("files/write", map[string]any{"path": "rw/big.bin", "content": "x", "offset": 2, "final": false},
		-32006, "CONCURRENCY_CONFLICT")
	f.call("files/write", map[string]any{"path": "rw/big.bin", "content": "YmJi", "encoding": "base64", "offset": 3, "final": false})
	res, _, _ = f.call("files/write", map[string]any{"path": "rw/big.bin", "content": "c", "offset": 6})
	if res["size"] != float64(7) || res["created"] != true {
		t.Fatalf("final chunk = %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(f.rw, "big.bin")); string(b) != "aaabbbc" {
		t.Errorf("committed content = %q", b)
	}
	// No temporary file is left behind.
	if left := tempFiles(t, f.rw); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestFilesStagedWriteExpires(t *testing.T) {
	f := startFiles(t, WithLimits(corridor.Limits{StageIdle: 50 * time.Millisecond}))
	f.call("files/write", map[string]any{"path": "rw/slow.bin", "content": "aaa", "final": false})
	deadline := time.Now().Add(wait)
	for f.sess.corridor.Stats().StagedWrites != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle staged write was not discarded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.mustFail("files/write", map[string]any{"path": "rw/slow.bin", "content": "b", "offset": 3}, -32006, "CONCURRENCY_CONFLICT")
	if left := tempFiles(t, f.rw); len(left) != 0 {
		t.Errorf("the expired stage left its temporary file: %v", left)
	}
}

func TestFilesStagedWriteEndsWithTheSession(t *testing.T) {
	f := startFiles(t)
	f.call("files/write", map[string]any{"path": "rw/half.bin", "content": "aaa", "final": false})
	f.endSession() // the server goes away mid-upload
	if left := tempFiles(t, f.rw); len(left) != 0 {
		t.Errorf("the session's staged write left %v", left)
	}
	if _, err := os.Lstat(filepath.Join(f.rw, "half.bin")); err == nil {
		t.Error("the session's staged write was committed")
	}
}

func TestFilesMethodsNeedAnExecutor(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"files/read","params":{"path":"project/a"}}`)
	if code, _, _ := errorOf(t, p.reply("1")); code != -32601 {
		t.Errorf("files/read without an executor: code %d, want -32601", code)
	}
}

// TestNestedReadOnlyRootCannotBeWrittenThroughTheOuterRoot: a read-only root
// nested in a writable one keeps its setting whether a file is named through
// the outer mount or reached through a link in the outer root.
func TestNestedReadOnlyRootCannotBeWrittenThroughTheOuterRoot(t *testing.T) {
	f, outer, nested := startNestedRoots(t, "app", "vendor", "vendor")
	if err := os.WriteFile(filepath.Join(nested, "lib.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("vendor/lib.go", filepath.Join(outer, "shortcut")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"app/vendor/lib.go", "app/shortcut", filepath.Join(outer, "vendor", "lib.go")} {
		f.mustFail("files/write", map[string]any{"path": p, "content": "pwned"}, -32002, "PERMISSION_DENIED")
	}
	f.mustFail("files/delete", map[string]any{"path": "app/vendor/lib.go"}, -32002, "PERMISSION_DENIED")
	if b, _ := os.ReadFile(filepath.Join(nested, "lib.go")); string(b) != "package lib\n" {
		t.Errorf("the read-only nested root was written: %q", b)
	}
	// Reads name the file under its own root.
	if r, _, _ := f.call("files/read", map[string]any{"path": "app/shortcut"}); r == nil || r["content"] != "package lib\n" {
		t.Errorf("read through the link = %v", r)
	}
	res, _, _ := f.call("files/list", map[string]any{"path": "app/vendor"})
	if e := res["entries"].([]any); len(e) != 1 || e[0].(map[string]any)["path"] != "vendor/lib.go" {
		t.Errorf("listing the nested root through the outer mount = %v", e)
	}
}

// startWatchFiles is startFiles with a watch hub and a small watch limit.
func startWatchFiles(t *testing.T, maxWatches int) *filesFixture {
	t.Helper()
	hub, err := watch.NewHub(watch.WithCoalesce(50 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	return startFiles(t, WithWatchHub(hub, maxWatches))
}

// nextChange returns the next notifications/files/changed.
func (f *filesFixture) nextChange() changedParams {
	f.t.Helper()
	for {
		m := f.Next()
		if m.Method != "notifications/files/changed" {
			f.t.Fatalf("got %s while waiting for a change", m.Raw)
		}
		var p changedParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			f.t.Fatal(err)
		}
		return p
	}
}

func TestFilesWatchDeliversChanges(t *testing.T) {
	f := startWatchFiles(t, 0)
	res, _, _ := f.call("files/watch", map[string]any{"path": "rw", "recursive": true})
	id, _ := res["watchId"].(string)
	if id == "" {
		t.Fatalf("watch = %v", res)
	}
	file := filepath.Join(f.rw, "new.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := f.nextChange()
	if c.WatchID != id || c.Path != "rw/new.txt" || c.Event != "created" {
		t.Fatalf("change = %+v", c)
	}
	if ts, err := time.Parse(time.RFC3339Nano, c.Timestamp); err != nil || ts.Location() != time.UTC {
		t.Errorf("timestamp %q is not RFC 3339 UTC", c.Timestamp)
	}
	// A write through the broker is one "modified", never its temporary file.
	f.call("files/write", map[string]any{"path": "rw/new.txt", "content": "yy"})
	if c := f.nextChange(); c.Path != "rw/new.txt" || c.Event != "modified" {
		t.Fatalf("change after files/write = %+v", c)
	}
	if err := os.Mkdir(filepath.Join(f.rw, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.Path != "rw/sub" || c.Event != "created" {
		t.Fatalf("change = %+v", c)
	}
	if err := os.WriteFile(filepath.Join(f.rw, "sub", "deep.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.Path != "rw/sub/deep.txt" || c.Event != "created" {
		t.Fatalf("change in a new subdirectory = %+v", c)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.Path != "rw/new.txt" || c.Event != "deleted" {
		t.Fatalf("change = %+v", c)
	}
	// After unwatch, nothing more is sent: the next message is the ping's reply.
	if r, _, _ := f.call("files/unwatch", map[string]any{"watchId": id}); r == nil {
		t.Fatal("unwatch failed")
	}
	if err := os.WriteFile(filepath.Join(f.rw, "after.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a coalescing window and more: an event would be on the wire by now
	f.SendRaw(`{"jsonrpc":"2.0","id":"after-unwatch","method":"ping"}`)
	if m := f.Next(); string(m.ID) != `"after-unwatch"` {
		t.Fatalf("after unwatch the broker sent %s", m.Raw)
	}
	f.mustFail("files/unwatch", map[string]any{"watchId": id}, -32602, "INVALID_PARAMS")
}

func TestFilesWatchLimitAndErrors(t *testing.T) {
	f := startWatchFiles(t, 2)
	f.call("files/watch", map[string]any{"path": "ro"})
	f.call("files/watch", map[string]any{"path": "rw"})
	f.mustFail("files/watch", map[string]any{"path": "ro/a.txt"}, -32007, "QUOTA_EXCEEDED")
	f.mustFail("files/watch", map[string]any{"path": "rw/missing"}, -32001, "FILE_NOT_FOUND")
	f.mustFail("files/watch", map[string]any{"path": "rw/escape"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/watch", map[string]any{"path": "rw", "events": []string{"renamed"}}, -32602, "INVALID_PARAMS")
	if n := f.sess.corridor.Stats().Watches; n != 2 {
		t.Errorf("the session holds %d watches, want 2", n)
	}
	f.endInput()
	select {
	case err := <-f.ran:
		f.ran <- err
	case <-time.After(wait):
		t.Fatal("the session did not end")
	}
	if n := f.sess.corridor.Stats().Watches; n != 0 {
		t.Errorf("%d watches outlived the session", n)
	}
}

// startNestedRoots serves a writable root (mount outerMount) holding a
// read-only root at innerRel (mount innerMount), and returns the fixture and
// both directories.
func startNestedRoots(t *testing.T, outerMount, innerRel, innerMount string) (*filesFixture, string, string) {
	t.Helper()
	outer := t.TempDir()
	inner := filepath.Join(outer, filepath.FromSlash(innerRel))
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: outer, Mount: outerMount, Writable: true, Preapproved: true}, {Path: inner, Mount: innerMount, Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	f := &filesFixture{peer: startPeer(t, set, WithExecutor(x))}
	f.initialize("2025-11-25")
	return f, outer, inner
}
