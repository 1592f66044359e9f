// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"errors"
)

// Close ends the runtime's own work (the watches, SIGHUP) and waits for
// it, then closes what Open opened: the grants and usage stores, the audit
// trail (flushed, its last checkpoint written), the decision-log uploader
// (which uploads what it can of the trail within the shutdown timeout;
// the rest waits for the next start), the server's sandbox directory, the
// desktop notifications, the file watcher and the executor. Close the
// sessions first. It returns the audit trail's error, if any; a second
// Close does nothing.
func (rt *Runtime) Close() error {
	rt.closeOnce.Do(func() { rt.closeErr = rt.close() })
	return rt.closeErr
}

// close is Close's work; every component may be nil (Open failed before it).
func (rt *Runtime) close() error {
	rt.stop()
	rt.tasks.Wait()
	var errs []error
	if rt.grants != nil {
		_ = rt.grants.Close()
	}
	if rt.usage != nil {
		_ = rt.usage.Close()
	}
	if rt.trail != nil {
		if err := rt.trail.Close(); err != nil {
			rt.log.Error("closing the audit trail", "error", err)
			errs = append(errs, err)
		}
	}
	if rt.decisions != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.Limits.ShutdownTimeout)
		rt.decisions.Close(ctx) // what it cannot upload in time stays in the trail for the next start
		cancel()
	}
	if err := rt.confinement.close(); err != nil {
		rt.log.Warn("closing the sandbox", "error", err)
	}
	rt.notes.Close()
	if rt.hub != nil {
		_ = rt.hub.Close()
	}
	if rt.exec != nil {
		_ = rt.exec.Close()
	}
	return errors.Join(errs...)
}
