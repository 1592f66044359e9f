// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package consent

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the command as the leader of a new process group and
// makes a timeout or cancellation kill that whole group, so nothing it
// started (a dialog, a sleep in a script) outlives the question. The leader
// is not reaped before Cancel runs, so the group id cannot have been reused.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
