// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build darwin || freebsd || netbsd

package executor

import (
	"os"
	"syscall"
	"time"
)

// statNoFollow describes name (a path inside h; a link in its last segment
// is not followed) with lstat through the root handle, with its access and
// birth times.
func statNoFollow(h *os.Root, name string) (StatResult, error) {
	fi, err := h.Lstat(name)
	if err != nil {
		return StatResult{}, err
	}
	res := StatResult{Info: infoOf(fi)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		res.Accessed = time.Unix(st.Atimespec.Unix())
		if st.Birthtimespec.Sec > 0 {
			res.Born = time.Unix(st.Birthtimespec.Unix())
		}
	}
	return res, nil
}
