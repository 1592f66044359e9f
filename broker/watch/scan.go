package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// scan watches directory rel of s and reconciles its entries with the ones
// s knows, descending into subdirectories when s is recursive. With report,
// every difference is recorded as a change (a new directory, a rescan);
// without it the entries found are the baseline (the initial walk). Errors
// of rel itself are returned; a subdirectory that cannot be watched is
// skipped, except that the initial walk stops at the system watch limit.
// h.mu is held.
func (h *Hub) scan(s *Subscription, rel string, report bool, now time.Time) error {
	d, list, err := h.watchDir(s, rel, report, now)
	if err != nil {
		return err
	}
	present := make(map[string]bool, len(list)) // name -> is a directory
	for _, e := range list {
		if name := e.Name(); !executor.IsTempName(name) && (!s.file || name == s.name) {
			present[name] = e.Type().IsDir()
		}
	}
	// Entries gone, or of another type, first: a directory moved within the
	// tree is released before it is watched under its new name.
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
	for _, e := range list {
		name := e.Name()
		isDir, ok := present[name]
		if !ok {
			continue
		}
		child := joinRel(rel, name)
		old, known := d.entries[name]
		if !known || old.dir != isDir {
			d.entries[name] = entry{dir: isDir}
			if report {
				h.change(s, child, known, true, now)
			}
		}
		if isDir && s.recursive {
			err := h.scan(s, child, report, now)
			switch {
			case err == nil:
			case !report && isQuota(err):
				return err
			case isVanished(err):
			default:
				h.log.Debug("a directory cannot be watched; skipped", "error", err)
			}
		}
	}
	return nil
}

// prune drops the watched directories of s that are no longer where s
// knows them (gone, or another object), reporting their known entries gone,
// before a rescan adds watches again: so a directory moved within the tree
// while events were lost is never watched under its old path. h.mu is held.
func (h *Hub) prune(s *Subscription, now time.Time) {
	rels := make([]string, 0, len(s.dirs))
	for rel := range s.dirs {
		rels = append(rels, rel)
	}
	slices.Sort(rels) // parents first: their subtrees go with them
	root := h.roots[s.target.Root.Path]
	for _, rel := range rels {
		d := s.dirs[rel]
		if d == nil || rel == s.top {
			continue
		}
		fi, err := root.Lstat(rel)
		if err == nil && fi.IsDir() && sameID(d.id, fileIDOf(fi)) {
			continue
		}
		h.dropSubtree(s, rel, true, now)
	}
}

// watchDir adds the watch on directory rel of s and reads its entries. The
// directory is looked up and read only through the root handle, without
// following a link in its last segment; the directory the watcher resolved
// by absolute path must be the same one (device and inode), else the watch
// is removed and errSwapped returned. A known directory that was replaced
// by another one is dropped first (its entries reported gone with report).
// h.mu is held.
func (h *Hub) watchDir(s *Subscription, rel string, report bool, now time.Time) (*dirState, []fs.DirEntry, error) {
	root := h.roots[s.target.Root.Path]
	name := dotRel(rel)
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, nil, fmt.Errorf("lstat a directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, nil, errNotDir
	}
	id := fileIDOf(fi)
	old := s.dirs[rel]
	if old != nil && !sameID(old.id, id) {
		h.dropSubtree(s, rel, report, now)
		old = nil
	}
	abs := absPath(s.target.Root.Path, rel)
	if h.beforeAdd != nil {
		h.beforeAdd(abs)
	}
	if err := h.ref(s, abs, rel, id); err != nil {
		return nil, nil, err
	}
	undo := func() {
		if old == nil {
			h.unref(s, abs)
		}
	}
	f, err := root.Open(name)
	if err != nil {
		undo()
		return nil, nil, fmt.Errorf("open a directory: %w", err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		undo()
		return nil, nil, fmt.Errorf("stat a directory: %w", err)
	}
	if !sameID(id, fileIDOf(ofi)) {
		undo()
		return nil, nil, errSwapped
	}
	list, err := f.ReadDir(-1)
	if err != nil {
		undo()
		return nil, nil, fmt.Errorf("read a directory: %w", err)
	}
	if old == nil {
		old = &dirState{abs: abs, id: id, entries: make(map[string]entry, len(list))}
		s.dirs[rel] = old
	}
	return old, list, nil
}

// ref adds the watcher's watch on abs (again: adding is idempotent and
// restores a lost watch) and records s's hold on it. It then checks that
// what the watcher resolved from the absolute path is the directory with
// identity id; if not, the watch is removed and errSwapped returned.
// h.mu is held.
func (h *Hub) ref(s *Subscription, abs, rel string, id fileID) error {
	if err := h.w.Add(abs); err != nil {
		return fmt.Errorf("add a watch: %w", err)
	}
	sfi, err := os.Stat(abs)
	if err != nil || !sameID(id, fileIDOf(sfi)) {
		// Other holders lose the watch as well: their directory was
		// replaced too, and the parent's events will drop it for them.
		if rerr := h.w.Remove(abs); rerr != nil && !errors.Is(rerr, fsnotify.ErrNonExistentWatch) {
			h.log.Debug("cannot remove a swapped directory's watch", "error", rerr)
		}
		if err != nil {
			return fmt.Errorf("stat a watched directory: %w", err)
		}
		return errSwapped
	}
	hd := h.dirs[abs]
	if hd == nil {
		hd = &hubDir{subs: make(map[*Subscription]string, 1)}
		h.dirs[abs] = hd
	}
	hd.subs[s] = rel
	return nil
}

// unref drops s's hold on abs, removing the watch when nobody holds it.
// h.mu is held.
func (h *Hub) unref(s *Subscription, abs string) {
	hd := h.dirs[abs]
	if hd == nil {
		return
	}
	delete(hd.subs, s)
	if len(hd.subs) > 0 {
		return
	}
	delete(h.dirs, abs)
	// The watch is already gone when the directory was deleted.
	if err := h.w.Remove(abs); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
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
	h.unref(s, d.abs)
}

// releaseAll releases every watch of s and forgets its directories.
// h.mu is held.
func (h *Hub) releaseAll(s *Subscription) {
	for rel, d := range s.dirs {
		delete(s.dirs, rel)
		h.unref(s, d.abs)
	}
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

// sameID reports whether two identities name the same object; an unknown
// identity matches anything (the check is skipped where unavailable).
func sameID(a, b fileID) bool {
	if !a.ok || !b.ok {
		return true
	}
	return a.dev == b.dev && a.ino == b.ino
}
