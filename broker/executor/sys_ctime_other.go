// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix && !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package executor

import "syscall"

// ctimeNs is unknown here; etags then rest on mtime, size and inode.
func ctimeNs(*syscall.Stat_t) int64 { return 0 }
