// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// walk watches directory rel of s, open as dir, and reconciles its entries
// with the ones s knows, then does the same for every subdirectory when s
// is recursive. It runs without h.mu, taking it briefly per directory, and
// while it runs the events of s wait (s.walking). Each subdirectory is
// looked up from the root handle without following any link, after its
// parent's watch was added, so that a change made during the walk is seen
// either by the lookup or as an event of the parent.
//
// With report, every difference is recorded as a change (a new directory,
// a rescan); without it the entries found are the baseline (the initial
// walk). With checkTop, rel is the top of s and is looked up again once its
// watch is added: moved or replaced before that, it would be watched
// without its move ever reported, so that is errSwapped. Errors of rel
// itself are returned; a subdirectory that cannot be watched is skipped,
// except that the initial walk stops at the system watch limit.
func (h *Hub) walk(s *Subscription, rel string, dir *handle, report, checkTop bool) error {
	stack := []string{rel}
	for first := true; len(stack) > 0; first = false {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		d := dir
		if !first {
			var err error
			if d, err = s.root.lookup(cur); err != nil {
				if !isVanished(err) && !errors.Is(err, errSwapped) {
					h.log.Debug("a directory cannot be watched; skipped", "error", err)
				}
				continue
			}
			if d.kind != kindDir {
				// Replaced since its parent was read: the parent's
				// events tell.
				d.close()
				continue
			}
		}
		subdirs, err := h.visit(s, cur, d, report, first && checkTop)
		if !first {
			d.close()
		}
		switch {
		case err == nil:
		case first, errors.Is(err, errAborted), !report && isQuota(err):
			return err
		case isVanished(err), errors.Is(err, errSwapped), errors.Is(err, errLoop):
			continue
		default:
			h.log.Debug("a directory cannot be watched; skipped", "error", err)
			continue
		}
		for i := len(subdirs) - 1; i >= 0; i-- {
			stack = append(stack, joinRel(cur, subdirs[i]))
		}
	}
	return nil
}

// visit is one directory of a walk: its watch is added on dir and recorded
// (h.mu held), its entries are read from dir (h.mu not held), then
// reconciled (h.mu held). It returns the names of the subdirectories to
// walk.
func (h *Hub) visit(s *Subscription, rel string, dir *handle, report, checkTop bool) ([]string, error) {
	if h.beforeAdd != nil {
		h.beforeAdd(rel)
	}
	h.mu.Lock()
	d, added, err := h.watchDir(s, rel, dir, report, time.Now())
	if err == nil && checkTop && !h.stillAt(s, rel, dir) {
		h.forget(s, rel, d, added)
		err = errSwapped
	}
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}

	list, rerr := dir.readDir()

	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.walkable(s); err != nil {
		return nil, err
	}
	if s.dirs[rel] != d {
		return nil, errAborted
	}
	if rerr != nil {
		h.forget(s, rel, d, added)
		return nil, rerr
	}
	subdirs := h.reconcile(s, rel, d, list, report, time.Now())
	if report {
		h.poke()
	}
	return subdirs, nil
}

// walkable returns errAborted once a walk of s has no reason to go on.
// h.mu is held.
func (h *Hub) walkable(s *Subscription) error {
	if h.closed || s.dead || s.gone {
		return errAborted
	}
	return nil
}

// stillAt reports whether rel still names the directory dir is open on.
// h.mu is held.
func (h *Hub) stillAt(s *Subscription, rel string, dir *handle) bool {
	again, err := s.root.lookup(rel)
	if err != nil {
		return false
	}
	defer again.close()
	return again.kind == kindDir && sameID(again.id, dir.id)
}

// forget undoes what watchDir recorded for rel, when it added the state.
// h.mu is held.
func (h *Hub) forget(s *Subscription, rel string, d *dirState, added bool) {
	if added && s.dirs[rel] == d {
		delete(s.dirs, rel)
		h.unref(s, d.key, rel)
	}
}

// reconcile records the entries read from directory rel of s (d): entries
// gone or of another type first (so that a directory moved within the tree
// is released before it is watched under its new name), then new ones;
// with report, each difference is a change. It returns the subdirectories
// to walk when s is recursive. h.mu is held.
func (h *Hub) reconcile(s *Subscription, rel string, d *dirState, list []fs.DirEntry, report bool, now time.Time) []string {
	present := make(map[string]bool, len(list)) // name -> is a directory
	for _, e := range list {
		if name := e.Name(); !executor.IsTempName(name) && (!s.file || name == s.name) {
			present[name] = e.Type().IsDir()
		}
	}
	for name, old := range d.entries {
		isDir, ok := present[name]
		if ok && isDir == old.dir {
			continue
		}
		child := joinRel(rel, name)
		if old.dir {
			h.dropSubtree(s, child, report, now)
		}
		if !ok {
			delete(d.entries, name)
			if report {
				h.change(s, child, true, false, now)
			}
		}
	}
	var subdirs []string
	for _, e := range list {
		name := e.Name()
		isDir, ok := present[name]
		if !ok {
			continue
		}
		old, known := d.entries[name]
		if !known || old.dir != isDir {
			d.entries[name] = entry{dir: isDir}
			if report {
				h.change(s, joinRel(rel, name), known, true, now)
			}
		}
		if isDir && s.recursive {
			subdirs = append(subdirs, name)
		}
	}
	return subdirs
}

