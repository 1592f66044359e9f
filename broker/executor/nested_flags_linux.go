// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import "golang.org/x/sys/unix"

// ancestorOpenFlags open a directory above another only to stat it and go
// further up (O_PATH: no read permission needed).
const ancestorOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
