// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package conformance

import (
	"errors"
	"os"
	"os/exec"
)

// mkfifo makes a named pipe; there are none here.
func mkfifo(string) error { return errors.New("named pipes are not supported on this system") }

// isRoot reports whether the runner runs as the superuser.
func isRoot() bool { return false }

// setGroup does nothing here.
func setGroup(*exec.Cmd) {}

// signalGroup ends the broker: there is no SIGTERM here, so a kill in both cases.
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// signalProcess can only interrupt here.
func signalProcess(cmd *exec.Cmd, name string) error {
	if name != "INT" {
		return errors.New("only INT can be sent on this system")
	}
	return cmd.Process.Signal(os.Interrupt)
}
