// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package consent

import (
	"fmt"
	"os"
	"syscall"
)

// queueModesChecked: checkPrivate checks owners and modes.
const queueModesChecked = true

// checkPrivate checks that the state directory stateDir is a directory of
// this process's user that group and others cannot write (they could then
// put another directory in place of the queue), and that dir, the queue, is
// a directory (not a symbolic link) of this user's that group and others
// cannot use at all (mode 0700 or narrower): no other user can then read a
// request or write one, or an answer.
func checkPrivate(stateDir, dir string) error {
	euid := os.Geteuid()
	for _, c := range []struct {
		path  string
		stat  func(string) (os.FileInfo, error)
		mask  os.FileMode
		wants string
	}{
		{stateDir, os.Stat, 0o022, "not writable by group or others (chmod go-w)"},
		{dir, os.Lstat, 0o077, "mode 0700 (chmod 700)"},
	} {
		fi, err := c.stat(c.path)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", c.path)
		case !ok || int(st.Uid) != euid:
			return fmt.Errorf("%s is not owned by this user (uid %d)", c.path, euid)
		case fi.Mode().Perm()&c.mask != 0:
			return fmt.Errorf("%s has mode %04o; it must be %s", c.path, fi.Mode().Perm(), c.wants)
		}
	}
	return nil
}

// ownFile reports whether fi is a file of this process's user.
func ownFile(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// openQueueFile opens name in root for reading without waiting: a FIFO
// (put at the name by another process after the caller looked) opens at
// once instead of waiting for a writer, and is then refused as not a
// regular file.
func openQueueFile(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
