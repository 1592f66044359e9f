// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package watch

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// rootDir is the Hub's os.Root handle of one root directory. Everything the
// Hub watches in the root is looked up through it.
type rootDir struct {
	root *os.Root
	dir  string
}

// handle is an object in a root, found by an Lstat through the root handle,
// and for a directory opened through it and checked to be the object the
// Lstat saw (device and inode where the platform has them).
type handle struct {
	kind kind
	id   roots.FileID
	abs  string   // the host path, which the watch is added by
	f    *os.File // the open directory; nil for anything else
}

// openRootDir opens the root directory dir and returns its identity, for
// the caller to check against the one the root was resolved with.
func openRootDir(dir string) (*rootDir, roots.FileID, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, roots.FileID{}, fmt.Errorf("open the root directory: %w", err)
	}
	fi, err := r.Stat(".")
	if err != nil {
		_ = r.Close()
		return nil, roots.FileID{}, fmt.Errorf("stat the root directory: %w", err)
	}
	return &rootDir{root: r, dir: dir}, roots.FileIDOf(fi), nil
}

// close closes the root handle.
func (rd *rootDir) close() error {
	if err := rd.root.Close(); err != nil {
		return fmt.Errorf("close a root handle: %w", err)
	}
	return nil
}

// lookup finds rel (a canonical Rel: "" for the root) through the root
// handle, without following a link in its last segment; a directory is
// opened, and one that is not the object the Lstat saw is errSwapped.
func (rd *rootDir) lookup(rel string) (*handle, error) {
	name := dotRel(rel)
	fi, err := rd.root.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("look up a path: %w", err)
	}
	h := &handle{kind: kindOf(fi.Mode()), id: roots.FileIDOf(fi), abs: absPath(rd.dir, rel)}
	if h.kind != kindDir {
		return h, nil
	}
	f, err := rd.root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open a directory: %w", err)
	}
	ofi, err := f.Stat()
	if err != nil || !ofi.IsDir() || !sameID(h.id, roots.FileIDOf(ofi)) {
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("stat a directory: %w", err)
		}
		return nil, errSwapped
	}
	h.f = f
	return h, nil
}

// kindOf is the kind of a file mode.
func kindOf(m fs.FileMode) kind {
	switch {
	case m.IsDir():
		return kindDir
	case m&fs.ModeSymlink != 0:
		return kindLink
	}
	return kindOther
}

// readDir reads the entries of the open directory.
func (h *handle) readDir() ([]fs.DirEntry, error) {
	if h.f == nil {
		return nil, errNotDir
	}
	list, err := h.f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read a directory: %w", err)
	}
	return list, nil
}

// close closes the handle.
func (h *handle) close() {
	if h.f != nil {
		_ = h.f.Close()
	}
}

// dotRel turns a Rel into a name for the root handle ("." for the root).
func dotRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
