// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package executor_test

import "io/fs"

// hostIdentity is zero where the platform gives no inode numbers, as the
// executor's Info is there.
func hostIdentity(fs.FileInfo) (dev, ino uint64) { return 0, 0 }

// setUmask does nothing where there is no umask (ok is false).
func setUmask(int) (old int, ok bool) { return 0, false }
