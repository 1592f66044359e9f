// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// A listing reads a directory's names once and keeps them, sorted, as a
// snapshot in the executor, so that the next pages of a large directory cost
// a binary search and the stats of one page instead of reading, stating and
// sorting the whole directory again for every page.
//
// A snapshot is the directory's names (the broker's temporary files left
// out), sorted, packed in one string. It is keyed by the directory's identity
// (device and inode) and reused only while the directory's stamp (fstat of
// the listing's own open descriptor: modification and change times in
// nanoseconds, size, link count) is the one read just before the names were;
// any entry added, removed or renamed in the directory changes it. A stamp
// whose times are within racyWindow of the moment the names were read is not
// trusted (a change in the same clock tick of the file system would leave it
// unchanged): such a snapshot serves only later pages of a listing that began
// before it was read, for which it holds every entry that existed throughout.
// A snapshot read before a listing began serves it for at most trustFor
// after its reading, so that a file system that fails to update a
// directory's times (some FUSE and network file systems) shows a change
// within that time anyway.
//
// The entries of a page are always stat'ed afresh: an entry removed since is
// left out, one replaced is described as it is now.

// racyWindow is how recent a directory's times may be, at the moment its
// names are read, for its snapshot to be trusted on its stamp alone: more than
// any file system's timestamp granularity (2 s on FAT).
const racyWindow = 2 * time.Second

// trustFor is how long after its reading a snapshot may serve a listing that
// began after it was read.
const trustFor = 30 * time.Second

// Defaults of the snapshot cache.
const (
	// DefaultListCacheDirs is how many directories' snapshots are kept.
	DefaultListCacheDirs = 8
	// DefaultListCacheBytes bounds the bytes of all snapshots together; a
	// directory whose names alone take more is never kept (about 400,000
	// names of 16 bytes): it is read again for every page, a page's worth
	// of names in memory at a time.
	DefaultListCacheBytes = 8 << 20
	// DefaultListCacheIdle is how long a snapshot is kept unused.
	DefaultListCacheIdle = 10 * time.Second
	// minSnapshotNames: smaller directories are read again each time, which
	// costs about as little as keeping them (and keeps a recursive listing
	// of many small directories from churning the cache).
	minSnapshotNames = 256
)

// WithListCache bounds the listing snapshots: at most dirs directories,
// bytes bytes in all (names and their offsets), each dropped after idle
// unused. dirs 0 disables the cache.
func WithListCache(dirs, bytes int, idle time.Duration) Option {
	return func(x *Executor) {
		x.snaps.maxDirs = max(dirs, 0)
		x.snaps.maxBytes = min(max(bytes, 0), math.MaxInt32) // offsets are uint32; int may be 32 bits
		if idle > 0 {
			x.snaps.idle = idle
		}
	}
}

// dirStamp is what fstat of an open directory says of it.
type dirStamp struct {
	dev, ino     uint64
	mtime, ctime int64 // nanoseconds since the epoch
	size         int64
	nlink        uint64
	isDir        bool
	// known is false where the platform cannot tell a change; such a
	// directory's snapshot is never kept.
	known bool
}

// entryStat is what lstat says of an entry.
type entryStat struct {
	typ   string
	size  int64
	mtime time.Time
	id    roots.FileID // device and inode (zero where the platform has none)
}

// snapKey identifies a directory.
type snapKey struct{ dev, ino uint64 }

// rawNames is names as read from a directory: packed in arena, unsorted.
// The arena is a strings.Builder, so that a snapshot takes the names as one
// string without copying them.
type rawNames struct {
	arena strings.Builder
	ends  []uint32
}

// grow makes room for about bytes bytes of names.
func (r *rawNames) grow(bytes int) {
	r.arena.Grow(bytes)
	r.ends = slices.Grow(r.ends, bytes/12) // names of about 12 bytes
}

func (r *rawNames) add(b []byte) {
	r.arena.Write(b)
	r.ends = append(r.ends, uint32(r.arena.Len()))
}

// size is the bytes the names take (and will take in a snapshot).
func (r *rawNames) size() int { return r.arena.Len() + 4*len(r.ends) }

// packed returns the names, as one string and their ends in it, and the
// bytes they hold (their arena's spare room too, when it is kept: up to
// half their size, else it is given back by a copy); r is not used
// afterwards.
func (r *rawNames) packed() (raw string, ends []uint32, weight int) {
	raw, ends, weight = r.arena.String(), r.ends, r.arena.Cap()
	if weight > len(raw)+len(raw)/2+4096 {
		raw, weight = strings.Clone(raw), len(raw)
	}
	if cap(ends) > len(ends)+len(ends)/2+1024 {
		ends = slices.Clone(ends)
	}
	weight += 4 * cap(ends)
	*r = rawNames{}
	return raw, ends, weight
}

