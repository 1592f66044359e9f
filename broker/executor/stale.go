// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// RemoveStaleTemps walks a root and removes the temporary files that a broker
// process which no longer runs left behind (a crash between creating and
// renaming one). Files of live processes, this one included, are kept. The
// walk goes through the root handle and never follows links. It returns how
// many files were removed.
//
// Directories are read in batches, not whole and sorted, so that a root with
// a huge directory costs a batch of entries in memory, not the directory.
func (x *Executor) RemoveStaleTemps(ctx context.Context, r roots.Root) (int, error) {
	h, err := x.handle(r)
	if err != nil {
		return 0, err
	}
	removed := 0
	pending := []string{"."}
	for len(pending) > 0 {
		dir := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		n, subdirs, err := x.removeStaleIn(ctx, h, r, dir)
		removed += n
		if err != nil {
			return removed, err
		}
		pending = append(pending, subdirs...)
	}
	return removed, nil
}

// staleBatch is how many entries of a directory RemoveStaleTemps reads at once.
const staleBatch = 1024

// removeStaleIn removes the stale temporary files directly in dir and returns
// its subdirectories (links are not followed). An unreadable directory is
// skipped, not fatal; only ctx ending is an error. Entry types come from the
// directory read itself (getdents) where the file system gives them: no
// entry is stat'ed for them.
func (x *Executor) removeStaleIn(ctx context.Context, h *os.Root, r roots.Root, dir string) (int, []string, error) {
	f, err := openListDir(h, dir)
	if err != nil {
		return 0, nil, ctx.Err()
	}
	defer f.Close()
	removed := 0
	var subdirs []string
	for {
		if err := ctx.Err(); err != nil {
			return removed, nil, err
		}
		entries, err := f.readEntries(staleBatch)
		for _, d := range entries {
			p := d.Name()
			if dir != "." {
				p = dir + "/" + p
			}
			switch {
			case d.IsDir():
				subdirs = append(subdirs, p)
			case d.Type().IsRegular() && IsTempName(d.Name()) && !tempOwnerAlive(d.Name()):
				if err := h.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					x.log.Warn("cannot remove a stale temporary file", "root", r.Mount, "error", err)
					continue
				}
				removed++
			}
		}
		if err != nil { // io.EOF at the end, or an unreadable rest: done with this directory
			return removed, subdirs, nil
		}
	}
}

// tempOwnerAlive reports whether the process named in a temporary file's
// name still runs. A name it cannot read counts as alive (kept).
func tempOwnerAlive(name string) bool {
	rest := strings.TrimPrefix(name, TempPrefix)
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return true
	}
	if pid == os.Getpid() {
		return true
	}
	return processAlive(pid)
}
