// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package keyfile keeps one small file per key (a server identity, say) in a
// directory that several broker processes share: the file is named by the
// key's SHA-256, guarded by a flock on a sidecar lock file that is never
// deleted, replaced atomically and durably (internal/atomicfile: a temporary
// file, fsync, rename, fsync of the directory), and identified without being
// read by a Stamp.
// broker/grants and broker/usage are built on it; what the files hold, and
// how they are cached, is theirs.
package keyfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// File names: <name>.json holds a key's data, <name>.lock is its lock, and
// .tmp-<name>.json-* are replacements being written (atomicfile's names).
const (
	DataExt    = ".json"
	LockExt    = ".lock"
	TempPrefix = atomicfile.TempPrefix
	// NameLen is the length of a name: the hex SHA-256 of the key.
	NameLen = 2 * sha256.Size

	fileMode  = 0o600
	dirMode   = 0o700
	lockRetry = time.Millisecond
)

// Name is the file name (without extension) of key's files.
func Name(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// IsName reports whether s has the form of a Name.
func IsName(s string) bool {
	if len(s) != NameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Dir is an open key-file directory.
type Dir struct {
	path     string
	what     string // for log lines: "grants", "usage"
	log      hclog.Logger
	lockWait time.Duration
	dir      *atomicfile.Dir // kept open to sync renames and removals
}

// Open opens (creating it 0700) the directory at path, and removes the
// temporary files crashed writers left. what names the files in log lines;
// lockWait bounds each wait for a key's lock.
func Open(path, what string, lockWait time.Duration, log hclog.Logger) (*Dir, error) {
	d := &Dir{path: filepath.Clean(path), what: what, log: log, lockWait: lockWait}
	if err := os.MkdirAll(d.path, dirMode); err != nil {
		return nil, fmt.Errorf("create the directory: %w", err)
	}
	dir, err := atomicfile.OpenDir(d.path)
	if err != nil {
		return nil, err
	}
	d.dir = dir
	d.removeStaleTemps()
	return d, nil
}

// Close releases the directory handle.
func (d *Dir) Close() error { return d.dir.Close() }

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// DataPath is the data file of name.
func (d *Dir) DataPath(name string) string { return filepath.Join(d.path, name+DataExt) }

// LockPath is the lock file of name.
func (d *Dir) LockPath(name string) string { return filepath.Join(d.path, name+LockExt) }

// Stamp identifies a version of a file without reading it: a rename keeps the
// inode, size and modification time of what it moves.
type Stamp struct {
	exists   bool
	size     int64
	modNanos int64
	dev, ino uint64 // 0 where the platform has no inode numbers
}

// StampOf is the stamp of a file's info.
func StampOf(fi fs.FileInfo) Stamp {
	dev, ino := fileID(fi)
	return Stamp{exists: true, size: fi.Size(), modNanos: fi.ModTime().UnixNano(), dev: dev, ino: ino}
}

// StatStamp is the stamp of the file at path; the zero Stamp when it does not
// exist.
func StatStamp(path string) (Stamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Stamp{}, nil
	}
	if err != nil {
		return Stamp{}, err
	}
	return StampOf(fi), nil
}

// Lock takes name's cross-process lock, shared or exclusive, waiting at most
// the lock wait, and returns the function that releases it.
func (d *Dir) Lock(name string, exclusive bool) (unlock func(), err error) {
	path := d.LockPath(name)
	fl := flock.New(path, flock.SetPermissions(fileMode))
	try, tryCtx := fl.TryRLock, fl.TryRLockContext
	if exclusive {
		try, tryCtx = fl.TryLock, fl.TryLockContext
	}
	ok, err := try()
	if err == nil && !ok {
		ctx, cancel := context.WithTimeout(context.Background(), d.lockWait)
		ok, err = tryCtx(ctx, lockRetry)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
	}
	if err != nil || !ok {
		_ = fl.Close()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return nil, fmt.Errorf("lock %s: held by another process for more than %s", path, d.lockWait)
	}
	return func() {
		if err := fl.Unlock(); err != nil {
			d.log.Warn("cannot release a "+d.what+" lock", "path", path, "error", err)
			_ = fl.Close()
		}
	}, nil
}

// Replace makes data the content of name's data file, atomically and
// durably, and returns the new file's stamp. The caller holds name's
// exclusive lock.
func (d *Dir) Replace(name string, data []byte) (Stamp, error) {
	path := d.DataPath(name)
	if err := d.dir.WriteFile(filepath.Base(path), data, fileMode); err != nil {
		if !errors.Is(err, atomicfile.ErrNotDurable) {
			return Stamp{}, err
		}
		d.warnNotDurable(err)
	}
	// Under the exclusive lock, the file is the one just renamed into place.
	fi, err := os.Stat(path)
	if err != nil {
		return Stamp{}, err
	}
	return StampOf(fi), nil
}

// Remove removes name's data file (not its lock), durably. A missing file
// is no error.
func (d *Dir) Remove(name string) error {
	if err := os.Remove(d.DataPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := d.dir.Sync(); err != nil {
		d.warnNotDurable(err)
	}
	return nil
}

// warnNotDurable logs a directory that could not be synced after a rename
// or removal. The change is in place either way; a failed sync only risks
// it after a power loss, which leaves the old file.
func (d *Dir) warnNotDurable(err error) {
	d.log.Warn("cannot sync the "+d.what+" directory", "path", d.path, "error", err)
}

// removeStaleTemps removes the temporary files whose writer is gone: a writer
// holds its key's exclusive lock until its rename, so a temporary file whose
// lock is free was left by a crash.
func (d *Dir) removeStaleTemps() {
	des, err := os.ReadDir(d.path)
	if err != nil {
		d.log.Warn("cannot list the "+d.what+" directory", "path", d.path, "error", err)
		return
	}
	for _, de := range des {
		rest, ok := strings.CutPrefix(de.Name(), TempPrefix)
		if !ok || len(rest) < NameLen || !IsName(rest[:NameLen]) {
			continue
		}
		fl := flock.New(d.LockPath(rest[:NameLen]), flock.SetPermissions(fileMode))
		if ok, err := fl.TryLock(); err != nil || !ok {
			continue // its writer may be live
		}
		p := filepath.Join(d.path, de.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("cannot remove a leftover "+d.what+" file", "path", p, "error", err)
		} else {
			d.log.Debug("removed a leftover "+d.what+" file", "path", p)
		}
		_ = fl.Unlock()
	}
}
