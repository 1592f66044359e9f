// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/canon"
)

// resolveFlags confine an openat2(2) lookup as the fast paths need it:
// nothing above the root's descriptor (RESOLVE_BENEATH), and no symbolic
// link anywhere on the way, /proc's magic links included
// (RESOLVE_NO_SYMLINKS and RESOLVE_NO_MAGICLINKS: ELOOP instead). A path that
// needs a link followed is left to the portable path, which follows links
// that stay inside the root as os.Root does.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// errNoFastPath says that a fast path did not apply: the caller takes the
// portable path, which then decides and reports as it always has.
var errNoFastPath = errors.New("executor: no fast path")

// errNoProc says that a file checked on its O_PATH descriptor could not be
// reopened through /proc/self/fd: the caller opens it with openFallback.
var errNoProc = errors.New("executor: no reopen through /proc")

// fastRoot is a raw O_PATH descriptor of a root directory, opened once beside
// its os.Root (and checked to be the same directory), for the fast paths of
// Resolve and Read: one openat2(2) relative to it instead of os.Root's walk
// segment by segment, and stats and reads on bare descriptors instead of
// os.File's (whose poller registration costs three fcntl calls and a refused
// epoll_ctl per open of a regular file). It exists only where openat2 with
// resolveFlags works (Linux 5.6 and later, not refused by a seccomp filter).
// Any failure of a fast path falls back to the portable path, which then
// tells what is there, so the fast paths only ever succeed on the cases that
// need no decision of their own.
type fastRoot struct {
	// mu keeps fd and procFD from being closed while a fast path uses them:
	// a closed descriptor's number is soon reused by some other open, and a
	// lookup relative to it would then start anywhere.
	mu sync.RWMutex
	fd int // -1 once closed
	// procFD is an O_PATH descriptor of this process's /proc/self/fd,
	// checked to be procfs, through which a file checked on its O_PATH
	// descriptor is reopened (reopen): one lookup of the descriptor's
	// number instead of /proc/self/fd/N's walk from /. -1 when it could not
	// be opened (the reopen then takes the path) and once closed.
	procFD int
}

// openFastRoot opens dir, the root whose os.Root gave want, as an O_PATH
// directory descriptor, checks that it is the same directory (a rename
// between the two opens would otherwise give the fast paths another tree:
// errRootMoved), and probes openat2 on it. Any other error means the fast
// paths stay off.
func openFastRoot(dir string, want Info) (*fastRoot, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("open the root's descriptor: %w", err)
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("stat the root's descriptor: %w", err)
	}
	if !sameObject(statInfo(&st), want) {
		_ = unix.Close(fd)
		return nil, errRootMoved
	}
	probe, err := openat2(fd, ".", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("openat2 is not usable: %w", err)
	}
	_ = unix.Close(probe)
	return &fastRoot{fd: fd, procFD: openProcFD()}, nil
}

// openProcFD opens /proc/self/fd as an O_PATH directory descriptor, or
// returns -1 when it cannot be opened or is not procfs ("self" is resolved
// now: the descriptor stays this process's).
func openProcFD() int {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.PROC_SUPER_MAGIC {
		_ = unix.Close(fd)
		return -1
	}
	return fd
}

