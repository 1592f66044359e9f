// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix && !linux

package executor

import "golang.org/x/sys/unix"

// ancestorOpenFlags open a directory above another only to stat it and go
// further up.
const ancestorOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
