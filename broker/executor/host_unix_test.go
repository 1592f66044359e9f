// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"io/fs"
	"syscall"
)

// hostIdentity is the device and inode the host gives fi, as the executor
// records them in Info.
func hostIdentity(fi fs.FileInfo) (dev, ino uint64) {
	st := fi.Sys().(*syscall.Stat_t)
	return uint64(st.Dev), uint64(st.Ino)
}

// setUmask sets the process's umask and returns the previous one; ok is
// false where there is none (then file modes are not the tests' to check).
func setUmask(mask int) (old int, ok bool) { return syscall.Umask(mask), true }
