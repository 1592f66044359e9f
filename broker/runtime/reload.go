// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// ConfigDebounce is how long the config watch waits for a burst of file
// events to settle before it reloads (well inside the 1 s promise of
// PROTOCOL.md section 3).
const ConfigDebounce = 100 * time.Millisecond

// startWatching starts the runtime's own work, which Close ends: clearing
// what crashed brokers left in the roots, and the watches of the policies,
// the config file and the grants.
func (rt *Runtime) startWatching() {
	rt.goBackground(func(ctx context.Context) { rt.removeStaleTemps(ctx, rt.started) })
	if rt.cfg.Policies.watchesPolicies() {
		rt.goBackground(func(ctx context.Context) {
			if err := rt.engine.Watch(ctx, rt.policiesReloaded); err != nil && ctx.Err() == nil {
				rt.log.Warn("the policy directory will not be reloaded on change", "error", err)
			}
		})
	}
	if rt.cfg.ConfigFile != "" && rt.cfg.ReloadRoots != nil {
		if err := rt.watchConfig(); err != nil {
			rt.log.Warn("config file will not be reloaded on change", "error", err)
		}
	}
	// Grants changed by another process (fsbroker grants revoke) reach the
	// sessions within a second.
	if err := rt.grants.Watch(rt.background, rt.grantsChanged); err != nil {
		rt.log.Warn("consent grants changed by other processes will not be seen", "error", err)
	}
}

// goBackground runs fn in a goroutine that Close ends and waits for.
func (rt *Runtime) goBackground(fn func(ctx context.Context)) {
	rt.tasks.Add(1)
	go func() {
		defer rt.tasks.Done()
		fn(rt.background)
	}()
}

// Reload reads the policies (from a directory or a bundle file) and the
// roots (Config.ReloadRoots) again now, as their watches do when their
// files change: a policy set that fails to load, or roots that cannot be
// used, leave the previous ones in force, and the error says why.
func (rt *Runtime) Reload(ctx context.Context) error {
	var policyErr error
	rt.engine.Reload(ctx, func(revision string, err error) {
		policyErr = err
		rt.policiesReloaded(revision, err)
	})
	if rt.cfg.ReloadRoots == nil {
		return policyErr
	}
	return errors.Join(policyErr, rt.reloadRoots())
}

// policiesReloaded logs and audits one reload of the policies.
func (rt *Runtime) policiesReloaded(revision string, err error) {
	if err != nil {
		rt.log.Warn("policy reload failed; the previous policies keep deciding", "error", err)
		rt.recordReload(audit.Record{Kind: audit.KindPolicyReloadFailed,
			PolicyRevision: rt.engine.Revision(), Detail: audit.TruncateDetail(err.Error())})
		return
	}
	rt.log.Info("policies reloaded", "revision", revision)
	rt.recordReload(audit.Record{Kind: audit.KindPolicyReload, PolicyRevision: revision})
}

// recordReload writes a policy reload (or reload failure) to the audit trail.
func (rt *Runtime) recordReload(rec audit.Record) {
	if _, err := rt.sink.Append(context.Background(), rec); err != nil {
		rt.log.Error("cannot write the policy reload to the audit trail", "error", err)
	}
}

// reloadRoots reads the roots again and applies them (applyRoots).
func (rt *Runtime) reloadRoots() error {
	specs, err := rt.cfg.ReloadRoots()
	if err != nil {
		rt.log.Named("config").Warn("config reload failed; keeping the previous configuration", "error", err)
		return err
	}
	return rt.applyRoots(specs)
}

// applyRoots makes specs the operator's roots, unless they cannot be used
// (a root that does not exist, or holds one of the broker's own paths); when
// they differ from the current ones, every session is told
// (notifications/roots/list_changed).
func (rt *Runtime) applyRoots(specs []roots.Spec) error {
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	next, err := rt.buildRoots(specs)
	if err != nil {
		rt.log.Warn("config reload failed; keeping the previous roots", "error", err)
		return err
	}
	if next.Equal(rt.current.Load()) {
		rt.log.Debug("config reloaded; roots unchanged")
		return nil
	}
	rt.current.Store(next)
	rt.goBackground(func(ctx context.Context) { rt.removeStaleTemps(ctx, next) })
	rt.log.Info("config reloaded; roots changed", "roots", next.Len())
	for _, sess := range rt.liveSessions() {
		if err := sess.RootsChanged(); err != nil {
			rt.log.Warn("cannot notify the server of the new roots", "error", err)
		}
	}
	return nil
}

// grantsChanged tells the sessions of server (every session: AnyServer)
// that its grants or blocks changed, so that each re-checks its watches and
// tells its server.
func (rt *Runtime) grantsChanged(server string) {
	for _, sess := range rt.liveSessions() {
		if server != grants.AnyServer && server != sess.StateKey() {
			continue
		}
		rt.log.Info("the server's consent grants changed", "server", server)
		sess.GrantsChanged()
	}
}

// watchConfig reloads the roots when the config file changes (debounced).
// The file's directory is watched, because editors and orchestrators
// replace files in several ways (write in place, rename over, swap a
// symlinked "..data" directory as Kubernetes does): events on the file's
// name and on names starting with ".." trigger a reload; other files in the
// directory (a log file, say) do not. A reload that fails is logged and the
// last good roots stay. The watch ends with the runtime.
func (rt *Runtime) watchConfig() error {
	path, log := rt.cfg.ConfigFile, rt.log.Named("config")
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch config directory %s: %w", dir, err)
	}
	rt.goBackground(func(ctx context.Context) {
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if name := filepath.Base(ev.Name); name != base && !strings.HasPrefix(name, "..") {
					continue
				}
				log.Trace("config file changed", "event", ev.String())
				timer.Reset(ConfigDebounce)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("config watcher error; reloading to be safe", "error", err)
				timer.Reset(ConfigDebounce)
			case <-timer.C:
				_ = rt.reloadRoots()
			}
		}
	})
	return nil
}

// removeStaleTemps clears what crashed brokers left in the roots, in the
// background so that start-up does not wait for a walk of every root.
func (rt *Runtime) removeStaleTemps(ctx context.Context, set *roots.Set) {
	for _, r := range set.All() {
		n, err := rt.exec.RemoveStaleTemps(ctx, r)
		if err != nil && ctx.Err() == nil {
			rt.log.Warn("cannot clear stale temporary files", "root", r.Mount, "error", err)
		}
		if n > 0 {
			rt.log.Info("removed stale temporary files", "root", r.Mount, "count", n)
		}
	}
}
