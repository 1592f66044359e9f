// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/internal/keyfile"
)

// Defaults of the options.
const (
	// DefaultMaxStale is how long a Store answers from its cached grants
	// before it checks the file again: the bound on how late a change by
	// another process is seen when no Watch event arrives. Half of
	// PROTOCOL.md's second, so that the bound holds with room to spare
	// even when the watch fails.
	DefaultMaxStale = 500 * time.Millisecond
	// DefaultLockWait is how long Grant and Revoke wait for a server's lock
	// held by another process.
	DefaultLockWait = 10 * time.Second
	// DefaultMaxGrants is how many grants one server may hold: set by
	// memory, so that fsbroker serve stays within its 64 MiB of peak RSS
	// when it reads the file of a server holding that many
	// (docs/consent.md has the measurements).
	DefaultMaxGrants = 30000
)

const (
	// maxFileSize bounds a grants file (its JSON object and its appended
	// records): DefaultMaxGrants grants take about 8 MiB in the JSON
	// object, more with long paths; the records appended to it are
	// compacted before they outgrow it.
	maxFileSize = 32 << 20
	// rereadFactor times the maximum staleness is how old a read may be
	// before the file is reread even though a stat shows no change.
	rereadFactor = 10
	idBytes      = 12
)

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger of warnings (a failed directory sync, a watch
// error, leftover temporary files). The default discards them.
func WithLogger(l hclog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithMaxStale sets how long cached grants are used before the file is
// checked again (DefaultMaxStale); 0 checks it on every call. See the
// package documentation.
func WithMaxStale(d time.Duration) Option {
	return func(s *Store) { s.maxStale = max(d, 0) }
}

// WithLockWait sets how long Grant and Revoke wait for a server's lock held
// by another process before they fail (DefaultLockWait).
func WithLockWait(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.lockWait = d
		}
	}
}

// WithMaxGrants sets how many grants one server may hold
// (DefaultMaxGrants).
func WithMaxGrants(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.maxGrants = n
		}
	}
}

// WithClock sets the clock that dates grants given without a Granted time,
// and that decides which grants have expired when a file is rewritten
// (default time.Now). Covers takes its time as an argument.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// Store is a directory of per-server consent grants.
type Store struct {
	dir       string
	log       hclog.Logger
	maxStale  time.Duration
	lockWait  time.Duration
	maxGrants int
	now       func() time.Time
	files     *keyfile.Dir
	seed      maphash.Seed  // of the sums of files (fileSum)
	done      chan struct{} // closed by Close: ends the watches

	mu      sync.RWMutex
	closed  bool
	servers map[string]*entry // by server identity
	byHash  map[string]*entry // by file name (hex SHA-256 of the identity), every-server entry included
	every   *entry            // the blocks for every server (AllServers)
}

// entry is one server's grants and blocks as this Store knows them, or,
// with every set, the blocks for every server.
type entry struct {
	server string // AllServers when every is set
	every  bool
	name   string // hex SHA-256 of server
	path   string

	// io serialises this Store's file access for the server, so that its
	// goroutines queue here rather than on the cross-process lock, and a
	// stale cache is revalidated once, not by every waiting request.
	io sync.Mutex

	mu        sync.Mutex // guards the fields below; never held during I/O
	loaded    bool
	dirty     bool   // a Watch saw the file change: reread it
	gen       uint64 // counts invalidations, so a read racing one does not clear dirty
	checkedAt time.Time
	stamp     stamp
	sum       fileSum // of the file's bytes snap was made from
	snap      *snapshot
	err       error // the last read's error, kept with its stamp

	// Under io only: what the Store knows of the file on disk, so that a
	// Grant appends to it, and a check finds its own append, without
	// reading it whole.
	held     *os.File    // the file snap was read from or written, kept open: its inode number is not reused while held
	heldInfo fs.FileInfo // held's, for os.SameFile
	lay      layout      // the file's layout, as far as snap goes
	hash     maphash.Hash
	fullAt   time.Time // when the file was last read or written whole
}

// contents is what one file holds: a server's grants and blocks, or the
// blocks for every server.
type contents struct {
	grants []Grant // sorted (sortGrants)
	blocks []Block // sorted (sortBlocks)
}

