//go:build !unix

package watch

import "io/fs"

// fileID is empty where the platform has no inode numbers; the identity
// checks then compare nothing.
type fileID struct {
	dev, ino uint64
	ok       bool
}

// fileIDOf returns no identity on this platform.
func fileIDOf(fs.FileInfo) fileID { return fileID{} }
