// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

func init() { helperRoles["swapper"] = swapperRole }

// swapperRole, "swapper DIR OUTSIDE", is a second process attacking reads of
// DIR/d/f.txt: until its standard input closes it swaps the file for a link
// out of the root (OUTSIDE/d/f.txt), a FIFO (DIR/spare/fifo), a device
// (DIR/spare/dev, when there is one) and another file, and its directory for
// a link out and for another directory, each time putting the original
// back. It prints "ready" once it has made every swap once.
func swapperRole(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("want DIR OUTSIDE, got %q", args)
	}
	dir, outside := args[0], args[1]
	host := func(rel string) string { return filepath.Join(dir, rel) }
	var stop atomic.Bool
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF: stop
		stop.Store(true)
	}()
	swapFile := func(put func()) {
		_ = os.Rename(host("d/f.txt"), host("d/f.keep"))
		put()
		// Leave it there for a while, as long as a decision takes.
		for range 20 {
			_, _ = os.Lstat(host("d/f.txt"))
		}
		_ = os.Remove(host("d/f.txt"))
		_ = os.Rename(host("d/f.keep"), host("d/f.txt"))
	}
	for i := 0; !stop.Load(); i++ {
		switch i % 6 {
		case 0:
			swapFile(func() { _ = os.Symlink(filepath.Join(outside, "d", "f.txt"), host("d/f.txt")) })
		case 1:
			swapFile(func() { _ = os.Link(host("spare/fifo"), host("d/f.txt")) })
		case 2:
			swapFile(func() { _ = os.Link(host("spare/dev"), host("d/f.txt")) })
		case 3:
			swapFile(func() { _ = os.Link(host("spare/f.txt"), host("d/f.txt")) })
		case 4:
			_ = os.Rename(host("d"), host("d.keep"))
			_ = os.Symlink(filepath.Join(outside, "d"), host("d"))
			_ = os.Remove(host("d"))
			_ = os.Rename(host("d.keep"), host("d"))
		case 5:
			_ = os.Rename(host("d"), host("d.keep"))
			_ = os.Rename(host("spare"), host("d"))
			_ = os.Rename(host("d"), host("spare"))
			_ = os.Rename(host("d.keep"), host("d"))
			if i == 5 {
				fmt.Println("ready")
			}
		}
	}
	return nil
}

// TestHeldReadsUnderSwapsByAnotherProcess attacks the read that keeps its
// file open from resolution to read (ResolveRead, then Read): a second
// process keeps swapping the file and its directory for links out of the
// root, a FIFO, a device and another file or directory, while this one
// resolves, reads and releases. Every read returns the content of the very
// file resolved (never the outside file, never a device's bytes), every
// error is a brokered one, none hangs, and the kernel records no open of the
// FIFO or the device.
func TestHeldReadsUnderSwapsByAnotherProcess(t *testing.T) {
	f := newFixture(t)
	f.makeSwapReadTree(t)
	// A character device like /dev/zero (1, 5), where this process may make
	// one (as root); else a second FIFO stands in for it.
	if err := syscall.Mknod(f.host("spare/dev"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Logf("no device node (%v): a FIFO in its place", err)
		if err := syscall.Mkfifo(f.host("spare/dev"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifoOpens, devOpens := watchOpens(t, f.host("spare/fifo")), watchOpens(t, f.host("spare/dev"))
	content := map[uint64]string{}
	for _, raw := range []string{"proj/d/f.txt", "proj/spare/f.txt"} {
		tg := f.resolve(t, raw, true)
		content[tg.Info.Ino] = f.readHost(t, strings.TrimPrefix(raw, "proj/"))
	}

	swapper := helperproc.Start(t, helperproc.Command("swapper", f.dir, f.outside))
	swapper.Expect("ready")
	p := f.path(t, "proj/d/f.txt")
	held, reads, refused := 0, 0, 0
	deadline := time.Now().Add(2 * time.Second)
	within(t, 30*time.Second, "the reads", func() {
		for time.Now().Before(deadline) {
			tg, err := f.x.ResolveRead(ctxT(t), p)
			if err == nil {
				if executor.Holds(tg) {
					held++
				}
				// The decision's time: the window a swap has to land in.
				for range 5 {
					_, _ = os.Lstat(f.host("d"))
				}
				var res executor.ReadResult
				res, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
				tg.Release()
				if err == nil {
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
	swapper.Stop()
	t.Logf("%d reads (%d resolved holding the file), %d refused", reads, held, refused)
	if held == 0 || reads == 0 {
		t.Fatalf("no read held its file (%d) or succeeded (%d): the attack did not exercise the kept descriptor", held, reads)
	}
	if n := fifoOpens.count(t); n != 0 {
		t.Fatalf("the FIFO was opened %d times", n)
	}
	if n := devOpens.count(t); n != 0 {
		t.Fatalf("the device was opened %d times", n)
	}
}

// TestHeldTargetReadsTheFileDecidedOn: a target that keeps its file open
// reads that file, or refuses with CONCURRENCY_CONFLICT once it changed;
// after Release a read looks the path up again.
func TestHeldTargetReadsTheFileDecidedOn(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "d/f.txt", "decided")
	tg, err := f.x.ResolveRead(ctxT(t), f.path(t, "proj/d/f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !executor.Holds(tg) {
		t.Fatal("ResolveRead of a plain file kept nothing open")
	}
	res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
	if err != nil || string(res.Data) != "decided" {
		t.Fatalf("Read = %q, %v", res.Data, err)
	}
	// Replaced by a rename: the kept file was unlinked (its change time
	// moved), so the read is a conflict, as a lookup by path would be.
	f.writeFile(t, "d/o.txt", "OTHER!!")
	if err := os.Rename(f.host("d/o.txt"), f.host("d/f.txt")); err != nil {
		t.Fatal(err)
	}
	wantConflictReading(t, f, tg)
	tg.Release()
	tg.Release() // a second Release does nothing
	wantConflictReading(t, f, tg)

	// A link, a directory or a FIFO is not kept: Resolve's target.
	if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "d/f.txt", "link")
	for _, raw := range []string{"proj/fifo", "proj/link", "proj/d"} {
		tg, err := f.x.ResolveRead(ctxT(t), f.path(t, raw))
		if err != nil {
			t.Fatalf("ResolveRead(%s): %v", raw, err)
		}
		if executor.Holds(tg) {
			t.Errorf("ResolveRead(%s) kept a %v open", raw, tg.Info.Type)
		}
		want, err := f.x.Resolve(ctxT(t), f.path(t, raw), true)
		if err != nil || want.Path != tg.Path || want.Info != tg.Info {
			t.Errorf("ResolveRead(%s) = %+v, Resolve = %+v (%v)", raw, tg, want, err)
		}
	}
}
