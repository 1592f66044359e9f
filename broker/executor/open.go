// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"io"
	"os"
)

// fileReader is a regular file opened for reading by openChecked.
type fileReader interface {
	io.ReaderAt
	io.Closer
}

// openFallback opens the file resolved as t for reading where O_PATH cannot
// be used: without blocking on a FIFO (O_NONBLOCK), then checks that the
// open file is the object resolved and a regular file.
func openFallback(h *os.Root, t Target) (fileReader, Info, error) {
	f, err := h.OpenFile(t.Path.Rel, openReadFlags, 0)
	if err != nil {
		return nil, Info{}, swappedOr(h, t, mapOSError(err, "the file cannot be opened"))
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Info{}, mapOSError(err, "the file cannot be read")
	}
	if !sameVersion(infoOf(fi), t.Info) {
		_ = f.Close()
		return nil, Info{}, conflict("the file changed while the request was decided")
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, Info{}, notRegular()
	}
	return f, infoOf(fi), nil
}

// swappedOr returns CONCURRENCY_CONFLICT when what is at t's path is no
// longer the object resolved (an open that failed because something else was
// put there), else err.
func swappedOr(h *os.Root, t Target, err error) error {
	fi, lerr := h.Lstat(t.Path.Rel)
	if lerr != nil || !sameObject(infoOf(fi), t.Info) {
		return conflict("the file changed while the request was decided")
	}
	return err
}
