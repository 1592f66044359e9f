// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build windows || plan9

package audit

import (
	"fmt"
	"runtime"
)

// newSyslogWitness refuses: Go's log/syslog does not exist on this system.
func newSyslogWitness(ws WitnessSpec) (Witness, error) {
	return nil, fmt.Errorf("audit witness %s: syslog is not available on %s; use file:PATH", ws, runtime.GOOS)
}
