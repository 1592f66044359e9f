// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// renameAt moves src's entry to dst's name with renameat(2), relative to the
// two directory handles: no path is resolved, no link followed (a link
// itself is moved, as rename(2) does). Without overwrite it asks the kernel
// not to replace an existing target (renameNoReplace); where the platform
// or file system cannot, it checks that the target is missing just before a
// plain renameat (atomic then only against other fsbroker processes, which
// hold the locks). h and sameDir serve only the platforms without renameat.
func renameAt(_ *os.Root, src, dst renameSide, _, overwrite bool) error {
	sf, err := src.dir.Open(".")
	if err != nil {
		return err
	}
	defer sf.Close()
	df, err := dst.dir.Open(".")
	if err != nil {
		return err
	}
	defer df.Close()
	return withFD(sf, func(sfd int) error {
		return withFD(df, func(dfd int) error {
			if !overwrite {
				err := renameNoReplace(sfd, src.name, dfd, dst.name)
				if !errors.Is(err, errNoReplaceUnsupported) {
					return linkError(src, dst, err)
				}
				var st unix.Stat_t
				if err := unix.Fstatat(dfd, dst.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
					return linkError(src, dst, unix.EEXIST)
				}
			}
			return linkError(src, dst, ignoringEINTR(func() error { return unix.Renameat(sfd, src.name, dfd, dst.name) }))
		})
	})
}

// errNoReplaceUnsupported says that the kernel or file system cannot rename
// without replacing: the caller checks and renames instead.
var errNoReplaceUnsupported = errors.New("executor: no rename without replace here")

// withFD runs fn with f's descriptor, kept open meanwhile.
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("a directory handle: %w", err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return fmt.Errorf("a directory handle: %w", err)
	}
	return ferr
}

// linkError wraps a rename's errno as os.Rename does (nil stays nil).
func linkError(src, dst renameSide, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: "renameat", Old: src.name, New: dst.name, Err: err}
}

// ignoringEINTR retries fn while it is interrupted.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
