// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package audit

import (
	"os"
	"syscall"
)

// witnessOpenFlags are the flags a witness file is opened with: the last
// name is never followed if it is a symbolic link (a link swapped in would
// send the lines elsewhere), and a FIFO put in its place does not block the
// open.
const witnessOpenFlags = os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
