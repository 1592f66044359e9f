// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"syscall"
)

// RunHelper is the hidden command HelperCommand: it applies the rules that
// Child.Command encoded in args to this process, with the IPC scopes
// (signals and abstract UNIX sockets stay within the server's own
// processes) and, with UnixSocketsDeny, the filter that refuses it UNIX
// sockets, and executes the server in its place with TMPDIR set to its
// private directory. It returns only on failure; the server is never
// started unconfined.
func RunHelper(args []string) error {
	s, err := decodeSpec(args)
	if err != nil {
		return err
	}
	if _, err := Restrict(s.Rules, true); err != nil {
		return fmt.Errorf("%s: confine the server: %w", HelperCommand, err)
	}
	if s.UnixSockets == UnixSocketsDeny {
		if err := denyUnixSockets(); err != nil {
			return fmt.Errorf("%s: deny the server UNIX sockets: %w", HelperCommand, err)
		}
	}
	err = syscall.Exec(s.Path, s.Argv, environ(os.Environ(), s.TempDir))
	return fmt.Errorf("%s: execute %s: %w", HelperCommand, s.Path, err)
}
