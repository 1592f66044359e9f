// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package child

import "os/exec"

// setProcessGroup does nothing where process groups do not exist.
func setProcessGroup(*exec.Cmd) {}

// terminate has no gentler form than kill where there is no SIGTERM.
func terminate(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// kill ends the child.
func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// groupAlive is false where there are no process groups to look at.
func groupAlive(*exec.Cmd) bool { return false }
