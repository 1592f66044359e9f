// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !(linux || darwin || freebsd)

package executor

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// dirFile is an open directory that a listing reads, through an os.Root
// handle of its own: names from Readdirnames (no entry is stat'ed), entries
// stat'ed with the handle's Lstat, subdirectories opened with its OpenRoot
// and checked to be directories.
type dirFile struct {
	r *os.Root
	f *os.File
}

// openListDir opens the directory rel of the root h. The caller checks, with
// stamp, that it is the directory it resolved.
func openListDir(h *os.Root, rel string) (*dirFile, error) {
	if rel == "" {
		rel = "."
	}
	r, err := h.OpenRoot(rel)
	if err != nil {
		return nil, err
	}
	f, err := r.Open(".")
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return &dirFile{r: r, f: f}, nil
}

// openChild opens the subdirectory name (one segment) of d. OpenRoot would
// follow a link (or a junction) swapped in for name after the Lstat, and the
// walk would list another directory under name's path: the directory opened
// must be the one the Lstat saw (os.SameFile), or name is gone as the
// directory it was.
func (d *dirFile) openChild(name string) (*dirFile, error) {
	seen, err := d.r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !seen.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	child, err := openListDir(d.r, name)
	if err != nil {
		return nil, err
	}
	opened, err := child.f.Stat()
	if err != nil || !os.SameFile(seen, opened) {
		_ = child.Close()
		if err == nil {
			err = fs.ErrNotExist
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return child, nil
}

// stamp describes the open directory itself. Here it tells no change apart
// (known is false), so that no listing snapshot is ever reused.
func (d *dirFile) stamp() (dirStamp, error) {
	fi, err := d.f.Stat()
	if err != nil {
		return dirStamp{}, err
	}
	id := identityOf(fi)
	return dirStamp{dev: id.dev, ino: id.ino, isDir: fi.IsDir()}, nil
}

// lstat describes the entry name of d; a link is described, not followed.
func (d *dirFile) lstat(name string) (entryStat, error) {
	fi, err := d.r.Lstat(name)
	if err != nil {
		return entryStat{}, err
	}
	id := identityOf(fi)
	return entryStat{typ: typeOf(fi.Mode()), size: fi.Size(), mtime: fi.ModTime().UTC(),
		id: roots.FileID{Dev: id.dev, Ino: id.ino}}, nil
}

// remove removes the entry name of d by name, through d's handle (os.Root:
// a file or an empty directory, whatever dir says). No link is followed.
func (d *dirFile) remove(name string, _ bool) error { return d.r.Remove(name) }

// readNames returns up to n more names of d (io.EOF at the end).
func (d *dirFile) readNames(n int) ([]string, error) { return d.f.Readdirnames(n) }

// readEntries returns up to n more entries of d (io.EOF at the end).
func (d *dirFile) readEntries(n int) ([]fs.DirEntry, error) { return d.f.ReadDir(n) }

// Close closes d.
func (d *dirFile) Close() error { return errors.Join(d.f.Close(), d.r.Close()) }

// isGoneErr reports an error of openChild or lstat that means the entry is
// no longer there as the directory it was.
func isGoneErr(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
