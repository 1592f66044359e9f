// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// ListOptions shape a listing.
type ListOptions struct {
	Recursive     bool
	IncludeHidden bool
	// MaxDepth bounds the recursion: 0 lists the directory's own entries
	// only, 1 their children too, and so on; negative means no bound.
	MaxDepth int
	// Limit is the most entries returned (at least 1).
	Limit int
	// Cursor continues a previous listing (its NextCursor).
	Cursor string
	// RefuseRoots makes a directory on the walk that is another root's
	// directory (WithRoots; by device and inode, wherever another program
	// moved it) PERMISSION_DENIED: for a listing of what an operation would
	// carry along, which must not take a root with it.
	RefuseRoots bool
	// TypesOnly is for a caller that needs each entry's name and type only
	// (its size, time and identity are then zero): an entry's type
	// is the one the directory records (getdents' d_type) and the entry is
	// stat'ed only where the directory does not say (DT_UNKNOWN, platforms
	// without d_type, names served from a large directory's snapshot, names
	// past the first maxTypedNames of a read). Not with RefuseRoots.
	TypesOnly bool
}

// maxTypedNames bounds the types a TypesOnly walk keeps from one reading of
// a directory; the names past them are stat'ed.
const maxTypedNames = 4096

// Entry is one listed file system object. Links are reported as links: the
// size and time are the link's own (lstat), never its target's.
type Entry struct {
	Path     canon.Path
	Name     string
	Type     string
	Size     int64
	Modified time.Time

	// id is the object's device and inode as listed (zero where the
	// platform has none): what a recursive Delete given the listing checks
	// each entry against.
	id roots.FileID
}

// ListResult is one page of a listing.
type ListResult struct {
	Entries    []Entry
	NextCursor string // empty on the last page
}

// List returns the entries under the directory at t, sorted by path segment
// by segment (a directory's entries come right after it). The broker's
// temporary files never appear; hidden entries (names starting with ".")
// appear only with IncludeHidden, and hidden directories are only descended
// then. Links are reported, never followed. The cursor is the last path
// returned, so a page stays correct when entries are added or removed
// between pages: an entry that exists throughout a listing is returned
// exactly once.
//
// Cost: a directory's names are read without a stat (getdents), only the
// entries of the page are stat'ed (fstatat relative to the open directory,
// never following a link; with TypesOnly, only those whose type getdents
// does not give), and a large directory's sorted names are kept
// between pages as a snapshot (see snapshot.go), so that a page costs a
// binary search and its own entries, not the whole directory.
func (x *Executor) List(ctx context.Context, t Target, o ListOptions) (ListResult, error) {
	if err := deadline(ctx); err != nil {
		return ListResult{}, err
	}
	switch {
	case !t.Exists:
		return ListResult{}, errcode.New(errcode.FileNotFound, "the directory does not exist")
	case t.Info.Type != TypeDirectory:
		return ListResult{}, errcode.New(errcode.IOError, "the path is not a directory").With("errno", "ENOTDIR")
	}
	cur, err := x.decodeCursor(o.Cursor)
	if err != nil {
		return ListResult{}, err
	}
	if o.Cursor == "" {
		cur.start = x.now()
	}
	if o.Limit < 1 {
		o.Limit = 1
	}
	if !o.Recursive {
		o.MaxDepth = 0
	}
	if o.RefuseRoots {
		o.TypesOnly = false // each entry's identity is checked
	}
	h, err := x.handle(t.Path.Root)
	if err != nil {
		return ListResult{}, err
	}
	d, err := openListDir(h, t.Path.Rel)
	if err != nil {
		if isGoneErr(err) {
			return ListResult{}, conflict("the directory changed while the request was decided")
		}
		return ListResult{}, mapOSError(err, "the directory cannot be opened")
	}
	st, err := d.stamp()
	if err != nil {
		_ = d.Close()
		return ListResult{}, mapOSError(err, "the directory cannot be read")
	}
	if !st.isDir || !sameObject(Info{Type: TypeDirectory, Dev: st.dev, Ino: st.ino}, t.Info) {
		_ = d.Close()
		return ListResult{}, conflict("the directory changed while the request was decided")
	}
	prefix := ""
	if t.Path.Rel != "" {
		prefix = t.Path.Rel + "/"
	}
	w := &walker{x: x, ctx: ctx, o: o, start: cur.start, cont: o.Cursor != "", root: t.Path}
	w.levels = append(w.levels, &level{d: d, id: snapKey{st.dev, st.ino}})
	err = w.walk(0, prefix, st, cur.after)
	w.closeAll()
	if err != nil && !errors.Is(err, errPageFull) {
		return ListResult{}, err
	}
	res := ListResult{Entries: w.entries()}
	if len(res.Entries) > o.Limit {
		res.Entries = res.Entries[:o.Limit:o.Limit]
		last := res.Entries[o.Limit-1].Path.Rel[len(prefix):]
		res.NextCursor = x.encodeCursor(cur.start, last)
	}
	return res, nil
}

