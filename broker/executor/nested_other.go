// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package executor

import (
	"os"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// nestedRootAbove finds, where there is no way up from a directory handle,
// only a nested root whose directory is dir itself.
func (x *Executor) nestedRootAbove(dir *os.Root, own roots.Root) (roots.Root, bool, error) {
	fi, err := dir.Stat(".")
	if err != nil {
		return roots.Root{}, false, mapOSError(err, "the directory cannot be read")
	}
	r, ok := x.otherRoot(own, infoOf(fi))
	return r, ok, nil
}
