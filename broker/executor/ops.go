package executor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// newDirMode is the mode of a directory the broker creates.
const newDirMode fs.FileMode = 0o755

// Create makes an empty file or a directory at t (resolved with follow
// false). An existing path (a link included) is IO_ERROR EEXIST; a missing
// parent is FILE_NOT_FOUND unless parents is set.
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
	h, err := x.handle(t.Path.Root)
	if err != nil {
		return err
	}
	parentPath, name := t.Path.Parent()
	if !cur.ParentExists {
		if !parents {
			return errcode.New(errcode.FileNotFound, "the parent directory does not exist (set parents)")
		}
		if err := h.MkdirAll(parentPath.Rel, newDirMode); err != nil {
			return mapOSError(err, "the parent directories cannot be created")
		}
		if cur, err = x.Resolve(ctx, t.Path, false); err != nil {
			return err
		}
		if cur.Path != t.Path || !cur.ParentExists {
			return conflict("the path changed while its parent directories were created")
		}
		if cur.Exists {
			return errcode.New(errcode.IOError, "the path already exists").With("errno", "EEXIST")
		}
	}
	dir, err := x.openDir(h, parentPath, cur.parent)
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
func (x *Executor) Delete(ctx context.Context, t Target, recursive bool) error {
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
// neither moved nor replaced.
func (x *Executor) Rename(ctx context.Context, from, to Target, overwrite bool) error {
	if err := deadline(ctx); err != nil {
		return err
	}
	if from.Path.IsRoot() || to.Path.IsRoot() {
		return errcode.New(errcode.PermissionDenied, "a root cannot be renamed or replaced")
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
	case dst.Exists && !overwrite:
		return errcode.New(errcode.IOError, "the target exists (set overwrite)").With("errno", "EEXIST")
	case src.Path == dst.Path:
		return nil
	}
	h, err := x.handle(from.Path.Root)
	if err != nil {
		return err
	}
	srcParent, _ := from.Path.Parent()
	dstParent, _ := to.Path.Parent()
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
	if err := h.Rename(from.Path.Rel, to.Path.Rel); err != nil {
		return mapOSError(err, "the path cannot be renamed")
	}
	for _, d := range []*os.Root{srcDir, dstDir} {
		if err := syncDir(d); err != nil {
			x.log.Warn("cannot sync a directory after a rename", "error", err)
		}
	}
	return nil
}

// Lock takes the exclusive locks of paths for the caller (tests, and the
// broker's own compound operations). The returned function releases them.
func (x *Executor) Lock(ctx context.Context, paths ...canon.Path) (func(), error) {
	return x.lock(ctx, paths...)
}