// ListSubtree lists everything below the directory at t, for an operation
// that acts on all of it (a recursive delete, a rename of a directory): List
// recursively, hidden entries included, at most limit entries (NextCursor is
// set when there are more), and a directory on the way that is another
// root's is PERMISSION_DENIED (RefuseRoots). Each entry carries the identity
// it was listed with, so that a recursive Delete given the listing removes
// those very objects and nothing else.
func (x *Executor) ListSubtree(ctx context.Context, t Target, limit int) (ListResult, error) {
	return x.List(ctx, t, ListOptions{Recursive: true, IncludeHidden: true, MaxDepth: -1, Limit: limit, RefuseRoots: true})
}

// now is the time on the executor's own clock (monotonic, in nanoseconds),
// which orders a listing's start and a snapshot's reading.
func (x *Executor) now() int64 { return int64(time.Since(x.epoch)) }

// errPageFull stops the walk once a page and one more entry are collected.
var errPageFull = errors.New("page full")

// maxOpenDirs bounds the directories a walk holds open at once: below that
// depth a directory stays open while its subdirectories are walked; deeper
// ones are closed meanwhile and opened again afterwards from the deepest
// held one, name by name (and checked to be the same directory).
const maxOpenDirs = 32

// statBatch is how many names a walk goes through between two looks at its
// deadline.
const statBatch = 256

type walker struct {
	x     *Executor
	ctx   context.Context
	o     ListOptions
	start int64 // the listing's start, on x's clock
	cont  bool  // a later page (a cursor was given)
	root  canon.Path

	levels []*level // the directories being walked, the listed one first

	out   []Entry
	rels  []byte // the rels of out, packed, made strings once at the end
	spans []span
	buf   []byte // the getdents buffer
}

// level is one directory on the walk's path.
type level struct {
	d    *dirFile // nil while closed (deeper than maxOpenDirs)
	name string   // its name in its parent
	id   snapKey  // its identity, to check it when opened again
}

type span struct{ start, name, end int }

// walk lists the directory at depth (its entries' rels start with prefix),
// whose stamp is st, in name order, depth first. after is what is left of
// the cursor below it: entries up to after[0] were returned already, except
// below after[0] itself when the cursor goes deeper (or is after[0]).
func (w *walker) walk(depth int, prefix string, st dirStamp, after []string) error {
	if err := deadline(w.ctx); err != nil {
		return err
	}
	from := ""
	if len(after) > 0 {
		from = after[0]
	}
	it, err := w.names(depth, st, from)
	if err != nil {
		return err
	}
	if depth == 0 && w.out == nil {
		w.reserve(it.remaining(), prefix)
	}
	descend := w.o.MaxDepth < 0 || depth < w.o.MaxDepth
	for n := 1; ; n++ {
		if n%statBatch == 0 {
			if err := deadline(w.ctx); err != nil {
				return err
			}
		}
		name, ok, err := w.next(depth, &it)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if !w.o.IncludeHidden && strings.HasPrefix(name, ".") {
			continue
		}
		returned := len(after) > 0 && name == after[0] // the cursor or one of its directories
		if returned && !descend {
			continue
		}
		d, err := w.dir(depth)
		if err != nil {
			return err
		}
		if d == nil {
			return nil // the directory was moved away while it was walked
		}
		es, err := it.describe(d, name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the names were read
			}
			return mapOSError(err, "an entry cannot be read")
		}
		if w.o.TypesOnly {
			es = entryStat{typ: es.typ} // the same whether stat'ed or not
		}
		if !returned {
			w.emit(prefix, name, es)
			if len(w.out) > w.o.Limit {
				return errPageFull
			}
		}
		if descend && es.typ == TypeDirectory {
			var below []string
			if returned {
				below = after[1:]
			}
			if err := w.descend(depth, prefix, name, below); err != nil {
				return err
			}
		}
	}
}

