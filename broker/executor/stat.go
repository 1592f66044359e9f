// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// StatResult describes one file system object: what Info holds, and the
// times a file's metadata shows besides its modification time.
type StatResult struct {
	Info
	// Accessed is the last access time; zero where the platform does not
	// report it.
	Accessed time.Time
	// Born is the birth (creation) time; zero where the file system or the
	// platform does not record it.
	Born time.Time
}

// Stat describes the object resolved as t: without opening it for reading
// (a FIFO, socket or device is described, never opened) and without
// following a link in its last segment, as lstat does (Resolve followed the
// links that stay inside the root; a link swapped in since is described, and
// is then not the object resolved). What it describes must still be the
// object resolved (device, inode and type), else CONCURRENCY_CONFLICT; a
// path that does not exist is FILE_NOT_FOUND.
func (x *Executor) Stat(ctx context.Context, t Target) (StatResult, error) {
	if err := deadline(ctx); err != nil {
		return StatResult{}, err
	}
	if !t.Exists {
		return StatResult{}, errcode.New(errcode.FileNotFound, "the path does not exist")
	}
	rh, err := x.rootHandle(t.Path.Root)
	if err != nil {
		return StatResult{}, err
	}
	name := t.Path.Rel
	if name == "" {
		name = "."
	}
	res, err := statNoFollow(rh.root, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return StatResult{}, conflict("the path was removed while the request was decided")
		}
		return StatResult{}, swappedOr(rh.root, t, mapOSError(err, "the path cannot be described"))
	}
	if !sameObject(res.Info, t.Info) {
		return StatResult{}, conflict("the path changed while the request was decided")
	}
	return res, nil
}
