// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestNarrowedRootsConfineToTheHostSubtree: a corridor whose roots a host's
// narrowed to a subtree of a writable root (roots.Intersect, through
// NarrowRoots) serves that subtree only: reads, writes, listings and stats
// inside it go on; the root itself, a sibling, a path climbing out with
// "..", a link inside the subtree to a file of the same root outside it
// (and one outside it to a file inside: the host named neither),
// a rename out of it, and the other root are PERMISSION_DENIED, and nothing
// is written outside.
func TestNarrowedRootsConfineToTheHostSubtree(t *testing.T) {
	f := newFixture(t)
	host := hostSubtree(t, f)
	if err := os.Symlink("../other.txt", filepath.Join(f.rw, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/in.txt", filepath.Join(f.rw, "into")); err != nil {
		t.Fatal(err)
	}
	c := f.corridor(t, WithDecider(defaultDecider(t)), WithoutAuditTrail())
	c.NarrowRoots(func(op *roots.Set) *roots.Set { return roots.Intersect(op, host) })
	ctx := context.Background()

	if r, err := c.Read(ctx, f.caller, ReadRequest{Path: "rw/sub/in.txt", Length: -1}); err != nil || string(r.Data) != "in\n" {
		t.Fatalf("read inside the host's root: %q, %v", r.Data, err)
	}
	if _, err := c.Write(ctx, f.caller, WriteRequest{Path: filepath.Join(f.rw, "sub", "new.txt"), Data: []byte("x"), Create: true, Final: true}); err != nil {
		t.Fatalf("write inside the host's root: %v", err)
	}
	if l, err := c.List(ctx, f.caller, ListRequest{Path: "rw/sub", MaxDepth: -1, Limit: 100}); err != nil || len(l.Entries) != 3 {
		t.Fatalf("listing of the host's root: %+v, %v", l, err)
	}
	if st, err := c.Stat(ctx, f.caller, StatRequest{Path: "rw/sub"}); err != nil || st.Type != "directory" {
		t.Fatalf("stat of the host's root: %+v, %v", st, err)
	}

	refused := func(what string, err error) {
		t.Helper()
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.PermissionDenied || !strings.Contains(e.Reason, "host's roots") &&
			!strings.Contains(e.Reason, "outside every root") {
			t.Errorf("%s: %v, want PERMISSION_DENIED outside the host's roots", what, err)
		}
	}
	for _, raw := range []string{"rw", "rw/other.txt", f.rw, filepath.Join(f.rw, "other.txt"), "rw/sub/../other.txt",
		"rw/sub/link", "rw/into", "rw/subx", "ro/a.txt"} {
		_, err := c.Read(ctx, f.caller, ReadRequest{Path: raw, Length: -1})
		refused("read "+raw, err)
	}
	_, err := c.List(ctx, f.caller, ListRequest{Path: "rw", MaxDepth: -1, Limit: 100})
	refused("listing of the whole root", err)
	_, err = c.Stat(ctx, f.caller, StatRequest{Path: "rw/other.txt"})
	refused("stat outside", err)
	_, err = c.Write(ctx, f.caller, WriteRequest{Path: "rw/planted.txt", Data: []byte("x"), Create: true, Final: true})
	refused("write outside", err)
	_, err = c.Rename(ctx, f.caller, RenameRequest{OldPath: "rw/sub/in.txt", NewPath: "rw/moved.txt"})
	refused("rename out", err)
	for _, name := range []string{"planted.txt", "moved.txt"} {
		if _, err := os.Lstat(filepath.Join(f.rw, name)); !os.IsNotExist(err) {
			t.Errorf("%s: a refused change touched the root (%v)", name, err)
		}
	}
}
