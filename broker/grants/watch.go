// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/fsnotify/fsnotify"
)

// AnyServer is what Watch reports when a change concerns every server (the
// blocks for every server changed), or when it cannot tell whose grants
// changed: the watcher's queue overflowed or failed, the directory itself
// was removed or renamed, or a grants file of a server this Store never saw
// was removed or is corrupt. The caller then re-checks the grants of every
// server it serves. (No server identity is empty, so this never names one.)
const AnyServer = ""

// Watch watches the store's directory for changes to grants files made by
// any process, this Store included, until ctx ends or the Store is closed.
// On a change it first invalidates the changed server's cached grants in
// this Store, so that the next Covers or List rereads the file, then calls
// fn with the server's identity (AnyServer when it cannot tell, see there),
// so that the caller can refuse what is no longer granted: re-check the
// server's watches and open requests with Covers, and send
// notifications/roots/list_changed. Changes that arrive together are
// reported once per server.
//
// fn may be nil (the cache is then invalidated, nothing else). It is called
// from one goroutine, one call at a time, and should return promptly:
// events wait meanwhile (the staleness bound of Covers still holds). A
// change is reported whether or not it changed anything (a Grant that only
// refreshes an expiry is a change).
//
// Watch returns once the watch is in place: every change completed after it
// returns is reported. Several Watches may run at once; each reports every
// change.
func (s *Store) Watch(ctx context.Context, fn func(server string)) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("grants: watch %s: %w", s.dir, err)
	}
	if err := w.Add(s.dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("grants: watch %s: %w", s.dir, err)
	}
	// Learn the servers of the files there now, so that a removal (the last
	// grant revoked) is reported by name.
	if hashes, err := s.scan(); err == nil {
		for _, h := range hashes {
			_, _ = s.resolve(h) // a corrupt file is reported when it changes
		}
	}
	if fn == nil {
		fn = func(string) {}
	}
	go s.watchLoop(ctx, w, fn)
	return nil
}

// changes collects the servers whose grants changed.
type changes struct {
	servers map[string]bool
	all     bool
}

func (s *Store) watchLoop(ctx context.Context, w *fsnotify.Watcher, fn func(string)) {
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			ch := changes{servers: map[string]bool{}}
			s.note(ev, &ch)
		drain: // what else is queued is reported with it
			for {
				select {
				case ev, ok := <-w.Events:
					if !ok {
						break drain
					}
					s.note(ev, &ch)
				default:
					break drain
				}
			}
			s.deliver(ch, fn)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			s.log.Warn("grants watch error; treating the grants of every server as changed", "path", s.dir, "error", err)
			s.deliver(changes{all: true}, fn)
		}
	}
}

// note records one event, and invalidates the cache of the server it names.
func (s *Store) note(ev fsnotify.Event, ch *changes) {
	if filepath.Clean(ev.Name) == s.dir {
		s.log.Warn("the grants directory was removed or renamed; changes are no longer watched, only checked every maximum staleness",
			"path", s.dir, "event", ev.Op.String())
		ch.all = true
		return
	}
	hash, ok := dataHash(filepath.Base(ev.Name))
	if !ok || ev.Op == fsnotify.Chmod {
		return
	}
	e := s.known(hash)
	if e == nil {
		var err error
		if e, err = s.resolve(hash); err != nil || e == nil {
			// Removed before it could be read, or corrupt: whose it was is
			// not known.
			s.log.Debug("a grants file of an unknown server changed", "path", ev.Name, "error", err)
			ch.all = true
			return
		}
	}
	e.invalidate()
	ch.servers[e.server] = true
}

// deliver invalidates what changed and reports it.
func (s *Store) deliver(ch changes, fn func(string)) {
	if ch.all {
		s.mu.RLock()
		es := make([]*entry, 0, len(s.servers)+1)
		for _, e := range s.servers {
			es = append(es, e)
		}
		es = append(es, s.every)
		s.mu.RUnlock()
		for _, e := range es {
			e.invalidate()
		}
		fn(AnyServer)
		return
	}
	servers := make([]string, 0, len(ch.servers))
	for srv := range ch.servers {
		servers = append(servers, srv)
	}
	slices.Sort(servers)
	for _, srv := range servers {
		fn(srv)
	}
}
