// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package consent

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushInput discards what was typed on the terminal but not yet read
// (tcflush(fd, TCIFLUSH), which is ioctl(TIOCFLUSH, &FREAD) here).
func flushInput(f *os.File) {
	const fread = 0x1 // FREAD in <sys/fcntl.h>
	// Through SyscallConn, not Fd, which would put the file in blocking mode
	// and end its deadlines.
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.IoctlSetPointerInt(int(fd), unix.TIOCFLUSH, fread) })
}
