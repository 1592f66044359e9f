// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/internal/swaptest"
)

// The attacks here need a second local process that swaps entries inside a
// root while the executor works (internal/swapper, started through
// internal/swaptest); each loops long enough
// to win the race against an executor that acts by path after its checks
// (verified against the code before issue 15), and is bounded in time.

// attackRounds and attackBudget bound each attack loop: whichever ends first.
const (
	attackRounds = 3000
	attackBudget = 4 * time.Second
)

// attack runs round(i) until it has run attackRounds times or attackBudget
// has passed, then stops sw. Each round makes one request under the swaps
// and checks that nothing escaped; it returns the request's error: nil when
// the operation was done, errDecidedElsewhere when the path resolved
// elsewhere than asked, else a brokered error (a refusal). The test fails if
// no round's operation was done: then it tested nothing.
func attack(t *testing.T, f *fixture, sw *swaptest.Swapper, round func(i int) error) {
	t.Helper()
	end := time.Now().Add(attackBudget)
	rounds, done, refused := 0, 0, 0
	for ; rounds < attackRounds && time.Now().Before(end); rounds++ {
		switch err := round(rounds); {
		case err == nil:
			done++
		case errors.Is(err, errDecidedElsewhere):
			refused++
		default:
			wantKnownCode(t, err, f.tmp)
			refused++
		}
	}
	swaps := sw.Stop()
	if done == 0 {
		t.Fatalf("no operation was done in %d rounds: the test tested nothing", rounds)
	}
	t.Logf("%d rounds: %d done, %d refused; %d swaps", rounds, done, refused, swaps)
}

// errDecidedElsewhere: the path resolved elsewhere than asked (a link was in
// place at resolution): a request the policy would decide on as that other
// path, so not a round of the attack.
var errDecidedElsewhere = errors.New("the path resolved elsewhere")

// TestRenameUnderParentSwaps: a rename whose source's (or target's)
// directory another process keeps swapping for a link to .ssh: the file
// renamed is always the one in the directory decided on, and nothing is
// ever moved out of .ssh or into it. The executor renames with renameat(2)
// from the two directory handles it checked, by final names only; a rename
// by path from the root would follow the link swapped in after the check.
func TestRenameUnderParentSwaps(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		t.Run("source", func(t *testing.T) { renameSourceAttack(t, f) })
		t.Run("target", func(t *testing.T) { renameTargetAttack(t, f) })
	})
}

func renameSourceAttack(t *testing.T, f *fixture) {
	f.writeFile(t, ".ssh/s", "SECRET")
	f.mkdir(t, "pub")
	f.mkdir(t, "d")
	// The real d, whatever name the swapper has given it, to put a new
	// source in before each round.
	d := openRootT(t, f.host("d"))
	sw := swaptest.Start(t, "-mode", "exchange", "-name", f.host("d"), "-target", ".ssh")
	attack(t, f, sw, func(i int) error {
		if err := d.WriteFile("s", []byte("public"), 0o644); err != nil {
			t.Fatal(err)
		}
		from, err := f.x.Resolve(ctxT(t), f.path(t, "proj/d/s"), false)
		if err == nil && from.Path.Rel != "d/s" {
			err = errDecidedElsewhere
		}
		if err == nil {
			err = f.x.Rename(ctxT(t), from, f.resolve(t, "proj/pub/s", false), false)
		}
		if b, rerr := os.ReadFile(f.host("pub/s")); rerr == nil && string(b) != "public" {
			t.Fatalf("round %d: the rename moved %q out of .ssh", i, b)
		}
		if b, rerr := os.ReadFile(f.host(".ssh/s")); rerr != nil || string(b) != "SECRET" {
			t.Fatalf("round %d: .ssh/s is %q, %v", i, b, rerr)
		}
		if rerr := os.Remove(f.host("pub/s")); rerr != nil && !os.IsNotExist(rerr) {
			t.Fatal(rerr)
		}
		return err
	})
}

