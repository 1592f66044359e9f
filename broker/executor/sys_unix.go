// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openReadFlags opens without blocking on a FIFO swapped in after
// resolution (it is then refused as not a regular file) and without
// following a link swapped into the last segment.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOFOLLOW

// identity is the part of stat that tells objects apart.
type identity struct {
	dev, ino, nlink uint64
	ctime           int64
}

func identityOf(fi fs.FileInfo) identity {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return identity{}
	}
	return identity{dev: uint64(st.Dev), ino: uint64(st.Ino), nlink: uint64(st.Nlink), ctime: ctimeNs(st)}
}

// errnoNames are the errno values reported in data.errno.
var errnoNames = map[syscall.Errno]string{
	syscall.EEXIST:       "EEXIST",
	syscall.ENOTEMPTY:    "ENOTEMPTY",
	syscall.EXDEV:        "EXDEV",
	syscall.ENOSPC:       "ENOSPC",
	syscall.EDQUOT:       "EDQUOT",
	syscall.EACCES:       "EACCES",
	syscall.EPERM:        "EPERM",
	syscall.EISDIR:       "EISDIR",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.ELOOP:        "ELOOP",
	syscall.EROFS:        "EROFS",
	syscall.EINVAL:       "EINVAL",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.EMFILE:       "EMFILE",
	syscall.ENFILE:       "ENFILE",
	syscall.EIO:          "EIO",
	syscall.EBUSY:        "EBUSY",
	syscall.EFBIG:        "EFBIG",
	syscall.ETXTBSY:      "ETXTBSY",
	syscall.EMLINK:       "EMLINK",
}

// errnoName returns the name of the errno inside err, or "".
func errnoName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if name, ok := errnoNames[en]; ok {
			return name
		}
		if name := unix.ErrnoName(en); name != "" {
			return name
		}
		return "EUNKNOWN"
	}
	return ""
}

// processAlive reports whether a process exists (EPERM: it exists but is
// someone else's).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
