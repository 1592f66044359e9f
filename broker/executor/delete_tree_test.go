// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// A recursive delete removes the entries it was decided on (the listing
// given to Delete), and nothing else; on Windows it removes the tree as it
// is, so these tests are for the systems that remove by name through
// directory handles.

// checkedTree makes the tree the tests delete, with a .git beside it (which
// a policy protects: it must never be removed with the tree):
//
//	proj/tree/{x, .h, a/y, a/b/f, a/l -> ../x}
//	proj/.git/HEAD
func checkedTree(t *testing.T, f *fixture) {
	t.Helper()
	for rel, content := range map[string]string{"tree/x": "x", "tree/.h": "h", "tree/a/y": "y", "tree/a/b/f": "f", ".git/HEAD": "ref"} {
		f.writeFile(t, rel, content)
	}
	f.symlink(t, "../x", "tree/a/l")
}

// TestRecursiveDeleteRefusesATreeThatChanged: a tree changed between the
// listing a recursive delete was decided on and the delete (an entry added
// at any depth, hidden or not; one removed; one replaced by another object
// under its name, a directory by another with the same names; a .git or
// another root's directory moved in; a broker's temporary file, which no
// listing shows): CONCURRENCY_CONFLICT, and nothing at all is removed.
func TestRecursiveDeleteRefusesATreeThatChanged(t *testing.T) {
	rename := func(t *testing.T, from, to string) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	changes := map[string]func(t *testing.T, f *fixture){
		"file added deep":   func(t *testing.T, f *fixture) { f.writeFile(t, "tree/a/b/new", "n") },
		"hidden file added": func(t *testing.T, f *fixture) { f.writeFile(t, "tree/.new", "n") },
		"directory added":   func(t *testing.T, f *fixture) { f.mkdir(t, "tree/a/b/c") },
		"git moved in":      func(t *testing.T, f *fixture) { rename(t, f.host(".git"), f.host("tree/a/b/.git")) },
		"root moved in":     func(t *testing.T, f *fixture) { rename(t, f.host("x/sub"), f.host("tree/a/sub")) },
		"temporary file":    func(t *testing.T, f *fixture) { f.writeFile(t, "tree/a/"+executor.TempPrefix+"1-2", "t") },
		"file removed": func(t *testing.T, f *fixture) {
			if err := os.Remove(f.host("tree/a/b/f")); err != nil {
				t.Fatal(err)
			}
		},
		"file replaced": func(t *testing.T, f *fixture) {
			f.writeFile(t, "tree/a/b/f.new", "other")
			rename(t, f.host("tree/a/b/f.new"), f.host("tree/a/b/f"))
		},
		"file replaced by a link": func(t *testing.T, f *fixture) {
			rename(t, f.host("tree/x"), f.host("x.old"))
			f.symlink(t, "../.git/HEAD", "tree/x")
		},
		"link replaced": func(t *testing.T, f *fixture) {
			rename(t, f.host("tree/a/l"), f.host("l.old"))
			f.symlink(t, "../x", "tree/a/l")
		},
		"directory replaced": func(t *testing.T, f *fixture) {
			f.writeFile(t, "a2/y", "y")
			f.writeFile(t, "a2/b/f", "f")
			f.symlink(t, "../x", "a2/l")
			rename(t, f.host("tree/a"), f.host("a.old"))
			rename(t, f.host("a2"), f.host("tree/a"))
		},
		"directory replaced by a link": func(t *testing.T, f *fixture) {
			rename(t, f.host("tree/a"), f.host("a.old"))
			f.symlink(t, "../a.old", "tree/a")
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			f := newNestedFixture(t)
			checkedTree(t, f)
			tg := f.resolve(t, "proj/tree", false)
			page, err := f.x.ListSubtree(ctxT(t), tg, maxChecked)
			if err != nil || page.NextCursor != "" || len(page.Entries) != 7 {
				t.Fatalf("ListSubtree = %d entries, %q, %v", len(page.Entries), page.NextCursor, err)
			}
			change(t, f)
			before := hostTree(t, f.dir)
			e := wantCode(t, f.x.Delete(ctxT(t), tg, true, page.Entries), errcode.ConcurrencyConflict, "")
			if e.Reason != "the directory changed while the request was decided" {
				t.Errorf("reason %q", e.Reason)
			}
			sameTree(t, before, hostTree(t, f.dir))
		})
	}
}