// splitNames returns the names packed in raw as strings that share it.
func splitNames(raw string, ends []uint32) []string {
	out := make([]string, len(ends))
	start := uint32(0)
	for i, e := range ends {
		out[i], start = raw[start:e], e
	}
	return out
}

// snapshot is a directory's names, kept between pages. It is built from the
// names as read and sorted on its first use (the page that read the
// directory takes its own names by selection, without sorting it all); it
// never changes afterwards, so that pages of several listings can share it.
type snapshot struct {
	stamp dirStamp
	// settled is true when the directory's times were older than
	// racyWindow when the names were read: the stamp alone then tells a
	// change.
	settled bool
	// readAt is when the names began to be read, on the executor's clock
	// (see Executor.now).
	readAt int64
	bytes  int

	once    sync.Once
	raw     string   // the names as read; dropped once sorted
	rawEnds []uint32 //
	view    sortedNames
}

func newSnapshot(raw string, ends []uint32, st dirStamp, settled bool, readAt int64) *snapshot {
	return &snapshot{stamp: st, settled: settled, readAt: readAt, bytes: len(raw) + 4*len(ends), raw: raw, rawEnds: ends}
}

// size is the snapshot's weight against the cache's byte bound.
func (s *snapshot) size() int { return s.bytes }

// sorted returns the names sorted, sorting them on the first call.
func (s *snapshot) sorted() sortedNames {
	s.once.Do(func() {
		if len(s.rawEnds) <= maxRadixNames {
			s.view = sortNames(s.raw, s.rawEnds)
		} else {
			s.view = sortNamesByComparison(s.raw, s.rawEnds)
		}
		s.raw, s.rawEnds = "", nil
	})
	return s.view
}

// sortedNames is names sorted, packed in names: name i is
// names[ends[i-1]:ends[i]] (from 0 for the first).
type sortedNames struct {
	names string
	ends  []uint32
}

func (s sortedNames) len() int { return len(s.ends) }

func (s sortedNames) name(i int) string {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.names[start:s.ends[i]]
}

