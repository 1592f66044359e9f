// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package keyfile

import "io/fs"

// fileID is 0 where a FileInfo carries no inode number: the stamp then
// rests on size and modification time, and the maximum staleness.
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
