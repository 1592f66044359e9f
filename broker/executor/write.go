// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// TempPrefix starts the name of every temporary file the broker writes. Such
// names are hidden from listings and watches, and stale ones (left by a
// broker that died) are removed by RemoveStaleTemps.
const TempPrefix = ".fsbroker-tmp-"

// IsTempName reports whether a file name is one of the broker's temporary
// files.
func IsTempName(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// TempFiles returns the names of the broker's temporary files (IsTempName)
// directly in dir: the staged and half-written files a crash may leave, and
// that the tests of staged writes count.
func TempFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list temporary files: %w", err)
	}
	var names []string
	for _, e := range ents {
		if IsTempName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// newFileMode is the mode of a file the broker creates.
const newFileMode fs.FileMode = 0o644

// WriteOptions are the conditions of a write.
type WriteOptions struct {
	// Create allows creating a missing file (files/write's create, default true).
	Create bool
	// CreateParents creates missing parent directories.
	CreateParents bool
	// IfMatch, when set, must equal the current file's etag.
	IfMatch string
	// IfNoneMatch refuses to replace an existing file (ifNoneMatch: "*").
	IfNoneMatch bool
}

// WriteResult describes the file after a committed write.
type WriteResult struct {
	Path    canon.Path
	Size    int64
	ETag    string
	Created bool
}

// Write replaces the file at t with data, atomically: a temporary file in the
// same directory is written, synced, renamed over the target, and the
// directory is synced. A reader sees the old or the new content, never a mix,
// and a crash leaves one of the two. An existing file's permission bits are
// kept; a new file gets 0644.
func (x *Executor) Write(ctx context.Context, t Target, data []byte, o WriteOptions) (WriteResult, error) {
	st, err := x.StartStage(ctx, t, o)
	if err != nil {
		return WriteResult{}, err
	}
	defer st.Abort()
	if err := st.Append(data, 0); err != nil {
		return WriteResult{}, err
	}
	return st.Commit(ctx, o)
}

// Stage is a write in progress: chunks are appended to a temporary file in
// the target's directory, and Commit replaces the target with it atomically.
// A Stage is used by one request at a time; the broker serialises the chunks
// of one staged write.
type Stage struct {
	x      *Executor
	target canon.Path
	dir    *os.Root // the parent directory, opened once and checked
	parent Info
	// existed is whether the target existed when the write was decided.
	existed bool
	tmp     string
	f       *os.File
	size    int64

	mu     sync.Mutex
	closed bool
}

// StartStage begins a write of t: it checks what can be checked before any
// data is written (the parent exists or may be created, a missing file may be
// created, ifNoneMatch), creates the parent directories when asked (one level
// at a time, through the handle of the level above: makeParents), and
// creates the temporary file (O_EXCL, mode 0600 until commit).
func (x *Executor) StartStage(ctx context.Context, t Target, o WriteOptions) (*Stage, error) {
	if err := deadline(ctx); err != nil {
		return nil, err
	}
	if t.Path.IsRoot() {
		return nil, errcode.New(errcode.IOError, "a root is a directory").With("errno", "EISDIR")
	}
	if err := checkWrite(t, o); err != nil {
		return nil, err
	}
	rh, err := x.rootHandle(t.Path.Root)
	if err != nil {
		return nil, err
	}
	parentPath, _ := t.Path.Parent()
	var dir *os.Root
	switch {
	case t.ParentExists:
		dir, err = x.openDir(rh.root, parentPath, t.parent)
	case o.CreateParents:
		dir, t.parent, err = x.makeParents(ctx, rh, parentPath)
	default:
		return nil, errcode.New(errcode.FileNotFound, "the parent directory does not exist (set createParents)")
	}
	if err != nil {
		return nil, err
	}
	name, err := tempName()
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		_ = dir.Close()
		return nil, mapOSError(err, "the temporary file cannot be created")
	}
	return &Stage{x: x, target: t.Path, dir: dir, parent: t.parent, existed: t.Exists, tmp: name, f: f}, nil
}

// openDir opens a directory of the root as a handle of its own and checks
// that it is the directory that was resolved, and neither another root's
// directory nor beneath one (PERMISSION_DENIED: a nested root reached through
// its outer root's path, its directory moved there at any depth, is changed
// only through its own mount).
func (x *Executor) openDir(h *os.Root, p canon.Path, want Info) (*os.Root, error) {
	rel := p.Rel
	if rel == "" {
		rel = "."
	}
	dir, err := h.OpenRoot(rel)
	if err != nil {
		return nil, swapped(err, "the directory changed while the request was decided", "the directory cannot be opened")
	}
	fi, err := dir.Stat(".")
	if err != nil {
		_ = dir.Close()
		return nil, mapOSError(err, "the directory cannot be read")
	}
	if !sameObject(infoOf(fi), want) {
		_ = dir.Close()
		return nil, conflict("the directory changed while the request was decided")
	}
	r, nested, err := x.nestedRootAbove(dir, p.Root)
	if err == nil && nested {
		err = inOtherRoot(r)
	}
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	return dir, nil
}

