// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// snapOfSize returns a snapshot whose weight is size bytes.
func snapOfSize(size int, st dirStamp) *snapshot {
	return newSnapshot(strings.Repeat("x", size-4), []uint32{uint32(size - 4)}, st, true, 0)
}

func TestSnapCacheBounds(t *testing.T) {
	now := time.Now()
	st := func(ino uint64) dirStamp { return dirStamp{ino: ino, known: true, isDir: true} }
	c := snapCache{maxDirs: 2, maxBytes: 1000, idle: time.Hour}
	defer c.close()
	for ino := uint64(1); ino <= 3; ino++ {
		c.put(snapKey{ino: ino}, snapOfSize(100, st(ino)), now)
	}
	if dirs, bytes := c.stats(); dirs != 2 || bytes != 200 {
		t.Fatalf("after 3 puts into 2 places: %d snapshots, %d bytes", dirs, bytes)
	}
	if c.get(snapKey{ino: 1}, st(1), now) != nil {
		t.Error("the least recently used snapshot was kept")
	}
	if c.get(snapKey{ino: 2}, st(2), now) == nil { // 2 is now the most recent
		t.Fatal("a recent snapshot was dropped")
	}
	c.put(snapKey{ino: 4}, snapOfSize(100, st(4)), now)
	if c.get(snapKey{ino: 3}, st(3), now) != nil || c.get(snapKey{ino: 2}, st(2), now) == nil {
		t.Error("eviction is not least recently used first")
	}
	// The byte bound: a 900-byte snapshot leaves room for one of 100 (the
	// most recently used, 2).
	c.put(snapKey{ino: 5}, snapOfSize(900, st(5)), now)
	if dirs, bytes := c.stats(); dirs != 2 || bytes != 1000 || c.get(snapKey{ino: 2}, st(2), now) == nil {
		t.Fatalf("after a 900-byte put: %d snapshots, %d bytes; want 2 (2 and 5), 1000", dirs, bytes)
	}
	c.put(snapKey{ino: 6}, snapOfSize(1001, st(6)), now)
	if c.get(snapKey{ino: 6}, st(6), now) != nil {
		t.Error("a snapshot over the byte bound was kept")
	}
	// Another stamp: the directory changed; the snapshot is dropped.
	changed := st(5)
	changed.mtime++
	if c.get(snapKey{ino: 5}, changed, now) != nil {
		t.Error("a snapshot of a changed directory was returned")
	}
	if dirs, bytes := c.stats(); dirs != 1 || bytes != 100 {
		t.Errorf("after a stale get: %d snapshots, %d bytes; want 1, 100", dirs, bytes)
	}
	// Idle: unused past the idle time, gone on the next get.
	c.put(snapKey{ino: 7}, snapOfSize(100, st(7)), now)
	if c.get(snapKey{ino: 7}, st(7), now.Add(2*time.Hour)) != nil {
		t.Error("an idle snapshot was returned")
	}
	// Closed: nothing kept.
	c.put(snapKey{ino: 8}, snapOfSize(100, st(8)), now)
	c.close()
	c.put(snapKey{ino: 9}, snapOfSize(100, st(9)), now)
	if dirs, bytes := c.stats(); dirs != 0 || bytes != 0 {
		t.Errorf("after close: %d snapshots, %d bytes", dirs, bytes)
	}
}

// TestSnapCacheDropsIdleSnapshots: an idle broker does not keep a
// directory's names: the timer drops them.
func TestSnapCacheDropsIdleSnapshots(t *testing.T) {
	c := snapCache{maxDirs: 4, maxBytes: 1 << 20, idle: 20 * time.Millisecond}
	defer c.close()
	c.put(snapKey{ino: 1}, snapOfSize(100, dirStamp{ino: 1, known: true}), time.Now())
	c.put(snapKey{ino: 2}, snapOfSize(100, dirStamp{ino: 2, known: true}), time.Now())
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if dirs, _ := c.stats(); dirs == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatal("idle snapshots were never dropped")
		}
	}
}

