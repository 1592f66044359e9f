// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package sandbox

import "fmt"

// RunHelper fails: Landlock is Linux's, and the broker never starts the
// helper elsewhere.
func RunHelper(args []string) error {
	return fmt.Errorf("%s: %w", HelperCommand, ErrUnavailable)
}
