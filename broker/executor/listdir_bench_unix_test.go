// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package executor_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time so far (user and system), which a busy
// machine disturbs less than the wall clock: the listing benchmarks report
// it per op beside their ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
