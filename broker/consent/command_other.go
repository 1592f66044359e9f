// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package consent

import "os/exec"

// ownProcessGroup leaves the command as it is: without process groups, a
// timeout kills the command itself (exec's default) but not what it started.
func ownProcessGroup(*exec.Cmd) {}
