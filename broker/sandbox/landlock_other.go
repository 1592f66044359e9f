// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package sandbox

// ABI is the Landlock ABI version the kernel offers: 0, Landlock is Linux's.
func ABI() int { return 0 }

// Restrict returns ErrUnavailable: Landlock is Linux's.
func Restrict(r Rules, scoped bool) (Status, error) {
	return Status{Reason: ErrUnavailable.Error()}, ErrUnavailable
}
