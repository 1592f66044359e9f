// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStdioLeavesInheritedPipesBlocking: fsbroker reads and writes its stdio
// pipes through the poller (pollableStdio), yet the open file descriptions it
// inherited, which its host (or a shell) shares, stay in blocking mode: a
// host reading the same pipe must not start seeing EAGAIN. The test keeps
// its own copies of the broker's stdin and stdout descriptions and looks at
// their flags during and after a session.
func TestStdioLeavesInheritedPipesBlocking(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(brokerBin, withConsent(t, "", []string{"stdio", "--root", dir, "--state-dir", t.TempDir()})...)
	p, inR, outW := startProcPipes(t, cmd, true) // exec puts both in blocking mode for the child
	defer inR.Close()
	defer outW.Close()

	p.handshake("2025-11-25")
	p.ping(1)
	for _, f := range []*os.File{inR, outW} {
		if nonblocking(t, f) {
			t.Errorf("%s: the description fsbroker inherited was set O_NONBLOCK", f.Name())
		}
	}
	p.closeStdin()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatal("fsbroker did not exit after its input ended")
	}
	for _, f := range []*os.File{inR, outW} {
		if nonblocking(t, f) {
			t.Errorf("%s: O_NONBLOCK after fsbroker exited", f.Name())
		}
	}
	outW.Close() // the test's copy: now fsbroker's output ends
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// nonblocking reports whether f's open file description has O_NONBLOCK,
// without changing it (f.Fd would).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}
