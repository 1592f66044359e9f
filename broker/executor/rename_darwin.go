// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import "golang.org/x/sys/unix"

// renameNoReplace is renameatx_np(2) with RENAME_EXCL: EEXIST when the
// target exists, atomically. A file system without the flag (ENOTSUP) gives
// errNoReplaceUnsupported.
func renameNoReplace(olddirfd int, oldname string, newdirfd int, newname string) error {
	err := ignoringEINTR(func() error {
		return unix.RenameatxNp(olddirfd, oldname, newdirfd, newname, unix.RENAME_EXCL)
	})
	if err == unix.ENOTSUP || err == unix.EINVAL {
		return errNoReplaceUnsupported
	}
	return err
}