// descend walks the subdirectory name of the directory at depth.
func (w *walker) descend(depth int, prefix, name string, after []string) error {
	parent := w.levels[depth]
	c, err := parent.d.openChild(name)
	if err != nil {
		if isGoneErr(err) {
			return nil // removed, or replaced by a link or a file, since it was stat'ed
		}
		return mapOSError(err, "the directory cannot be read")
	}
	st, err := c.stamp()
	if err != nil {
		_ = c.Close()
		return mapOSError(err, "the directory cannot be read")
	}
	if w.o.RefuseRoots {
		if r, ok := w.x.otherRoot(w.root.Root, Info{Type: TypeDirectory, Dev: st.dev, Ino: st.ino}); ok {
			_ = c.Close()
			return inOtherRoot(r)
		}
	}
	w.levels = pushLevel(w.levels, depth, &level{d: c, name: name, id: snapKey{st.dev, st.ino}})
	err = w.walk(depth+1, prefix+name+"/", st, after)
	w.levels = popLevel(w.levels, depth)
	return err
}

// dir returns the open directory at depth (see openLevel).
func (w *walker) dir(depth int) (*dirFile, error) { return openLevel(w.levels, depth) }

// pushLevel adds lv, a subdirectory of the directory at depth just opened,
// to a walk's path (levels, the walked directory first), and closes the
// directory at depth when the walk is more than maxOpenDirs deep (openLevel
// opens it again when the walk comes back to it).
func pushLevel(levels []*level, depth int, lv *level) []*level {
	if depth >= maxOpenDirs {
		if parent := levels[depth]; parent.d != nil {
			_ = parent.d.Close()
			parent.d = nil
		}
	}
	return append(levels, lv)
}

// popLevel closes the directory below depth on a walk's path and drops it.
func popLevel(levels []*level, depth int) []*level {
	if lv := levels[depth+1]; lv.d != nil {
		_ = lv.d.Close()
	}
	return levels[:depth+1]
}

// openLevel returns the open directory at depth of a walk's path (levels,
// the walked directory first, which is never closed), opening it again when
// it was closed while its subdirectories were walked: name by name from the
// deepest directory still open, and checked to be the same directory. It
// returns nil when it is no longer there.
func openLevel(levels []*level, depth int) (*dirFile, error) {
	lv := levels[depth]
	if lv.d != nil {
		return lv.d, nil
	}
	anchor := depth - 1
	for levels[anchor].d == nil {
		anchor--
	}
	d := levels[anchor].d
	for i := anchor + 1; i <= depth; i++ {
		next, err := d.openChild(levels[i].name)
		if i > anchor+1 {
			_ = d.Close()
		}
		if err != nil {
			if isGoneErr(err) {
				return nil, nil
			}
			return nil, mapOSError(err, "the directory cannot be read")
		}
		d = next
	}
	st, err := d.stamp()
	if err != nil || (snapKey{st.dev, st.ino}) != lv.id {
		_ = d.Close()
		if err != nil {
			return nil, mapOSError(err, "the directory cannot be read")
		}
		return nil, nil
	}
	lv.d = d
	return d, nil
}

func (w *walker) closeAll() { closeLevels(w.levels) }

// closeLevels closes the open directories of a walk's path.
func closeLevels(levels []*level) {
	for _, lv := range levels {
		if lv.d != nil {
			_ = lv.d.Close()
			lv.d = nil
		}
	}
}

// reserve makes room for the page of a directory with n names left.
func (w *walker) reserve(n int, prefix string) {
	if w.o.MaxDepth == 0 {
		n = min(n, w.o.Limit+1)
	} else {
		n = min(n+1, w.o.Limit+1) // and more as the walk goes down
	}
	w.out = make([]Entry, 0, n)
	w.spans = make([]span, 0, n)
	w.rels = make([]byte, 0, n*(len(prefix)+16))
}

