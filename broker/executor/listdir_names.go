// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package executor

import "io"

// readBatch gives add the next names of d (the broker's temporary files
// left out), each valid only during the call (it is copied into buf), with
// no type: the caller stats an entry to tell. It reports done at the end of
// the directory.
func (d *dirFile) readBatch(buf []byte, add func(name []byte, typ string)) (done bool, err error) {
	names, err := d.f.Readdirnames(1024)
	for _, n := range names {
		if !IsTempName(n) {
			add(append(buf[:0], n...), "")
		}
	}
	if err == io.EOF {
		return true, nil
	}
	return false, err
}
