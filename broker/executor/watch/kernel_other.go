// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// kernel is the platform's file watcher through fsnotify, which adds watches
// by path only. The guarantee is weaker than on Linux: a watch is added by
// the directory's host path, and what that path resolves to is then checked
// to be the directory the root handle opened (device and inode, where the
// platform has them); a swap between the two can go unnoticed.
type kernel struct {
	w    *fsnotify.Watcher
	sink func(kernelEvent)
	fail func(error)
	done chan struct{}

	mu    sync.Mutex
	keys  map[string]watchKey // by host path
	paths map[watchKey]string
	next  watchKey
}

// newKernel creates the watcher and starts reading it: events go to sink,
// and lost events to fail.
func newKernel(sink func(kernelEvent), fail func(error)) (*kernel, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("create a file watcher: %w", err)
	}
	k := &kernel{w: w, sink: sink, fail: fail, done: make(chan struct{}),
		keys: make(map[string]watchKey), paths: make(map[watchKey]string)}
	go k.read()
	return k, nil
}

// add watches d's host path and checks that it still resolves to d.
func (k *kernel) add(d *handle) (watchKey, error) {
	if err := k.w.Add(d.abs); err != nil {
		return 0, fmt.Errorf("add a watch: %w", err)
	}
	fi, err := os.Stat(d.abs)
	if err != nil || !sameID(d.id, roots.FileIDOf(fi)) {
		// Other holders lose the watch as well: their directory was
		// replaced too, and its parent's events will drop it for them.
		if rerr := k.w.Remove(d.abs); rerr != nil && !errors.Is(rerr, fsnotify.ErrNonExistentWatch) {
			k.fail(fmt.Errorf("remove a swapped directory's watch: %w", rerr))
		}
		if err != nil {
			return 0, fmt.Errorf("stat a watched directory: %w", err)
		}
		return 0, errSwapped
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[d.abs]
	if !ok {
		k.next++
		key = k.next
		k.keys[d.abs], k.paths[key] = key, d.abs
	}
	return key, nil
}

// remove ends a watch.
func (k *kernel) remove(key watchKey) error {
	k.mu.Lock()
	abs, ok := k.paths[key]
	delete(k.paths, key)
	delete(k.keys, abs)
	k.mu.Unlock()
	if !ok {
		return nil
	}
	if err := k.w.Remove(abs); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
		return fmt.Errorf("remove a watch: %w", err)
	}
	return nil
}

// close closes the watcher and waits for the reader to end.
func (k *kernel) close() error {
	err := k.w.Close()
	<-k.done
	if err != nil {
		return fmt.Errorf("close the file watcher: %w", err)
	}
	return nil
}

// read turns fsnotify's events into kernel events: one for the watched
// directory a name is (its own removal or move), and one for the entry of
// the watched directory it is in.
func (k *kernel) read() {
	defer close(k.done)
	events, errs := k.w.Events, k.w.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			o := opOf(ev.Op)
			if o == 0 {
				continue
			}
			dir, base := filepath.Split(ev.Name)
			k.mu.Lock()
			self, isSelf := k.keys[ev.Name]
			parent, inParent := k.keys[filepath.Clean(dir)]
			k.mu.Unlock()
			if isSelf {
				k.sink(kernelEvent{key: self, op: o})
			}
			if inParent && base != "" {
				k.sink(kernelEvent{key: parent, name: base, op: o})
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			k.fail(err)
		}
	}
}

// opOf maps fsnotify's operations; attribute changes are dropped.
func opOf(fo fsnotify.Op) op {
	var o op
	if fo.Has(fsnotify.Create) {
		o |= opCreate
	}
	if fo.Has(fsnotify.Write) {
		o |= opWrite
	}
	if fo.Has(fsnotify.Remove) {
		o |= opRemove
	}
	if fo.Has(fsnotify.Rename) {
		o |= opRename
	}
	return o
}