// snapshot is an immutable copy of one file's contents. Its grants are
// sorted by path (sortGrants), in two runs: contents.grants, made when the
// file was read or compacted, and delta, the grants appended since, which a
// new grant copies (it is small) while the first run is shared by every
// later snapshot. When delta outgrows deltaLimit the two are merged, so
// that a new grant costs O(sqrt(n)) copies, amortized, rather than a copy of
// every grant. The grants on one path, and those beneath one, are a run in
// each, found by binary search: a lookup costs O(log n) in the server's
// grants.
type snapshot struct {
	contents
	delta []Grant // sorted (sortGrants); grants appended since contents.grants was made
	// firstExpiry is the earliest Expires of the grants (zero when none
	// expires): before it, no grant has expired and a new one may be
	// appended without a sweep.
	firstExpiry time.Time
}

var emptySnapshot = &snapshot{}

func newSnapshot(c contents) *snapshot {
	if len(c.grants) == 0 && len(c.blocks) == 0 {
		return emptySnapshot
	}
	return &snapshot{contents: c, firstExpiry: firstExpiry(time.Time{}, c.grants)}
}

// firstExpiry returns the earliest of first (zero: none) and the Expires of
// gs.
func firstExpiry(first time.Time, gs []Grant) time.Time {
	for i := range gs {
		if x := gs[i].Expires; !x.IsZero() && (first.IsZero() || x.Before(first)) {
			first = x
		}
	}
	return first
}

// deltaLimit is how many appended grants a snapshot keeps apart from the n
// of its first run before merging them in.
func deltaLimit(n int) int {
	l := 64
	for l*l < n {
		l *= 2
	}
	return l
}

// runs returns the snapshot's sorted runs of grants.
func (s *snapshot) runs() [2][]Grant { return [2][]Grant{s.grants, s.delta} }

// all returns every grant of the snapshot, sorted; the caller must not
// modify it.
func (s *snapshot) all() []Grant {
	if len(s.delta) == 0 {
		return s.grants
	}
	return mergeGrants(s.grants, s.delta)
}

// full returns the snapshot's contents with every grant in one run.
func (s *snapshot) full() contents {
	return contents{grants: s.all(), blocks: s.blocks}
}

// withAdded returns the snapshot with the new grants added (sorted, none of
// them the same path, access and root as a grant held).
func (s *snapshot) withAdded(added []Grant) *snapshot {
	next := &snapshot{contents: s.contents, firstExpiry: firstExpiry(s.firstExpiry, added)}
	next.delta = mergeGrants(s.delta, added)
	if len(next.delta) > deltaLimit(len(next.grants)) {
		next.grants, next.delta = mergeGrants(next.grants, next.delta), nil
	}
	return next
}

// mergeGrants merges two sorted runs of grants into a new one.
func mergeGrants(a, b []Grant) []Grant {
	return appendMerged(make([]Grant, 0, len(a)+len(b)), a, b, nil)
}

// appendMerged appends to out the grants of the sorted runs a and b that
// keep (nil: every one) keeps, in order.
func appendMerged(out, a, b []Grant, keep func(*Grant) bool) []Grant {
	for len(a) > 0 || len(b) > 0 {
		var g *Grant
		if len(a) == 0 || len(b) > 0 && compareGrants(b[0], a[0]) < 0 {
			g, b = &b[0], b[1:]
		} else {
			g, a = &a[0], a[1:]
		}
		if keep == nil || keep(g) {
			out = append(out, *g)
		}
	}
	return out
}

// onPath returns the index range [lo, hi) of the grants of run gs on path
// p.
func onPath(gs []Grant, p string) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(gs, p, func(g Grant, p string) int { return strings.Compare(g.Path, p) })
	hi = lo
	for hi < len(gs) && gs[hi].Path == p {
		hi++
	}
	return lo, hi
}

// beneath returns the index range [lo, hi) of the grants of run gs
// strictly beneath p: those whose path starts with p + "/" (a contiguous
// run in path order).
func beneath(gs []Grant, p string) (lo, hi int) {
	prefix := p + "/"
	lo, _ = slices.BinarySearchFunc(gs, prefix, func(g Grant, p string) int { return strings.Compare(g.Path, p) })
	hi = lo + sort.Search(len(gs)-lo, func(i int) bool { return !strings.HasPrefix(gs[lo+i].Path, prefix) })
	return lo, hi
}

// holding returns the grant on the path, access and root of g, if the
// snapshot holds one.
func (s *snapshot) holding(g *Grant) (Grant, bool) {
	for _, run := range s.runs() {
		lo, hi := onPath(run, g.Path)
		for _, h := range run[lo:hi] {
			if h.Access == g.Access && h.Root == g.Root {
				return h, true
			}
		}
	}
	return Grant{}, false
}

