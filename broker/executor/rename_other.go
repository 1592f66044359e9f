// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package executor

import (
	"errors"
	"io/fs"
	"os"
)

// renameAt moves src's entry to dst's name where there is no renameat(2):
// within one directory by name, through that directory's checked handle;
// across two, by the paths from the root h (the handles were checked just
// before, but the paths are resolved again: what Windows gives without
// renaming by an open file's handle). Without overwrite, an existing target
// is EEXIST, checked just before (atomic only against other fsbroker
// processes, which hold the locks).
func renameAt(h *os.Root, src, dst renameSide, sameDir, overwrite bool) error {
	if !overwrite {
		if _, err := dst.dir.Lstat(dst.name); err == nil {
			return &os.LinkError{Op: "rename", Old: src.name, New: dst.name, Err: fs.ErrExist}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if sameDir {
		return src.dir.Rename(src.name, dst.name)
	}
	return h.Rename(src.rel, dst.rel)
}