// watchDir adds the watch of directory rel of s on dir, the directory as
// looked up through the root, and records it; added tells whether the
// state is new. A known directory that was replaced by another one is
// dropped first (its entries reported gone with report). h.mu is held.
func (h *Hub) watchDir(s *Subscription, rel string, dir *handle, report bool, now time.Time) (d *dirState, added bool, err error) {
	if err := h.walkable(s); err != nil {
		return nil, false, err
	}
	old := s.dirs[rel]
	if old != nil && !sameID(old.id, dir.id) {
		h.dropSubtree(s, rel, report, now)
		old = nil
	}
	key, err := h.kernel.add(dir)
	if err != nil {
		return nil, false, fmt.Errorf("add a watch: %w", err)
	}
	if err := h.ref(s, key, rel, dir, report, now); err != nil {
		if h.dirs[key] == nil {
			h.removeWatch(key)
		}
		return nil, false, err
	}
	if old != nil {
		if old.key != key {
			// The kernel had lost the old watch (it gave a new one).
			h.unref(s, old.key, rel)
			old.key = key
		}
		return old, false, nil
	}
	d = &dirState{key: key, id: dir.id, entries: make(map[string]entry)}
	s.dirs[rel] = d
	return d, true, nil
}

// errLoop: a directory is already watched by the subscription at a path
// above or below this one (a bind mount of a directory inside itself).
var errLoop = errors.New("the directory is already watched above or below this path")

// ref records s's hold on the watch key as directory rel. A directory that
// s holds at another path has moved there: it is forgotten at the old one.
// h.mu is held.
func (h *Hub) ref(s *Subscription, key watchKey, rel string, dir *handle, report bool, now time.Time) error {
	hd := h.dirs[key]
	if hd == nil {
		hd = &hubDir{id: dir.id, subs: make(map[*Subscription]string, 1)}
		h.dirs[key] = hd
	}
	prev, held := hd.subs[s]
	if held && prev != rel && (within(rel, prev) || within(prev, rel)) {
		return errLoop
	}
	hd.subs[s] = rel
	if held && prev != rel {
		h.dropSubtree(s, prev, report, now)
	}
	return nil
}

// unref drops s's hold on key as directory rel, removing the watch when
// nobody holds it. A hold that is now for another path (the directory
// moved) is kept. h.mu is held.
func (h *Hub) unref(s *Subscription, key watchKey, rel string) {
	hd := h.dirs[key]
	if hd == nil {
		return
	}
	if cur, ok := hd.subs[s]; !ok || cur != rel {
		return
	}
	delete(hd.subs, s)
	if len(hd.subs) > 0 {
		return
	}
	delete(h.dirs, key)
	h.removeWatch(key)
}

// removeWatch removes a watch nobody holds. h.mu is held.
func (h *Hub) removeWatch(key watchKey) {
	if err := h.kernel.remove(key); err != nil {
		h.log.Trace("cannot remove a watch", "error", err)
	}
}

// dropSubtree forgets directory rel of s and everything below it, releasing
// their watches. With report, the known entries below rel are recorded as
// gone (rel itself is the caller's). h.mu is held.
func (h *Hub) dropSubtree(s *Subscription, rel string, report bool, now time.Time) {
	d := s.dirs[rel]
	if d == nil {
		return
	}
	delete(s.dirs, rel)
	for name, e := range d.entries {
		child := joinRel(rel, name)
		if e.dir {
			h.dropSubtree(s, child, report, now)
		}
		if report {
			h.change(s, child, true, false, now)
		}
	}
	h.unref(s, d.key, rel)
}

// releaseAll releases every watch of s and forgets its directories.
// h.mu is held.
func (h *Hub) releaseAll(s *Subscription) {
	for rel, d := range s.dirs {
		delete(s.dirs, rel)
		h.unref(s, d.key, rel)
	}
}

// startWalk walks directory rel of s in the background, reporting what it
// finds; the events of s wait until it ends. With checkTop, rel is the top
// of s (a rescan): a top that is no longer the directory s watches makes s
// gone. h.mu is held.
func (h *Hub) startWalk(s *Subscription, rel string, checkTop bool) {
	if h.walkable(s) != nil {
		return
	}
	s.walking = true
	h.walks.Add(1)
	go h.runWalk(s, rel, checkTop)
}

