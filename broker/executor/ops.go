// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// newDirMode is the mode of a directory the broker creates.
const newDirMode fs.FileMode = 0o755

// Create makes an empty file or a directory at t (resolved with follow
// false). An existing path (a link included) is IO_ERROR EEXIST; a missing
// parent is FILE_NOT_FOUND unless parents is set, when the missing
// directories are made one level at a time through the handle of the level
// above (makeParents).
func (x *Executor) Create(ctx context.Context, t Target, directory, parents bool) error {
	if err := deadline(ctx); err != nil {
		return err
	}
	cur, unlock, err := x.lockResolved(ctx, t.Path)
	if err != nil {
		return err
	}
	defer unlock()
	if cur.Exists {
		return errcode.New(errcode.IOError, "the path already exists").With("errno", "EEXIST")
	}
	rh, err := x.rootHandle(t.Path.Root)
	if err != nil {
		return err
	}
	parentPath, name := t.Path.Parent()
	var dir *os.Root
	switch {
	case cur.ParentExists:
		dir, err = x.openDir(rh.root, parentPath, cur.parent)
	case parents:
		dir, _, err = x.makeParents(ctx, rh, parentPath)
	default:
		return errcode.New(errcode.FileNotFound, "the parent directory does not exist (set parents)")
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	if directory {
		err = dir.Mkdir(name, newDirMode)
	} else {
		var f *os.File
		if f, err = dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, newFileMode); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errcode.New(errcode.IOError, "the path already exists").With("errno", "EEXIST")
		}
		return mapOSError(err, "the path cannot be created")
	}
	if err := syncDir(dir); err != nil {
		x.log.Warn("cannot sync a directory after a create", "error", err)
	}
	return nil
}

// lockResolved takes p's lock and resolves p again (not following a final
// link), so that the operation acts on what is there now; a path that no
// longer resolves to itself (a link appeared on the way) is
// CONCURRENCY_CONFLICT. The caller releases the lock.
func (x *Executor) lockResolved(ctx context.Context, p canon.Path) (Target, func(), error) {
	unlock, err := x.lock(ctx, p)
	if err != nil {
		return Target{}, nil, err
	}
	cur, err := x.Resolve(ctx, p, false)
	if err == nil && cur.Path != p {
		err = conflict("the path changed while the request was decided")
	}
	if err != nil {
		unlock()
		return Target{}, nil, err
	}
	return cur, unlock, nil
}

// Delete removes what is at t (resolved with follow false, so a link is
// removed, not its target). A non-empty directory needs recursive; a
// recursive delete never follows links and stays inside the root. A root is
// never deleted.
//
// A recursive delete of a directory removes what was checked and nothing
// else: checked is the directory's listing that the request was decided on
// (ListSubtree; nil for an empty directory). The tree must hold exactly
// those entries, the same objects under the same names, else
// CONCURRENCY_CONFLICT before anything is removed; it is then removed
// bottom-up by name through directory handles, and an entry moved in
// meanwhile makes the delete stop with CONCURRENCY_CONFLICT, what was
// removed until then staying removed (see removeChecked). On Windows the
// tree is removed as it is (os.Root.RemoveAll), checked is not used.
func (x *Executor) Delete(ctx context.Context, t Target, recursive bool, checked []Entry) error {
	if err := deadline(ctx); err != nil {
		return err
	}
	if t.Path.IsRoot() {
		return errcode.New(errcode.PermissionDenied, "a root cannot be deleted")
	}
	cur, unlock, err := x.lockResolved(ctx, t.Path)
	if err != nil {
		return err
	}
	defer unlock()
	if !cur.Exists {
		return errcode.New(errcode.FileNotFound, "the path does not exist")
	}
	if t.Exists && !sameObject(cur.Info, t.Info) {
		return conflict("the path changed while the request was decided")
	}
	if x.isRoot(t.Path.Root, cur.Info) {
		return errcode.New(errcode.PermissionDenied, "a root cannot be deleted")
	}
	h, err := x.handle(t.Path.Root)
	if err != nil {
		return err
	}
	parentPath, name := t.Path.Parent()
	dir, err := x.openDir(h, parentPath, cur.parent)
	if err != nil {
		return err
	}
	defer dir.Close()
	switch {
	case cur.Info.Type == TypeDirectory && recursive && checkedRemoval:
		err = x.removeChecked(ctx, dir, name, cur.Info, t.Path, checked)
	case cur.Info.Type == TypeDirectory && recursive:
		err = dir.RemoveAll(name)
	case cur.Info.Type == TypeDirectory:
		if err = notEmpty(dir, name); err == nil {
			err = dir.Remove(name)
		}
	default:
		err = dir.Remove(name)
	}
	if err != nil {
		if name := errnoName(err); name == "ENOTEMPTY" || name == "EEXIST" {
			err = errNotEmpty()
		}
		return mapOSError(err, "the path cannot be deleted")
	}
	if err := syncDir(dir); err != nil {
		x.log.Warn("cannot sync a directory after a delete", "error", err)
	}
	return nil
}

func errNotEmpty() error {
	return errcode.New(errcode.IOError, "the directory is not empty (set recursive)").With("errno", "ENOTEMPTY")
}

