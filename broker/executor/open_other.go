// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package executor

// openChecked opens the regular file resolved as t for reading; see
// openFallback.
func openChecked(rh *rootHandle, t Target) (fileReader, Info, error) {
	return openFallback(rh.root, t)
}
