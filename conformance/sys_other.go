//go:build !unix

package conformance

import (
	"errors"
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