// reopen opens the file of pfd, an O_PATH descriptor of this process, for
// reading through /proc: by its number in procFD when it is open, else by
// the path /proc/self/fd/N.
func (f *fastRoot) reopen(pfd int) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	name := strconv.Itoa(pfd)
	return retryEINTR(func() (int, error) {
		if f.procFD >= 0 {
			return unix.Openat(f.procFD, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		return unix.Open("/proc/self/fd/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
}

// close closes the descriptor, once no fast path is using it.
func (f *fastRoot) close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if f.procFD >= 0 {
		_ = unix.Close(f.procFD)
		f.procFD = -1
	}
	if err != nil {
		return fmt.Errorf("close a root's descriptor: %w", err)
	}
	return nil
}

// resolve is Resolve's fast path, for a path with no symbolic link on it,
// whose canonical path is then p itself: an openat2 of p's parent directory
// (with resolveFlags and O_DIRECTORY) and an fstat of what it opened, then
// an fstatat of the last segment without following it; for a path of one
// segment, only the fstatat in the root (whose identity rootInfo is: the
// descriptor holds that directory, so it cannot change). The kernel's lookup
// applies the walk's rules to every segment at once: each is looked up in
// the directory before it, none may be a link (or the lookup fails with
// ELOOP), none climbs out of the root; the parent's identity is the
// directory actually opened. ok is false where the walk is needed: a link on
// the path or a last segment that is a link to follow, a missing or
// non-directory segment on the way, any error; the walk then tells what is
// there and reports errors as before.
func (f *fastRoot) resolve(p canon.Path, follow bool, rootInfo Info) (t Target, ok bool) {
	if f == nil || p.Rel == "" {
		return Target{}, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.fd < 0 {
		return Target{}, false
	}
	dirfd, parent, name := f.fd, rootInfo, p.Rel
	if i := strings.LastIndexByte(p.Rel, '/'); i >= 0 {
		fd, err := openat2(f.fd, p.Rel[:i], unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return Target{}, false
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := fstat(fd, &st); err != nil {
			return Target{}, false
		}
		dirfd, parent, name = fd, statInfo(&st), p.Rel[i+1:]
	}
	var st unix.Stat_t
	switch err := fstatat(dirfd, name, &st); {
	case errors.Is(err, unix.ENOENT):
		return Target{Path: p, ParentExists: true, parent: parent}, true
	case err != nil:
		return Target{}, false
	}
	info := statInfo(&st)
	if info.Type == TypeSymlink && follow {
		return Target{}, false
	}
	return Target{Path: p, Exists: true, Info: info, ParentExists: true, parent: parent}, true
}

// open is openChecked's fast path: the file is opened O_PATH|O_NOFOLLOW by
// openat2 with resolveFlags (which opens nothing: no FIFO or device open, no
// link followed, nothing outside the root), checked on that descriptor to be
// the version resolved (sameVersion) and a regular file, and only then
// reopened for reading through /proc/self/fd. It returns errNoFastPath when
// openat2 failed (the caller takes the os.Root path, which tells a removed
// or swapped file from an error as before), and errNoProc when the reopen
// failed.
func (f *fastRoot) open(t Target) (fileReader, Info, error) {
	if f == nil {
		return nil, Info{}, errNoFastPath
	}
	f.mu.RLock()
	if f.fd < 0 {
		f.mu.RUnlock()
		return nil, Info{}, errNoFastPath
	}
	pfd, err := openat2(f.fd, t.Path.Rel, unix.O_PATH|unix.O_NOFOLLOW)
	f.mu.RUnlock()
	if err != nil {
		return nil, Info{}, errNoFastPath
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := fstat(pfd, &st); err != nil {
		return nil, Info{}, mapOSError(os.NewSyscallError("fstat", err), "the file cannot be read")
	}
	info := statInfo(&st)
	if !sameVersion(info, t.Info) {
		return nil, Info{}, conflict("the file changed while the request was decided")
	}
	if info.Type != TypeFile {
		return nil, Info{}, notRegular()
	}
	fd, err := f.reopen(pfd)
	if err != nil {
		return nil, Info{}, errNoProc
	}
	return fdFile{fd: fd}, info, nil
}

// resolveHeld is ResolveRead's fast path: one openat2 of p with resolveFlags
// and O_PATH|O_NOFOLLOW (nothing opened, no link followed, nothing outside
// the root) and an fstat of what it found; ok only for a regular file, which
// the target then holds (heldFile). The parent's identity is not looked up:
// a read does not use it. Anything else (a link on the path or at its end, a
// directory, a FIFO, a missing file, an error) is closed and left to
// Resolve's paths.
func (f *fastRoot) resolveHeld(p canon.Path) (t Target, ok bool) {
	if f == nil || p.Rel == "" {
		return Target{}, false
	}
	f.mu.RLock()
	if f.fd < 0 {
		f.mu.RUnlock()
		return Target{}, false
	}
	fd, err := openat2(f.fd, p.Rel, unix.O_PATH|unix.O_NOFOLLOW)
	f.mu.RUnlock()
	if err != nil {
		return Target{}, false
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return Target{}, false
	}
	info := statInfo(&st)
	if info.Type != TypeFile {
		_ = unix.Close(fd)
		return Target{}, false
	}
	return Target{Path: p, Exists: true, Info: info, ParentExists: true, held: &heldFile{fd: fd, root: f}}, true
}

// heldFile is the O_PATH descriptor of a regular file a Target was resolved
// to (resolveHeld), kept until Release. It pins the object: whatever is put
// at the path afterwards, a reopen of the descriptor opens the file found
// then, which was a regular file inside the root.
type heldFile struct {
	mu   sync.Mutex // held while the descriptor is used or closed
	fd   int        // -1 once released
	root *fastRoot  // the root it was opened in, which reopens it
}

// errNotHeld says that the held descriptor was released, or could not be
// reopened through /proc: the read looks the path up again.
var errNotHeld = errors.New("executor: the target holds nothing")

// reopen opens the held file for reading through /proc/self/fd and checks
// that it is still the version t was decided on (sameVersion: a write, a
// rename or a removal since moved its change time; CONCURRENCY_CONFLICT).
// errNotHeld when it was released or /proc cannot reopen it.
func (h *heldFile) reopen(t Target) (fileReader, Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd < 0 {
		return nil, Info{}, errNotHeld
	}
	fd, err := h.root.reopen(h.fd)
	if err != nil {
		return nil, Info{}, errNotHeld
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, Info{}, mapOSError(os.NewSyscallError("fstat", err), "the file cannot be read")
	}
	info := statInfo(&st)
	if !sameVersion(info, t.Info) {
		_ = unix.Close(fd)
		return nil, Info{}, conflict("the file changed while the request was decided")
	}
	if info.Type != TypeFile {
		_ = unix.Close(fd)
		return nil, Info{}, notRegular()
	}
	return fdFile{fd: fd}, info, nil
}

// release closes the descriptor, once.
func (h *heldFile) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd >= 0 {
		_ = unix.Close(h.fd)
		h.fd = -1
	}
}

// fdFile is a regular file open for reading by its bare descriptor: a
// regular file never waits, so it needs none of os.File's poller machinery.
// Its one owner closes it.
type fdFile struct{ fd int }

// maxRW caps one pread, as os.File does.
const maxRW = 1 << 30

// ReadAt implements io.ReaderAt.
func (f fdFile) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(f.fd, b[n:min(len(b), n+maxRW)], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, os.NewSyscallError("pread", err)
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// Close implements io.Closer.
func (f fdFile) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// openat2 opens path relative to dirfd with resolveFlags, close-on-exec.
func openat2(dirfd int, path string, flags uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolveFlags}
	return retryEINTR(func() (int, error) { return unix.Openat2(dirfd, path, &how) })
}

func fstat(fd int, st *unix.Stat_t) error {
	_, err := retryEINTR(func() (int, error) { return 0, unix.Fstat(fd, st) })
	return err
}

// fstatat stats name in dirfd without following a link.
func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	_, err := retryEINTR(func() (int, error) {
		return 0, unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	})
	return err
}

func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// statInfo is infoOf for a raw stat: the same fields, and the mode built as
// the os package builds it.
func statInfo(st *unix.Stat_t) Info {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	msec, mnsec := st.Mtim.Unix()
	csec, cnsec := st.Ctim.Unix()
	return Info{
		Type:    typeOf(mode),
		Size:    st.Size,
		Mode:    mode,
		ModTime: time.Unix(msec, mnsec),
		Nlink:   uint64(st.Nlink),
		Dev:     uint64(st.Dev),
		Ino:     uint64(st.Ino),
		Ctime:   csec*1e9 + cnsec,
	}
}