// notEmpty returns errNotEmpty() when directory name holds any entry.
func notEmpty(dir *os.Root, name string) error {
	d, err := dir.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) > 0 {
		return errNotEmpty()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Rename moves from to to (both resolved with follow false). Both paths are
// locked, in sorted order. Across two roots it is IO_ERROR EXDEV; an
// existing target without overwrite is IO_ERROR EEXIST; a root can be
// neither moved nor replaced, whatever path reaches its directory.
//
// The rename itself never resolves a path: the two parent directories are
// opened, checked to be the directories resolved when the request was
// decided (and not another root's), and the entry is moved from one handle
// to the other by its final names (renameAt: renameat(2), and without
// overwrite renameat2 RENAME_NOREPLACE on Linux or renameatx_np RENAME_EXCL
// on macOS, so that a target made meanwhile by any program is never
// replaced). A directory swapped for a link after the checks is not
// followed: the entry moved is the one named in the directory checked.
func (x *Executor) Rename(ctx context.Context, from, to Target, overwrite bool) error {
	if err := deadline(ctx); err != nil {
		return err
	}
	if from.Path.IsRoot() || to.Path.IsRoot() {
		return errRenameRoot()
	}
	if from.Path.Root.Path != to.Path.Root.Path {
		return errcode.New(errcode.IOError, "the paths are in different roots").With("errno", "EXDEV")
	}
	unlock, err := x.lock(ctx, from.Path, to.Path)
	if err != nil {
		return err
	}
	defer unlock()
	src, err := x.Resolve(ctx, from.Path, false)
	if err != nil {
		return err
	}
	dst, err := x.Resolve(ctx, to.Path, false)
	if err != nil {
		return err
	}
	switch {
	case src.Path != from.Path || dst.Path != to.Path:
		return conflict("a path changed while the request was decided")
	case !src.Exists:
		return errcode.New(errcode.FileNotFound, "the path to rename does not exist")
	case from.Exists && !sameObject(src.Info, from.Info):
		return conflict("the path changed while the request was decided")
	case !dst.ParentExists:
		return errcode.New(errcode.FileNotFound, "the target's parent directory does not exist")
	case from.ParentExists && !sameObject(src.parent, from.parent),
		to.ParentExists && !sameObject(dst.parent, to.parent):
		return conflict("a directory changed while the request was decided")
	case dst.Exists && !overwrite:
		return errTargetExists()
	case to.Exists != dst.Exists || (dst.Exists && !sameObject(dst.Info, to.Info)):
		// The target was decided on as missing (or as another object):
		// replacing what appeared (or what replaced it) would act on a state
		// nobody decided on, as a write's commit refuses.
		return conflict("the target changed while the request was decided")
	case src.Path == dst.Path:
		return nil
	}
	if x.isRoot(from.Path.Root, src.Info) || (dst.Exists && x.isRoot(to.Path.Root, dst.Info)) {
		return errRenameRoot()
	}
	h, err := x.handle(from.Path.Root)
	if err != nil {
		return err
	}
	srcParent, srcName := from.Path.Parent()
	dstParent, dstName := to.Path.Parent()
	srcDir, err := x.openDir(h, srcParent, src.parent)
	if err != nil {
		return err
	}
	defer srcDir.Close()
	dstDir, err := x.openDir(h, dstParent, dst.parent)
	if err != nil {
		return err
	}
	defer dstDir.Close()
	// What is under the source's name now, in the directory checked: the
	// object decided on (this narrows the window to the rename call itself;
	// whatever is then moved is an entry of that directory).
	if fi, err := srcDir.Lstat(srcName); err != nil || !sameObject(infoOf(fi), src.Info) {
		return conflict("the path changed while the request was decided")
	}
	err = renameAt(h,
		renameSide{dir: srcDir, name: srcName, rel: from.Path.Rel},
		renameSide{dir: dstDir, name: dstName, rel: to.Path.Rel},
		srcParent == dstParent, overwrite)
	switch {
	case err == nil:
	case !overwrite && errors.Is(err, fs.ErrExist):
		return errTargetExists()
	default:
		return mapOSError(err, "the path cannot be renamed")
	}
	for _, d := range []*os.Root{srcDir, dstDir} {
		if err := syncDir(d); err != nil {
			x.log.Warn("cannot sync a directory after a rename", "error", err)
		}
	}
	return nil
}

// renameSide is one side of a rename: the directory handle checked, the
// entry's name in it, and its path from the root (used only where the
// platform cannot rename between two directory handles).
type renameSide struct {
	dir  *os.Root
	name string
	rel  string
}

// isRoot reports whether info describes the directory of a root: own's, or
// another's (a nested root reached through own's path).
func (x *Executor) isRoot(own roots.Root, info Info) bool {
	if own.ID.Known() && info.Type == TypeDirectory && fileID(info) == own.ID {
		return true
	}
	_, ok := x.otherRoot(own, info)
	return ok
}

func errRenameRoot() error {
	return errcode.New(errcode.PermissionDenied, "a root cannot be renamed or replaced")
}

func errTargetExists() error {
	return errcode.New(errcode.IOError, "the target exists (set overwrite)").With("errno", "EEXIST")
}

// Lock takes the exclusive locks of paths for the caller (tests, and the
// broker's own compound operations). The returned function releases them.
func (x *Executor) Lock(ctx context.Context, paths ...canon.Path) (func(), error) {
	return x.lock(ctx, paths...)
}
