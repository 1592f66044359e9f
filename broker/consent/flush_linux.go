// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package consent

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushInput discards what was typed on the terminal but not yet read
// (tcflush(fd, TCIFLUSH)).
func flushInput(f *os.File) {
	// Through SyscallConn, not Fd, which would put the file in blocking mode
	// and end its deadlines.
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.IoctlSetInt(int(fd), unix.TCFLSH, unix.TCIFLUSH) })
}
