// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin || freebsd

package metrics

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// spaceOf asks statfs(2) for the space of the file system holding path.
func spaceOf(path string) (space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return space{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return space{avail: uint64(st.Bavail) * bsize, size: uint64(st.Blocks) * bsize}, nil
}
