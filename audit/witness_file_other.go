// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package audit

import "os"

// witnessOpenFlags are the flags a witness file is opened with (this
// platform has no O_NOFOLLOW: the regular-file check after the open stays).
const witnessOpenFlags = os.O_WRONLY | os.O_APPEND | os.O_CREATE