// runWalk is the goroutine of startWalk.
func (h *Hub) runWalk(s *Subscription, rel string, checkTop bool) {
	defer h.walks.Done()
	err := h.walkFrom(s, rel, checkTop)

	h.mu.Lock()
	defer h.mu.Unlock()
	s.walking = false
	if h.closed {
		return
	}
	now := time.Now()
	switch {
	case err == nil, errors.Is(err, errAborted):
	case checkTop && (isVanished(err) || errors.Is(err, errSwapped)):
		h.topGone(s, now)
	case isVanished(err), errors.Is(err, errSwapped), errors.Is(err, errLoop):
		// Gone or replaced meanwhile: its parent's events tell.
	default:
		h.log.Warn("a directory cannot be watched", "error", err)
	}
	h.flush(s, now)
	h.poke()
}

// walkFrom looks rel up and walks it; with checkTop, rel must still be the
// top directory s watches.
func (h *Hub) walkFrom(s *Subscription, rel string, checkTop bool) error {
	dir, err := s.root.lookup(rel)
	if err != nil {
		return err
	}
	defer dir.close()
	if dir.kind != kindDir {
		return errNotDir
	}
	if checkTop {
		h.mu.Lock()
		d := s.dirs[s.top]
		same := d != nil && sameID(d.id, dir.id)
		h.mu.Unlock()
		if !same {
			return errSwapped
		}
	}
	return h.walk(s, rel, dir, true, checkTop)
}

// window is one subscription's coalescing window for one path: whether the
// path existed when the window opened and whether it exists now.
type window struct {
	s        *Subscription
	rel      string
	before   bool
	after    bool
	deadline time.Time
	last     time.Time
}

// kind is the change over the window; false when there is none to report.
func (w *window) kind() (Kind, bool) {
	switch {
	case w.before && w.after:
		return Modified, true
	case w.after:
		return Created, true
	case w.before:
		return Deleted, true
	}
	return "", false
}

// change records a change of path rel of s: existed tells whether it
// existed just before (used when a window opens), exists whether it does
// now. h.mu is held.
func (h *Hub) change(s *Subscription, rel string, existed, exists bool, now time.Time) {
	if w := s.pending[rel]; w != nil {
		w.after, w.last = exists, now
		return
	}
	if !existed && !exists {
		return
	}
	w := &window{s: s, rel: rel, before: existed, after: exists, deadline: now.Add(h.coalesce), last: now}
	s.pending[rel] = w
	h.windows = append(h.windows, w)
}

// touch notes that rel of s still exists, only when a window is open.
// h.mu is held.
func (h *Hub) touch(s *Subscription, rel string, now time.Time) {
	if w := s.pending[rel]; w != nil {
		w.after, w.last = true, now
	}
}

// popDue closes the windows whose deadline has passed and returns their
// events, in the order the windows opened. h.mu is held.
func (h *Hub) popDue(now time.Time) []delivery {
	var out []delivery
	i := 0
	for ; i < len(h.windows); i++ {
		w := h.windows[i]
		if w.deadline.After(now) {
			break
		}
		h.windows[i] = nil
		s := w.s
		if s.dead || s.pending[w.rel] != w {
			continue
		}
		delete(s.pending, w.rel)
		k, ok := w.kind()
		if !ok || !s.kinds.has(k) {
			continue
		}
		out = append(out, delivery{s: s, ev: Event{
			Path: canon.Path{Root: s.target.Root, Rel: w.rel},
			Kind: k,
			Time: w.last.UTC(),
		}})
	}
	h.windows = h.windows[i:]
	return out
}

// kindSet is a set of kinds.
type kindSet uint8

// allKinds is the filter of a subscription that named none.
const allKinds kindSet = 7

func kindBit(k Kind) kindSet {
	switch k {
	case Created:
		return 1
	case Modified:
		return 2
	case Deleted:
		return 4
	}
	return 0
}

func (ks kindSet) has(k Kind) bool { return ks&kindBit(k) != 0 }

// parseKinds turns a filter into a set: nil or empty means all three.
func parseKinds(kinds []Kind) (kindSet, error) {
	if len(kinds) == 0 {
		return allKinds, nil
	}
	var ks kindSet
	for _, k := range kinds {
		b := kindBit(k)
		if b == 0 {
			return 0, errcode.New(errcode.InvalidParams,
				fmt.Sprintf("unknown event kind %q (created, modified or deleted)", quoteShort(string(k))))
		}
		ks |= b
	}
	return ks, nil
}

// quoteShort cuts s to 32 bytes for an error reason.
func quoteShort(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
