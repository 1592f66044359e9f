// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin && !freebsd && !windows

package metrics

import (
	"errors"
	"runtime"
)

// spaceOf is not implemented here: the file systems' space is left out.
func spaceOf(string) (space, error) {
	return space{}, errors.New("metrics: no file system space on " + runtime.GOOS)
}
