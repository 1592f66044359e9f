// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix && !linux && !darwin

package executor

// renameNoReplace has no kernel call here: the caller checks that the target
// is missing and renames.
func renameNoReplace(int, string, int, string) error { return errNoReplaceUnsupported }
