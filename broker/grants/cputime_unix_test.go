// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package grants_test

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) the whole process has used, every
// thread included (the garbage collector, the audit trail's syncer), and true.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
