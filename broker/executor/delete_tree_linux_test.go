// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/internal/swaptest"
)

// TestRecursiveDeleteUnderAGitMovedIn: another process (internal/swapper)
// keeps moving proj/.git into proj/victim and back while victim is deleted
// recursively, round after round, each delete given the listing it was
// decided on (a listing that shows a .git is refused, as the default
// policies refuse it). The .git is never destroyed, nor anything in it;
// a delete either removes the whole victim, or is CONCURRENCY_CONFLICT and
// leaves only entries it was checked on (and the .git). An executor that
// removes the tree as it is at the time (os.Root.RemoveAll) destroys the
// .git within a few rounds.
func TestRecursiveDeleteUnderAGitMovedIn(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		f.writeFile(t, ".git/HEAD", "ref: refs/heads/main\n")
		f.writeFile(t, ".git/objects/ab/cdef", "object")
		// Second names outside the root: their link counts fall when a name
		// in .git is removed, wherever the .git is at that moment.
		kept := map[string]string{"HEAD": ".git/HEAD", "cdef": ".git/objects/ab/cdef"}
		for name, rel := range kept {
			if err := os.Link(f.host(rel), filepath.Join(f.outside, name)); err != nil {
				t.Fatal(err)
			}
		}
		sw := swaptest.Start(t, "-mode", "move", "-name", f.host(".git"), "-target", f.host("victim/.git"))
		deleted, midway := 0, 0
		attack(t, f, sw, func(int) error {
			for _, rel := range []string{"victim/f.txt", "victim/a/g.txt", "victim/a/b/h.txt", "victim/.hidden"} {
				f.writeFile(t, rel, "x")
			}
			tg := f.resolve(t, "proj/victim", false)
			page, err := f.x.ListSubtree(ctxT(t), tg, maxChecked)
			if err != nil {
				return err
			}
			for _, e := range page.Entries {
				if e.Name == ".git" {
					return errcode.New(errcode.PermissionDenied, "a .git below the directory (the policy's refusal)")
				}
			}
			err = f.x.Delete(ctxT(t), tg, true, page.Entries)
			for name := range kept {
				var st syscall.Stat_t
				if serr := syscall.Lstat(filepath.Join(f.outside, name), &st); serr != nil || st.Nlink != 2 {
					t.Fatalf("a recursive delete removed .git's %s (links %d, %v; delete: %v)", name, st.Nlink, serr, err)
				}
			}
			var e *errcode.Error
			switch {
			case err == nil:
				deleted++
			case errors.As(err, &e) && e.Reason == "the directory changed while it was deleted":
				midway++
				onlyChecked(t, f, page.Entries)
			}
			return err
		})
		t.Logf("%d victims deleted whole, %d deletes stopped midway", deleted, midway)
	})
}

// onlyChecked fails unless everything left under proj/victim (but a .git in
// it, moved there by the swapper) is an entry of checked, of the same kind.
func onlyChecked(t *testing.T, f *fixture, checked []executor.Entry) {
	t.Helper()
	want := map[string]string{}
	for _, e := range checked {
		want[e.Path.Rel] = e.Type
	}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := os.ReadDir(f.host(rel))
		if os.IsNotExist(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range names {
			sub := rel + "/" + d.Name()
			if sub == "victim/.git" {
				continue
			}
			if typ, ok := want[sub]; !ok || (typ == executor.TypeDirectory) != d.IsDir() {
				t.Fatalf("%s is left after a delete stopped midway, but was not checked", sub)
			}
			if d.IsDir() {
				walk(sub)
			}
		}
	}
	walk("victim")
}