// emit adds an entry to the page.
func (w *walker) emit(prefix, name string, es entryStat) {
	start := len(w.rels)
	w.rels = append(w.rels, prefix...)
	w.rels = append(w.rels, name...)
	w.spans = append(w.spans, span{start: start, name: len(w.rels) - len(name), end: len(w.rels)})
	w.out = append(w.out, Entry{Path: canon.Path{Root: w.root.Root}, Type: es.typ, Size: es.size, Modified: es.mtime, id: es.id})
}

// entries returns the page, its paths and names made strings (all carved
// from one).
func (w *walker) entries() []Entry {
	all := string(w.rels)
	for i, s := range w.spans {
		w.out[i].Path.Rel = all[s.start:s.end]
		w.out[i].Name = all[s.name:s.end]
	}
	return w.out
}

// nameIter yields one directory's names in order: from a snapshot's sorted
// names, or from a page's worth of names selected for this walk.
type nameIter struct {
	sorted    sortedNames
	useSorted bool
	i         int
	batch     []string // the smallest names from the start on
	more      bool     // names after batch were left out
	snap      *snapshot
	types     map[string]string // for TypesOnly: names' types as the directory records them
}

// describe returns what a walk needs of the entry name of d: its type from
// it.types when the walk needs no more and the directory gave it, else its
// lstat.
func (it *nameIter) describe(d *dirFile, name string) (entryStat, error) {
	if typ, ok := it.types[name]; ok {
		return entryStat{typ: typ}, nil
	}
	return d.lstat(name)
}

// remaining is how many names are left (a lower bound when more is set).
func (it *nameIter) remaining() int {
	if it.useSorted {
		return it.sorted.len() - it.i
	}
	return len(it.batch) - it.i
}

// next returns the directory's next name. A batch that runs out while names
// were left out (entries vanished between the reading and their stat)
// continues after its last name: in the directory's snapshot when there is
// one, else in the directory read again.
func (w *walker) next(depth int, it *nameIter) (string, bool, error) {
	if it.useSorted {
		if it.i >= it.sorted.len() {
			return "", false, nil
		}
		it.i++
		return it.sorted.name(it.i - 1), true, nil
	}
	if it.i < len(it.batch) {
		it.i++
		return it.batch[it.i-1], true, nil
	}
	if !it.more || len(it.batch) == 0 {
		return "", false, nil
	}
	last := it.batch[len(it.batch)-1]
	if it.snap != nil {
		s := it.snap.sorted()
		i := s.search(last)
		if i < s.len() && s.name(i) == last {
			i++
		}
		*it = nameIter{sorted: s, useSorted: true, i: i}
		return w.next(depth, it)
	}
	d, err := w.dir(depth)
	if err != nil || d == nil {
		return "", false, err
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return "", false, mapOSError(err, "the directory cannot be read")
	}
	*it, err = w.readNames(d, dirStamp{}, last, false, false)
	if err != nil {
		return "", false, err
	}
	return w.next(depth, it)
}

// names returns the names of the directory at depth from from on: from its
// snapshot when one is kept that may serve this page, else read now.
func (w *walker) names(depth int, st dirStamp, from string) (nameIter, error) {
	x := w.x
	cacheable := st.known && x.snaps.maxDirs > 0
	if cacheable {
		s := x.snaps.get(snapKey{st.dev, st.ino}, st, time.Now())
		// One read since this listing began holds every entry that existed
		// throughout, which is the contract; one read before it must be
		// settled (its stamp tells any change) and recent.
		if s != nil && ((w.cont && w.start <= s.readAt) || (s.settled && x.now()-s.readAt < int64(trustFor))) {
			sorted := s.sorted()
			return nameIter{sorted: sorted, useSorted: true, i: sorted.search(from)}, nil
		}
	}
	// One listing at a time reads a directory whole to keep it; the others
	// read a page's worth at a time meanwhile (snapCache.building).
	keep := cacheable && x.snaps.building.CompareAndSwap(false, true)
	if keep {
		defer x.snaps.building.Store(false)
	}
	return w.readNames(w.levels[depth].d, st, from, true, keep)
}

