// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// rootDir is the Hub's descriptor of one root directory (O_PATH), opened
// once, without following a link in its last segment. Everything the Hub
// watches in the root is looked up from it.
type rootDir struct {
	fd int
	// noOpenat2 is set once openat2 turned out to be unavailable (before
	// Linux 5.6, or refused by a seccomp filter): lookups then walk.
	noOpenat2 atomic.Bool
}

// handle is an object in a root, opened (O_PATH) by a lookup that follows no
// symbolic link, with what fstat said of it. A directory's handle is what
// its watch is added on and its entries are read from.
type handle struct {
	fd   int
	kind kind
	id   roots.FileID
}

// openRootDir opens the root directory dir and returns its identity, for
// the caller to check against the one the root was resolved with.
func openRootDir(dir string) (*rootDir, roots.FileID, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, roots.FileID{}, fmt.Errorf("open the root directory: %w", err)
	}
	h, err := newHandle(fd)
	if err != nil {
		return nil, roots.FileID{}, err
	}
	return &rootDir{fd: h.fd}, h.id, nil
}

// close closes the root's descriptor.
func (rd *rootDir) close() error {
	if err := unix.Close(rd.fd); err != nil {
		return fmt.Errorf("close a root's descriptor: %w", err)
	}
	return nil
}

// lookup opens rel (a canonical Rel: "" for the root) without following any
// symbolic link on the way or in its last segment, and never above the
// root: a link in the last segment is opened as the link itself, a link on
// the way is errSwapped. It takes one openat2(2) with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS where the kernel has it, and otherwise an openat(2)
// per segment with O_NOFOLLOW, each relative to the directory before.
func (rd *rootDir) lookup(rel string) (*handle, error) {
	if rel == "" {
		fd, err := unix.FcntlInt(uintptr(rd.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("duplicate a root's descriptor: %w", err)
		}
		return newHandle(fd)
	}
	if !rd.noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := retryEINTR(func() (int, error) { return unix.Openat2(rd.fd, rel, &how) })
		switch {
		case err == nil:
			return newHandle(fd)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.EINVAL), errors.Is(err, unix.E2BIG):
			rd.noOpenat2.Store(true)
		case errors.Is(err, unix.ENAMETOOLONG), errors.Is(err, unix.EAGAIN):
			// Too long for one lookup, or a rename raced it: walk.
		default:
			return nil, lookupError(err)
		}
	}
	return rd.walk(rel)
}

// walk is lookup one segment at a time.
func (rd *rootDir) walk(rel string) (*handle, error) {
	segs := strings.Split(rel, "/")
	cur := rd.fd
	for i, seg := range segs {
		if !validName(seg) {
			if cur != rd.fd {
				_ = unix.Close(cur)
			}
			return nil, fmt.Errorf("segment %d of a path: %w", i, fs.ErrNotExist)
		}
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(segs)-1 {
			flags |= unix.O_DIRECTORY // a link or a file on the way: ENOTDIR
		}
		fd, err := retryEINTR(func() (int, error) { return unix.Openat(cur, seg, flags, 0) })
		if cur != rd.fd {
			_ = unix.Close(cur)
		}
		if err != nil {
			return nil, lookupError(err)
		}
		cur = fd
	}
	return newHandle(cur)
}

// lookupError wraps a lookup's error: a link on the way (ELOOP from
// RESOLVE_NO_SYMLINKS) or a step out of the root (EXDEV from
// RESOLVE_BENEATH) is errSwapped, since the caller's paths have neither.
func lookupError(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("look up a path: %w (%w)", errSwapped, err)
	}
	return fmt.Errorf("look up a path: %w", err)
}

// newHandle takes fd over and fstats it.
func newHandle(fd int) (*handle, error) {
	var st unix.Stat_t
	if _, err := retryEINTR(func() (int, error) { return 0, unix.Fstat(fd, &st) }); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("fstat an opened path: %w", err)
	}
	h := &handle{fd: fd, kind: kindOther, id: roots.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		h.kind = kindDir
	case unix.S_IFLNK:
		h.kind = kindLink
	}
	return h, nil
}

// procPath names the open object itself: the kernel resolves it to what
// the descriptor holds, not to whatever a path leads to now.
func (h *handle) procPath() string { return "/proc/self/fd/" + strconv.Itoa(h.fd) }

// readDir reads the entries of the directory h is open on (not of whatever
// its path names now).
func (h *handle) readDir() ([]fs.DirEntry, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(h.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("open a directory for reading: %w", err)
	}
	// The name is what os falls back to (lstat of name/entry) where the
	// file system gives no entry types: it names this very directory.
	f := os.NewFile(uintptr(fd), "/proc/self/fd/"+strconv.Itoa(fd))
	defer f.Close()
	list, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read a directory: %w", err)
	}
	return list, nil
}

// close closes the handle.
func (h *handle) close() {
	_ = unix.Close(h.fd)
}

// retryEINTR runs fn again while it is interrupted by a signal.
func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
