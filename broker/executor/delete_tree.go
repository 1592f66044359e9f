// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// checkedRemoval says whether a recursive delete removes only the entries
// it was checked on (removeChecked). Windows removes the tree as it is
// (os.Root.RemoveAll): there, a directory cannot be removed while a handle
// on it is open, which the walk through directory handles needs.
const checkedRemoval = runtime.GOOS != "windows"

// checkedNode is one entry of the listing a recursive delete was decided
// on: its identity as listed and, for a directory, its entries by name.
type checkedNode struct {
	typ      string
	id       roots.FileID
	names    []string                // a directory's entries, in listing order
	children map[string]*checkedNode // the same, by name
}

// checkedTree turns the listing checked of the directory p (whose info is
// info) into a tree. Entries that are not below p, not under a directory
// of the listing, listed twice or without an identity make it
// CONCURRENCY_CONFLICT: the directory does not hold what was checked.
func checkedTree(p canon.Path, info Info, checked []Entry) (*checkedNode, error) {
	top := &checkedNode{typ: TypeDirectory, id: fileID(info)}
	dirs := map[string]*checkedNode{"": top}
	prefix := p.Rel + "/"
	for _, e := range checked {
		rest, ok := strings.CutPrefix(e.Path.Rel, prefix)
		if !ok || rest == "" || e.Path.Root.Path != p.Root.Path || !e.id.Known() {
			return nil, errTreeChanged()
		}
		dir, name := "", rest
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			dir, name = rest[:i], rest[i+1:]
		}
		parent := dirs[dir]
		if parent == nil || parent.children[name] != nil {
			return nil, errTreeChanged()
		}
		n := &checkedNode{typ: e.Type, id: e.id}
		if parent.children == nil {
			parent.children = make(map[string]*checkedNode)
		}
		parent.children[name] = n
		parent.names = append(parent.names, name)
		if n.typ == TypeDirectory {
			dirs[rest] = n
		}
	}
	return top, nil
}

// errTreeChanged refuses a recursive delete, before anything is removed,
// whose directory does not hold exactly the entries checked.
func errTreeChanged() error {
	return conflict("the directory changed while the request was decided")
}

// errChangedWhileDeleted stops a recursive delete midway: an entry is not
// the one checked, or a directory holds an entry that was not checked.
func errChangedWhileDeleted() error {
	return conflict("the directory changed while it was deleted")
}

// removeChecked removes the directory name of parent (the checked parent
// directory of p), whose info is info, and everything below it, as checked
// (the listing the decision was made on, from ListSubtree), and nothing
// else. The tree is walked through directory handles only: each directory
// is opened by its name in its parent's handle without following a link
// (openat O_NOFOLLOW|O_DIRECTORY) and checked (fstat) to be the directory
// listed.
//
// First the tree is verified to hold exactly the entries checked (the same
// names in each directory, each the same object: device, inode and type),
// else CONCURRENCY_CONFLICT and nothing is removed. Then it is removed
// bottom-up by name through each parent's handle, each entry checked again
// just before (fstatat): files and links with unlinkat, directories with
// unlinkat(AT_REMOVEDIR), which removes only an empty one. An entry moved
// into the tree after the verification is never removed, and its directory
// then cannot be (CONCURRENCY_CONFLICT, "the directory changed while it was
// deleted"); what was removed before stays removed.
func (x *Executor) removeChecked(ctx context.Context, parent *os.Root, name string, info Info, p canon.Path, checked []Entry) error {
	tree, err := checkedTree(p, info, checked)
	if err != nil {
		return err
	}
	pd, err := openListDir(parent, ".")
	if err != nil {
		return mapOSError(err, "the directory cannot be opened")
	}
	defer pd.Close()
	w := &treeRemoval{ctx: ctx}
	top, err := w.enter(pd, name, tree)
	if err != nil {
		return err
	}
	w.levels = []*level{top}
	err = w.verify(0, tree)
	if err == nil {
		err = w.remove(0, tree)
	}
	closeLevels(w.levels)
	if err != nil {
		return err
	}
	return removeEntry(pd, name, tree)
}

// treeRemoval is removeChecked's walk: the directories on its path, the
// deleted directory first (see walker: deeper than maxOpenDirs, a
// directory is closed while its subdirectories are walked and opened again
// afterwards, checked to be the same).
type treeRemoval struct {
	ctx    context.Context
	levels []*level
}

