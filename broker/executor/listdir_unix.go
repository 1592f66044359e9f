// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux || darwin || freebsd

package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// dirFile is an open directory that a listing reads. Its names come from
// getdents (Readdirnames: no entry is stat'ed), its entries are stat'ed one
// by one with fstatat(AT_SYMLINK_NOFOLLOW) relative to its descriptor, and
// its subdirectories are opened with openat(O_NOFOLLOW|O_DIRECTORY) relative
// to it, one name (never a path) at a time: no link is ever followed, and
// nothing outside the directory can be named.
type dirFile struct {
	f  *os.File
	fd int
}

// openListDir opens the directory rel of the root h: through the root handle
// (so the path stays confined) and with O_DIRECTORY (a FIFO or device
// swapped in is refused, never opened). The caller checks, with stamp, that
// it is the directory it resolved.
//
// The descriptor is duplicated into a file of its own: a file opened through
// an os.Root stats every entry it reads (os.(*File).ReadDir), this one reads
// types from getdents.
func openListDir(h *os.Root, rel string) (*dirFile, error) {
	if rel == "" {
		rel = "."
	}
	rf, err := h.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	fd, err := dupCloexec(rf)
	if err != nil {
		return nil, err
	}
	return newDirFile(fd, "."), nil
}

// dupCloexec duplicates f's descriptor, close-on-exec.
func dupCloexec(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("duplicate a directory handle: %w", err)
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("duplicate a directory handle: %w", err)
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	return nfd, nil
}

// newDirFile wraps an open directory descriptor. name is only for errors:
// it is never used as a path (the file's DirEntry.Info, which would lstat
// by name, is never called).
func newDirFile(fd int, name string) *dirFile {
	return &dirFile{f: os.NewFile(uintptr(fd), name), fd: fd}
}

// openChild opens the subdirectory name (one segment) relative to d,
// without following a link in it.
func (d *dirFile) openChild(name string) (*dirFile, error) {
	for {
		fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "openat", Path: name, Err: err}
		}
		return newDirFile(fd, name), nil
	}
}

// stamp describes the open directory itself (fstat).
func (d *dirFile) stamp() (dirStamp, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(d.fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return dirStamp{}, &fs.PathError{Op: "fstat", Path: ".", Err: err}
		}
		break
	}
	return dirStamp{
		dev:   uint64(st.Dev),
		ino:   uint64(st.Ino),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		size:  st.Size,
		nlink: uint64(st.Nlink),
		isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR,
		known: true,
	}, nil
}

// lstat describes the entry name of d; a link is described, not followed.
func (d *dirFile) lstat(name string) (entryStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return entryStat{}, &fs.PathError{Op: "fstatat", Path: name, Err: err}
		}
		break
	}
	typ := TypeOther
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		typ = TypeFile
	case unix.S_IFDIR:
		typ = TypeDirectory
	case unix.S_IFLNK:
		typ = TypeSymlink
	}
	sec, nsec := st.Mtim.Unix()
	return entryStat{typ: typ, size: st.Size, mtime: time.Unix(sec, nsec).UTC(),
		id: roots.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}}, nil
}

// remove removes the entry name of d by name (unlinkat(2)): a directory
// (dir) only when it is empty, anything else only when it is not a
// directory. No link is followed.
func (d *dirFile) remove(name string, dir bool) error {
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(d.fd, name, flags) }); err != nil {
		return &fs.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return nil
}

// readNames returns up to n more names of d (io.EOF at the end).
func (d *dirFile) readNames(n int) ([]string, error) { return d.f.Readdirnames(n) }

// readEntries returns up to n more entries of d, their types from getdents
// where the file system gives them (io.EOF at the end).
func (d *dirFile) readEntries(n int) ([]fs.DirEntry, error) { return d.f.ReadDir(n) }

// Close closes d.
func (d *dirFile) Close() error { return d.f.Close() }

// isGoneErr reports an error of openChild or lstat that means the entry is
// no longer there as the directory it was: removed, or replaced by a link
// (ELOOP; EMLINK on FreeBSD) or by something that is not a directory.
func isGoneErr(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
