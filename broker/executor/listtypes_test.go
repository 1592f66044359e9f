// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestListTypesOnlyAsStat: a TypesOnly listing returns the same entries with the same types as
// the listing that stats every entry (files, directories, a link to a directory, which is not
// descended, a link out of the root, a FIFO, hidden names, a directory large enough for a
// snapshot and one past the types kept from a reading), page by page, recursive or not, and its
// entries carry no size, time or identity.
func TestListTypesOnlyAsStat(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "t/a.txt", "abc")
	f.writeFile(t, "t/.hidden", "h")
	f.writeFile(t, "t/sub/inner.go", "package x")
	f.writeFile(t, "t/sub/.git/config", "[core]")
	f.symlink(t, "sub", "t/linkdir")
	f.symlink(t, "/etc/passwd", "t/out")
	if err := syscall.Mkfifo(f.host("t/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 300 { // a snapshot's worth
		f.writeFile(t, fmt.Sprintf("t/many/f%03d", i), "")
	}
	f.mkdir(t, "t/huge")
	for i := range 4200 { // past the types kept from one reading
		fl, err := os.Create(f.host(fmt.Sprintf("t/huge/g%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		_ = fl.Close()
	}
	f.mkdir(t, "t/huge/zdir")
	tg := f.resolve(t, "proj/t", false)
	for _, o := range []executor.ListOptions{
		{Limit: 1000},
		{Limit: 7, IncludeHidden: true},
		{Recursive: true, MaxDepth: -1, IncludeHidden: true, Limit: 1000},
		{Recursive: true, MaxDepth: 1, Limit: 333},
	} {
		stated := listPages(t, f.x, tg, o)
		typed := o
		typed.TypesOnly = true
		got := listPages(t, f.x, tg, typed)
		if len(got) != len(stated) {
			t.Fatalf("%+v: %d entries, %d with a stat of each", o, len(got), len(stated))
		}
		for i, e := range got {
			want := stated[i]
			if e.Path != want.Path || e.Name != want.Name || e.Type != want.Type {
				t.Errorf("%+v: entry %d is %s %q (%s), with a stat %s %q (%s)", o, i, e.Path.Rel, e.Name, e.Type,
					want.Path.Rel, want.Name, want.Type)
			}
			if e.Size != 0 || !e.Modified.IsZero() {
				t.Errorf("%+v: %s has a size or a time: %d %v", o, e.Path.Rel, e.Size, e.Modified)
			}
		}
	}
	for _, e := range listPages(t, f.x, tg, executor.ListOptions{Limit: 1000, IncludeHidden: true, TypesOnly: true}) {
		want := map[string]string{"a.txt": "file", ".hidden": "file", "sub": "directory", "linkdir": "symlink", "out": "symlink",
			"fifo": "other", "many": "directory", "huge": "directory"}[e.Name]
		if e.Type != want {
			t.Errorf("%s: %s, want %s", e.Name, e.Type, want)
		}
	}
}

// TestListSubtreeStatsEveryEntry: the listing of what a delete or rename carries along keeps each
// entry's identity (a recursive Delete checks it), TypesOnly or not.
func TestListSubtreeStatsEveryEntry(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "d/a", "a")
	f.writeFile(t, "d/b/c", "c")
	res, err := f.x.List(ctxT(t), f.resolve(t, "proj/d", false),
		executor.ListOptions{Recursive: true, IncludeHidden: true, MaxDepth: -1, Limit: 10, RefuseRoots: true, TypesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Entries {
		if e.Modified.IsZero() {
			t.Errorf("%s was not stat'ed", e.Path.Rel)
		}
	}
}