// search returns the index of the first name >= from.
func (s sortedNames) search(from string) int {
	lo, hi := 0, len(s.ends)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.name(m) < from {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// snapCache holds the executor's listing snapshots, within its bounds: a few
// directories, a number of bytes, an idle time. Expired snapshots are dropped
// by a timer, so that an idle broker does not keep a large directory's names.
type snapCache struct {
	maxDirs  int
	maxBytes int
	idle     time.Duration

	// building is set while a listing reads a directory whole to keep its
	// names: one at a time, so that concurrent first pages of large
	// directories hold at most one directory's names (twice, while they are
	// copied) beyond the cache itself.
	building atomic.Bool

	mu     sync.Mutex
	items  []*snapItem // least recently used first
	bytes  int
	timer  *time.Timer
	closed bool
}

type snapItem struct {
	key     snapKey
	snap    *snapshot
	lastUse time.Time
}

func newSnapCache() snapCache {
	return snapCache{maxDirs: DefaultListCacheDirs, maxBytes: DefaultListCacheBytes, idle: DefaultListCacheIdle}
}

// get returns the snapshot kept for key when it was taken at stamp st, and
// forgets one taken at another stamp (the directory has changed since).
func (c *snapCache) get(key snapKey, st dirStamp, now time.Time) *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range c.items {
		if it.key != key {
			continue
		}
		if it.snap.stamp != st || now.Sub(it.lastUse) > c.idle {
			c.removeAt(i)
			return nil
		}
		it.lastUse = now
		c.items = append(append(c.items[:i], c.items[i+1:]...), it) // most recent last
		return it.snap
	}
	return nil
}

// put keeps s for key, in place of any other, evicting the least recently
// used snapshots to stay within the bounds. One that cannot fit alone is not
// kept.
func (c *snapCache) put(key snapKey, s *snapshot, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range c.items {
		if it.key == key {
			c.removeAt(i)
			break
		}
	}
	if c.closed || c.maxDirs == 0 || s.size() > c.maxBytes {
		return
	}
	for len(c.items) > 0 && (len(c.items) >= c.maxDirs || c.bytes+s.size() > c.maxBytes) {
		c.removeAt(0)
	}
	c.items = append(c.items, &snapItem{key: key, snap: s, lastUse: now})
	c.bytes += s.size()
	if c.timer == nil {
		c.timer = time.AfterFunc(c.idle, c.sweep)
	}
}

func (c *snapCache) removeAt(i int) {
	c.bytes -= c.items[i].snap.size()
	c.items = slices.Delete(c.items, i, i+1)
}

// sweep drops the snapshots unused for the idle time, and comes back while
// some are left.
func (c *snapCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if c.closed {
		return
	}
	now := time.Now()
	next := time.Duration(-1)
	for i := 0; i < len(c.items); {
		left := c.idle - now.Sub(c.items[i].lastUse)
		if left <= 0 {
			c.removeAt(i)
			continue
		}
		if next < 0 || left < next {
			next = left
		}
		i++
	}
	if next >= 0 {
		c.timer = time.AfterFunc(next, c.sweep)
	}
}

// stats returns how many snapshots are kept and their bytes.
func (c *snapCache) stats() (dirs, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.bytes
}

// close drops every snapshot and stops the timer.
func (c *snapCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.items, c.bytes = nil, 0
}

// maxRadixNames is the most names sortNames sorts: its scratch space is 32
// bytes a name (6.4 MB here), against 16 for sortNamesByComparison, which
// sorts more (up to the cache's bound, about a million short names) without
// the extra peak in memory.
const maxRadixNames = 200_000

// sortNamesByComparison is sortNames by slices.Sort of the names as strings:
// slower (about 17 comparisons a name for 100,000), half the scratch space.
func sortNamesByComparison(raw string, ends []uint32) sortedNames {
	list := splitNames(raw, ends)
	slices.Sort(list)
	var b strings.Builder
	b.Grow(len(raw))
	sorted := make([]uint32, len(list))
	for i, n := range list {
		b.WriteString(n)
		sorted[i] = uint32(b.Len())
	}
	return sortedNames{names: b.String(), ends: sorted}
}

// sortNames returns the names packed in raw (name i ends at ends[i]) sorted
// by their bytes, as slices.Sort would order them, packed the same way.
//
// It sorts by radix, eight bytes at a time: every name gets the next eight
// bytes of itself as a number (big-endian, a short name padded with zeros,
// which no name holds, so that a name sorts before the longer names it
// starts), the names are sorted by that number a byte at a time (a byte
// that is the same in every name costs no pass), and the names that share
// all eight bytes are sorted again by their next eight. This costs a few
// passes over the names instead of about 17 string comparisons each for
// 100,000 names, and allocates nothing per name.
func sortNames(raw string, ends []uint32) sortedNames {
	items := make([]sortItem, len(ends))
	start := uint32(0)
	for i, e := range ends {
		items[i] = sortItem{start: start, end: e}
		start = e
	}
	sortItems(raw, items, make([]sortItem, len(items)), 0)
	var b strings.Builder
	b.Grow(len(raw))
	sorted := make([]uint32, len(items))
	for i, it := range items {
		b.WriteString(raw[it.start:it.end])
		sorted[i] = uint32(b.Len())
	}
	return sortedNames{names: b.String(), ends: sorted}
}

// sortItem is a name of raw[start:end] and, while it is sorted, eight of its
// bytes as a number.
type sortItem struct {
	key        uint64
	start, end uint32
}

// smallSort: runs of names up to this many are sorted by comparison.
const smallSort = 48

// sortItems sorts items, names that share their first depth bytes, by the
// rest of their bytes. tmp is scratch space at least as long as items.
func sortItems(raw string, items, tmp []sortItem, depth int) {
	if len(items) <= smallSort {
		slices.SortFunc(items, func(a, b sortItem) int {
			return strings.Compare(raw[a.start:a.end], raw[b.start:b.end])
		})
		return
	}
	for i := range items {
		items[i].key = chunkKey(raw[items[i].start:items[i].end], depth)
	}
	radixSort(items, tmp[:len(items)])
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].key == items[i].key {
			j++
		}
		if j-i > 1 {
			if items[i].key&0xff == 0 {
				// Every name of the run ends within these eight bytes: the
				// same name read twice (one a directory read returned
				// twice as it changed), or names holding a zero byte.
				slices.SortFunc(items[i:j], func(a, b sortItem) int {
					return strings.Compare(raw[a.start:a.end], raw[b.start:b.end])
				})
			} else {
				sortItems(raw, items[i:j], tmp, depth+8)
			}
		}
		i = j
	}
}

// chunkKey is the bytes of name from depth on, the first eight of them, as
// a big-endian number (zeros past the name's end).
func chunkKey(name string, depth int) uint64 {
	if depth >= len(name) {
		return 0
	}
	b := name[depth:]
	if len(b) >= 8 {
		_ = b[7]
		return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
			uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	}
	var k uint64
	for i := range 8 {
		k <<= 8
		if i < len(b) {
			k |= uint64(b[i])
		}
	}
	return k
}

// radixSort sorts items by key, least significant byte first; tmp is
// scratch space as long as items. A byte that is the same in every key is
// skipped.
func radixSort(items, tmp []sortItem) {
	var counts [8][256]int
	for _, it := range items {
		k := it.key
		for b := range 8 {
			counts[b][byte(k>>(8*b))]++
		}
	}
	src, dst := items, tmp
	for b := range 8 {
		c := &counts[b]
		shift := 8 * b
		if c[byte(src[0].key>>shift)] == len(src) {
			continue
		}
		sum := 0
		for i := range c {
			c[i], sum = sum, sum+c[i]
		}
		for _, it := range src {
			d := byte(it.key >> shift)
			dst[c[d]] = it
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &items[0] {
		copy(items, src)
	}
}