// readNames reads d's names (the broker's temporary files left out) and
// returns the smallest ones from from on (from itself when incl), as many as
// the page can still take, selected without sorting the whole directory.
// With keep, all the names are also kept as the directory's snapshot when
// there are enough of them and they fit the cache (sorted only when a later
// page needs them); otherwise only the page's worth is kept as they are
// read, so that a huge directory costs a page's worth of names in memory.
func (w *walker) readNames(d *dirFile, st dirStamp, from string, incl, keep bool) (nameIter, error) {
	x := w.x
	readAt, wall := x.now(), time.Now()
	top := topNames{k: w.o.Limit + 2 - len(w.out), from: from, incl: incl, hidden: w.o.IncludeHidden}
	if w.buf == nil {
		w.buf = make([]byte, readBuffer)
	}
	var types map[string]string
	if w.o.TypesOnly {
		// Room for a page's worth at once: a map grown name by name rehashed
		// itself several times a listing of 1,000 names.
		types = make(map[string]string, min(top.k, maxTypedNames))
	}
	var r rawNames
	if keep && st.size >= growFrom {
		// About the names' bytes: a directory's size is its records' on
		// most file systems (ext4, xfs: about twice its names for short
		// ones; btrfs: twice exactly); the arena grows past it if need be.
		// Capped: ext4 never shrinks a directory, so one that once held
		// many names keeps a large size when it holds few, and every
		// listing would make room for nothing.
		r.grow(int(min(st.size/2, maxGrowHint, int64(x.snaps.maxBytes))))
	}
	add := func(name []byte, typ string) {
		if typ != "" && types != nil && len(types) < maxTypedNames &&
			(w.o.IncludeHidden || len(name) == 0 || name[0] != '.') {
			types[string(name)] = typ
		}
		if !keep {
			top.addBytes(name)
			return
		}
		r.add(name)
		if r.size() > x.snaps.maxBytes {
			// Too many to keep: select from them and from the rest as it
			// comes. The names so far stay in their arena until the page is
			// done, as they would in a batch of a smaller buffer.
			keep = false
			raw, start := r.arena.String(), uint32(0)
			for _, e := range r.ends {
				top.add(raw[start:e])
				start = e
			}
			r = rawNames{}
		}
	}
	for {
		done, err := d.readBatch(w.buf, add)
		if err != nil {
			return nameIter{}, mapOSError(err, "the directory cannot be read")
		}
		if done {
			break
		}
		if err := deadline(w.ctx); err != nil {
			return nameIter{}, err
		}
	}
	if !keep {
		return nameIter{batch: top.sorted(), more: top.dropped, types: types}, nil
	}
	raw, ends, weight := r.packed()
	if len(ends) < minSnapshotNames {
		names := splitNames(raw, ends)
		slices.Sort(names)
		i, found := slices.BinarySearch(names, from)
		if found && !incl {
			i++
		}
		return nameIter{batch: names[i:], types: types}, nil
	}
	s := newSnapshot(raw, ends, st, settled(st, wall), readAt)
	s.bytes = weight
	x.snaps.put(snapKey{st.dev, st.ino}, s, time.Now())
	start := uint32(0)
	for _, e := range ends {
		top.add(raw[start:e])
		start = e
	}
	return nameIter{batch: top.sorted(), more: top.dropped, snap: s, types: types}, nil
}

// readBuffer is the size of a walk's getdents buffer.
const readBuffer = 32 << 10

// growFrom is the size (st_size) from which a directory read whole has room
// made for its names at once: about 1,000 short names on ext4. A smaller one
// grows as it is read, which costs less than room made for nothing.
const growFrom = 32 << 10

// maxGrowHint caps the room made from a directory's size (see readNames):
// about 80,000 short names; a bigger directory's arena grows as it is read.
const maxGrowHint = 1 << 20

// settled reports whether a directory's times, as of wall, are too old for a
// change in the same clock tick to have left them as they are.
func settled(st dirStamp, wall time.Time) bool {
	limit := wall.Add(-racyWindow).UnixNano()
	return st.mtime < limit && st.ctime < limit
}

// topNames keeps the k smallest names it is given from from on (hidden ones
// only when hidden), in at most 2k strings.
type topNames struct {
	k       int
	from    string
	incl    bool
	hidden  bool
	names   []string
	max     string // once trimmed: the largest name kept
	trimmed bool
	dropped bool // a name was left out
}

// add considers n, a string that stays as it is.
func (t *topNames) add(n string) {
	if n < t.from || (!t.incl && n == t.from) || (!t.hidden && strings.HasPrefix(n, ".")) {
		return
	}
	if t.trimmed && n >= t.max {
		t.dropped = true
		return
	}
	t.keep(n)
}

