// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package sandbox

// UnixSocketFilterAvailable returns ErrNoUnixSocketFilter: the filter is a
// Linux seccomp program.
func UnixSocketFilterAvailable() error { return ErrNoUnixSocketFilter }
