// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunHelper is the hidden command HelperCommand: it applies the rules that
// Child.Command encoded in args to this process, with the IPC scopes
// (signals and abstract UNIX sockets stay within the server's own
// processes) and, with UnixSocketsDeny, the filter that refuses it UNIX
// sockets, and executes the server in its place with TMPDIR set to its
// private directory and no descriptor but its stdin, stdout and stderr
// (passOnStdioOnly). It returns only on failure; the server is never
// started unconfined.
func RunHelper(args []string) error {
	if err := passOnStdioOnly(); err != nil {
		return fmt.Errorf("%s: close the inherited descriptors: %w", HelperCommand, err)
	}
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

// passOnStdioOnly marks every descriptor above 2 close-on-exec, so that the
// server gets stdin, stdout and stderr (the broker's pipes) and nothing a
// process before it left open without close-on-exec: an open file outside
// the rules, or a socket the UNIX socket filter never saw created (a
// datagram socket's end sends to any socket at a path). They are marked,
// not closed, so that the Go runtime keeps its own until the exec:
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11), else
// markCloseOnExec.
func passOnStdioOnly() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return markCloseOnExec()
}

// markCloseOnExec marks close-on-exec each descriptor above 2 that
// /proc/self/fd lists; when it cannot be read, the server is not started.
func markCloseOnExec() error {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 {
			continue
		}
		// EBADF: the descriptor that read /proc/self/fd, closed since.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("descriptor %d: %w", fd, err)
		}
	}
	return nil
}
