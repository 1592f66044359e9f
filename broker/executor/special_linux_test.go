// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor_test

import (
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// FIFOs never opened, proved by the kernel's own record of opens (inotify).

// opens counts IN_OPEN events on a file, the kernel's own record of every
// open(2) of it: the way to prove that a FIFO was never opened.
type opens struct{ fd int }

func watchOpens(t *testing.T, path string) *opens {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	return &opens{fd: fd}
}

// count drains the queued events (queued synchronously by open(2), so no
// waiting is needed) and returns how many opens there were.
func (o *opens) count(t *testing.T) int {
	t.Helper()
	n := 0
	buf := make([]byte, 4096)
	for {
		k, err := syscall.Read(o.fd, buf)
		if err == syscall.EAGAIN {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= k; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				n++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestResolvedFIFOIsNeverOpened: a FIFO that Resolve saw is refused without
// an open(2) (the kernel records none).
func TestResolvedFIFOIsNeverOpened(t *testing.T) {
	f := newFixture(t)
	if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "fifo", "link")
	w := watchOpens(t, f.host("fifo"))
	for _, raw := range []string{"proj/fifo", "proj/link"} {
		tg := f.resolve(t, raw, true)
		_, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10})
		wantCode(t, err, errcode.PermissionDenied, "")
		_, err = f.x.Write(ctxT(t), tg, []byte("x"), executor.WriteOptions{Create: true})
		wantCode(t, err, errcode.PermissionDenied, "")
	}
	if n := w.count(t); n != 0 {
		t.Fatalf("the FIFO was opened %d times", n)
	}
}

// TestSwappedInFIFOIsNeverOpened: a FIFO (or a link to one) put in place of
// a resolved file must be refused without being opened.
func TestSwappedInFIFOIsNeverOpened(t *testing.T) {
	f := newFixture(t)
	if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := watchOpens(t, f.host("fifo"))
	for _, how := range []string{"link", "rename"} {
		f.writeFile(t, "f.txt", "decided")
		tg := f.resolve(t, "proj/f.txt", true)
		switch how {
		case "link":
			_ = os.Remove(f.host("f.txt"))
			f.symlink(t, "fifo", "f.txt")
		case "rename":
			if err := os.Link(f.host("fifo"), f.host("fifo2")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.host("fifo2"), f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		within(t, 5*time.Second, "Read", func() { _, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10}) })
		wantCode(t, err, errcode.ConcurrencyConflict, "")
		if n := w.count(t); n != 0 {
			t.Fatalf("%s: the FIFO was opened %d times", how, n)
		}
		_ = os.Remove(f.host("f.txt"))
	}
}
