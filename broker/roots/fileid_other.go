// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package roots

import "io/fs"

// FileIDOf returns the zero FileID: this platform gives no device and inode
// numbers through fs.FileInfo.
func FileIDOf(fs.FileInfo) FileID { return FileID{} }
