// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// spaceOf asks GetDiskFreeSpaceEx for the space of the volume holding path.
func spaceOf(path string) (space, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return space{}, fmt.Errorf("%s: %w", path, err)
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return space{}, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", path, err)
	}
	return space{avail: avail, size: total}, nil
}