// covering returns the live grant given under root that covers access to p
// and lasts the longest (the first in file order among equals).
func (s *snapshot) covering(access Access, p string, root Root, now time.Time) (Grant, bool) {
	var best Grant
	found := false
	consider := func(prefix string) {
		for _, run := range s.runs() {
			lo, hi := onPath(run, prefix)
			for _, g := range run[lo:hi] {
				if g.Access.Allows(access) && g.Root.Same(root) && g.Live(now) && (!found || g.lasts(best) && !best.lasts(g) || !g.lasts(best) && !best.lasts(g) && compareGrants(g, best) < 0) {
					best, found = g, true
				}
			}
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			consider(p[:i])
		}
	}
	consider(p)
	return best, found
}

// related returns the grants on one of paths, on a directory above one, or
// beneath one, in file order, each once.
func (s *snapshot) related(paths []string) []Grant {
	var out []Grant
	for _, run := range s.runs() {
		var at []int
		add := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				at = append(at, i)
			}
		}
		for _, p := range paths {
			for i := 0; i < len(p); i++ {
				if p[i] == '/' {
					add(onPath(run, p[:i]))
				}
			}
			add(onPath(run, p))
			add(beneath(run, p))
		}
		if len(paths) > 1 {
			slices.Sort(at)
			at = slices.Compact(at)
		}
		found := make([]Grant, len(at))
		for i, j := range at {
			found[i] = run[j]
		}
		if out == nil {
			out = found
		} else if len(found) > 0 {
			out = mergeGrants(out, found)
		}
	}
	return out
}

// stamp identifies a version of a grants file without reading it.
type stamp = keyfile.Stamp

// Open opens the store in dir, creating the directory (0700) if needed, and
// removes temporary files left by a crashed writer.
func Open(dir string, opts ...Option) (*Store, error) {
	s := &Store{
		dir:       filepath.Clean(dir),
		log:       hclog.NewNullLogger(),
		maxStale:  DefaultMaxStale,
		lockWait:  DefaultLockWait,
		maxGrants: DefaultMaxGrants,
		now:       time.Now,
		seed:      maphash.MakeSeed(),
		done:      make(chan struct{}),
		servers:   make(map[string]*entry),
		byHash:    make(map[string]*entry),
	}
	for _, o := range opts {
		o(s)
	}
	files, err := keyfile.Open(s.dir, "grants", s.lockWait, s.log)
	if err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	s.files = files
	name := keyfile.Name(AllServers)
	s.every = &entry{server: AllServers, every: true, name: name, path: files.DataPath(name)}
	s.byHash[name] = s.every
	return s, nil
}

// Close releases the Store and ends its watches; its methods return
// ErrClosed afterwards. Calls in progress finish.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	for _, e := range s.byHash {
		e.io.Lock()
		e.hold(nil)
		e.io.Unlock()
	}
	return s.files.Close()
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the file that holds server's grants and blocks (which may not
// exist); with AllServers, the file of the blocks for every server.
func (s *Store) Path(server string) string {
	return s.files.DataPath(keyfile.Name(server))
}

// Covers reports whether server holds a grant, live at now, that allows
// access to mountPath (a canonical mount-relative path, see ValidPath) and
// was given under root, the root mountPath's mount names now (a grant given
// under another root, or without one, covers nothing), and returns it: among
// several, the one that lasts the longest. It answers from memory within the
// staleness bound (see the package documentation). A corrupt or unreadable
// grants file is an error, and no grant.
func (s *Store) Covers(server string, access Access, mountPath string, root Root, now time.Time) (Grant, bool, error) {
	e, err := s.entry(server)
	if err != nil {
		return Grant{}, false, err
	}
	if !access.Valid() {
		return Grant{}, false, e.fail("covers", invalidf("access %q: want read or write", access))
	}
	if err := ValidPath(mountPath); err != nil {
		return Grant{}, false, e.fail("covers", err)
	}
	snap, err := s.current(e)
	if err != nil {
		return Grant{}, false, e.fail("covers", err)
	}
	g, ok := snap.covering(access, mountPath, root, now)
	return g, ok, nil
}

// List returns the grants server holds, expired ones included (see
// Grant.Live), sorted by path, then access. A server without grants has
// none; a corrupt or unreadable file is an error.
func (s *Store) List(server string) ([]Grant, error) {
	e, err := s.entry(server)
	if err != nil {
		return nil, err
	}
	snap, err := s.current(e)
	if err != nil {
		return nil, e.fail("list", err)
	}
	return slices.Clone(snap.all()), nil
}

