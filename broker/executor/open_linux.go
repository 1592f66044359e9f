// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openChecked opens the regular file resolved as t for reading, without ever
// opening anything else: the path is first opened with O_PATH|O_NOFOLLOW
// (which opens nothing: no FIFO open, no device open, no link followed), the
// handle is checked to be the object resolved (device, inode and change
// time) and a regular file, and only then is it reopened for reading through
// /proc/self/fd. Something swapped in after resolution is
// CONCURRENCY_CONFLICT.
//
// The O_PATH open is the root's fast path (fastRoot.open: one openat2 that
// follows no link) when it applies, else through the root's os.Root
// (openPath), which follows links that stay inside the root and tells a
// removed or swapped file from another error.
func openChecked(rh *rootHandle, t Target) (fileReader, Info, error) {
	f, info, err := rh.fast.open(t)
	switch {
	case errors.Is(err, errNoFastPath):
		return openPath(rh.root, t)
	case errors.Is(err, errNoProc):
		// Without /proc, open through the root; the inode is checked again.
		return openFallback(rh.root, t)
	}
	return f, info, err
}

// openPath is openChecked through the root's os.Root.
func openPath(h *os.Root, t Target) (fileReader, Info, error) {
	p, err := h.OpenFile(t.Path.Rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Info{}, conflict("the file was removed while the request was decided")
		}
		return nil, Info{}, swappedOr(h, t, mapOSError(err, "the file cannot be opened"))
	}
	defer p.Close()
	fi, err := p.Stat()
	if err != nil {
		return nil, Info{}, mapOSError(err, "the file cannot be read")
	}
	if !sameVersion(infoOf(fi), t.Info) {
		return nil, Info{}, conflict("the file changed while the request was decided")
	}
	if !fi.Mode().IsRegular() {
		return nil, Info{}, notRegular()
	}
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(p.Fd())), os.O_RDONLY, 0)
	if err != nil {
		// Without /proc, open through the root; the inode is checked again.
		return openFallback(h, t)
	}
	return f, infoOf(fi), nil
}
