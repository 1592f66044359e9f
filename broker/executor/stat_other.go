// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !(linux || darwin || freebsd || netbsd)

package executor

import "os"

// statNoFollow describes name (a path inside h; a link in its last segment
// is not followed) with lstat through the root handle. Access and birth
// times are not read here (zero).
func statNoFollow(h *os.Root, name string) (StatResult, error) {
	fi, err := h.Lstat(name)
	if err != nil {
		return StatResult{}, err
	}
	return StatResult{Info: infoOf(fi)}, nil
}
