// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pollableStdio returns this process's stdin and stdout reopened for Go's
// network poller when they are pipes (as an MCP host starts fsbroker): a
// read or write then parks the goroutine instead of holding an OS thread in
// a blocking system call, which the runtime hands off and wakes again on
// every message. Each pipe is opened anew through /proc/self/fd, which
// makes a new open file description of the same pipe: O_NONBLOCK is set on
// that one only, and the descriptions fsbroker inherited (and shares with
// its host or a shell) are left as they are. Anything else (a terminal, a
// socket, a file; /proc missing) is returned unchanged.
func pollableStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer) {
	return reopenPipe(stdin, unix.O_RDONLY).(io.Reader), reopenPipe(stdout, unix.O_WRONLY).(io.Writer)
}

// reopenPipe returns f reopened non-blocking when it is a pipe (see
// pollableStdio), else f.
func reopenPipe(f any, mode int) any {
	file, ok := f.(*os.File)
	if !ok {
		return f
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(file.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return f
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(file.Fd())), mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), file.Name())
}
