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
// valid only during the call. It reports done at the end of the directory.
// buf is the walk's read buffer.
func (d *dirFile) readBatch(buf []byte, add func(name []byte)) (done bool, err error) {
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
		name := b[nameOff:reclen]
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
		add(name)
	}
	return false, nil
}
