// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// mkfifo makes a named pipe.
func mkfifo(path string) error {
	return syscall.Mkfifo(path, 0o644)
}

// isRoot reports whether the runner runs as the superuser (file modes do not stop it).
func isRoot() bool { return os.Geteuid() == 0 }

// setGroup starts the broker in its own process group, so that signals reach the whole command
// (a wrapper script and what it starts).
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig (SIGTERM when term, else SIGKILL) to the broker's process group.
func signalGroup(cmd *exec.Cmd, term bool) {
	sig := syscall.SIGKILL
	if term {
		sig = syscall.SIGTERM
	}
	if cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// signalProcess sends the broker process (not its group) SIGTERM ("TERM") or SIGINT ("INT").
func signalProcess(cmd *exec.Cmd, name string) error {
	sig, ok := map[string]os.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT}[name]
	if !ok {
		return fmt.Errorf("unknown signal %q", name)
	}
	return cmd.Process.Signal(sig)
}