func renameTargetAttack(t *testing.T, f *fixture) {
	f.mkdir(t, ".ssh")
	f.mkdir(t, "src")
	f.mkdir(t, "t")
	// The real t, whatever name the swapper has given it, to take the
	// renamed file out of after each round.
	dir := openRootT(t, f.host("t"))
	sw := swaptest.Start(t, "-mode", "exchange", "-name", f.host("t"), "-target", ".ssh")
	attack(t, f, sw, func(i int) error {
		f.writeFile(t, "src/k", "planted")
		to, err := f.x.Resolve(ctxT(t), f.path(t, "proj/t/k"), false)
		if err == nil && to.Path.Rel != "t/k" {
			err = errDecidedElsewhere
		}
		if err == nil {
			err = f.x.Rename(ctxT(t), f.resolve(t, "proj/src/k", false), to, i%2 == 0)
		}
		if _, lerr := os.Lstat(f.host(".ssh/k")); lerr == nil {
			t.Fatalf("round %d: the rename planted .ssh/k", i)
		}
		if rerr := dir.Remove("k"); rerr != nil && !os.IsNotExist(rerr) {
			t.Fatal(rerr)
		}
		return err
	})
}

// openRootT opens dir as an os.Root, closed at the end of the test.
func openRootT(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestCreateParentsUnderSwaps: files/create with parents, and files/write
// with createParents, of proj/d/nI/f while another process keeps putting a
// link to the read-only nested root (proj/d -> x/sub) where proj/d is
// missing: nothing is ever created inside the nested root. Each level is
// made relative to the handle of the level above and opened without
// following a link; creating the chain by path first would follow the link.
func TestCreateParentsUnderSwaps(t *testing.T) {
	// Both resolve the path as the broker would and go on only when it
	// resolved as asked, with its parent missing: the request decided on.
	ops := map[string]func(t *testing.T, f *fixture, tg executor.Target) error{
		"create": func(t *testing.T, f *fixture, tg executor.Target) error {
			return f.x.Create(ctxT(t), tg, false, true)
		},
		"write": func(t *testing.T, f *fixture, tg executor.Target) error {
			_, err := f.x.Write(ctxT(t), tg, []byte("w"), executor.WriteOptions{Create: true, CreateParents: true})
			return err
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			forEachModeOf(t, newNestedFixture, func(t *testing.T, f *fixture) {
				junk := filepath.Join(f.tmp, "junk-"+name)
				if err := os.Mkdir(junk, 0o755); err != nil {
					t.Fatal(err)
				}
				sw := swaptest.Start(t, "-mode", "missing", "-name", f.host("d"), "-target", "x/sub", "-junk", junk, "-keep", "5ms")
				attack(t, f, sw, func(i int) error {
					rel := fmt.Sprintf("d/n%d/f", i)
					tg, err := f.x.Resolve(ctxT(t), f.path(t, "proj/"+rel), name == "write")
					switch {
					case err != nil:
					case tg.Path.Rel != rel || tg.ParentExists:
						err = errDecidedElsewhere
					default:
						err = op(t, f, tg)
					}
					if names := dirEntries(t, f.host("x/sub")); len(names) > 0 {
						t.Fatalf("round %d: created inside the read-only nested root: %v", i, names)
					}
					return err
				})
				noTemps(t, f.dir)
			})
		})
	}
}

