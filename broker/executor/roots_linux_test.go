// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// TestRootReplacedIsRefused: a root replaced after it was resolved (the
// operator's start-up), by a link to an outside tree or by another
// directory, before the executor first used it: every operation is
// PERMISSION_DENIED naming the mount, nothing outside is read, listed or
// changed. A reload (the roots resolved again) re-pins the new directory.
func TestRootReplacedIsRefused(t *testing.T) {
	replacements := map[string]func(t *testing.T, f *fixture){
		"link out": func(t *testing.T, f *fixture) {
			if err := os.Symlink(f.outside, f.dir); err != nil {
				t.Fatal(err)
			}
		},
		"another directory": func(t *testing.T, f *fixture) {
			if err := os.Mkdir(f.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(f.dir, "secret"), []byte("NEW"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, replace := range replacements {
		t.Run(name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, f *fixture) {
				if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("OUTSIDE"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(f.dir, f.dir+".orig"); err != nil {
					t.Fatal(err)
				}
				replace(t, f)
				ctx := ctxT(t)
				wantReplaced := func(what string, err error) {
					t.Helper()
					e := wantCode(t, err, errcode.PermissionDenied, "")
					if !strings.Contains(e.Reason, "the root proj was replaced") {
						t.Fatalf("%s: reason %q does not say the root proj was replaced", what, e.Reason)
					}
					wantKnownCode(t, err, f.tmp)
				}
				for _, raw := range []string{"proj", "proj/secret", "proj/new"} {
					_, err := f.x.Resolve(ctx, f.path(t, raw), true)
					wantReplaced("Resolve "+raw, err)
				}
				_, err := f.x.RemoveStaleTemps(ctx, f.root)
				wantReplaced("RemoveStaleTemps", err)
				if b, _ := os.ReadFile(filepath.Join(f.outside, "secret")); string(b) != "OUTSIDE" {
					t.Fatalf("outside/secret is %q", b)
				}
				if names := dirEntries(t, f.outside); len(names) != 1 {
					t.Fatalf("outside holds %v", names)
				}

				// The operator reloads: the root is resolved again, and its
				// new directory is used.
				set, err := roots.New([]roots.Spec{{Path: f.dir, Mount: "proj", Writable: true}})
				if err != nil {
					t.Fatal(err)
				}
				f.set = set
				tg := f.resolve(t, "proj/secret", true)
				res, err := f.x.Read(ctx, tg, executor.ReadOptions{Length: 100})
				want := map[string]string{"link out": "OUTSIDE", "another directory": "NEW"}[name]
				if err != nil || string(res.Data) != want {
					t.Fatalf("after the reload: %q, %v", res.Data, err)
				}
			})
		})
	}
}

// TestPinnedRootKeepsItsDirectory: once the executor has opened a root, the
// root's path replaced by a link to an outside tree changes nothing: reads,
// listings and writes act in the directory opened (pinned), never outside.
func TestPinnedRootKeepsItsDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		f.writeFile(t, "f.txt", "PINNED")
		if err := os.WriteFile(filepath.Join(f.outside, "f.txt"), []byte("OUTSIDE"), 0o644); err != nil {
			t.Fatal(err)
		}
		f.resolve(t, "proj/f.txt", true) // opens (pins) the root
		if err := os.Rename(f.dir, f.dir+".orig"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(f.outside, f.dir); err != nil {
			t.Fatal(err)
		}
		if got := string(f.read(t, "proj/f.txt").Data); got != "PINNED" {
			t.Fatalf("read %q", got)
		}
		if got := listAll(t, f, "proj", executor.ListOptions{Limit: 10}); len(got) != 1 || got[0] != "proj/f.txt" {
			t.Fatalf("listed %v", got)
		}
		f.write(t, "proj/new.txt", "written")
		if _, err := os.Lstat(filepath.Join(f.dir+".orig", "new.txt")); err != nil {
			t.Fatalf("the write did not land in the pinned directory: %v", err)
		}
		if names := dirEntries(t, f.outside); len(names) != 1 {
			t.Fatalf("outside holds %v", names)
		}
	})
}

// TestNestedRootReachedThroughItsOuterRoot: the read-only nested root's
// directory moved into its writable outer root (proj/x/sub to proj/d, by
// another program): through the outer root, nothing is created, written,
// deleted or renamed in it, and it is neither renamed nor replaced itself:
// PERMISSION_DENIED, found by its identity, whatever its path now.
func TestNestedRootReachedThroughItsOuterRoot(t *testing.T) {
	forEachModeOf(t, newNestedFixture, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		f.writeFile(t, "x/sub/keep.txt", "nested")
		f.writeFile(t, "file.txt", "outer")
		f.mkdir(t, "empty")
		// Decided before the move: parents to make under d.
		deep := f.resolve(t, "proj/d/new/f", false)
		deepW := f.resolve(t, "proj/d/new/w", true)
		if err := os.Rename(f.host("x/sub"), f.host("d")); err != nil {
			t.Fatal(err)
		}
		denied := func(what string, err error) { t.Helper(); wantRootRefusal(t, what, err) }
		denied("create with parents", f.x.Create(ctx, deep, false, true))
		_, err := f.x.Write(ctx, deepW, []byte("w"), executor.WriteOptions{Create: true, CreateParents: true})
		denied("write with createParents", err)
		denied("create in it", f.x.Create(ctx, f.resolve(t, "proj/d/c", false), false, false))
		_, err = f.x.Write(ctx, f.resolve(t, "proj/d/keep.txt", true), []byte("w"), executor.WriteOptions{Create: true})
		denied("write in it", err)
		denied("delete in it", f.delete(ctx, f.resolve(t, "proj/d/keep.txt", false), false))
		denied("delete it", f.delete(ctx, f.resolve(t, "proj/d", false), true))
		ren := func(from, to string, overwrite bool) error {
			return f.x.Rename(ctx, f.resolve(t, from, false), f.resolve(t, to, false), overwrite)
		}
		denied("rename out of it", ren("proj/d/keep.txt", "proj/out.txt", false))
		denied("rename into it", ren("proj/file.txt", "proj/d/in.txt", false))
		denied("rename it", ren("proj/d", "proj/e", false))
		denied("replace it", ren("proj/empty", "proj/d", true))
		if names := dirEntries(t, f.host("d")); len(names) != 1 || names[0] != "keep.txt" || f.readHost(t, "d/keep.txt") != "nested" {
			t.Fatalf("the nested root changed: %v", names)
		}
		// The outer root itself still works.
		if err := ren("proj/file.txt", "proj/empty/file.txt", false); err != nil {
			t.Fatal(err)
		}
	})
}
