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
	// DefaultMaxGrants is how many grants one server may hold.
	DefaultMaxGrants = 4096
)

const (
	// maxFileSize bounds a grants file: DefaultMaxGrants grants with long
	// paths take about 20 MiB.
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
	readAt    time.Time
	stamp     stamp
	sum       fileSum // of the file's bytes snap was made from
	snap      *snapshot
	err       error // the last read's error, kept with its stamp
}

// contents is what one file holds: a server's grants and blocks, or the
// blocks for every server.
type contents struct {
	grants []Grant // sorted (sortGrants)
	blocks []Block // sorted (sortBlocks)
}

// snapshot is an immutable copy of one file's contents. Its grants are
// sorted by path (sortGrants), so the grants on one path, and those beneath
// one, are each a run found by binary search: a snapshot costs nothing to
// index when the grant set changes, and a lookup costs O(log n) in the
// server's grants.
type snapshot struct {
	contents
}

var emptySnapshot = &snapshot{}

func newSnapshot(c contents) *snapshot {
	if len(c.grants) == 0 && len(c.blocks) == 0 {
		return emptySnapshot
	}
	return &snapshot{contents: c}
}

// onPath returns the index range [lo, hi) of the grants on path p.
func (s *snapshot) onPath(p string) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(s.grants, p, func(g Grant, p string) int { return strings.Compare(g.Path, p) })
	hi = lo
	for hi < len(s.grants) && s.grants[hi].Path == p {
		hi++
	}
	return lo, hi
}

// beneath returns the index range [lo, hi) of the grants strictly beneath
// p: those whose path starts with p + "/" (a contiguous run in path order).
func (s *snapshot) beneath(p string) (lo, hi int) {
	prefix := p + "/"
	lo, _ = slices.BinarySearchFunc(s.grants, prefix, func(g Grant, p string) int { return strings.Compare(g.Path, p) })
	hi = lo + sort.Search(len(s.grants)-lo, func(i int) bool { return !strings.HasPrefix(s.grants[lo+i].Path, prefix) })
	return lo, hi
}

// covering returns the live grant given under root that covers access to p
// and lasts the longest (the first in file order among equals).
func (s *snapshot) covering(access Access, p string, root Root, now time.Time) (Grant, bool) {
	var best Grant
	found := false
	consider := func(prefix string) {
		lo, hi := s.onPath(prefix)
		for _, g := range s.grants[lo:hi] {
			if g.Access.Allows(access) && g.Root.Same(root) && g.Live(now) && (!found || g.lasts(best) && !best.lasts(g)) {
				best, found = g, true
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
	var at []int
	add := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			at = append(at, i)
		}
	}
	for _, p := range paths {
		for i := 0; i < len(p); i++ {
			if p[i] == '/' {
				add(s.onPath(p[:i]))
			}
		}
		add(s.onPath(p))
		add(s.beneath(p))
	}
	if len(paths) > 1 {
		slices.Sort(at)
		at = slices.Compact(at)
	}
	out := make([]Grant, len(at))
	for i, j := range at {
		out[i] = s.grants[j]
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
	return slices.Clone(snap.grants), nil
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
		all = append(all, snap.grants...)
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
	var stored []Grant
	err = s.update(e, func(c contents) (contents, bool, error) {
		// next stays sorted (sortGrants): an existing grant is found, and a
		// new one placed, by binary search on its path.
		next := make([]Grant, 0, len(c.grants)+len(add))
		for _, g := range c.grants {
			if g.Live(now) {
				next = append(next, g)
			}
		}
		stored = make([]Grant, len(add))
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
					return contents{}, false, fmt.Errorf("%w: the server would hold %d grants; the limit is %d", ErrTooMany, len(next)+1, s.maxGrants)
				}
			}
			at, _ := slices.BinarySearchFunc(next, a, compareGrants)
			next = slices.Insert(next, at, a)
			stored[i] = a
		}
		c.grants = next
		return c, true, nil
	})
	if err != nil {
		return nil, e.fail("grant", err)
	}
	return stored, nil
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
	server, _, _, err := readFile(path, "", false)
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
	gen, dirty, loaded, cached, readAt := e.gen, e.dirty, e.loaded, e.stamp, e.readAt
	e.mu.Unlock()
	if loaded && !dirty && time.Since(readAt) < rereadFactor*s.maxStale {
		if st, err := keyfile.StatStamp(e.path); err == nil && st == cached {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.checkedAt = time.Now()
			return e.snap, e.err
		}
	}
	s.load(e, gen)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap, e.err
}

// load reads an entry's file and installs what it holds, for the
// invalidation count gen taken before (see install), and returns it. The
// file is parsed only when its bytes are not those the cached snapshot was
// made from (readIfChanged compares their length and hash): the file this
// Store itself wrote last (or read) is recognised by its content, not by its
// stamp, so a Watch's report of this Store's own write, or a check when
// nothing changed, costs one read of the file through a small buffer and no
// parse, and a change by another process is never mistaken for none. The
// caller holds e.io.
func (s *Store) load(e *entry, gen uint64) (contents, error) {
	e.mu.Lock()
	known := e.sum
	if !e.loaded || e.err != nil {
		known = unknownSum
	}
	e.mu.Unlock()
	b, sum, st, same, err := readIfChanged(e.path, s.seed, known)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil && same {
		e.install(gen, e.snap, sum, st, nil)
		return e.snap.contents, nil
	}
	var c contents
	if err == nil && b != nil {
		if _, c, err = parse(b, e.server, e.every); err != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	if err != nil {
		e.install(gen, emptySnapshot, unknownSum, st, err)
		return contents{}, err
	}
	e.install(gen, newSnapshot(c), sum, st, nil)
	return c, nil
}

// install records what a read or a write found, under e.mu. A read that
// began before the last invalidation (gen) leaves the cache dirty.
func (e *entry) install(gen uint64, snap *snapshot, sum fileSum, st stamp, err error) {
	now := time.Now()
	e.loaded, e.checkedAt, e.readAt, e.stamp, e.err = true, now, now, st, err
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
	cur, gen, err := s.locked(e)
	if err != nil {
		return err
	}
	next, write, err := change(cur)
	if err != nil || !write {
		return err
	}
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
		return err
	}
	e.mu.Lock()
	e.install(gen, newSnapshot(next), sumOf(s.seed, raw), nst, nil)
	e.mu.Unlock()
	return nil
}

// locked returns an entry's contents on disk for a change, under the
// file's exclusive lock, and the invalidation count they go with: the file
// is read, and parsed only when it is not what the cache was made from
// (load). The change must not modify the slices it is given: they may be
// the cached snapshot's, which readers use without a lock.
func (s *Store) locked(e *entry) (contents, uint64, error) {
	e.mu.Lock()
	gen := e.gen
	e.mu.Unlock()
	c, err := s.load(e, gen)
	return c, gen, err
}

// sortGrants orders one server's grants by path, then access, then time
// granted, then ID.
func sortGrants(gs []Grant) { slices.SortFunc(gs, compareGrants) }

func compareGrants(a, b Grant) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(string(a.Access), string(b.Access)),
		a.Granted.Compare(b.Granted), strings.Compare(a.ID, b.ID))
}
