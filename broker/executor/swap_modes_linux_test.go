// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// The tests here run each attack twice: with the Linux fast paths (openat2
// from a raw descriptor of the root, bare descriptors) and without them
// (executor.WithoutFastPaths: os.Root throughout, as where openat2 is
// missing or refused). Both must refuse the same things the same way.

var modes = []struct {
	name string
	opts []executor.Option
}{
	{"fast", nil},
	{"portable", []executor.Option{executor.WithoutFastPaths()}},
}

func forEachMode(t *testing.T, fn func(t *testing.T, f *fixture)) {
	forEachModeOf(t, newFixture, fn)
}

// forEachModeOf is forEachMode over fixtures made by mk.
func forEachModeOf(t *testing.T, mk func(testing.TB, ...executor.Option) *fixture, fn func(t *testing.T, f *fixture)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { fn(t, mk(t, m.opts...)) })
	}
}

// TestSwapIntoTheDirectoryOfAResolvedFile: a directory on the path of a
// resolved file is swapped, after the decision, for a link (out of the root,
// or to another directory inside) or a FIFO: the read is
// CONCURRENCY_CONFLICT and nothing else is read or opened. The fast path's
// lookup refuses every link (ELOOP); the portable path then follows the
// link as os.Root does, and the file's identity check refuses what it finds.
func TestSwapIntoTheDirectoryOfAResolvedFile(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		if err := os.WriteFile(filepath.Join(f.outside, "f.txt"), []byte("SECRET"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := watchOpens(t, f.host("fifo"))
		swaps := map[string]func(t *testing.T){
			"link out of the root": func(t *testing.T) { f.symlink(t, "../outside", "d") },
			"absolute link":        func(t *testing.T) { f.symlink(t, f.outside, "d") },
			"link to another directory inside": func(t *testing.T) {
				f.writeFile(t, "e/f.txt", "OTHER")
				f.symlink(t, "e", "d")
			},
			"fifo": func(t *testing.T) { swapInFIFO(t, f, "d") },
		}
		for name, swap := range swaps {
			t.Run(name, func(t *testing.T) {
				f.writeFile(t, "d/f.txt", "decided")
				tg := f.resolve(t, "proj/d/f.txt", true)
				if err := os.Rename(f.host("d"), f.host("d.old")); err != nil {
					t.Fatal(err)
				}
				swap(t)
				wantConflictReading(t, f, tg)
				for _, p := range []string{"d", "d.old", "e"} {
					_ = os.RemoveAll(f.host(p))
				}
			})
		}
		if n := w.count(t); n != 0 {
			t.Fatalf("the FIFO was opened %d times", n)
		}
	})
}

// TestDirectoryMovedBehindALinkStillReads: the directory of a resolved file
// renamed and a link to it put in its place: the very file decided on is
// still there, so the read succeeds, as it did through os.Root before the
// fast paths (they leave a path with a link to it).
func TestDirectoryMovedBehindALinkStillReads(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		f.writeFile(t, "d/f.txt", "decided")
		tg := f.resolve(t, "proj/d/f.txt", true)
		if err := os.Rename(f.host("d"), f.host("e")); err != nil {
			t.Fatal(err)
		}
		f.symlink(t, "e", "d")
		res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
		if err != nil || string(res.Data) != "decided" {
			t.Fatalf("Read = %q, %v", res.Data, err)
		}
	})
}

