// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// statNoFollow describes name (a path inside h; a link in its last segment
// is not followed) through a handle opened with O_PATH|O_NOFOLLOW, which
// opens nothing for reading: fstat for its info and access time, statx for
// its birth time where the kernel and file system record one.
func statNoFollow(h *os.Root, name string) (StatResult, error) {
	f, err := h.OpenFile(name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return StatResult{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return StatResult{}, err
	}
	res := StatResult{Info: infoOf(fi)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		res.Accessed = time.Unix(st.Atim.Unix())
	}
	var sx unix.Statx_t
	err = ignoringEINTR(func() error {
		return unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &sx)
	})
	switch {
	case err == nil && sx.Mask&unix.STATX_BTIME != 0:
		res.Born = time.Unix(sx.Btime.Sec, int64(sx.Btime.Nsec))
	case err != nil && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL):
		return StatResult{}, err
	}
	return res, nil
}
