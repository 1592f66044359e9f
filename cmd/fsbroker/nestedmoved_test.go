// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Issue 15 review: the real binary keeps a read-only root nested in a
// writable one read-only when another local process moves the nested root's
// directory to another name inside the outer root (docs/files.md, "The
// operation": a directory about to be changed that is another root's
// directory, reached through this root's path, is PERMISSION_DENIED).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rootAttempt is a request that must be refused for a root's sake.
type rootAttempt struct {
	method string
	params map[string]any
}

// refusedNamingARoot sends each attempt and fails the test unless it is
// PERMISSION_DENIED with a reason that names a root.
func refusedNamingARoot(t *testing.T, p *proc, attempts []rootAttempt) {
	t.Helper()
	for i, a := range attempts {
		r := p.Call(i+1, a.method, a.params)
		if r.Error == nil {
			t.Errorf("%s %v was done in, or with, the nested root: %s", a.method, a.params, r.Raw)
			continue
		}
		if d := dataOf(t, r); d.Code != "PERMISSION_DENIED" || !strings.Contains(d.Reason, "root") {
			t.Errorf("%s %v = %s, want PERMISSION_DENIED naming the root", a.method, a.params, r.Raw)
		}
	}
}

// TestNestedRootMovedIntoItsOuterRootStaysReadOnly: --root proj:rw --root
// proj/x/sub (read-only). A local process renames proj/x/sub to proj/d; the
// server then writes, creates, deletes and renames in proj/d, directly and
// one level down (TestNestedRootMovedIntoItsOuterRootStaysItsOwn has the
// direct write), through the outer root's mount. Every change is refused and
// the nested root's files are untouched.
func TestNestedRootMovedIntoItsOuterRootStaysReadOnly(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	proj := filepath.Join(base, "proj")
	writeTree(t, proj, map[string]string{"x/sub/keep.txt": "nested\n", "x/sub/deep/keep.txt": "deep\n", "file.txt": "outer\n"})
	p := startBroker(t, "", "stdio", "--root", proj+":rw", "--root", filepath.Join(proj, "x", "sub"),
		"--state-dir", filepath.Join(base, "state"))
	p.handshake("2025-11-25")
	// The nested root is read-only through its own mount.
	csRefused(t, p, "own", "files/write", map[string]any{"path": "sub/keep.txt", "content": "x"}, "PERMISSION_DENIED")

	// Another local process moves the nested root's directory inside the
	// outer root.
	if err := os.Rename(filepath.Join(proj, "x", "sub"), filepath.Join(proj, "d")); err != nil {
		t.Fatal(err)
	}
	refusedNamingARoot(t, p, []rootAttempt{
		{"files/write", map[string]any{"path": "proj/d/deep/keep.txt", "content": "pwned\n"}},
		{"files/create", map[string]any{"path": "proj/d/new.txt", "type": "file"}},
		{"files/create", map[string]any{"path": "proj/d/deep/new.txt", "type": "file"}},
		{"files/delete", map[string]any{"path": "proj/d/deep/keep.txt"}},
		{"files/rename", map[string]any{"oldPath": "proj/d/deep/keep.txt", "newPath": "proj/out.txt"}},
		{"files/rename", map[string]any{"oldPath": "proj/file.txt", "newPath": "proj/d/deep/in.txt"}},
		{"files/rename", map[string]any{"oldPath": "proj/d", "newPath": "proj/e"}},
	})
	for name, want := range map[string]string{"d/keep.txt": "nested\n", "d/deep/keep.txt": "deep\n"} {
		if b, err := os.ReadFile(filepath.Join(proj, filepath.FromSlash(name))); err != nil || string(b) != want {
			t.Errorf("proj/%s = %q, %v; want it untouched", name, b, err)
		}
	}
	for _, name := range []string{"d/new.txt", "d/deep/new.txt", "d/deep/in.txt", "out.txt", "e"} {
		if _, err := os.Lstat(filepath.Join(proj, filepath.FromSlash(name))); !os.IsNotExist(err) {
			t.Errorf("proj/%s exists (%v)", name, err)
		}
	}
}

// TestNestedRootMovedBelowADirectoryGoesNowhereWithIt: the read-only nested
// root's directory moved by another local process one level down into the
// writable outer root (proj/x/sub to proj/e/d): a recursive delete or a
// rename of proj/e would take the nested root with it, so both are
// refused, and its file stays.
func TestNestedRootMovedBelowADirectoryGoesNowhereWithIt(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	proj := filepath.Join(base, "proj")
	writeTree(t, proj, map[string]string{"x/sub/keep.txt": "nested\n", "e/other.txt": "other\n"})
	p := startBroker(t, "", "stdio", "--root", proj+":rw", "--root", filepath.Join(proj, "x", "sub"),
		"--state-dir", filepath.Join(base, "state"))
	p.handshake("2025-11-25")
	if err := os.Rename(filepath.Join(proj, "x", "sub"), filepath.Join(proj, "e", "d")); err != nil {
		t.Fatal(err)
	}
	refusedNamingARoot(t, p, []rootAttempt{
		{"files/delete", map[string]any{"path": "proj/e", "recursive": true}},
		{"files/rename", map[string]any{"oldPath": "proj/e", "newPath": "proj/f"}},
	})
	if b, err := os.ReadFile(filepath.Join(proj, "e", "d", "keep.txt")); err != nil || string(b) != "nested\n" {
		t.Errorf("the nested root's file is %q, %v; want it where it was", b, err)
	}
}