// TestSwapOfADeepFile: the last segment of a path two directories deep
// swapped for a link (out, relative, dangling), a FIFO or another file:
// CONCURRENCY_CONFLICT, nothing read, the FIFO never opened.
func TestSwapOfADeepFile(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("SECRET"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := watchOpens(t, f.host("fifo"))
		swaps := map[string]func(t *testing.T){
			"link out":      func(t *testing.T) { f.symlink(t, filepath.Join(f.outside, "secret"), "a/b/f.txt") },
			"relative link": func(t *testing.T) { f.symlink(t, "../../../outside/secret", "a/b/f.txt") },
			"dangling link": func(t *testing.T) { f.symlink(t, "missing", "a/b/f.txt") },
			"link to fifo":  func(t *testing.T) { f.symlink(t, "../../fifo", "a/b/f.txt") },
			"fifo":          func(t *testing.T) { swapInFIFO(t, f, "a/b/f.txt") },
			"other file": func(t *testing.T) {
				f.writeFile(t, "a/b/o.txt", "OTHER!!")
				if err := os.Rename(f.host("a/b/o.txt"), f.host("a/b/f.txt")); err != nil {
					t.Fatal(err)
				}
			},
			"removed": func(t *testing.T) {},
		}
		for name, swap := range swaps {
			t.Run(name, func(t *testing.T) {
				f.writeFile(t, "a/b/f.txt", "decided")
				tg := f.resolve(t, "proj/a/b/f.txt", true)
				if err := os.Rename(f.host("a/b/f.txt"), f.host("a/b/old.txt")); err != nil {
					t.Fatal(err)
				}
				swap(t)
				wantConflictReading(t, f, tg)
				_ = os.Remove(f.host("a/b/f.txt"))
				_ = os.Remove(f.host("a/b/old.txt"))
			})
		}
		if n := w.count(t); n != 0 {
			t.Fatalf("the FIFO was opened %d times", n)
		}
	})
}

// TestModesResolveAndReadAlike: both modes resolve a tree to the same
// targets and read the same content and etag, which is the etag a write
// returns.
func TestModesResolveAndReadAlike(t *testing.T) {
	fast := newFixture(t)
	portable := newExecutor(t, t.TempDir(), executor.WithoutFastPaths())
	fast.mkdir(t, "a/b")
	fast.write(t, "proj/a/b/w.txt", "written")
	fast.writeFile(t, "top.txt", "top")
	fast.mkdir(t, "a/empty")
	fast.symlink(t, "a/b", "lnk")
	fast.symlink(t, "nowhere", "dang")
	paths := []string{"proj", "proj/top.txt", "proj/a", "proj/a/b/w.txt", "proj/a/empty", "proj/missing",
		"proj/a/missing", "proj/lnk", "proj/lnk/w.txt", "proj/dang", "proj/top.txt/x", "proj/no/such"}
	for _, raw := range paths {
		for _, follow := range []bool{true, false} {
			p := fast.path(t, raw)
			a, errA := fast.x.Resolve(context.Background(), p, follow)
			b, errB := portable.Resolve(context.Background(), p, follow)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%s: fast %v, portable %v", raw, errA, errB)
			}
			if !a.Info.ModTime.Equal(b.Info.ModTime) {
				t.Errorf("%s: modification times differ", raw)
			}
			a.Info.ModTime = b.Info.ModTime
			if a.Path != b.Path || a.Exists != b.Exists || a.ParentExists != b.ParentExists || a.Info != b.Info {
				t.Errorf("%s (follow %v):\nfast     %+v\nportable %+v", raw, follow, a, b)
			}
			if !a.Exists || a.Info.Type != executor.TypeFile {
				continue
			}
			ra, errA := fast.x.Read(ctxT(t), a, executor.ReadOptions{Length: 100})
			rb, errB := portable.Read(ctxT(t), b, executor.ReadOptions{Length: 100})
			if errA != nil || errB != nil || string(ra.Data) != string(rb.Data) || ra.ETag != rb.ETag ||
				ra.Size != rb.Size || ra.EOF != rb.EOF || ra.MimeType != rb.MimeType {
				t.Errorf("%s: fast %+v %v, portable %+v %v", raw, ra, errA, rb, errB)
			}
		}
	}
	w := fast.write(t, "proj/a/b/w.txt", "rewritten")
	for _, x := range []*executor.Executor{fast.x, portable} {
		tg, err := x.Resolve(context.Background(), fast.path(t, "proj/a/b/w.txt"), true)
		if err != nil {
			t.Fatal(err)
		}
		r, err := x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
		if err != nil || r.ETag != w.ETag {
			t.Fatalf("read etag %q (%v), the write's %q", r.ETag, err, w.ETag)
		}
	}
}

