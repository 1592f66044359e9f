// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package executor

import (
	"io/fs"
	"os"
)

// openReadFlags is a plain read-only open where FIFOs and links cannot be
// swapped in the way they can on Unix.
const openReadFlags = os.O_RDONLY

// identity is empty where the platform has no inode numbers; the identity
// checks then compare nothing.
type identity struct {
	dev, ino, nlink uint64
	ctime           int64
}

func identityOf(fs.FileInfo) identity { return identity{} }

// errnoName has no errno names to give here.
func errnoName(error) string { return "" }

// processAlive reports whether a process exists.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
