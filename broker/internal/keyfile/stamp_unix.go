// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package keyfile

import (
	"io/fs"
	"syscall"
)

// fileID is a file's device and inode number.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) // the field types differ between platforms
	}
	return 0, 0
}