// Related returns the grants server holds (expired ones included) whose
// path is one of paths, a directory above one of them, or beneath one of
// them: every grant that can cover one of the paths, and every grant that a
// question about a directory's contents can involve. They are in List's
// order, each once. It answers from memory within the staleness bound, as
// Covers does, in time logarithmic in the server's grants plus the number
// returned. The paths are canonical mount-relative paths (ValidPath); a
// corrupt or unreadable file is an error.
func (s *Store) Related(server string, paths ...string) ([]Grant, error) {
	e, err := s.entry(server)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := ValidPath(p); err != nil {
			return nil, e.fail("list", err)
		}
	}
	snap, err := s.current(e)
	if err != nil {
		return nil, e.fail("list", err)
	}
	return snap.related(paths), nil
}

// ListAll returns the grants of every server, sorted by server, then path,
// then access. It goes on past a file it cannot read: the error then names
// each such file (an *Error for each, joined), and the grants are those of
// the other files.
func (s *Store) ListAll() ([]Grant, error) {
	targets, errs, err := s.targets("")
	if err != nil {
		return nil, err
	}
	var all []Grant
	for _, e := range targets {
		snap, err := s.current(e)
		if err != nil {
			errs = append(errs, e.fail("list", err))
			continue
		}
		all = append(all, snap.all()...)
	}
	slices.SortFunc(all, func(a, b Grant) int { return cmp.Or(strings.Compare(a.Server, b.Server), compareGrants(a, b)) })
	return all, errors.Join(errs...)
}

// Grant gives server the grants gs and returns them as stored, in the order
// given. Each needs an Access, a canonical Path, the Root of its mount and
// a By; Granted defaults to the Store's clock; Expires, when set, must be
// after that clock; ID and Server must be empty or, for Server, the server.
// A grant whose path, access and root the server already holds refreshes
// that grant: it takes the new Expires, Granted and By and keeps its ID. Expired grants of the server
// are dropped. The grants are on disk when Grant returns without error.
func (s *Store) Grant(server string, gs ...Grant) ([]Grant, error) {
	e, err := s.entry(server)
	if err != nil {
		return nil, err
	}
	now := s.now()
	add := make([]Grant, len(gs))
	for i, g := range gs {
		if err := checkNew(&g, server, now); err != nil {
			return nil, e.fail("grant", fmt.Errorf("grant %d: %w", i, err))
		}
		add[i] = g
	}
	if len(add) == 0 {
		return nil, nil
	}
	stored, err := s.grant(e, add, now)
	if err != nil {
		return nil, e.fail("grant", err)
	}
	return stored, nil
}

