// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package ptytest allocates pseudo-terminals for the tests that drive a program
// through its controlling terminal (the consent prompt): Open a pair, or Attach
// one to a command and type on it and read what it shows. The broker itself
// never imports it. Linux only.
package ptytest

import (
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Open allocates a pseudo-terminal pair through /dev/ptmx, as posix_openpt,
// unlockpt and ptsname do on Linux; the caller closes both ends.
// The test is skipped where there are no pseudo-terminals.
func Open(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	var (
		n        uint32
		ioctlErr error
	)
	if err := rc.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr == nil {
			n, ioctlErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
		}
	}); err != nil || ioctlErr != nil {
		m.Close()
		t.Fatalf("unlockpt/ptsname: %v %v", err, ioctlErr)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return m, s
}
