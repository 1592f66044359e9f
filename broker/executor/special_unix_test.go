// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"errors"
	"net"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// FIFOs and sockets, which the systems without them cannot make.

// TestSpecialFilesAreNeverOpened: a FIFO and a socket are PERMISSION_DENIED
// "not a regular file" for read and write, and the read returns (a FIFO
// opened for reading would block until a writer comes).
func TestSpecialFilesAreNeverOpened(t *testing.T) {
	f := newFixture(t)
	if err := syscall.Mkfifo(f.host("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Socket paths are limited to 108 bytes: bind inside the root through a
	// short relative name.
	l := listenUnix(t, f.dir, "sock")
	defer l.Close()
	f.symlink(t, "fifo", "fifolink")
	for _, raw := range []string{"proj/fifo", "proj/sock", "proj/fifolink"} {
		t.Run(raw, func(t *testing.T) {
			tg := f.resolve(t, raw, true)
			if tg.Info.Type != executor.TypeOther {
				t.Fatalf("type %q, want other", tg.Info.Type)
			}
			var err error
			within(t, 5*time.Second, "Read of a "+raw, func() {
				_, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10})
			})
			e := wantCode(t, err, errcode.PermissionDenied, "")
			if e.Reason != "not a regular file" {
				t.Errorf("reason %q, want %q", e.Reason, "not a regular file")
			}
			within(t, 5*time.Second, "Write to a "+raw, func() {
				_, err = f.x.Write(ctxT(t), tg, []byte("x"), executor.WriteOptions{Create: true})
			})
			e = wantCode(t, err, errcode.PermissionDenied, "")
			if e.Reason != "not a regular file" {
				t.Errorf("reason %q, want %q", e.Reason, "not a regular file")
			}
		})
	}
	if fi, err := os.Lstat(f.host("fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatal("the FIFO was replaced")
	}
	noTemps(t, f.dir)
}

// TestSpecialFileSwappedInDoesNotHang: a FIFO or socket renamed over a file
// after it was resolved: Read neither hangs nor returns data.
func TestSpecialFileSwappedInDoesNotHang(t *testing.T) {
	f := newFixture(t)
	for _, kind := range []string{"fifo", "socket"} {
		t.Run(kind, func(t *testing.T) {
			f.writeFile(t, "f.txt", "decided")
			tg := f.resolve(t, "proj/f.txt", true)
			switch kind {
			case "fifo":
				if err := syscall.Mkfifo(f.host("tmpfifo"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(f.host("tmpfifo"), f.host("f.txt")); err != nil {
					t.Fatal(err)
				}
			case "socket":
				if err := os.Remove(f.host("f.txt")); err != nil {
					t.Fatal(err)
				}
				l := listenUnix(t, f.dir, "f.txt")
				defer l.Close()
			}
			var (
				res executor.ReadResult
				err error
			)
			within(t, 5*time.Second, "Read of a swapped-in "+kind, func() {
				res, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10})
			})
			if err == nil || len(res.Data) != 0 {
				t.Fatalf("Read of a swapped-in %s succeeded: %+v", kind, res)
			}
			wantKnownCode(t, err, f.tmp)
			if kind == "fifo" { // opened (O_NONBLOCK), then refused by the identity check
				wantCode(t, err, errcode.ConcurrencyConflict, "")
			}
			_ = os.Remove(f.host("f.txt"))
		})
	}
}

// TestSocketSwappedInIsConflict: a socket swapped in after resolution is a
// changed file (CONCURRENCY_CONFLICT), and any errno reported is a symbol.
func TestSocketSwappedInIsConflict(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "f.txt", "decided")
	tg := f.resolve(t, "proj/f.txt", true)
	if err := os.Remove(f.host("f.txt")); err != nil {
		t.Fatal(err)
	}
	l := listenUnix(t, f.dir, "f.txt")
	defer l.Close()
	var err error
	within(t, 5*time.Second, "Read of a swapped-in socket", func() {
		_, err = f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 10})
	})
	var e *errcode.Error
	if errors.As(err, &e) {
		if errno, ok := e.Details["errno"].(string); ok && !regexp.MustCompile(`^E[A-Z0-9]+$`).MatchString(errno) {
			t.Errorf("data.errno %q is not an errno symbol", errno)
		}
	}
	wantCode(t, err, errcode.ConcurrencyConflict, "")
}

// listenUnix binds a unix socket named name in dir (through a relative
// name, so that the 108-byte limit of socket paths does not matter).
func listenUnix(t *testing.T, dir, name string) net.Listener {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Chdir is process-wide: no parallel tests in this package use the
	// working directory.
	t.Chdir(dir)
	l, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(wd); err != nil {
		t.Fatal(err)
	}
	return l
}
