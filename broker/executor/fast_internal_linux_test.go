// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// fastFixture is an executor over a fresh root, with the root's handles.
type fastFixture struct {
	dir string
	set *roots.Set
	x   *Executor
	rh  *rootHandle
}

func newFastFixture(t *testing.T, opts ...Option) *fastFixture {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: dir, Writable: true}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	r, _ := set.ByMount("proj")
	rh, err := x.rootHandle(r)
	if err != nil {
		t.Fatal(err)
	}
	return &fastFixture{dir: dir, set: set, x: x, rh: rh}
}

func (f *fastFixture) path(t *testing.T, raw string) canon.Path {
	t.Helper()
	p, err := canon.Parse(f.set, raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needOpenat2 skips the test where the kernel (or a seccomp filter) refuses
// openat2: the fast paths are off there, as they should be.
func needOpenat2(t *testing.T) {
	t.Helper()
	fd, err := unix.Openat2(unix.AT_FDCWD, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		t.Skipf("openat2 is not usable here (%v): the fast paths are off", err)
	}
	_ = unix.Close(fd)
}

// TestStatInfoIsInfoOf: the fast paths' raw stats give the very Info that
// the portable paths get from os.Lstat, for every kind of object and mode
// bit (etags, sameVersion and the policy input depend on it).
func TestStatInfoIsInfoOf(t *testing.T) {
	dir := t.TempDir()
	mk := map[string]func(p string) error{
		"file": func(p string) error { return os.WriteFile(p, []byte("hello"), 0o644) },
		"setuid": func(p string) error {
			return errors.Join(os.WriteFile(p, nil, 0o755), os.Chmod(p, 0o755|os.ModeSetuid|os.ModeSetgid))
		},
		"dir":     func(p string) error { return os.Mkdir(p, 0o755) },
		"sticky":  func(p string) error { return errors.Join(os.Mkdir(p, 0o777), os.Chmod(p, 0o777|os.ModeSticky)) },
		"symlink": func(p string) error { return os.Symlink("file", p) },
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
	}
	for name, create := range mk {
		p := filepath.Join(dir, name)
		if err := create(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append([]string{"/dev/null"}, func() []string {
		var ps []string
		for name := range mk {
			ps = append(ps, filepath.Join(dir, name))
		}
		return ps
	}()...) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := fstatat(unix.AT_FDCWD, p, &st); err != nil {
			t.Fatal(err)
		}
		want, got := infoOf(fi), statInfo(&st)
		if !got.ModTime.Equal(want.ModTime) {
			t.Errorf("%s: ModTime %v, os.Lstat %v", p, got.ModTime, want.ModTime)
		}
		got.ModTime = want.ModTime
		if got != want {
			t.Errorf("%s: statInfo %+v, infoOf(os.Lstat) %+v", p, got, want)
		}
		if ETag(statInfo(&st)) != ETag(infoOf(fi)) {
			t.Errorf("%s: etags differ", p)
		}
	}
}

// TestFastPathsAreTaken: on a kernel with openat2, a path without links is
// resolved by the fast path and its file read through a bare descriptor
// (else the fast code would go untested while the fallbacks pass).
func TestFastPathsAreTaken(t *testing.T) {
	needOpenat2(t)
	f := newFastFixture(t)
	if f.rh.fast == nil {
		t.Fatal("openat2 works here, yet the root has no fast path")
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"top.txt", "a/b/deep.txt"} {
		if err := os.WriteFile(filepath.Join(f.dir, rel), []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := f.path(t, "proj/"+rel)
		tg, ok := f.rh.fast.resolve(p, true, f.rh.info)
		if !ok || !tg.Exists || tg.Info.Type != TypeFile {
			t.Fatalf("fast resolve of %s: %+v, %v", rel, tg, ok)
		}
		r, info, err := openChecked(f.rh, tg)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(fdFile); !ok {
			t.Fatalf("%s was opened as %T, not by the fast path", rel, r)
		}
		buf := make([]byte, info.Size)
		if n, err := r.ReadAt(buf, 0); err != nil || string(buf[:n]) != "content" {
			t.Fatalf("ReadAt: %q, %v", buf[:n], err)
		}
		_ = r.Close()
	}
	// The portable option turns them off.
	g := newFastFixture(t, WithoutFastPaths())
	if g.rh.fast != nil {
		t.Fatal("WithoutFastPaths left a fast path on")
	}
}

// TestFastResolveMatchesTheWalk: wherever the fast path answers, it answers
// exactly what the walk does (path, existence, infos, parent), and it
// answers for every path without a link; every path with a link on it is
// left to the walk.
func TestFastResolveMatchesTheWalk(t *testing.T) {
	needOpenat2(t)
	f := newFastFixture(t)
	for _, d := range []string{"a/b/c", "e"} {
		if err := os.MkdirAll(filepath.Join(f.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"top.txt", "a/f.txt", "a/b/c/deep.txt", "e/g.txt"} {
		if err := os.WriteFile(filepath.Join(f.dir, file), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"lnk": "top.txt", "a/dl": "b", "dang": "missing", "a/b/up": "../f.txt"} {
		if err := os.Symlink(target, filepath.Join(f.dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(f.dir, "a/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	fast := []string{"top.txt", "a", "a/b", "a/b/c", "a/f.txt", "a/b/c/deep.txt", "e/g.txt", "a/fifo",
		"missing", "a/missing", "a/b/c/missing"}
	walk := []string{"lnk", "a/dl/c", "a/dl/c/deep.txt", "dang", "a/b/up", "nodir/x", "a/nodir/x", "top.txt/x", "a/f.txt/y", "lnk/x"}
	check := func(rel string, follow, wantFast bool) {
		t.Helper()
		p := f.path(t, "proj/"+rel)
		got, ok := f.rh.fast.resolve(p, follow, f.rh.info)
		if ok != wantFast {
			t.Errorf("%s (follow %v): fast path answered %v, want %v", rel, follow, ok, wantFast)
		}
		want, err := f.x.resolveSlow(context.Background(), f.rh, p, follow)
		if err != nil {
			t.Fatalf("walk of %s: %v", rel, err)
		}
		if !ok {
			return
		}
		if !got.Info.ModTime.Equal(want.Info.ModTime) || !got.parent.ModTime.Equal(want.parent.ModTime) {
			t.Errorf("%s: modification times differ", rel)
		}
		got.Info.ModTime, got.parent.ModTime = want.Info.ModTime, want.parent.ModTime
		if got != want {
			t.Errorf("%s (follow %v):\nfast %+v\nwalk %+v", rel, follow, got, want)
		}
	}
	for _, rel := range fast {
		check(rel, true, true)
		check(rel, false, true)
	}
	for _, rel := range walk {
		check(rel, true, false)
	}
	// A link in the last segment that is not followed is the link itself.
	check("lnk", false, true)
	check("dang", false, true)
}

// TestOpenFallbackRefusesASwappedFIFO: the open used where /proc is missing
// (a FIFO swapped in is opened non-blocking, then refused by its identity).
func TestOpenFallbackRefusesASwappedFIFO(t *testing.T) {
	f := newFastFixture(t)
	host := filepath.Join(f.dir, "f.txt")
	if err := os.WriteFile(host, []byte("decided"), 0o644); err != nil {
		t.Fatal(err)
	}
	tg, err := f.x.Resolve(context.Background(), f.path(t, "proj/f.txt"), true)
	if err != nil {
		t.Fatal(err)
	}
	r, info, err := openFallback(f.rh.root, tg)
	if err != nil || info.Size != 7 {
		t.Fatalf("openFallback: %v, %+v", err, info)
	}
	_ = r.Close()
	if err := syscall.Mkfifo(filepath.Join(f.dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.dir, "fifo"), host); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openFallback(f.rh.root, tg); err == nil {
		t.Fatal("openFallback opened a swapped-in FIFO as the file")
	}
}

// TestCloseEndsTheFastPaths: once the executor is closed, the root's raw
// descriptor is closed and never used again (its number could be anyone's).
func TestCloseEndsTheFastPaths(t *testing.T) {
	needOpenat2(t)
	f := newFastFixture(t)
	fr := f.rh.fast
	if err := f.x.Close(); err != nil {
		t.Fatal(err)
	}
	if fr.fd != -1 {
		t.Fatalf("descriptor %d left open", fr.fd)
	}
	if _, ok := fr.resolve(f.path(t, "proj/x"), true, f.rh.info); ok {
		t.Fatal("a closed fast root resolved a path")
	}
	if _, _, err := fr.open(Target{Path: f.path(t, "proj/x")}); !errors.Is(err, errNoFastPath) {
		t.Fatalf("a closed fast root opened a file: %v", err)
	}
}

// TestFastRootChecksItsDirectory: the raw descriptor is opened by the root's
// path a second time, after its os.Root; a path that names another directory
// by then (the root replaced between the two opens) is errRootMoved, which
// refuses the root, and the same directory gives a usable descriptor.
func TestFastRootChecksItsDirectory(t *testing.T) {
	needOpenat2(t)
	dir, other := t.TempDir(), t.TempDir()
	infoAt := func(p string) Info {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return infoOf(fi)
	}
	if fr, err := openFastRoot(dir, infoAt(other)); !errors.Is(err, errRootMoved) || fr != nil {
		t.Fatalf("another directory: %v, %v", fr, err)
	}
	fr, err := openFastRoot(dir, infoAt(dir))
	if err != nil || fr == nil {
		t.Fatalf("the same directory: %v, %v", fr, err)
	}
	if err := fr.close(); err != nil {
		t.Fatal(err)
	}
}

// TestReopenThroughProcFD: a fast root reopens a held file through its
// descriptor of /proc/self/fd (procfs, checked), which opens the object held
// (the same device and inode as its O_PATH descriptor); once the root is
// closed its /proc descriptor is closed too, and a file held before is
// reopened by the path /proc/self/fd/N instead, the object held still.
func TestReopenThroughProcFD(t *testing.T) {
	needOpenat2(t)
	f := newFastFixture(t)
	if f.rh.fast.procFD < 0 {
		t.Fatal("no descriptor of /proc/self/fd: reopens take the path")
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(f.rh.fast.procFD, &fs); err != nil || fs.Type != unix.PROC_SUPER_MAGIC {
		t.Fatalf("the /proc descriptor is not procfs: %x, %v", fs.Type, err)
	}
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(name string) Target {
		t.Helper()
		tg, ok := f.rh.fast.resolveHeld(f.path(t, "proj/"+name))
		if !ok {
			t.Fatalf("%s was not held", name)
		}
		t.Cleanup(tg.held.release)
		return tg
	}
	requireHeldObject := func(tg Target, name string) {
		t.Helper()
		r, _, err := tg.held.reopen(tg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var opened, held unix.Stat_t
		if err := unix.Fstat(r.(fdFile).fd, &opened); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fstat(tg.held.fd, &held); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		n, _ := r.ReadAt(buf, 0)
		if opened.Dev != held.Dev || opened.Ino != held.Ino || string(buf[:n]) != name {
			t.Fatalf("reopened %d:%d (%q), holding %d:%d (%s)", opened.Dev, opened.Ino, buf[:n], held.Dev, held.Ino, name)
		}
	}
	a, b := hold("a.txt"), hold("b.txt")
	requireHeldObject(b, "b.txt")
	requireHeldObject(a, "a.txt")
	if err := f.x.Close(); err != nil {
		t.Fatal(err)
	}
	if f.rh.fast.procFD != -1 {
		t.Fatalf("the /proc descriptor %d is left open", f.rh.fast.procFD)
	}
	requireHeldObject(a, "a.txt")
}