// TestCreateParentsRefusesALinkedLevel: a level of the parents to make
// replaced, after the decision, by a link (to the nested root, or to a
// directory of the same root): files/write with createParents is
// PERMISSION_DENIED and nothing is made through the link; files/create (which
// resolves again under its lock) is CONCURRENCY_CONFLICT.
func TestCreateParentsRefusesALinkedLevel(t *testing.T) {
	forEachModeOf(t, newNestedFixture, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		f.mkdir(t, "plain")
		for _, target := range []string{"x/sub", "plain"} {
			w := f.resolve(t, "proj/d/new/w", true)
			c := f.resolve(t, "proj/d/new/c", false)
			f.symlink(t, target, "d")
			_, err := f.x.Write(ctx, w, []byte("w"), executor.WriteOptions{Create: true, CreateParents: true})
			wantCode(t, err, errcode.PermissionDenied, "")
			wantCode(t, f.x.Create(ctx, c, false, true), errcode.ConcurrencyConflict, "")
			if names := dirEntries(t, f.host(target)); len(names) != 0 {
				t.Fatalf("made through the link to %s: %v", target, names)
			}
			if err := os.Remove(f.host("d")); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCreateParents: parents are made below existing directories and
// links resolved before the decision, for files and directories, by create
// and by write; a file on the way is IO_ERROR ENOTDIR.
func TestCreateParents(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		f.mkdir(t, "a/b")
		f.symlink(t, "a/b", "ln")
		f.writeFile(t, "file", "x")
		if err := f.x.Create(ctx, f.resolve(t, "proj/a/b/c/d/e", false), true, true); err != nil {
			t.Fatal(err)
		}
		if err := f.x.Create(ctx, f.resolve(t, "proj/ln/m/n", false), false, true); err != nil {
			t.Fatal(err)
		}
		res, err := f.x.Write(ctx, f.resolve(t, "proj/a/p/q/w.txt", true), []byte("w"), executor.WriteOptions{Create: true, CreateParents: true})
		if err != nil || res.Path.Rel != "a/p/q/w.txt" || !res.Created {
			t.Fatalf("write: %+v, %v", res, err)
		}
		for rel, dir := range map[string]bool{"a/b/c/d/e": true, "a/b/m/n": false, "a/p/q/w.txt": false} {
			if fi, err := os.Lstat(f.host(rel)); err != nil || fi.IsDir() != dir {
				t.Fatalf("%s: %v, %v", rel, fi, err)
			}
		}
		below := f.resolve(t, "proj/file/x/y", false)
		wantCode(t, f.x.Create(ctx, below, false, true), errcode.IOError, "ENOTDIR")
		_, err = f.x.Write(ctx, f.resolve(t, "proj/file/x/y", true), []byte("w"), executor.WriteOptions{Create: true, CreateParents: true})
		wantCode(t, err, errcode.IOError, "ENOTDIR")
		if f.readHost(t, "file") != "x" {
			t.Fatal("the file on the way changed")
		}
	})
}

// TestRenameChecksWhatWasDecided: a rename acts on the directories decided
// on: the target's directory replaced by another directory after the
// decision (same path) is CONCURRENCY_CONFLICT, as is a source replaced by
// another file; a target made by another program after the decision is
// EEXIST without overwrite and untouched.
func TestRenameChecksWhatWasDecided(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		f.writeFile(t, "s.txt", "source")
		f.mkdir(t, "t")
		from := f.resolve(t, "proj/s.txt", false)
		to := f.resolve(t, "proj/t/s.txt", false)
		if err := os.Rename(f.host("t"), f.host("t.old")); err != nil {
			t.Fatal(err)
		}
		f.mkdir(t, "t")
		wantCode(t, f.x.Rename(ctx, from, to, false), errcode.ConcurrencyConflict, "")

		to = f.resolve(t, "proj/t/s.txt", false)
		if err := os.Rename(f.host("s.txt"), f.host("s.old")); err != nil {
			t.Fatal(err)
		}
		f.writeFile(t, "s.txt", "another")
		wantCode(t, f.x.Rename(ctx, from, to, false), errcode.ConcurrencyConflict, "")

		from = f.resolve(t, "proj/s.txt", false)
		f.writeFile(t, "t/s.txt", "theirs")
		wantCode(t, f.x.Rename(ctx, from, to, false), errcode.IOError, "EEXIST")
		if f.readHost(t, "t/s.txt") != "theirs" || f.readHost(t, "s.txt") != "another" {
			t.Fatal("a refused rename changed something")
		}
		if err := f.x.Rename(ctx, from, f.resolve(t, "proj/t/s.txt", false), true); err != nil {
			t.Fatal(err)
		}
		if f.readHost(t, "t/s.txt") != "another" {
			t.Fatal("overwrite")
		}
		// A directory over an empty directory, with overwrite.
		f.writeFile(t, "dir/in.txt", "in")
		f.mkdir(t, "emptydir")
		wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/dir", false), f.resolve(t, "proj/emptydir", false), false), errcode.IOError, "EEXIST")
		if err := f.x.Rename(ctx, f.resolve(t, "proj/dir", false), f.resolve(t, "proj/emptydir", false), true); err != nil {
			t.Fatal(err)
		}
		if f.readHost(t, "emptydir/in.txt") != "in" {
			t.Fatal("directory over an empty directory")
		}
	})
}
