// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"os"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// wantRootRefusal fails the test unless err is PERMISSION_DENIED with a
// reason that names a root.
func wantRootRefusal(t *testing.T, what string, err error) {
	t.Helper()
	if e := wantCode(t, err, errcode.PermissionDenied, ""); !strings.Contains(e.Reason, "root") {
		t.Fatalf("%s: reason %q", what, e.Reason)
	}
}

// TestNestedRootMovedDeepIsNotChanged: a read-only root nested in a writable
// one, its directory moved by another program into the outer root
// (proj/x/sub to proj/d): nothing below it is created, written, deleted or
// renamed through the outer root, at any depth, not only directly in its
// directory (PERMISSION_DENIED naming the root).
func TestNestedRootMovedDeepIsNotChanged(t *testing.T) {
	forEachModeOf(t, newNestedFixture, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		f.writeFile(t, "x/sub/a/b/keep.txt", "nested")
		f.writeFile(t, "file.txt", "outer")
		if err := os.Rename(f.host("x/sub"), f.host("d")); err != nil {
			t.Fatal(err)
		}
		denied := func(what string, err error) { t.Helper(); wantRootRefusal(t, what, err) }
		for _, dir := range []string{"proj/d/a", "proj/d/a/b"} {
			denied("create in "+dir, f.x.Create(ctx, f.resolve(t, dir+"/c", false), false, false))
			_, err := f.x.Write(ctx, f.resolve(t, dir+"/w", true), []byte("w"), executor.WriteOptions{Create: true})
			denied("write in "+dir, err)
			denied("rename into "+dir, f.x.Rename(ctx, f.resolve(t, "proj/file.txt", false), f.resolve(t, dir+"/in.txt", false), false))
		}
		_, err := f.x.Write(ctx, f.resolve(t, "proj/d/a/b/keep.txt", true), []byte("w"), executor.WriteOptions{Create: true})
		denied("write over a file", err)
		denied("delete a file", f.delete(ctx, f.resolve(t, "proj/d/a/b/keep.txt", false), false))
		denied("delete a directory", f.delete(ctx, f.resolve(t, "proj/d/a/b", false), true))
		denied("rename out", f.x.Rename(ctx, f.resolve(t, "proj/d/a/b/keep.txt", false), f.resolve(t, "proj/out.txt", false), false))
		if got := f.readHost(t, "d/a/b/keep.txt"); got != "nested" {
			t.Fatalf("the nested root's file = %q", got)
		}
		if names := dirEntries(t, f.host("d/a/b")); len(names) != 1 {
			t.Fatalf("the nested root changed: %v", names)
		}
		// The outer root's own directories still work.
		f.mkdir(t, "plain/deeper")
		if err := f.x.Rename(ctx, f.resolve(t, "proj/file.txt", false), f.resolve(t, "proj/plain/deeper/file.txt", false), false); err != nil {
			t.Fatal(err)
		}
	})
}