// tempName returns a fresh temporary file name holding this process's id, so
// that RemoveStaleTemps can tell a live broker's files from a dead one's.
func tempName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random temporary name: %w", err)
	}
	return TempPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:]), nil
}

// checkWrite applies a write's conditions to the current state of t.
func checkWrite(t Target, o WriteOptions) error {
	if t.Exists {
		switch {
		case t.Info.Type == TypeDirectory:
			return errcode.New(errcode.IOError, "the path is a directory").With("errno", "EISDIR")
		case t.Info.Type != TypeFile:
			return notRegular()
		case o.IfNoneMatch:
			return conflict("the file exists (ifNoneMatch)")
		case o.IfMatch != "" && o.IfMatch != ETag(t.Info):
			return conflict("the file's etag does not match ifMatch")
		}
		return nil
	}
	switch {
	case !o.Create:
		return errcode.New(errcode.FileNotFound, "the file does not exist (create is false)")
	case o.IfMatch != "":
		return conflict("the file does not exist, so it cannot match ifMatch")
	}
	return nil
}

// Size is the number of bytes staged so far.
func (s *Stage) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Target is the canonical path the stage will replace.
func (s *Stage) Target() canon.Path { return s.target }

// Append adds a chunk at offset, which must equal the bytes staged so far
// (CONCURRENCY_CONFLICT otherwise).
func (s *Stage) Append(data []byte, offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return conflict("the staged write has ended")
	}
	if offset != s.size {
		return errcode.New(errcode.ConcurrencyConflict,
			fmt.Sprintf("offset %d does not follow the %d bytes staged so far", offset, s.size)).With("staged", s.size)
	}
	if _, err := s.f.Write(data); err != nil {
		return mapOSError(err, "the data cannot be written")
	}
	s.size += int64(len(data))
	return nil
}

// Commit replaces the target with the staged data, under the target's lock:
// the target is resolved again, the write's conditions are checked against
// what is there now, the file gets the old file's permission bits (set on
// the open file, never by path), is synced and renamed over the target, and
// the directory is synced. The stage ends either way.
func (s *Stage) Commit(ctx context.Context, o WriteOptions) (WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return WriteResult{}, conflict("the staged write has ended")
	}
	defer s.abortLocked()

	unlock, err := s.x.lock(ctx, s.target)
	if err != nil {
		return WriteResult{}, err
	}
	defer unlock()
	cur, err := s.x.Resolve(ctx, s.target, true)
	if err != nil {
		return WriteResult{}, err
	}
	if cur.Path != s.target || !cur.ParentExists || !sameObject(cur.parent, s.parent) {
		return WriteResult{}, conflict("the path changed while the write was staged")
	}
	if cur.Exists != s.existed {
		// The decision was made on a file that was missing (or present);
		// replacing what appeared (or recreating what vanished) would act on
		// a state nobody decided on.
		return WriteResult{}, conflict("the file was created or removed while the write was decided")
	}
	if err := checkWrite(cur, o); err != nil {
		return WriteResult{}, err
	}
	mode := newFileMode
	if cur.Exists {
		mode = cur.Info.Mode.Perm()
	}
	if err := s.f.Chmod(mode); err != nil {
		return WriteResult{}, mapOSError(err, "the file mode cannot be set")
	}
	if err := s.f.Sync(); err != nil {
		return WriteResult{}, mapOSError(err, "the data cannot be synced")
	}
	fi, err := s.f.Stat()
	if err != nil {
		return WriteResult{}, mapOSError(err, "the temporary file cannot be read")
	}
	if err := deadline(ctx); err != nil {
		return WriteResult{}, err
	}
	_, name := s.target.Parent()
	if err := s.dir.Rename(s.tmp, name); err != nil {
		return WriteResult{}, mapOSError(err, "the file cannot be replaced")
	}
	s.tmp = "" // renamed: nothing to remove
	if err := syncDir(s.dir); err != nil {
		// The rename happened; only its durability is in doubt.
		s.x.log.Warn("cannot sync a directory after a write", "error", err)
	}
	// The rename changed the file's status-change time: the etag is taken
	// from the file as it now stands under its name.
	written := infoOf(fi)
	if after, err := s.dir.Lstat(name); err == nil && sameObject(infoOf(after), written) {
		written = infoOf(after)
	}
	return WriteResult{Path: s.target, Size: written.Size, ETag: ETag(written), Created: !cur.Exists}, nil
}

// Abort ends the stage, removing its temporary file. It is safe to call more
// than once and after Commit.
func (s *Stage) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortLocked()
}

func (s *Stage) abortLocked() {
	if s.closed {
		return
	}
	s.closed = true
	_ = s.f.Close()
	if s.tmp != "" {
		if err := s.dir.Remove(s.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.x.log.Warn("cannot remove a temporary file", "error", err)
		}
	}
	_ = s.dir.Close()
}

// syncDir makes a directory's entries (a rename, a new file) durable.
func syncDir(dir *os.Root) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
