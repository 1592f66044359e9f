//go:build unix

package watch

import (
	"io/fs"
	"syscall"
)

// fileID tells directories apart: device and inode. ok is false when the
// platform gave none, and such an identity matches anything.
type fileID struct {
	dev, ino uint64
	ok       bool
}

// fileIDOf returns the identity in a FileInfo from Lstat, Stat or fstat.
func fileIDOf(fi fs.FileInfo) fileID {
	if fi == nil {
		return fileID{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), ok: true}
}