// listFixture is a root over a temporary directory holding dir "d" with n
// files, and an executor.
func listFixture(t *testing.T, n int, opts ...Option) (*Executor, Target, string) {
	t.Helper()
	root, dir := newListDir(t)
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x, tg := listExecutor(t, root, opts...)
	return x, tg, dir
}

// newListDir makes a temporary root directory (links resolved) holding an
// empty directory "d", and returns both.
func newListDir(t *testing.T) (root, dir string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

// listExecutor is a new executor, closed when the test ends, and the target
// of "d" under root (mounted as "m").
func listExecutor(t *testing.T, root string, opts ...Option) (*Executor, Target) {
	t.Helper()
	set, err := roots.New([]roots.Spec{{Path: root, Mount: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := set.ByMount("m")
	x, err := New(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	tg, err := x.Resolve(context.Background(), canon.Path{Root: r, Rel: "d"}, true)
	if err != nil {
		t.Fatal(err)
	}
	return x, tg
}

func (x *Executor) onlySnapshot(t *testing.T) *snapshot {
	t.Helper()
	x.snaps.mu.Lock()
	defer x.snaps.mu.Unlock()
	if len(x.snaps.items) != 1 {
		t.Fatalf("%d snapshots kept, want 1", len(x.snaps.items))
	}
	return x.snaps.items[0].snap
}

// changeDir changes dir's modification time (a temporary file of the broker
// made and removed) until it differs from what it was.
func changeDir(t *testing.T, dir string) {
	t.Helper()
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		p := filepath.Join(dir, TempPrefix+"x")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(before.ModTime()) {
			return
		}
		if i > 1000 {
			t.Fatal("the directory's time does not change")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestListKeepsSnapshotUntilTheDirectoryChanges: the pages of a listing
// share one reading of the directory until it changes; a new listing reuses
// it only once the directory's times are settled.
func TestListKeepsSnapshotUntilTheDirectoryChanges(t *testing.T) {
	x, tg, dir := listFixture(t, 600)
	ctx := context.Background()
	page := func(cursor string) ListResult {
		t.Helper()
		res, err := x.List(ctx, tg, ListOptions{Limit: 100, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	p1 := page("")
	s1 := x.onlySnapshot(t)
	p2 := page(p1.NextCursor)
	if x.onlySnapshot(t) != s1 {
		t.Fatal("the second page read the unchanged directory again")
	}
	changeDir(t, dir)
	p3 := page(p2.NextCursor)
	s3 := x.onlySnapshot(t)
	if s3 == s1 {
		t.Fatal("the page after a change used the old snapshot")
	}
	if p3.Entries[0].Name != "f0200" {
		t.Fatalf("page 3 starts at %s", p3.Entries[0].Name)
	}
	// A new listing: the directory just changed, so its snapshot (read
	// within the racy window) is not trusted for a first page...
	page("")
	s4 := x.onlySnapshot(t)
	if s4 == s3 || s4.settled {
		t.Fatal("a first page used an unsettled snapshot")
	}
	// ... but a settled one is.
	settledSnap := newSnapshot(s4.raw, s4.rawEnds, s4.stamp, true, s4.readAt)
	x.snaps.put(snapKey{s4.stamp.dev, s4.stamp.ino}, settledSnap, time.Now())
	page("")
	if x.onlySnapshot(t) != settledSnap {
		t.Fatal("a first page did not use a settled snapshot of the unchanged directory")
	}
	// ... if it is recent: one read longer than trustFor ago is read again.
	oldSnap := newSnapshot(s4.raw, s4.rawEnds, s4.stamp, true, x.now()-int64(trustFor)-1)
	x.snaps.put(snapKey{s4.stamp.dev, s4.stamp.ino}, oldSnap, time.Now())
	page("")
	if x.onlySnapshot(t) == oldSnap {
		t.Fatal("a first page used a snapshot read longer than trustFor ago")
	}
	// Settled means older than the racy window when read.
	now := time.Now()
	old := dirStamp{mtime: now.Add(-3 * time.Second).UnixNano(), ctime: now.Add(-3 * time.Second).UnixNano()}
	if !settled(old, now) {
		t.Error("times 3 s old are not settled")
	}
	fresh := old
	fresh.ctime = now.Add(-time.Second).UnixNano()
	if settled(fresh, now) {
		t.Error("a change time 1 s old is settled")
	}
}

// TestListKeepsOnlyLargeDirectories: a small directory is read again each
// time (no snapshot); none is kept when the cache is off.
func TestListKeepsOnlyLargeDirectories(t *testing.T) {
	x, tg, _ := listFixture(t, minSnapshotNames-1)
	if _, err := x.List(context.Background(), tg, ListOptions{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := x.snaps.stats(); dirs != 0 {
		t.Errorf("a directory of %d names was kept", minSnapshotNames-1)
	}
	x, tg, _ = listFixture(t, 1000, WithListCache(0, 0, 0))
	if _, err := x.List(context.Background(), tg, ListOptions{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := x.snaps.stats(); dirs != 0 {
		t.Error("a snapshot was kept with the cache off")
	}
}

// TestListBuildsOneSnapshotAtATime: while one listing reads a directory
// whole to keep it, another listing's first page reads only a page's worth
// of names and keeps nothing, and its page is still right; once the build
// is done the next listing keeps a snapshot.
func TestListBuildsOneSnapshotAtATime(t *testing.T) {
	x, tg, _ := listFixture(t, 1000)
	x.snaps.building.Store(true) // another listing is building
	res, err := x.List(context.Background(), tg, ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if dirs, _ := x.snaps.stats(); dirs != 0 {
		t.Error("a second snapshot was built while one was being built")
	}
	if len(res.Entries) != 10 || res.Entries[0].Name != "f0000" || res.Entries[9].Name != "f0009" {
		t.Errorf("first page without a snapshot: %v", res.Entries)
	}
	x.snaps.building.Store(false)
	if _, err := x.List(context.Background(), tg, ListOptions{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if dirs, _ := x.snaps.stats(); dirs != 1 {
		t.Errorf("%d snapshots kept after the build was free, want 1", dirs)
	}
	if x.snaps.building.Load() {
		t.Error("the build slot was not released")
	}
}

func TestTopNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := rng.IntN(3000)
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%c%04d", ".abz"[rng.IntN(4)], rng.IntN(5000))
		}
		from := ""
		if rng.IntN(2) == 0 {
			from = fmt.Sprintf("b%04d", rng.IntN(5000))
		}
		incl, hidden := rng.IntN(2) == 0, rng.IntN(2) == 0
		k := 1 + rng.IntN(50)
		top := topNames{k: k, from: from, incl: incl, hidden: hidden}
		var want []string
		for i, nm := range names {
			if i%2 == 0 {
				top.add(nm)
			} else {
				top.addBytes([]byte(nm))
			}
			if nm > from || (incl && nm == from) {
				if hidden || !strings.HasPrefix(nm, ".") {
					want = append(want, nm)
				}
			}
		}
		slices.Sort(want)
		dropped := len(want) > k
		want = want[:min(k, len(want))]
		got := top.sorted()
		if !slices.Equal(got, want) {
			t.Fatalf("k %d from %q incl %v hidden %v: got %q, want %q", k, from, incl, hidden, got, want)
		}
		if dropped && !top.dropped {
			t.Fatalf("names were left out but dropped is false")
		}
	}
}

// TestNextContinuesAfterABatch: a page's batch of names that runs out while
// names were left out (entries vanished before their stat) continues after
// its last name, from the directory read again or from its snapshot.
func TestNextContinuesAfterABatch(t *testing.T) {
	for _, withSnap := range []bool{false, true} {
		x, tg, _ := listFixture(t, 300)
		h, err := x.handle(tg.Path.Root)
		if err != nil {
			t.Fatal(err)
		}
		d, err := openListDir(h, tg.Path.Rel)
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.stamp()
		if err != nil {
			t.Fatal(err)
		}
		w := &walker{x: x, ctx: context.Background(), o: ListOptions{Limit: 5}, levels: []*level{{d: d}}}
		it := nameIter{batch: []string{"f0000", "f0001", "f0002"}, more: true}
		if withSnap {
			full, err := w.readNames(d, st, "", true, true)
			if err != nil || full.snap == nil {
				t.Fatalf("no snapshot: %v", err)
			}
			it.snap = full.snap
		}
		var got []string
		for {
			name, ok, err := w.next(0, &it)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, name)
		}
		w.closeAll()
		if len(got) != 300 || !slices.IsSorted(got) || got[3] != "f0003" {
			t.Errorf("snapshot %v: %d names after the batch, sorted %v", withSnap, len(got), slices.IsSorted(got))
		}
	}
}

// TestSortNames: the radix sort of a snapshot's names orders them as
// slices.Sort does, whatever they share: long common prefixes (beyond 8 and
// 16 bytes), names that begin others, names of exactly 8 or 16 bytes, bytes
// above 0x7f, a name read twice, and, though no directory holds one, a zero
// byte.
func TestSortNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	prefixes := []string{"", "a", "f0", "common_prefix_", "a_much_longer_common_prefix_of_", "\xc3\xa9t\xc3\xa9-", "\xff\xfe"}
	alphabet := "ab0189._-~\x7f\x80\xc3\xa9\xff"
	gen := func(n int) []string {
		names := make([]string, n)
		for i := range names {
			var b strings.Builder
			b.WriteString(prefixes[rng.IntN(len(prefixes))])
			for range rng.IntN(20) {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			if b.Len() == 0 || rng.IntN(50) == 0 {
				b.WriteString(strings.Repeat("x", 8*(1+rng.IntN(2)))) // exactly 8 or 16 more
			}
			names[i] = b.String()
			if i > 0 && rng.IntN(100) == 0 {
				names[i] = names[rng.IntN(i)] // read twice
			}
			if rng.IntN(500) == 0 {
				names[i] += "\x00" + names[i] // a zero byte
			}
		}
		return names
	}
	sizes := []int{0, 1, 2, smallSort - 1, smallSort, smallSort + 1, 100, 1000, 20_000}
	for _, n := range sizes {
		for range 5 {
			names := gen(n)
			var raw strings.Builder
			ends := make([]uint32, 0, n)
			for _, nm := range names {
				raw.WriteString(nm)
				ends = append(ends, uint32(raw.Len()))
			}
			want := slices.Sorted(slices.Values(names))
			for _, sort := range []func(string, []uint32) sortedNames{sortNames, sortNamesByComparison} {
				got := sort(raw.String(), ends)
				if got.len() != len(want) {
					t.Fatalf("%d names: %d sorted", n, got.len())
				}
				for i, w := range want {
					if g := got.name(i); g != w {
						t.Fatalf("%d names: name %d is %q, want %q", n, i, g, w)
					}
				}
			}
		}
	}
	// Every name sharing its first 40 bytes: five levels of the radix.
	var raw strings.Builder
	var ends []uint32
	var want []string
	for i := range 3000 {
		nm := strings.Repeat("p", 40) + fmt.Sprint(rng.IntN(1_000_000), "-", i)
		raw.WriteString(nm)
		ends = append(ends, uint32(raw.Len()))
		want = append(want, nm)
	}
	slices.Sort(want)
	got := sortNames(raw.String(), ends)
	for i, w := range want {
		if got.name(i) != w {
			t.Fatalf("shared 40-byte prefix: name %d is %q, want %q", i, got.name(i), w)
		}
	}
}

// TestRawNamesPacked: the names given to a snapshot hold no more than about
// their size, and the snapshot is weighed by what they hold.
func TestRawNamesPacked(t *testing.T) {
	for _, c := range []struct {
		grow, names int
		cloned      bool
	}{
		{0, 1000, false},         // grown by appends: within half again
		{1 << 20, 10, true},      // a hint far too large: copied
		{13 * 1000, 1000, false}, // a hint near the size
	} {
		var r rawNames
		r.grow(c.grow)
		for i := range c.names {
			r.add(fmt.Appendf(nil, "name%08d", i))
		}
		size := r.size()
		arenaCap := r.arena.Cap()
		raw, ends, weight := r.packed()
		if len(raw) != 12*c.names || len(ends) != c.names || ends[c.names-1] != uint32(len(raw)) {
			t.Fatalf("%+v: %d bytes, %d ends", c, len(raw), len(ends))
		}
		if weight < size || weight > size+size/2+4096+1024*4 {
			t.Errorf("%+v: weight %d for %d bytes of names", c, weight, size)
		}
		if cloned := weight < arenaCap; cloned != c.cloned {
			t.Errorf("%+v: arena of %d copied %v (weight %d)", c, arenaCap, cloned, weight)
		}
	}
}

// TestListFreshFirstPage: the first page of a directory not listed before
// (selected from the names as read, without sorting them) is the directory's
// smallest names in order, whatever they are, and the pages after it (from
// the snapshot it kept, sorted then) go on from it without losing or
// repeating a name, for any page size; so do pages of a listing that was
// given a page size too small to keep anything.
func TestListFreshFirstPage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	root, dir := newListDir(t)
	seen := map[string]bool{}
	var want []string
	prefixes := []string{"", "a", "same_long_prefix_for_many_", "\xc3\xa9", "Z", "~"}
	for len(want) < 3000 {
		digits := fmt.Sprint(rng.IntN(100_000))
		name := prefixes[rng.IntN(len(prefixes))] + digits[:min(len(digits), 1+rng.IntN(5))]
		if rng.IntN(20) == 0 {
			name += strings.Repeat("q", 8)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf(".hidden%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	for _, limit := range []int{2, 7, 256, 999, 2999, 3000, 5000} {
		for _, opts := range [][]Option{nil, {WithListCache(8, 2048, time.Minute)}} {
			if opts != nil && limit < 256 {
				continue // the whole directory read for every page: slow
			}
			x, tg := listExecutor(t, root, opts...)
			var got []string
			cursor := ""
			for page := 0; ; page++ {
				res, err := x.List(context.Background(), tg, ListOptions{Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				if page == 0 {
					n := min(limit, len(want))
					if len(res.Entries) != n {
						t.Fatalf("limit %d: a first page of %d", limit, len(res.Entries))
					}
					for i, e := range res.Entries {
						if e.Name != want[i] {
							t.Fatalf("limit %d, cache %v: first page entry %d is %q, want %q", limit, opts != nil, i, e.Name, want[i])
						}
					}
					if kept, _ := x.snaps.stats(); (kept == 1) != (opts == nil) {
						t.Fatalf("limit %d, cache %v: %d snapshots kept after the first page", limit, opts != nil, kept)
					}
				}
				for _, e := range res.Entries {
					got = append(got, e.Name)
				}
				if res.NextCursor == "" {
					break
				}
				cursor = res.NextCursor
				if page > len(want) {
					t.Fatal("the listing does not end")
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d, cache %v: %d names over the pages, want %d; first difference at %d",
					limit, opts != nil, len(got), len(want), firstDiff(got, want))
			}
			_ = x.Close()
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSelectSmallest: the k-th smallest string lands at k-1, the smaller
// ones before it, the larger after, duplicates and all.
func TestSelectSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		a := make([]string, 1+rng.IntN(300))
		for i := range a {
			a[i] = fmt.Sprint(rng.IntN(1 + rng.IntN(400)))
		}
		k := 1 + rng.IntN(len(a))
		sorted := slices.Sorted(slices.Values(a))
		selectSmallest(a, k)
		if a[k-1] != sorted[k-1] {
			t.Fatalf("k %d of %d: %q at k-1, want %q", k, len(a), a[k-1], sorted[k-1])
		}
		for i, s := range a {
			if i < k-1 && s > a[k-1] || i > k-1 && s < a[k-1] {
				t.Fatalf("k %d of %d: %q at %d is on the wrong side of %q", k, len(a), s, i, a[k-1])
			}
		}
		if got := slices.Sorted(slices.Values(a)); !slices.Equal(got, sorted) {
			t.Fatalf("k %d: the strings changed", k)
		}
	}
}
