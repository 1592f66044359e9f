// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package consent

import "os"

// promptSupported: the prompt opens /dev/tty.
const promptSupported = true

var errPromptUnsupported error // unused on Unix

// ttyPath is the controlling terminal of the process, whatever stdin and
// stdout are (they carry the protocol).
const ttyPath = "/dev/tty"

// openTerminal opens the controlling terminal for reading and writing. It
// fails (ENXIO) in a process without one, such as a broker started by a
// desktop host or a service manager.
func openTerminal() (*os.File, error) {
	return os.OpenFile(ttyPath, os.O_RDWR, 0)
}
