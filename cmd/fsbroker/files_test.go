// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
		r := p.Call(id, method, params)
		if r.Error != nil {
			t.Fatalf("%s %v: error %s", method, params, r.Raw)
		}
		var res map[string]any
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	fail := func(id any, method string, params map[string]any, code string) {
		t.Helper()
		r := p.Call(id, method, params)
		if r.Error == nil || !strings.Contains(string(r.Error.Data), `"code":"`+code+`"`) {
			t.Fatalf("%s %v = %s, want %s", method, params, r.Raw, code)
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
	change := p.Await("a change event", func(m *message) bool { return m.IsNotification("notifications/files/changed") })
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

// TestReadRacingAtomicReplaces: two broker processes replace one file
// atomically over and over (each files/write is a temp file and a rename)
// while a third reads it. Every read returns one version whole, the old or
// the new (PROTOCOL.md section 5, files/read): never a torn file, never
// CONCURRENCY_CONFLICT.
func TestReadRacingAtomicReplaces(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	rw, state := filepath.Join(base, "rw"), filepath.Join(base, "state")
	if err := os.Mkdir(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 4096
	writeFile(t, filepath.Join(rw, "f.txt"), strings.Repeat("0", size))
	// No rate limit: the reader reads as fast as it can while the writers
	// write.
	args := []string{"stdio", "--root", rw + ":rw", "--state-dir", state, "--rate-limit", "0"}
	grant := func(p *proc, access string) {
		t.Helper()
		r := p.Call("consent", "files/consent", map[string]any{"message": "race", "requestedPaths": []string{"rw/f.txt"}, "access": access})
		if r.Error != nil || !strings.Contains(string(r.Result), `"granted":true`) {
			t.Fatalf("files/consent: %s", r.Raw)
		}
	}

	stop := make(chan struct{})
	var writers sync.WaitGroup
	var writes [2]atomic.Int64
	for w, fill := range []string{"A", "B"} {
		p := startBroker(t, "", args...)
		p.handshake("2025-11-25")
		grant(p, "write")
		content := strings.Repeat(fill, size)
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d", i)
				p.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "files/write",
					"params": map[string]any{"path": "rw/f.txt", "content": content}})
				r := p.TryAwait(waitLimit, func(m *message) bool { return m.IsReplyTo(`"` + id + `"`) })
				if r == nil || r.Error != nil {
					return // the reader's checks fail if too few writes happened
				}
				writes[w].Add(1)
			}
		}()
	}

	reader := startBroker(t, "", args...)
	reader.handshake("2025-11-25")
	grant(reader, "read")
	// Read until both writers made enough replaces to race with, however
	// slow the machine: at least minReads reads, and minWrites writes each.
	const minReads, minWrites = 400, 50
	deadline := time.Now().Add(waitLimit)
	var reads, conflicts, torn int
	for ; reads < minReads || writes[0].Load() < minWrites || writes[1].Load() < minWrites; reads++ {
		if time.Now().After(deadline) {
			break
		}
		r := reader.Call(reads, "files/read", map[string]any{"path": "rw/f.txt"})
		if r.Error != nil {
			conflicts++
			if conflicts == 1 {
				t.Errorf("read %d: %s", reads, r.Raw)
			}
			continue
		}
		var res struct {
			Content string `json:"content"`
			Size    int    `json:"size"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Content) != size || res.Size != size || strings.Trim(res.Content, res.Content[:1]) != "" {
			torn++
		}
	}
	close(stop)
	writers.Wait()
	w0, w1 := writes[0].Load(), writes[1].Load()
	t.Logf("%d reads against %d + %d atomic replaces: %d refused, %d torn", reads, w0, w1, conflicts, torn)
	if conflicts > 0 || torn > 0 {
		t.Fatalf("%d of %d reads refused and %d torn; want every read whole", conflicts, reads, torn)
	}
	if w0 < minWrites || w1 < minWrites {
		t.Fatalf("only %d and %d writes happened within %s: the race was not run", w0, w1, waitLimit)
	}
}

// TestNestedRootMovedIntoItsOuterRootStaysItsOwn: the broker gives the
// executor the operator's roots, so a read-only nested root's directory that
// another program moved within the writable outer root (app/x/sub to app/d)
// is still that root's, found by its identity: nothing is written in it or
// made under it through the outer root.
func TestNestedRootMovedIntoItsOuterRootStaysItsOwn(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	app := filepath.Join(base, "app")
	if err := os.MkdirAll(filepath.Join(app, "x", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(app, "x", "sub", "keep.txt"), "nested")
	p := startBroker(t, "", "stdio", "--root", app+":rw", "--root", filepath.Join(app, "x", "sub"),
		"--state-dir", filepath.Join(base, "state"))
	p.handshake("2025-11-25")
	if err := os.Rename(filepath.Join(app, "x", "sub"), filepath.Join(app, "d")); err != nil {
		t.Fatal(err)
	}
	for i, params := range []map[string]any{
		{"path": "app/d/keep.txt", "content": "changed"},
		{"path": "app/d/new/f.txt", "content": "new", "createParents": true},
	} {
		r := p.Call(i+1, "files/write", params)
		if r.Error == nil || dataOf(t, r).Code != "PERMISSION_DENIED" || !strings.Contains(dataOf(t, r).Reason, "root") {
			t.Errorf("files/write %v = %s, want PERMISSION_DENIED naming the nested root", params, r.Raw)
		}
	}
	if b, err := os.ReadFile(filepath.Join(app, "d", "keep.txt")); err != nil || string(b) != "nested" {
		t.Errorf("the nested root's file is %q (%v), want it unchanged", b, err)
	}
	if _, err := os.Lstat(filepath.Join(app, "d", "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory was made in the nested root through its outer root (%v)", err)
	}
}
