// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package engine

import "time"

// threadCPUTime is not available on this system.
func threadCPUTime() (time.Duration, bool) {
	return 0, false
}
