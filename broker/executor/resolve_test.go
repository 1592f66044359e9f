// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// Each test here attacks one rule of docs/protocol.md section 3 through Resolve
// and then through the operation itself, on real files.

// TestLinksOutOfTheRootAreDenied: a link that leaves the root, whatever its
// spelling, is PERMISSION_DENIED for every operation, and the outside is
// never read or changed. An absolute link is refused even when it names a
// file inside the root.
func TestLinksOutOfTheRootAreDenied(t *testing.T) {
	f := newFixture(t)
	secret := filepath.Join(f.outside, "secret")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, "inside.txt", "inside")
	f.symlink(t, secret, "filelink")                         // absolute, to an outside file
	f.symlink(t, f.outside, "dirlink")                       // absolute, to an outside directory
	f.symlink(t, "../../outside/secret", "sub/rel")          // relative, climbs out
	f.symlink(t, "../outside", "reldir")                     // relative, to the outside directory
	f.symlink(t, f.host("inside.txt"), "absin")              // absolute, to a file inside the root
	f.symlink(t, filepath.Join(f.dir, "sub"), "absindir")    // absolute, to a directory inside
	f.symlink(t, "../proj/inside.txt", "viaparent")          // leaves the root lexically, comes back
	f.symlink(t, "../other", "sibling")                      // into a sibling root
	f.symlink(t, "dirlink/secret", "chain")                  // a chain whose second hop leaves
	f.symlink(t, "sub/../../outside/secret", "dotdotinlink") // ".." inside the link text

	for _, raw := range []string{
		"proj/filelink", "proj/dirlink", "proj/dirlink/secret", "proj/dirlink/new",
		"proj/sub/rel", "proj/reldir/secret", "proj/reldir/new", "proj/absin", "proj/absindir",
		"proj/absindir/x", "proj/viaparent", "proj/sibling", "proj/sibling/x", "proj/chain",
		"proj/dotdotinlink",
	} {
		t.Run(raw, func(t *testing.T) {
			_, err := f.x.Resolve(context.Background(), f.path(t, raw), true)
			wantCode(t, err, errcode.PermissionDenied, "")
			wantKnownCode(t, err, f.tmp)
		})
	}

	// The link itself (follow false) resolves, but no operation acts through
	// it: read and write refuse a link, create finds it exists.
	for _, raw := range []string{"proj/filelink", "proj/dirlink", "proj/sub/rel", "proj/absin"} {
		t.Run(raw+"/nofollow", func(t *testing.T) {
			tg := f.resolve(t, raw, false)
			if !tg.Exists || tg.Info.Type != executor.TypeSymlink {
				t.Fatalf("Resolve(%q, false) = %+v, want the link itself", raw, tg)
			}
			_, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
			e := wantCode(t, err, errcode.PermissionDenied, "")
			if e.Reason != "not a regular file" {
				t.Errorf("reason %q", e.Reason)
			}
			_, err = f.x.Write(ctxT(t), tg, []byte("pwned"), executor.WriteOptions{Create: true})
			wantCode(t, err, errcode.PermissionDenied, "")
			err = f.x.Create(ctxT(t), tg, false, false)
			wantCode(t, err, errcode.IOError, "EEXIST")
			_, err = f.x.List(ctxT(t), tg, executor.ListOptions{Limit: 10})
			wantCode(t, err, errcode.IOError, "ENOTDIR")
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside" {
		t.Fatalf("the outside file changed: %q", b)
	}
	if names := dirEntries(t, f.outside); len(names) != 1 {
		t.Fatalf("the outside directory changed: %v", names)
	}
	noTemps(t, f.tmp)
}

// TestDanglingLinkOutsideNeverCreatesOutside: writing through a dangling link
// to the outside is PERMISSION_DENIED and creates nothing outside, whatever
// the options and whichever way the link was resolved.
func TestDanglingLinkOutsideNeverCreatesOutside(t *testing.T) {
	f := newFixture(t)
	f.symlink(t, filepath.Join(f.outside, "created"), "abs")
	f.symlink(t, "../outside/created2", "rel")
	f.symlink(t, filepath.Join(f.outside, "newdir", "created3"), "deep")
	for _, raw := range []string{"proj/abs", "proj/rel", "proj/deep"} {
		t.Run(raw, func(t *testing.T) {
			for _, o := range []executor.WriteOptions{{Create: true}, {Create: true, CreateParents: true}} {
				_, err := f.x.Resolve(context.Background(), f.path(t, raw), true)
				wantCode(t, err, errcode.PermissionDenied, "")
				tg := f.resolve(t, raw, false)
				_, err = f.x.Write(ctxT(t), tg, []byte("escaped"), o)
				wantCode(t, err, errcode.PermissionDenied, "")
				st, err := f.x.StartStage(ctxT(t), tg, o)
				if err == nil {
					st.Abort()
					t.Fatal("StartStage through a dangling link to the outside succeeded")
				}
				err = f.x.Create(ctxT(t), tg, false, true)
				wantCode(t, err, errcode.IOError, "EEXIST")
				err = f.x.Create(ctxT(t), tg, true, true)
				wantCode(t, err, errcode.IOError, "EEXIST")
			}
		})
	}
	if names := dirEntries(t, f.outside); len(names) != 0 {
		t.Fatalf("files were created outside the root: %v", names)
	}
	noTemps(t, f.tmp)
}

// TestDanglingLinkInsideWriteCreatesTarget: a dangling link to a place inside
// the root resolves to that place, and a write creates the file there; the
// link stays a link.
func TestDanglingLinkInsideWriteCreatesTarget(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "dir")
	f.symlink(t, "dir/new.txt", "link")
	f.symlink(t, "../deeper/made.txt", "dir/link2") // the parent is missing too
	tg := f.resolve(t, "proj/link", true)
	if tg.Exists || tg.Path.Rel != "dir/new.txt" || !tg.ParentExists {
		t.Fatalf("Resolve = %+v, want the missing canonical target dir/new.txt", tg)
	}
	res, err := f.x.Write(ctxT(t), tg, []byte("hello"), executor.WriteOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Path.Rel != "dir/new.txt" || res.Size != 5 {
		t.Fatalf("Write = %+v", res)
	}
	if got := f.readHost(t, "dir/new.txt"); got != "hello" {
		t.Fatalf("target holds %q", got)
	}
	if fi, err := os.Lstat(f.host("link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}

	tg = f.resolve(t, "proj/dir/link2", true)
	if tg.Exists || tg.ParentExists || tg.Path.Rel != "deeper/made.txt" {
		t.Fatalf("Resolve = %+v, want deeper/made.txt with a missing parent", tg)
	}
	_, err = f.x.Write(ctxT(t), tg, []byte("x"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.FileNotFound, "")
	if _, err := f.x.Write(ctxT(t), tg, []byte("x"), executor.WriteOptions{Create: true, CreateParents: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.readHost(t, "deeper/made.txt"); got != "x" {
		t.Fatalf("target holds %q", got)
	}
	noTemps(t, f.dir)
}

// TestLinkChainInsideResolvesToFinalTarget: links to links to links, through
// linked directories and "..", resolve to the canonical path of the file,
// and operations act on that file.
func TestLinkChainInsideResolvesToFinalTarget(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "a/b/real.txt", "real")
	f.symlink(t, "l2", "l1")
	f.symlink(t, "c/l3", "l2")
	f.symlink(t, "../a/bl/real.txt", "c/l3") // through a linked directory
	f.symlink(t, "b", "a/bl")
	f.symlink(t, "./a/../a/b", "dirlink")
	cases := map[string]string{
		"proj/l1":                 "a/b/real.txt",
		"proj/l2":                 "a/b/real.txt",
		"proj/c/l3":               "a/b/real.txt",
		"proj/dirlink/real.txt":   "a/b/real.txt",
		"proj/a/bl/real.txt":      "a/b/real.txt",
		"proj/dirlink":            "a/b",
		"proj/dirlink/../x":       "x", // ".." in the request is lexical (canon), before any link
		"proj/dirlink/missing/xx": "a/b/missing/xx",
	}
	for raw, want := range cases {
		tg := f.resolve(t, raw, true)
		if tg.Path.Rel != want || tg.Path.Root != f.root {
			t.Errorf("Resolve(%q) = %q, want %q", raw, tg.Path.Rel, want)
		}
	}
	res := f.read(t, "proj/l1")
	if string(res.Data) != "real" {
		t.Fatalf("read through the chain = %q", res.Data)
	}
	wr := f.write(t, "proj/l1", "new")
	if wr.Path.Rel != "a/b/real.txt" || wr.Created {
		t.Fatalf("Write = %+v", wr)
	}
	if got := f.readHost(t, "a/b/real.txt"); got != "new" {
		t.Fatalf("target holds %q", got)
	}
	for _, l := range []string{"l1", "l2", "c/l3", "a/bl"} {
		if fi, err := os.Lstat(f.host(l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a link", l)
		}
	}
}

// TestLinkLoopIsELOOP: loops of one, two and many links, and a chain over
// the hop limit, are IO_ERROR ELOOP, for every operation.
func TestLinkLoopIsELOOP(t *testing.T) {
	f := newFixture(t)
	f.symlink(t, "self", "self")
	f.symlink(t, "b", "a")
	f.symlink(t, "a", "b")
	f.symlink(t, "../d/x", "d/x")        // itself, through its directory
	f.symlink(t, "loopdir/z", "loopdir") // a directory link into itself
	// A chain of 50 links ending at a real file: more than the 40 hops.
	f.writeFile(t, "end", "end")
	for i := 0; i < 50; i++ {
		next := "end"
		if i < 49 {
			next = "c" + itoa(i+1)
		}
		f.symlink(t, next, "c"+itoa(i))
	}
	for _, raw := range []string{"proj/self", "proj/a", "proj/b", "proj/d/x", "proj/a/below", "proj/loopdir/file", "proj/c0"} {
		t.Run(raw, func(t *testing.T) {
			_, err := f.x.Resolve(context.Background(), f.path(t, raw), true)
			wantCode(t, err, errcode.IOError, "ELOOP")
		})
	}
	// A short chain is fine.
	if tg := f.resolve(t, "proj/c45", true); tg.Path.Rel != "end" {
		t.Fatalf("c45 resolves to %q", tg.Path.Rel)
	}
	// follow false stops at the link, and delete removes it.
	tg := f.resolve(t, "proj/self", false)
	if err := f.delete(ctxT(t), tg, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.host("self")); !os.IsNotExist(err) {
		t.Fatalf("the loop link survived: %v", err)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// TestNoFollowDeletesTheLinkNotTheTarget: with follow false the final link
// is left alone: Delete removes the link, the target survives (a file, a
// directory inside, and a directory outside the root).
func TestNoFollowDeletesTheLinkNotTheTarget(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "target.txt", "keep")
	f.writeFile(t, "tdir/keep", "keep")
	if err := os.WriteFile(filepath.Join(f.outside, "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "target.txt", "lf")
	f.symlink(t, "tdir", "ld")
	f.symlink(t, f.outside, "lo")
	for _, l := range []string{"lf", "ld", "lo"} {
		tg := f.resolve(t, "proj/"+l, false)
		if tg.Path.Rel != l || tg.Info.Type != executor.TypeSymlink {
			t.Fatalf("Resolve(%s, false) = %+v", l, tg)
		}
		for _, recursive := range []bool{false, true} {
			if recursive {
				f.symlink(t, map[string]string{"lf": "target.txt", "ld": "tdir", "lo": f.outside}[l], l)
				tg = f.resolve(t, "proj/"+l, false)
			}
			if err := f.delete(ctxT(t), tg, recursive); err != nil {
				t.Fatalf("Delete(%s, recursive %v): %v", l, recursive, err)
			}
			if _, err := os.Lstat(f.host(l)); !os.IsNotExist(err) {
				t.Fatalf("%s survived", l)
			}
		}
	}
	if f.readHost(t, "target.txt") != "keep" || f.readHost(t, "tdir/keep") != "keep" {
		t.Fatal("a link's target inside the root was touched")
	}
	if b, err := os.ReadFile(filepath.Join(f.outside, "keep")); err != nil || string(b) != "keep" {
		t.Fatalf("the outside directory was touched: %q %v", b, err)
	}
}

// TestPathThroughARegularFileIsNotFound: nothing exists below a file used as
// a directory, directly or through a link: Resolve says so without an error
// (what is on the path of a denied request must not leak before the
// decision), reading is FILE_NOT_FOUND, and no operation creates anything.
func TestPathThroughARegularFileIsNotFound(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "file", "x")
	f.symlink(t, "file", "lf")
	for _, raw := range []string{"proj/file/x", "proj/file/x/y", "proj/lf/x"} {
		for _, follow := range []bool{true, false} {
			tg, err := f.x.Resolve(context.Background(), f.path(t, raw), follow)
			if err != nil || tg.Exists || tg.ParentExists {
				t.Fatalf("Resolve(%s) = %+v, %v; want a target that does not exist", raw, tg, err)
			}
			_, err = f.x.Read(context.Background(), tg, executor.ReadOptions{Length: 10})
			wantCode(t, err, errcode.FileNotFound, "")
		}
	}
	if f.readHost(t, "file") != "x" {
		t.Fatal("the file changed")
	}
}

// TestLinkToTheRoot: a link to the root resolves to the root, which can be
// listed but never written, deleted or renamed; the link itself can be.
func TestLinkToTheRoot(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "file", "x")
	f.symlink(t, ".", "top")
	f.symlink(t, "..", "sub/up")
	f.symlink(t, "../..", "sub/up2")
	for _, raw := range []string{"proj/top", "proj/sub/up", "proj/top/top/sub/up"} {
		tg := f.resolve(t, raw, true)
		if !tg.Path.IsRoot() || !tg.Exists || tg.Info.Type != executor.TypeDirectory {
			t.Fatalf("Resolve(%q) = %+v, want the root", raw, tg)
		}
		_, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10})
		wantCode(t, err, errcode.IOError, "EISDIR")
		_, err = f.x.Write(ctxT(t), tg, []byte("x"), executor.WriteOptions{Create: true})
		wantCode(t, err, errcode.IOError, "EISDIR")
		wantCode(t, f.delete(ctxT(t), tg, true), errcode.PermissionDenied, "")
		other := f.resolve(t, "proj/elsewhere", false)
		wantCode(t, f.x.Rename(ctxT(t), tg, other, true), errcode.PermissionDenied, "")
		wantCode(t, f.x.Rename(ctxT(t), f.resolve(t, "proj/file", false), tg, true), errcode.PermissionDenied, "")
		list, err := f.x.List(ctxT(t), tg, executor.ListOptions{Limit: 100})
		if err != nil || len(list.Entries) == 0 {
			t.Fatalf("List of the root through %q: %+v %v", raw, list, err)
		}
		if got := f.resolve(t, raw+"/file", true); got.Path.Rel != "file" || !got.Exists {
			t.Fatalf("Resolve(%q/file) = %+v", raw, got)
		}
	}
	_, err := f.x.Resolve(context.Background(), f.path(t, "proj/sub/up2"), true)
	wantCode(t, err, errcode.PermissionDenied, "")
	// The link itself is an ordinary object.
	if err := f.delete(ctxT(t), f.resolve(t, "proj/top", false), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dir); err != nil {
		t.Fatal("the root was removed")
	}
	if f.readHost(t, "file") != "x" {
		t.Fatal("the root's content changed")
	}
}

// TestReadChecksIdentity: a file replaced between Resolve and Read (the
// window in which the policy decides) is CONCURRENCY_CONFLICT, and the new
// content never leaks.
func TestReadChecksIdentity(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name    string
		replace func(t *testing.T)
	}{
		{"renamed over", func(t *testing.T) {
			f.writeFile(t, "other.txt", "OTHER")
			if err := os.Rename(f.host("other.txt"), f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"moved away and recreated", func(t *testing.T) {
			// The old file lives on under another name, so its inode
			// number cannot be reused by the new file. (After a plain
			// unlink, ext4 may give the new file the same inode number:
			// device and inode cannot tell those apart, which is harmless
			// because the new file is at the very path that was decided.)
			if err := os.Rename(f.host("f.txt"), f.host("old.txt")); err != nil {
				t.Fatal(err)
			}
			f.writeFile(t, "f.txt", "OTHER")
		}},
		{"symlink to a file inside", func(t *testing.T) {
			f.writeFile(t, "other.txt", "OTHER")
			if err := os.Remove(f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
			f.symlink(t, "other.txt", "f.txt")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.writeFile(t, "f.txt", "decided")
			tg := f.resolve(t, "proj/f.txt", true)
			c.replace(t)
			res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
			wantCode(t, err, errcode.ConcurrencyConflict, "")
			if len(res.Data) != 0 {
				t.Fatalf("content leaked: %q", res.Data)
			}
			for _, n := range []string{"f.txt", "other.txt", "old.txt"} {
				_ = os.Remove(f.host(n))
			}
		})
	}
}

// TestReadSymlinkSwappedInIsConflict: a final link swapped in after
// resolution is never followed: the file is opened O_PATH|O_NOFOLLOW and
// checked before it is read (CONCURRENCY_CONFLICT).
func TestReadSymlinkSwappedInIsConflict(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"outside":  filepath.Join(f.outside, "secret"),
		"relative": "../outside/secret",
		"dangling": "missing",
	} {
		t.Run(name, func(t *testing.T) {
			f.writeFile(t, "f.txt", "decided")
			tg := f.resolve(t, "proj/f.txt", true)
			if err := os.Remove(f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
			f.symlink(t, target, "f.txt")
			defer os.Remove(f.host("f.txt"))
			res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
			wantCode(t, err, errcode.ConcurrencyConflict, "")
			if len(res.Data) != 0 {
				t.Fatalf("content leaked: %q", res.Data)
			}
		})
	}
}

// TestLinkTextDotDotFollowsTheLinkBeforeIt: in a link's text, ".." after a
// component that is itself a link applies to that link's target, as the
// kernel and os.Root do it (docs/protocol.md section 3), so that the broker
// reads and writes the file the link names on the host.
func TestLinkTextDotDotFollowsTheLinkBeforeIt(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "releases/v2/app", "app")
	f.writeFile(t, "releases/shared/config", "physical")
	f.writeFile(t, "shared/config", "lexical")
	f.symlink(t, "releases/v2", "cur")
	f.symlink(t, "cur/../shared/config", "cfg")
	f.writeFile(t, "a/file", "a-file")
	f.mkdir(t, "a/b/c")
	f.symlink(t, "a/b/c", "deep")
	f.symlink(t, "deep/../../file", "up")

	h, err := os.OpenRoot(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for link, want := range map[string]string{"cfg": "releases/shared/config", "up": "a/file"} {
		host, err := os.ReadFile(f.host(link))
		if err != nil {
			t.Fatal(err)
		}
		viaRoot, err := h.ReadFile(link)
		if err != nil || string(viaRoot) != string(host) {
			t.Fatalf("os.Root reads %q (%v), the kernel %q", viaRoot, err, host)
		}
		tg, err := f.x.Resolve(context.Background(), f.path(t, "proj/"+link), true)
		if err != nil {
			t.Fatalf("Resolve(%s): %v; the host reads %q through it", link, err, host)
		}
		if tg.Path.Rel != want {
			t.Fatalf("Resolve(%s) = %q, the host's target is %q", link, tg.Path.Rel, want)
		}
		if got := f.read(t, "proj/"+link); string(got.Data) != string(host) {
			t.Fatalf("the broker reads %q through %s, the host %q", got.Data, link, host)
		}
	}
}
