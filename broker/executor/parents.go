// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// makeParents makes the directory p and any missing directory above it (the
// parents of files/create and files/write), one level at a time, and returns
// an open handle on p with its info. Each level is looked up, made when
// missing, and opened relative to the handle of the level above, never by a
// path: a level that is a symbolic link, or the directory of another root,
// is refused (PERMISSION_DENIED) before anything is made below it, and a
// level opened is checked to be the real directory just looked up (else
// CONCURRENCY_CONFLICT), so a link swapped in at any moment never leads the
// chain anywhere. Directories made for a request refused further down stay.
func (x *Executor) makeParents(ctx context.Context, rh *rootHandle, p canon.Path) (*os.Root, Info, error) {
	info, err := rh.rootInfo()
	if err != nil {
		return nil, Info{}, err
	}
	dir, err := rh.root.OpenRoot(".")
	if err != nil {
		return nil, Info{}, mapOSError(err, "the root cannot be opened")
	}
	for name := range strings.SplitSeq(p.Rel, "/") {
		if name == "" {
			continue
		}
		if err := deadline(ctx); err != nil {
			_ = dir.Close()
			return nil, Info{}, err
		}
		next, nextInfo, err := x.makeLevel(dir, p.Root, name)
		_ = dir.Close()
		if err != nil {
			return nil, Info{}, err
		}
		dir, info = next, nextInfo
	}
	return dir, info, nil
}

// makeLevel makes the directory name in dir unless it exists, and opens it
// (see makeParents).
func (x *Executor) makeLevel(dir *os.Root, own roots.Root, name string) (*os.Root, Info, error) {
	fi, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if err := dir.Mkdir(name, newDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, Info{}, mapOSError(err, "a parent directory cannot be created")
		}
		fi, err = dir.Lstat(name)
	}
	if err != nil {
		return nil, Info{}, mapOSError(err, "a parent directory cannot be read")
	}
	seen := infoOf(fi)
	switch seen.Type {
	case TypeDirectory:
	case TypeSymlink:
		return nil, Info{}, errcode.New(errcode.PermissionDenied, "a parent directory is a symbolic link (it appeared after the path was resolved)")
	default:
		return nil, Info{}, errcode.New(errcode.IOError, "a parent on the path is not a directory").With("errno", "ENOTDIR")
	}
	if r, ok := x.otherRoot(own, seen); ok {
		return nil, Info{}, inOtherRoot(r)
	}
	next, err := dir.OpenRoot(name)
	if err != nil {
		return nil, Info{}, swapped(err, "a parent directory changed while it was created", "a parent directory cannot be opened")
	}
	opened, err := next.Lstat(".")
	if err != nil {
		_ = next.Close()
		return nil, Info{}, mapOSError(err, "a parent directory cannot be read")
	}
	if !sameObject(infoOf(opened), seen) {
		// name was swapped between the lookup and the open.
		_ = next.Close()
		return nil, Info{}, conflict("a parent directory changed while it was created")
	}
	return next, seen, nil
}

// swapped maps err of an open that failed because what it was to open was
// swapped meanwhile (gone, a link in its place, no longer a directory, or a
// link out of the root) to CONCURRENCY_CONFLICT saying changed, and any
// other error as mapOSError does with reason.
func swapped(err error, changed, reason string) error {
	if isGoneErr(err) || isEscape(err) {
		return conflict(changed)
	}
	return mapOSError(err, reason)
}
