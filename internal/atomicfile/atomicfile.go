// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package atomicfile replaces and creates the broker's state files
// atomically and durably: the content is written to a temporary file in the
// same directory (named TempPrefix, the file's name, a dash and a random
// suffix), fsynced and closed, then renamed over the file (WriteFile) or
// linked to its name if it has none yet (Create), and the directory is
// fsynced. A crash at any moment, kill -9 or a power loss, leaves the old
// file or the new one, never a torn or empty one; a failure leaves the old
// file and removes the temporary one. What a crash leaves behind is at most
// a temporary file, which the owner of the directory removes (broker/
// internal/keyfile does when it opens a directory).
//
// Every writer of a state file uses it: grants, usage counts and the
// decision-log cursors (through broker/internal/keyfile), the decision log's
// start time, the audit keys and published checkpoint keys, the audit
// segments' checkpoint files and prev notes (WithoutFsync under the trail's
// --audit-sync none), and the persisted policy bundle. The executor's writes
// inside roots do not: they go through an os.Root under the executor's locks
// (broker/executor).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// TempPrefix starts the name of every temporary file: .tmp-<name>-<random>
// is a replacement for <name> being written.
const TempPrefix = ".tmp-"

// ErrNotDurable is returned, wrapped, when the file was replaced or created
// but the directory could not be fsynced: the change is made, and only its
// survival across a power loss is in doubt (a crash of the process alone
// loses nothing). A caller that can go on logs it and carries on.
var ErrNotDurable = errors.New("made, but the directory could not be synced")

// Option changes how WriteFile writes a file.
type Option func(*writeOptions)

// writeOptions are what the options set.
type writeOptions struct {
	noSync bool
}

// WithoutFsync makes WriteFile atomic but not durable: neither the temporary
// file nor the directory is fsynced. A crash of the process still leaves the
// old file or the new one, never a torn one; a power loss may leave the old
// file, the new one or an empty one. It is for a writer whose operator chose
// no fsyncs (the audit trail's --audit-sync none), never for state that must
// survive a power loss.
func WithoutFsync() Option { return func(o *writeOptions) { o.noSync = true } }

// WriteFile replaces the file at path with data, atomically and durably
// (unless WithoutFsync). The file gets mode perm exactly (the umask does not
// apply); a file that was not there is created.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	var o writeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := replace(path, data, perm, !o.noSync); err != nil {
		return err
	}
	if o.noSync {
		return nil
	}
	return SyncDir(filepath.Dir(path))
}

// Create creates the file at path with data and mode perm (exactly), unless
// a file of that name exists: the error is then one errors.Is finds to be
// fs.ErrExist, and the file is left as it is. Readers never see the file
// partly written, so two processes racing to create it may both read it
// after either wins.
func Create(path string, data []byte, perm fs.FileMode) error {
	if err := link(path, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Dir is a directory kept open to write files in it: its handle syncs each
// change without opening the directory again.
type Dir struct {
	path string
	f    *os.File // nil on Windows, which cannot sync a directory handle
}

// OpenDir opens the directory at path, which must exist.
func OpenDir(path string) (*Dir, error) {
	d := &Dir{path: path}
	if runtime.GOOS != "windows" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open the directory: %w", err)
		}
		d.f = f
	}
	return d, nil
}

// Close releases the directory's handle.
func (d *Dir) Close() error {
	if d.f == nil {
		return nil
	}
	return d.f.Close()
}

// WriteFile is the package's WriteFile for the file name in d.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	if err := replace(filepath.Join(d.path, name), data, perm, true); err != nil {
		return err
	}
	return d.Sync()
}

// Sync makes the changes made in d (a rename, a new or removed file)
// durable; a failure wraps ErrNotDurable.
func (d *Dir) Sync() error {
	if d.f == nil {
		return nil
	}
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("%s: %w: %w", d.path, ErrNotDurable, err)
	}
	return nil
}

// SyncDir fsyncs the directory at path, so that the names created, renamed
// or removed in it survive a power loss; a failure wraps ErrNotDurable.
func SyncDir(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(path)
	if err == nil {
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %w", path, ErrNotDurable, err)
	}
	return nil
}

// replace renames a complete temporary copy of data over path, fsynced
// first if fsync.
func replace(path string, data []byte, perm fs.FileMode, fsync bool) error {
	tmp, err := writeTemp(path, data, perm, fsync)
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// link gives a complete temporary copy of data the name path, unless path
// exists.
func link(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = os.Link(tmp, path)
	_ = os.Remove(tmp) // the file keeps its new name, if it got it
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path, with mode
// perm, fsyncs it if fsync, closes it, and returns its name; on failure it
// removes it.
func writeTemp(path string, data []byte, perm fs.FileMode, fsync bool) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