// grant adds the checked grants add to an entry's file, under its
// exclusive lock: by appending a record for each (appendNew) when none of
// them refreshes a grant held and the file needs no sweep or compaction,
// else by rewriting the file.
func (s *Store) grant(e *entry, add []Grant, now time.Time) ([]Grant, error) {
	e.io.Lock()
	defer e.io.Unlock()
	unlock, err := s.files.Lock(e.name, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	snap, gen, err := s.locked(e, true)
	if err != nil {
		return nil, err
	}
	if stored, ok, err := s.appendNew(e, snap, gen, add, now); ok || err != nil {
		return stored, err
	}
	// A rewrite: from the file's content, read in any case.
	if snap, gen, err = s.locked(e, false); err != nil {
		return nil, err
	}
	cur := snap.contents
	// next stays sorted (sortGrants): an existing grant is found, and a
	// new one placed, by binary search on its path. It is merged from the
	// snapshot's runs directly, with no copy of every grant beside it (at
	// the limit, a copy of the grants is megabytes).
	next := appendMerged(make([]Grant, 0, len(snap.grants)+len(snap.delta)+len(add)), snap.grants, snap.delta,
		func(g *Grant) bool { return g.Live(now) })
	stored := make([]Grant, len(add))
	var ids map[string]bool // for a Grant of many: the IDs taken, so that it costs linear time
	for i, a := range add {
		lo, _ := slices.BinarySearchFunc(next, a.Path, func(g Grant, p string) int { return strings.Compare(g.Path, p) })
		j := lo
		for j < len(next) && next[j].Path == a.Path && (next[j].Access != a.Access || next[j].Root != a.Root) {
			j++
		}
		if j < len(next) && next[j].Path == a.Path {
			g := next[j]
			g.Expires, g.Granted, g.By = a.Expires, a.Granted, a.By
			next = slices.Delete(next, j, j+1)
			a = g
		} else {
			if ids == nil && len(add) > 2 {
				ids = make(map[string]bool, len(next)+len(add))
				for k := range next {
					ids[next[k].ID] = true
				}
			}
			a.ID = newID(func(id string) bool { return ids[id] || ids == nil && hasID(next, id) })
			if ids != nil {
				ids[a.ID] = true
			}
			if len(next) >= s.maxGrants {
				return nil, fmt.Errorf("%w: the server would hold %d grants; the limit is %d", ErrTooMany, len(next)+1, s.maxGrants)
			}
		}
		at, _ := slices.BinarySearchFunc(next, a, compareGrants)
		next = slices.Insert(next, at, a)
		stored[i] = a
	}
	cur.grants = next
	if err := s.rewrite(e, gen, cur); err != nil {
		return nil, err
	}
	return stored, nil
}

// appendNew appends a record for each grant of add to an entry's file, in
// one write, and fsyncs it, under the file's exclusive lock, when that
// needs no rewrite: the file is a version 4 file this Store holds open
// (entry.held) and ends with a complete record, no grant held has expired
// (a rewrite drops them), none of add refreshes a grant held or repeats
// another, the limit holds, and the records appended stay no larger than
// the compacted part (so that the file is compacted each time it doubles:
// O(1) bytes written per grant, amortized). ok is false when it did not
// append, and the caller rewrites the file. The IDs are random (96 bits):
// unlike a rewrite, an append does not look through every ID held for a
// collision, whose chance is below 2^-60 at the limit, and which would make
// the file corrupt (no grant), never grant anything else.
func (s *Store) appendNew(e *entry, snap *snapshot, gen uint64, add []Grant, now time.Time) (stored []Grant, ok bool, err error) {
	n := len(snap.grants) + len(snap.delta)
	if e.held == nil || !e.lay.appendable || n+len(add) > s.maxGrants ||
		!snap.firstExpiry.IsZero() && now.After(snap.firstExpiry) {
		return nil, false, nil
	}
	stored = make([]Grant, len(add))
	for i, a := range add {
		if _, held := snap.holding(&a); held {
			return nil, false, nil
		}
		for _, b := range stored[:i] {
			if b.Path == a.Path && b.Access == a.Access && b.Root == a.Root {
				return nil, false, nil
			}
		}
		a.ID = newID(func(id string) bool { return hasID(stored[:i], id) })
		stored[i] = a
	}
	rec := appendRecords(nil, e.server, stored)
	if e.lay.appended+len(rec) > e.lay.base || e.lay.base+e.lay.appended+len(rec) > maxFileSize {
		return nil, false, nil
	}
	f, err := os.OpenFile(e.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	size := int64(e.lay.base + e.lay.appended)
	if !os.SameFile(fi, e.heldInfo) || fi.Size() != size {
		// Changed by a writer that does not take the lock: read it whole
		// again, and rewrite it.
		e.hold(nil)
		return nil, false, nil
	}
	_, err = f.Write(rec)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		// A write stopped short (a full disk) may have left whole records
		// of some of the grants: cut the file back to its length before,
		// so that a Grant that fails grants none of them.
		if terr := f.Truncate(size); terr == nil {
			_ = f.Sync()
		}
		e.forget()
		return nil, false, fmt.Errorf("append: %w", err)
	}
	fi, err = f.Stat()
	if err != nil || fi.Size() != size+int64(len(rec)) {
		e.forget()
		return nil, false, fmt.Errorf("append: the file is not as long as written (%v)", err)
	}
	e.hash.Write(rec)
	e.lay.appended += len(rec)
	sorted := slices.Clone(stored)
	sortGrants(sorted)
	e.mu.Lock()
	e.install(gen, snap.withAdded(sorted), fileSum{exists: true, size: int(fi.Size()), hash: e.hash.Sum64()}, keyfile.StampOf(fi), nil)
	e.mu.Unlock()
	return stored, true, nil
}

// checkNew validates a grant to be added and fills in its defaults.
func checkNew(g *Grant, server string, now time.Time) error {
	switch {
	case g.ID != "":
		return invalidf("the Store assigns IDs; got %q", g.ID)
	case g.Server != "" && g.Server != server:
		return invalidf("it names server %q", g.Server)
	case !g.Access.Valid():
		return invalidf("access %q: want read or write", g.Access)
	}
	if err := ValidPath(g.Path); err != nil {
		return err
	}
	if err := validRoot(g.Root); err != nil {
		return err
	}
	if err := validBy(g.By); err != nil {
		return err
	}
	g.Server = server
	if g.Granted.IsZero() {
		g.Granted = now
	}
	g.Granted = g.Granted.UTC()
	if !g.Expires.IsZero() {
		if !g.Expires.After(now) {
			return invalidf("it expires at %s, not after now (%s)", g.Expires.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		}
		g.Expires = g.Expires.UTC()
	}
	return nil
}

// hasID reports whether one of gs has the ID id.
func hasID(gs []Grant, id string) bool {
	for i := range gs { // by index: a Grant is too large to copy per comparison
		if gs[i].ID == id {
			return true
		}
	}
	return false
}

// newID returns a random ID (of a grant or a block) for which taken is
// false.
func newID(taken func(id string) bool) string {
	for {
		var b [idBytes]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := hex.EncodeToString(b[:]); !taken(id) {
			return id
		}
	}
}

// Revoke removes the grants the filter selects and returns them, sorted by
// server, then path, then access. Nothing selected is not an error: the
// result is empty. A Path selects grants on it and beneath it, never a
// broader grant (see RevokeFilter). Each server's grants change atomically;
// across servers Revoke goes on past a file it cannot read or change, and
// the error names each (an *Error for each, joined).
func (s *Store) Revoke(f RevokeFilter) ([]Grant, error) {
	if err := f.validate(); err != nil {
		return nil, &Error{Op: "revoke", Server: f.Server, Err: err}
	}
	targets, errs, err := s.targets(f.Server)
	if err != nil {
		return nil, err
	}
	var revoked []Grant
	for _, e := range targets {
		var gone []Grant
		err := s.update(e, func(c contents) (contents, bool, error) {
			var keep []Grant
			if keep, gone = partition(c.grants, f.matches); len(gone) == 0 {
				return c, false, nil
			}
			now := s.now()
			c.grants = slices.DeleteFunc(keep, func(g Grant) bool { return !g.Live(now) })
			return c, true, nil
		})
		if err != nil {
			errs = append(errs, e.fail("revoke", err))
			continue
		}
		revoked = append(revoked, gone...)
	}
	slices.SortFunc(revoked, func(a, b Grant) int { return cmp.Or(strings.Compare(a.Server, b.Server), compareGrants(a, b)) })
	return revoked, errors.Join(errs...)
}

// targets returns the entry of server, or with no server the entries of
// every server that has a file (not the every-server entry), and an error for
// each file whose server cannot be read.
func (s *Store) targets(server string) ([]*entry, []error, error) {
	if server != "" {
		e, err := s.entry(server)
		if err != nil {
			return nil, nil, err
		}
		return []*entry{e}, nil, nil
	}
	hashes, err := s.scan()
	if err != nil {
		return nil, nil, err
	}
	var (
		out  []*entry
		errs []error
	)
	for _, h := range hashes {
		e, err := s.resolve(h)
		if err != nil {
			errs = append(errs, err)
		} else if e != nil {
			out = append(out, e)
		}
	}
	return out, errs, nil
}

// partition splits xs into those that match does not select and those it
// does, each in order.
func partition[T any](xs []T, match func(T) bool) (keep, gone []T) {
	for _, x := range xs {
		if match(x) {
			gone = append(gone, x)
		} else {
			keep = append(keep, x)
		}
	}
	return keep, gone
}

// entry returns server's entry, creating it on first use.
func (s *Store) entry(server string) (*entry, error) {
	s.mu.RLock()
	e, closed := s.servers[server], s.closed
	s.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if e != nil {
		return e, nil
	}
	if err := validServer(server); err != nil {
		return nil, &Error{Op: "grants", Server: server, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if e := s.servers[server]; e != nil {
		return e, nil
	}
	name := keyfile.Name(server)
	e = &entry{
		server: server,
		name:   name,
		path:   s.files.DataPath(name),
	}
	s.servers[server] = e
	s.byHash[name] = e
	return e, nil
}

// known returns the entry of the file name hash, if this Store has one.
func (s *Store) known(hash string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byHash[hash]
}

// resolve returns the entry of the grants file named hash, reading the file
// for its server when the Store does not know it yet; nil when the file is
// gone.
func (s *Store) resolve(hash string) (*entry, error) {
	if e := s.known(hash); e != nil {
		return e, nil
	}
	path := s.files.DataPath(hash)
	server, _, _, err := readFile(path, "", false, s.maxGrants)
	if err == nil && server != "" && keyfile.Name(server) != hash {
		err = fmt.Errorf("%w: it holds the grants of server %q, whose file is %s%s", ErrCorrupt, server, keyfile.Name(server), keyfile.DataExt)
	}
	if err != nil {
		return nil, &Error{Op: "list", Path: path, Err: trimPathErr(err, path)}
	}
	if server == "" {
		return nil, nil
	}
	return s.entry(server)
}

// scan returns the file names (hashes) of the servers' files in the
// directory (not the every-server file).
func (s *Store) scan() ([]string, error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("grants: list %s: %w", s.dir, err)
	}
	var hashes []string
	for _, de := range des {
		if h, ok := dataHash(de.Name()); ok && h != s.every.name {
			hashes = append(hashes, h)
		}
	}
	return hashes, nil
}

// dataHash returns the hash a grants file name stands for.
func dataHash(name string) (string, bool) {
	h, ok := strings.CutSuffix(name, keyfile.DataExt)
	return h, ok && keyfile.IsName(h)
}

func (e *entry) fail(op string, err error) error {
	var ge *Error
	if errors.As(err, &ge) {
		return err
	}
	return &Error{Op: op, Server: e.server, Path: e.path, Err: trimPathErr(err, e.path)}
}

// trimPathErr drops the path from an *fs.PathError on path, which Error
// names already.
func trimPathErr(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// invalidate marks the cache stale: the next use rereads the file.
func (e *entry) invalidate() {
	e.mu.Lock()
	e.dirty = true
	e.gen++
	e.mu.Unlock()
}

// fresh reports whether the cached grants may be used without a check.
func (s *Store) fresh(e *entry) bool {
	return e.loaded && !e.dirty && time.Since(e.checkedAt) < s.maxStale
}

// cached returns the cached grants if they are fresh.
func (s *Store) cached(e *entry) (snap *snapshot, ok bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !s.fresh(e) {
		return nil, false, nil
	}
	return e.snap, true, e.err
}

// current returns server's grants: the cache, or the file when the cache
// may be stale (see the package documentation).
func (s *Store) current(e *entry) (*snapshot, error) {
	if snap, ok, err := s.cached(e); ok {
		return snap, err
	}
	e.io.Lock()
	defer e.io.Unlock()
	if snap, ok, err := s.cached(e); ok { // another goroutine checked it meanwhile
		return snap, err
	}
	e.mu.Lock()
	// fullAt, not the last install: appends of this Store's own keep
	// coming, yet the file is read whole every rereadFactor staleness
	// bounds (e.io is held).
	gen, dirty, loaded, cached, fullAt := e.gen, e.dirty, e.loaded, e.stamp, e.fullAt
	e.mu.Unlock()
	if loaded && !dirty && time.Since(fullAt) < rereadFactor*s.maxStale {
		if st, err := keyfile.StatStamp(e.path); err == nil && st == cached {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.checkedAt = time.Now()
			return e.snap, e.err
		}
	}
	s.load(e, gen, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap, e.err
}

// load reads an entry's file and installs what it holds, for the
// invalidation count gen taken before (see install), and returns it.
//
// When the Store holds the file open (entry.held, so that its inode number
// cannot be reused) and a stat of the path shows that file, with the length
// and modification time it had when the Store last read or wrote it, it is
// taken as unchanged without reading it, for up to rereadFactor times the
// staleness bound since it was last read or written whole: every fsbroker
// writer replaces the file (a new inode) or appends to it (a new length), so
// this is how a Store finds its own append, or nothing new, in O(1).
// Otherwise the file is read, and parsed only when its bytes are not those
// the cached snapshot was made from (readIfChanged compares their length and
// hash): a change by another process is never mistaken for none. The caller
// holds e.io. Without trust the file is read in any case: before a rewrite,
// which must not write over a change the stat cannot see.
func (s *Store) load(e *entry, gen uint64, trust bool) (*snapshot, error) {
	e.mu.Lock()
	known := e.sum
	if !e.loaded || e.err != nil {
		known = unknownSum
	}
	trusted := trust && e.loaded && e.err == nil && e.held != nil && time.Since(e.fullAt) < rereadFactor*s.maxStale
	cachedStamp := e.stamp
	e.mu.Unlock()
	if trusted {
		if fi, err := os.Stat(e.path); err == nil && os.SameFile(fi, e.heldInfo) && keyfile.StampOf(fi) == cachedStamp {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.install(gen, e.snap, e.sum, cachedStamp, nil)
			return e.snap, nil
		}
	}
	f, st, same, err := readIfChanged(e.path, s.seed, known)
	var heldInfo fs.FileInfo
	if f != nil {
		if heldInfo, err = f.Stat(); err != nil {
			f.Close()
			f = nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil && same {
		e.hold(f, heldInfo)
		e.fullAt = time.Now()
		e.install(gen, e.snap, known, st, nil)
		return e.snap, nil
	}
	var (
		c   contents
		lay layout
		sum fileSum
	)
	e.hash.SetSeed(s.seed)
	if err == nil && f != nil {
		sum.exists = true
		if _, c, lay, sum.size, err = parseFrom(f, &e.hash, e.server, e.every, s.maxGrants); err != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		sum.hash = e.hash.Sum64()
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		e.hold(nil)
		e.fullAt = time.Now()
		e.install(gen, emptySnapshot, unknownSum, st, err)
		return emptySnapshot, err
	}
	e.hold(f, heldInfo)
	e.lay, e.fullAt = lay, time.Now()
	snap := newSnapshot(c)
	e.install(gen, snap, sum, st, nil)
	return snap, nil
}

// hold makes f (with its info) the file the entry holds open, closing the
// one it held; hold(nil) holds none, and the next check reads the file
// whole. The caller holds e.io.
func (e *entry) hold(f *os.File, info ...fs.FileInfo) {
	if e.held != nil && e.held != f {
		e.held.Close()
	}
	e.held, e.heldInfo = f, nil
	if f != nil {
		e.heldInfo = info[0]
	}
}

// forget drops what the entry knows of its file after a failed append: the
// next use reads the file whole. The caller holds e.io.
func (e *entry) forget() {
	e.hold(nil)
	e.mu.Lock()
	e.loaded, e.sum = false, unknownSum
	e.mu.Unlock()
}

// install records what a read or a write found, under e.mu. A read that
// began before the last invalidation (gen) leaves the cache dirty.
func (e *entry) install(gen uint64, snap *snapshot, sum fileSum, st stamp, err error) {
	now := time.Now()
	e.loaded, e.checkedAt, e.stamp, e.err = true, now, st, err
	e.snap, e.sum = snap, sum
	if e.gen == gen {
		e.dirty = false
	}
}

// update runs a read-modify-write of an entry's file under its exclusive
// lock: change gets the contents on disk and returns the new ones and
// whether to write them.
func (s *Store) update(e *entry, change func(cur contents) (next contents, write bool, err error)) error {
	e.io.Lock()
	defer e.io.Unlock()
	unlock, err := s.files.Lock(e.name, true)
	if err != nil {
		return err
	}
	defer unlock()
	snap, gen, err := s.locked(e, false)
	if err != nil {
		return err
	}
	next, write, err := change(snap.full())
	if err != nil || !write {
		return err
	}
	return s.rewrite(e, gen, next)
}

// rewrite replaces an entry's file with next (a compaction), under its
// exclusive lock and e.io, and installs it, with gen from locked.
func (s *Store) rewrite(e *entry, gen uint64, next contents) error {
	// The contents may share their slices with the cached snapshot, which
	// readers use without a lock: sorted already, they are left as they are.
	if !slices.IsSortedFunc(next.grants, compareGrants) {
		sortGrants(next.grants)
	}
	if !slices.IsSortedFunc(next.blocks, compareBlocks) {
		sortBlocks(next.blocks)
	}
	nst, raw, err := s.write(e, next)
	if err != nil {
		e.forget()
		return err
	}
	// Under the exclusive lock, the file is the one just written: hold it.
	e.hold(nil)
	e.lay = layout{}
	if raw != nil {
		if f, err := os.Open(e.path); err == nil {
			if fi, err := f.Stat(); err == nil && keyfile.StampOf(fi) == nst {
				e.hold(f, fi)
				e.lay = layout{appendable: !e.every, base: len(raw)}
			} else {
				f.Close()
			}
		}
	}
	e.fullAt = time.Now()
	e.hash.SetSeed(s.seed)
	e.hash.Write(raw)
	e.mu.Lock()
	e.install(gen, newSnapshot(next), sumOf(s.seed, raw), nst, nil)
	e.mu.Unlock()
	return nil
}

// locked returns an entry's contents on disk for a change, under the
// file's exclusive lock, and the invalidation count they go with: the file
// is read, and parsed only when it is not what the cache was made from
// (load); with trust, for an append only, a stat may stand for the read.
// The change must not modify the slices it is given: they may be
// the cached snapshot's, which readers use without a lock.
func (s *Store) locked(e *entry, trust bool) (*snapshot, uint64, error) {
	e.mu.Lock()
	gen := e.gen
	e.mu.Unlock()
	snap, err := s.load(e, gen, trust)
	return snap, gen, err
}

// sortGrants orders one server's grants by path, then access, then time
// granted, then ID.
func sortGrants(gs []Grant) { slices.SortFunc(gs, compareGrants) }

func compareGrants(a, b Grant) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(string(a.Access), string(b.Access)),
		a.Granted.Compare(b.Granted), strings.Compare(a.ID, b.ID))
}