// TestRecursiveDeleteRefusesAListingOfAnotherTree: entries that are not the
// directory's listing (another directory's, a listing missing a directory
// its entries are in, entries made up without an identity) are
// CONCURRENCY_CONFLICT, and nothing is removed.
func TestRecursiveDeleteRefusesAListingOfAnotherTree(t *testing.T) {
	f := newFixture(t)
	checkedTree(t, f)
	f.writeFile(t, "twin/x", "x")
	ctx := ctxT(t)
	tg := f.resolve(t, "proj/tree", false)
	page, err := f.x.ListSubtree(ctx, tg, maxChecked)
	if err != nil {
		t.Fatal(err)
	}
	twin, err := f.x.ListSubtree(ctx, f.resolve(t, "proj/twin", false), maxChecked)
	if err != nil {
		t.Fatal(err)
	}
	var noDirs, madeUp []executor.Entry
	for _, e := range page.Entries {
		if e.Type != executor.TypeDirectory {
			noDirs = append(noDirs, e)
		}
		madeUp = append(madeUp, executor.Entry{Path: e.Path, Name: e.Name, Type: e.Type})
	}
	before := hostTree(t, f.dir)
	for name, checked := range map[string][]executor.Entry{"another directory's": twin.Entries,
		"without its directories": noDirs, "made up": madeUp, "none": nil} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, f.x.Delete(ctx, tg, true, checked), errcode.ConcurrencyConflict, "")
			sameTree(t, before, hostTree(t, f.dir))
		})
	}
	if err := f.x.Delete(ctx, tg, true, page.Entries); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.host("tree")); !os.IsNotExist(err) {
		t.Fatal("the tree survived its delete")
	}
}

// TestRecursiveDeleteOfDeepAndWideTrees: a tree deeper than the directories
// a walk keeps open (each closed and opened again below that depth), one
// directory with more entries than a batch, hidden entries, and links to
// the root, to a directory inside and out of the root: all of it is
// removed, and nothing a link points at.
func TestRecursiveDeleteOfDeepAndWideTrees(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "keep/k", "keep")
	if err := os.WriteFile(filepath.Join(f.outside, "o"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := "tree"
	for i := range 80 {
		deep += "/d" + itoa(i)
		f.writeFile(t, deep+"/f", "f")
		f.writeFile(t, deep+"/.h", "h")
	}
	f.symlink(t, "../../../../keep", "tree/d0/d1/d2/in")
	f.symlink(t, f.outside, deep+"/out")
	f.symlink(t, "..", "tree/d0/up")
	for i := range 600 {
		f.writeFile(t, "tree/wide/n"+itoa(i), "w")
	}
	if err := f.delete(ctxT(t), f.resolve(t, "proj/tree", false), true); err != nil {
		t.Fatal(err)
	}
	if names := dirEntries(t, f.dir); strings.Join(names, ",") != "keep" {
		t.Fatalf("left in the root: %v", names)
	}
	if f.readHost(t, "keep/k") != "keep" {
		t.Fatal("a directory a link points at was touched")
	}
	if b, err := os.ReadFile(filepath.Join(f.outside, "o")); err != nil || string(b) != "outside" {
		t.Fatalf("the outside was touched: %q %v", b, err)
	}
}

// TestRecursiveDeleteOfATreeHoldingAnotherRoot: a root's directory moved
// into the tree before the listing: the listing refuses it
// (PERMISSION_DENIED naming the root), and nothing is removed.
func TestRecursiveDeleteOfATreeHoldingAnotherRoot(t *testing.T) {
	f := newNestedFixture(t)
	checkedTree(t, f)
	f.writeFile(t, "x/sub/keep.txt", "nested")
	if err := os.Rename(f.host("x/sub"), f.host("tree/a/b/sub")); err != nil {
		t.Fatal(err)
	}
	before := hostTree(t, f.dir)
	err := f.delete(ctxT(t), f.resolve(t, "proj/tree", false), true)
	if e := wantCode(t, err, errcode.PermissionDenied, ""); !strings.Contains(e.Reason, "root sub") {
		t.Fatalf("reason %q", e.Reason)
	}
	sameTree(t, before, hostTree(t, f.dir))
}
