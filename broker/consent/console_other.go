// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package consent

import (
	"fmt"
	"os"
)

// queueModesChecked: there are no Unix modes to check.
const queueModesChecked = false

// checkPrivate checks that dir, the queue, is a directory. Where there are
// no Unix modes (Windows), who may use it is the directory's ACL, which is
// not checked: the state directory under the user's profile is private to
// the user by default.
func checkPrivate(_, dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// ownFile reports whether fi is a file of this process's user: where there
// are no Unix owners (Windows), the directory's ACL decides (checkPrivate).
func ownFile(os.FileInfo) bool { return true }

// openQueueFile opens name in root for reading (no FIFO can be put there
// without Unix file types).
func openQueueFile(root *os.Root, name string) (*os.File, error) { return root.Open(name) }