// enter opens the subdirectory name of d, which must be the directory n
// (else CONCURRENCY_CONFLICT), as a level of the walk.
func (w *treeRemoval) enter(d *dirFile, name string, n *checkedNode) (*level, error) {
	c, err := d.openChild(name)
	if err != nil {
		if isGoneErr(err) {
			return nil, errTreeChanged()
		}
		return nil, mapOSError(err, "the directory cannot be opened")
	}
	st, err := c.stamp()
	if err == nil && (!st.isDir || (roots.FileID{Dev: st.dev, Ino: st.ino}) != n.id) {
		err = errTreeChanged()
	}
	if err != nil {
		_ = c.Close()
		return nil, mapOSError(err, "the directory cannot be read")
	}
	return &level{d: c, name: name, id: snapKey{st.dev, st.ino}}, nil
}

// dir returns the open directory at depth, or CONCURRENCY_CONFLICT when it
// is no longer there as the directory checked.
func (w *treeRemoval) dir(depth int) (*dirFile, error) {
	d, err := openLevel(w.levels, depth)
	if err == nil && d == nil {
		err = errTreeChanged()
	}
	return d, err
}

// descend runs fn on the subdirectory name of the directory at depth,
// which must be n.
func (w *treeRemoval) descend(depth int, name string, n *checkedNode, fn func(int, *checkedNode) error) error {
	d, err := w.dir(depth)
	if err != nil {
		return err
	}
	lv, err := w.enter(d, name, n)
	if err != nil {
		return err
	}
	w.levels = pushLevel(w.levels, depth, lv)
	err = fn(depth+1, n)
	w.levels = popLevel(w.levels, depth)
	return err
}

// verify checks that the directory at depth holds exactly n's entries, each
// the object checked, and so on below.
func (w *treeRemoval) verify(depth int, n *checkedNode) error {
	if err := deadline(w.ctx); err != nil {
		return err
	}
	d, err := w.dir(depth)
	if err != nil {
		return err
	}
	if err := holdsExactly(d, n); err != nil {
		return err
	}
	for _, name := range n.names {
		c := n.children[name]
		if c.typ == TypeDirectory {
			// enter checks the directory's identity on its handle.
			err = w.descend(depth, name, c, w.verify)
		} else if d, err = w.dir(depth); err == nil {
			err = checkEntry(d, name, c, errTreeChanged)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// holdsExactly checks that d's names (all of them: hidden ones and the
// broker's temporary files too) are those of n's entries.
func holdsExactly(d *dirFile, n *checkedNode) error {
	seen := make(map[string]bool, len(n.names))
	for {
		names, err := d.readNames(256)
		for _, name := range names {
			if n.children[name] == nil || seen[name] {
				return errTreeChanged()
			}
			seen[name] = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return mapOSError(err, "the directory cannot be read")
		}
	}
	if len(seen) != len(n.names) {
		return errTreeChanged()
	}
	return nil
}

// remove removes the entries of the directory at depth, bottom-up.
func (w *treeRemoval) remove(depth int, n *checkedNode) error {
	for i, name := range n.names {
		if i%statBatch == 0 {
			if err := deadline(w.ctx); err != nil {
				return err
			}
		}
		c := n.children[name]
		if c.typ == TypeDirectory {
			if err := w.descend(depth, name, c, w.remove); err != nil {
				return err
			}
		}
		d, err := w.dir(depth)
		if err != nil {
			return err
		}
		if err := removeEntry(d, name, c); err != nil {
			return err
		}
	}
	return nil
}

// checkEntry checks that the entry name of d is the object n, else returns
// changed().
func checkEntry(d *dirFile, name string, n *checkedNode, changed func() error) error {
	es, err := d.lstat(name)
	switch {
	case err != nil && isGoneErr(err):
		return changed()
	case err != nil:
		return mapOSError(err, "an entry cannot be read")
	case es.typ != n.typ || es.id != n.id:
		return changed()
	}
	return nil
}

// removeEntry removes the entry name of d, checked first to be the object
// n: a directory only when it is empty (else an entry that was not checked
// is in it), anything else only when it is not a directory.
func removeEntry(d *dirFile, name string, n *checkedNode) error {
	if err := checkEntry(d, name, n, errChangedWhileDeleted); err != nil {
		return err
	}
	err := d.remove(name, n.typ == TypeDirectory)
	if err == nil {
		return nil
	}
	// Not empty (ENOTEMPTY, or EEXIST on some systems), or no longer the
	// object checked (gone, or another put in its place since the check).
	if errors.Is(err, fs.ErrExist) || checkEntry(d, name, n, errChangedWhileDeleted) != nil {
		return errChangedWhileDeleted()
	}
	return mapOSError(err, "the path cannot be deleted")
}
