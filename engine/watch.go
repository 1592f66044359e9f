// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the policy set when its source changes, until ctx ends; it then returns nil.
//
// For a Dir source it watches the directory tree (directories created later included); for a
// Bundle source, the bundle file (replacing it by a rename is seen too). Changes are debounced
// (WithReloadDebounce). The new set is read, compiled, type-checked and tested (WithRunTests)
// like at New, and only then swapped in atomically: decisions in flight finish on the set they
// started with. A set that fails keeps the last good one deciding; the failure is logged with
// file and line. A change that leaves the files as they are (same revision) does nothing,
// except after a failure, where it reports the recovery. For a Remote source it polls the
// bundle server (OPA's downloader: ETags, long polling, the configured delays) and treats
// every download the same way; a download that fails keeps the last good set too.
//
// onReload, which may be nil, is called from Watch's goroutine after each reload attempt with
// the new revision and nil, or "" and the error (a *LoadError). An FS source never changes:
// Watch only waits for ctx. Call Watch at most once per Engine at a time.
func (e *Engine) Watch(ctx context.Context, onReload func(revision string, err error)) error {
	var (
		root      string
		recursive bool
		relevant  func(name string) bool
	)
	switch {
	case e.src.Remote != nil:
		return e.watchRemote(ctx, e.src.Remote, onReload)
	case e.src.Dir != "":
		root, recursive = e.src.Dir, true
		relevant = func(name string) bool { return !hidden(filepath.Base(name)) }
	case e.src.Bundle != "":
		abs, err := filepath.Abs(e.src.Bundle)
		if err != nil {
			return fmt.Errorf("engine: watch %s: %w", e.src.Bundle, err)
		}
		root = filepath.Dir(abs)
		base := filepath.Base(abs)
		relevant = func(name string) bool { return filepath.Base(name) == base }
	default:
		e.logger.Debug("policy source is not watched", "source", e.src.String())
		e.watching.Add(1)
		defer e.watching.Add(-1)
		<-ctx.Done()
		return nil
	}

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("engine: watch %s: %w", root, err)
	}
	defer w.Close()
	if err := e.addWatches(w, root, recursive); err != nil {
		return fmt.Errorf("engine: watch %s: %w", root, err)
	}
	e.logger.Debug("watching policies", "source", e.src.String(), "debounce", e.debounce)
	e.watching.Add(1)
	defer e.watching.Add(-1)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("engine: policy watcher closed")
			}
			if ev.Op == fsnotify.Chmod || !relevant(ev.Name) {
				continue
			}
			if recursive && ev.Has(fsnotify.Create) {
				// A new directory (possibly with files already in it): watch it too.
				if err := e.addWatches(w, ev.Name, true); err != nil && !errors.Is(err, fs.ErrNotExist) {
					e.logger.Warn("cannot watch new policy directory", "path", ev.Name, "error", err)
				}
			}
			timer.Reset(e.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("engine: policy watcher closed")
			}
			// After an overflow some events are lost: reload to be sure.
			e.logger.Warn("policy watcher error; reloading", "error", err)
			timer.Reset(e.debounce)
		case <-timer.C:
			e.reload(ctx, onReload)
		}
	}
}

// addWatches watches path, and every non-hidden directory under it when recursive. A path that
// is not a directory is ignored.
func (e *Engine) addWatches(w *fsnotify.Watcher, path string, recursive bool) error {
	if !recursive {
		return w.Add(path)
	}
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == path {
				return err
			}
			return nil // vanished meanwhile
		}
		if !d.IsDir() {
			return nil
		}
		if p != path && hidden(d.Name()) {
			return fs.SkipDir
		}
		return w.Add(p)
	})
}

// Reload reads a Dir or Bundle source again now, as Watch does after a change, and swaps the
// new set in when it is good and new; onReload (which may be nil) is called as Watch calls it.
// An FS source never changes, and a Remote one is pulled by Watch: Reload leaves them as they
// are.
func (e *Engine) Reload(ctx context.Context, onReload func(revision string, err error)) {
	if e.src.Dir == "" && e.src.Bundle == "" {
		return
	}
	e.reload(ctx, onReload)
}

// reload builds the source again and swaps it in when it is good and new.
func (e *Engine) reload(ctx context.Context, onReload func(string, error)) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()

	start := time.Now()
	old := e.set.Load()
	raw, err := read(e.src, e.runTests)
	if err == nil && old != nil && raw.revision == old.revision && !e.failing {
		e.logger.Debug("policy files changed back or not at all", "revision", old.revision)
		return
	}
	var set *policySet
	if err == nil {
		set, err = buildRaw(ctx, raw, e.loadOptions())
	}
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down, not a policy failure
		}
		e.failing = true
		e.logReloadFailure(err, old)
		if onReload != nil {
			onReload("", err)
		}
		return
	}
	e.set.Store(set)
	e.failing = false
	e.logLoaded("policies reloaded", set, time.Since(start))
	if onReload != nil {
		onReload(set.revision, nil)
	}
}

// logReloadFailure logs each problem of a failed reload with its file and line.
func (e *Engine) logReloadFailure(err error, kept *policySet) {
	keptRevision := ""
	if kept != nil {
		keptRevision = kept.revision
	}
	var le *LoadError
	if !errors.As(err, &le) {
		e.logger.Error("policy reload failed; the last good policy set stays in force",
			"error", err, "kept_revision", keptRevision)
		return
	}
	for _, p := range le.Problems {
		args := []any{"file", p.File}
		if p.Line > 0 {
			args = append(args, "line", p.Line, "column", p.Column)
		}
		args = append(args, "error", p.Message, "kept_revision", keptRevision)
		e.logger.Error("policy reload failed; the last good policy set stays in force", args...)
	}
}
