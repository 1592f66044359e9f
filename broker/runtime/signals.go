// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// HandleSignals has SIGHUP reopen the audit trail (ReopenAudit) until the
// runtime closes: log shippers move segment files away and signal, and
// operators rotate the audit keys. A Go host that handles its signals
// itself calls ReopenAudit instead.
func (rt *Runtime) HandleSignals() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	rt.goBackground(func(ctx context.Context) {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := rt.ReopenAudit(); err != nil {
					rt.log.Error("SIGHUP: reopening the audit trail failed", "error", err)
					continue
				}
				rt.log.Info("SIGHUP: audit trail reopened", "segment", rt.trail.Segment())
			}
		}
	})
}

// ReopenAudit starts a new audit segment and reads the audit keys again
// (audit.Writer.Reopen).
func (rt *Runtime) ReopenAudit() error { return rt.trail.Reopen() }
