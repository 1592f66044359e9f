// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package roots

import (
	"io/fs"
	"syscall"
)

// FileIDOf returns the identity in a FileInfo from Lstat, Stat or fstat;
// the zero FileID where the platform gave none.
func FileIDOf(fi fs.FileInfo) FileID {
	if fi == nil {
		return FileID{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
}
