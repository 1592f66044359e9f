// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import "golang.org/x/sys/unix"

// renameNoReplace is renameat2(2) with RENAME_NOREPLACE: EEXIST when the
// target exists, atomically. A kernel before 3.15 (ENOSYS) or a file system
// without the flag (EINVAL) gives errNoReplaceUnsupported; a rename that is
// invalid in itself (a directory into itself) then fails again as plain
// renameat, with its own EINVAL.
func renameNoReplace(olddirfd int, oldname string, newdirfd int, newname string) error {
	err := ignoringEINTR(func() error {
		return unix.Renameat2(olddirfd, oldname, newdirfd, newname, unix.RENAME_NOREPLACE)
	})
	if err == unix.ENOSYS || err == unix.EINVAL {
		return errNoReplaceUnsupported
	}
	return err
}
