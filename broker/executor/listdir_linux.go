// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package executor

import (
	"encoding/binary"
	"io/fs"

	"golang.org/x/sys/unix"
)

// readBatch gives add the names of the next getdents64 call on d (the
// broker's temporary files left out), without a string per name: each is
// valid only during the call, with its type as the directory records it
// (d_type: "" where the file system does not say, DT_UNKNOWN). It reports
// done at the end of the directory. buf is the walk's read buffer.
func (d *dirFile) readBatch(buf []byte, add func(name []byte, typ string)) (done bool, err error) {
	var n int
	for {
		n, err = unix.Getdents(d.fd, buf)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, &fs.PathError{Op: "getdents", Path: ".", Err: err}
	}
	if n <= 0 {
		return true, nil
	}
	// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
	const nameOff = 19
	for b := buf[:n]; len(b) >= nameOff; {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			break
		}
		name, typ := b[nameOff:reclen], direntType(b[18])
		b = b[reclen:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." ||
			(len(name) >= len(TempPrefix) && string(name[:len(TempPrefix)]) == TempPrefix) {
			continue
		}
		add(name, typ)
	}
	return false, nil
}

// direntType is the entry type of a d_type: "" for DT_UNKNOWN (or a value
// this does not know), which the caller must stat to tell.
func direntType(t byte) string {
	switch t {
	case unix.DT_REG:
		return TypeFile
	case unix.DT_DIR:
		return TypeDirectory
	case unix.DT_LNK:
		return TypeSymlink
	case unix.DT_FIFO, unix.DT_CHR, unix.DT_BLK, unix.DT_SOCK:
		return TypeOther
	}
	return ""
}