// makeSwapReadTree makes the tree the read-swap attacks work on: the file
// decided on (d/f.txt), its twin outside the root (a secret), another file
// and a FIFO to swap in (spare/).
func (f *fixture) makeSwapReadTree(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(f.outside, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "d", "f.txt"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, "d/f.txt", "decided")
	f.writeFile(t, "spare/f.txt", "OTHER")
	if err := syscall.Mkfifo(f.host("spare/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadsUnderConcurrentSwaps: resolutions and reads while another
// goroutine keeps swapping the file and its directory for links out of the
// root, FIFOs and another directory: every read returns the content of the
// very file resolved (never the outside file), none hangs, and every error
// is a brokered one.
func TestReadsUnderConcurrentSwaps(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *fixture) {
		f.makeSwapReadTree(t)
		// Renames keep inodes: the content each inode must read as.
		content := map[uint64]string{}
		for _, raw := range []string{"proj/d/f.txt", "proj/spare/f.txt"} {
			tg := f.resolve(t, raw, true)
			content[tg.Info.Ino] = f.readHost(t, strings.TrimPrefix(raw, "proj/"))
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch i % 4 {
				case 0: // the directory for a link out of the root, and back
					_ = os.Rename(f.host("d"), f.host("d.keep"))
					_ = os.Symlink("../outside/d", f.host("d"))
					_ = os.Remove(f.host("d"))
					_ = os.Rename(f.host("d.keep"), f.host("d"))
				case 1: // the file for a link out, and back
					_ = os.Rename(f.host("d/f.txt"), f.host("d/f.keep"))
					_ = os.Symlink(filepath.Join(f.outside, "d", "f.txt"), f.host("d/f.txt"))
					_ = os.Remove(f.host("d/f.txt"))
					_ = os.Rename(f.host("d/f.keep"), f.host("d/f.txt"))
				case 2: // the file for a FIFO, and back
					_ = os.Rename(f.host("d/f.txt"), f.host("d/f.keep"))
					_ = os.Link(f.host("spare/fifo"), f.host("d/f.txt"))
					_ = os.Remove(f.host("d/f.txt"))
					_ = os.Rename(f.host("d/f.keep"), f.host("d/f.txt"))
				case 3: // the directory for another one, and back
					_ = os.Rename(f.host("d"), f.host("d.keep"))
					_ = os.Rename(f.host("spare"), f.host("d"))
					_ = os.Rename(f.host("d"), f.host("spare"))
					_ = os.Rename(f.host("d.keep"), f.host("d"))
				}
			}
		}()
		p := f.path(t, "proj/d/f.txt")
		reads, refused := 0, 0
		within(t, 30*time.Second, "the reads", func() {
			for range 500 {
				tg, err := f.x.Resolve(ctxT(t), p, true)
				if err == nil {
					var res executor.ReadResult
					if res, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100}); err == nil {
						if want, ok := content[tg.Info.Ino]; !ok || string(res.Data) != want {
							t.Errorf("read %q from %s (inode %d), not the file resolved", res.Data, tg.Path.Rel, tg.Info.Ino)
						}
						reads++
						continue
					}
				}
				wantKnownCode(t, err, f.tmp)
				refused++
			}
		})
		close(stop)
		wg.Wait()
		t.Logf("%d reads, %d refused", reads, refused)
	})
}

// TestCloseDuringReads: closing the executor while reads run neither races
// nor lets a read use a closed descriptor: each read returns its file or an
// error.
func TestCloseDuringReads(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "d/f.txt", "decided")
	tg := f.resolve(t, "proj/d/f.txt", true)
	p := f.path(t, "proj/d/f.txt")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := f.x.Resolve(context.Background(), p, true); err != nil {
					wantKnownCode(t, err, f.tmp)
				}
				res, err := f.x.Read(context.Background(), tg, executor.ReadOptions{Length: 100})
				if err == nil && string(res.Data) != "decided" {
					t.Errorf("read %q", res.Data)
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	if err := f.x.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// swapInFIFO puts the fixture's FIFO at rel, under a second name of its own
// (a hard link renamed over rel), as a swap attack would.
func swapInFIFO(t *testing.T, f *fixture, rel string) {
	t.Helper()
	tmp := rel + ".fifo"
	if err := os.Link(f.host("fifo"), f.host(tmp)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.host(tmp), f.host(rel)); err != nil {
		t.Fatal(err)
	}
}

// wantConflictReading reads tg and wants CONCURRENCY_CONFLICT with nothing
// read, within 5 s (a FIFO opened for reading would block).
func wantConflictReading(t *testing.T, f *fixture, tg executor.Target) {
	t.Helper()
	var (
		res executor.ReadResult
		err error
	)
	within(t, 5*time.Second, "Read", func() { res, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100}) })
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if len(res.Data) != 0 {
		t.Fatalf("content leaked: %q", res.Data)
	}
}
