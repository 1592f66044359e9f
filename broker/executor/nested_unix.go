// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// maxAncestors bounds the walk up from a directory to its root.
const maxAncestors = 4096

// nestedRootAbove returns the root, other than own, whose directory is dir or
// one of dir's ancestors below own's directory: a nested root whose directory
// was moved (or renamed) to another place inside own, at any depth. The walk
// goes up through ".." from dir's own descriptor, never by a path, and stops
// at own's directory (by identity) or at the top of the file system.
func (x *Executor) nestedRootAbove(dir *os.Root, own roots.Root) (roots.Root, bool, error) {
	nested := x.nestedIn(own)
	if len(nested) == 0 {
		return roots.Root{}, false, nil
	}
	f, err := dir.Open(".")
	if err != nil {
		return roots.Root{}, false, mapOSError(err, "the directory cannot be opened")
	}
	defer f.Close()
	var found roots.Root
	var ok bool
	err = withFD(f, func(start int) error {
		fd := start
		defer func() {
			if fd != start {
				_ = unix.Close(fd)
			}
		}()
		for range maxAncestors {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
			id := roots.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}
			if id == own.ID {
				return nil
			}
			for _, r := range nested {
				if r.ID == id {
					found, ok = r, true
					return nil
				}
			}
			var up int
			err := ignoringEINTR(func() (err error) {
				up, err = unix.Openat(fd, "..", ancestorOpenFlags, 0)
				return err
			})
			if err != nil {
				return err
			}
			if fd != start {
				_ = unix.Close(fd)
			}
			fd = up
			var upSt unix.Stat_t
			if err := unix.Fstat(fd, &upSt); err != nil {
				return err
			}
			if upSt.Dev == st.Dev && upSt.Ino == st.Ino {
				return nil // the top of the file system
			}
		}
		return nil
	})
	if err != nil {
		return roots.Root{}, false, mapOSError(err, "a directory above the path cannot be read")
	}
	return found, ok, nil
}
