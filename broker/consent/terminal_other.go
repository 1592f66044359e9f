// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package consent

import (
	"errors"
	"os"
	"runtime"
)

// promptSupported: there is no /dev/tty; the Windows console is not
// supported yet.
const promptSupported = false

var errPromptUnsupported = errors.New("consent prompt: not available on " + runtime.GOOS + "; use deny, auto or command:PROG")

func openTerminal() (*os.File, error) { return nil, errPromptUnsupported }

func flushInput(*os.File) {}