// addBytes considers n, copied only when it is kept.
func (t *topNames) addBytes(n []byte) {
	if string(n) < t.from || (!t.incl && string(n) == t.from) || (!t.hidden && len(n) > 0 && n[0] == '.') {
		return
	}
	if t.trimmed && string(n) >= t.max {
		t.dropped = true
		return
	}
	t.keep(string(n))
}

func (t *topNames) keep(n string) {
	t.names = append(t.names, n)
	if len(t.names) >= 2*t.k {
		t.trim()
	}
}

// trim keeps the k smallest names (unsorted: selected, not sorted, which
// costs a pass or two over them instead of a sort) and the largest of them.
func (t *topNames) trim() {
	if len(t.names) > t.k {
		selectSmallest(t.names, t.k)
		clear(t.names[t.k:])
		t.names = t.names[:t.k]
		t.dropped = true
		t.max, t.trimmed = t.names[t.k-1], true
	} else if len(t.names) == t.k {
		t.max, t.trimmed = slices.Max(t.names), true
	}
}

func (t *topNames) sorted() []string {
	t.trim()
	slices.Sort(t.names)
	return t.names
}

// selectSmallest reorders a so that a[k-1] is its k-th smallest string, those
// before it no larger and those after it no smaller (quickselect, with a
// three-way partition so that equal strings cost nothing more). Names come in
// an order a server that creates files may choose (on file systems that list
// in creation order), so past 2*log2(len(a)) rounds, which only an unlucky or
// crafted order needs, what is left is sorted instead: never quadratic.
func selectSmallest(a []string, k int) {
	n, lo, hi := k-1, 0, len(a)
	for rounds := 2 * bits.Len(uint(len(a))); hi-lo > 1; rounds-- {
		if rounds == 0 {
			slices.Sort(a[lo:hi])
			return
		}
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi-1]
		if x > y {
			x, y = y, x
		}
		if y > z {
			y = z
			if x > y {
				y = x
			}
		}
		p := y // the median of three
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch c := strings.Compare(a[i], p); {
			case c < 0:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case c > 0:
				gt--
				a[i], a[gt] = a[gt], a[i]
			default:
				i++
			}
		}
		switch {
		case n < lt:
			hi = lt
		case n >= gt:
			lo = gt
		default:
			return
		}
	}
}

// cursorVersion starts every cursor, so that the format can change.
const cursorVersion = "2\x00"

// cursor is what a cursor holds: the listing's start on the executor's
// clock, and the last path returned (its segments below the listed
// directory).
type cursor struct {
	start int64
	after []string
}

// encodeCursor seals the last path of a page. The cursor is opaque to the
// server: it is encrypted and authenticated under a key of this process, so
// that it never reveals the name of an entry the policy hid from the page,
// and a forged or altered cursor is refused.
func (x *Executor) encodeCursor(start int64, last string) string {
	nonce := make([]byte, x.cursorAEAD.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "" // no cursor: the listing ends here rather than leak
	}
	plain := strconv.AppendInt([]byte(cursorVersion), start, 10)
	plain = append(append(plain, 0), last...)
	sealed := x.cursorAEAD.Seal(nonce, nonce, plain, nil)
	return base64.RawURLEncoding.EncodeToString(sealed)
}

// decodeCursor opens a cursor; one this process did not make is
// INVALID_PARAMS.
func (x *Executor) decodeCursor(c string) (cursor, error) {
	if c == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	var plain []byte
	if err == nil && len(b) > x.cursorAEAD.NonceSize() {
		n := x.cursorAEAD.NonceSize()
		plain, err = x.cursorAEAD.Open(nil, b[:n], b[n:], nil)
	} else if err == nil {
		err = errors.New("short cursor")
	}
	rest, ok := strings.CutPrefix(string(plain), cursorVersion)
	startText, last, ok2 := strings.Cut(rest, "\x00")
	start, perr := strconv.ParseInt(startText, 10, 64)
	if err != nil || !ok || !ok2 || perr != nil || last == "" {
		return cursor{}, errcode.New(errcode.InvalidParams, "the cursor is not one this broker returned").
			With("errors", []map[string]string{{"pointer": "/cursor", "message": "not a cursor returned by files/list"}})
	}
	return cursor{start: start, after: strings.Split(last, "/")}, nil
}
