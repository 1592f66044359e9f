// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/leakcheck"
)

// listPages lists tg with x page by page and returns every entry.
func listPages(t *testing.T, x *executor.Executor, tg executor.Target, o executor.ListOptions) []executor.Entry {
	t.Helper()
	var out []executor.Entry
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("the listing never ends")
		}
		res, err := x.List(ctxT(t), tg, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) > o.Limit {
			t.Fatalf("%d entries on a page with limit %d", len(res.Entries), o.Limit)
		}
		out = append(out, res.Entries...)
		if res.NextCursor == "" {
			return out
		}
		if len(res.Entries) == 0 {
			t.Fatal("an empty page with a cursor")
		}
		o.Cursor = res.NextCursor
	}
}

func relsOf(entries []executor.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Path.Rel
	}
	return out
}

// touchDir changes dir (a temporary file of the broker created and removed:
// never listed) until its modification time differs from before's, so that
// a change made since is told by the directory's stamp whatever the file
// system's timestamp granularity.
func touchDir(t *testing.T, dir string, before fs.FileInfo) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(before.ModTime()) {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the directory's modification time does not change")
		}
		time.Sleep(5 * time.Millisecond)
		p := filepath.Join(dir, executor.TempPrefix+"touch")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

func mustStat(t *testing.T, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestListHugeDirectoryPageByPage: a 20,000-entry directory listed page
// after page is the whole directory, in order, once, with each entry's own
// type, size and time: with the snapshot kept between pages, without any
// snapshot, and with one too large for the cache (read a page's worth at a
// time).
func TestListHugeDirectoryPageByPage(t *testing.T) {
	f := newFixture(t)
	const n = 20_000
	var want, wantHidden []string
	for i := range n {
		name := fmt.Sprintf("big/f%05d", i)
		content := ""
		if i%1000 == 0 {
			content = strings.Repeat("x", i/1000+1)
		}
		if i%1000 == 0 || i == 0 {
			f.writeFile(t, name, content)
		} else {
			fl, err := os.Create(f.host(name))
			if err != nil {
				t.Fatal(err)
			}
			_ = fl.Close()
		}
		want = append(want, name)
	}
	for i := range 50 {
		f.writeFile(t, fmt.Sprintf("big/.h%02d", i), "h")
		wantHidden = append(wantHidden, fmt.Sprintf("big/.h%02d", i))
	}
	for i := range 5 {
		f.writeFile(t, fmt.Sprintf("big/%s1-%d", executor.TempPrefix, i), "t")
	}
	for i := range 10 {
		f.writeFile(t, fmt.Sprintf("big/d%02d/inner", i), "i")
		want = append(want, fmt.Sprintf("big/d%02d", i))
	}
	f.symlink(t, "f00000", "big/zlink")
	want = append(want, "big/zlink")
	slices.Sort(want)
	withHidden := slices.Sorted(slices.Values(append(slices.Clone(want), wantHidden...)))
	var wantRec []string
	for _, p := range want {
		wantRec = append(wantRec, p)
		if strings.HasPrefix(p, "big/d") {
			wantRec = append(wantRec, p+"/inner")
		}
	}

	executors := map[string]*executor.Executor{
		"snapshot":  f.x,
		"uncached":  newExecutor(t, t.TempDir(), executor.WithListCache(0, 0, 0)),
		"too large": newExecutor(t, t.TempDir(), executor.WithListCache(8, 4096, time.Minute)),
	}
	for name, x := range executors {
		t.Run(name, func(t *testing.T) {
			tg, err := x.Resolve(ctxT(t), f.path(t, "proj/big"), true)
			if err != nil {
				t.Fatal(err)
			}
			for _, limit := range []int{997, 10_000} {
				got := listPages(t, x, tg, executor.ListOptions{Limit: limit})
				if rels := relsOf(got); !slices.Equal(rels, want) {
					t.Fatalf("limit %d: %d entries, want %d; first difference at %d", limit, len(rels), len(want), firstDiff(rels, want))
				}
				for _, e := range got {
					checkEntry(t, f, e)
				}
			}
			got := relsOf(listPages(t, x, tg, executor.ListOptions{Limit: 1234, IncludeHidden: true}))
			if !slices.Equal(got, withHidden) {
				t.Fatalf("with hidden entries: %d entries, want %d; first difference at %d", len(got), len(withHidden), firstDiff(got, withHidden))
			}
			got = relsOf(listPages(t, x, tg, executor.ListOptions{Limit: 1500, Recursive: true, MaxDepth: -1}))
			if !slices.Equal(got, wantRec) {
				t.Fatalf("recursive: %d entries, want %d; first difference at %d", len(got), len(wantRec), firstDiff(got, wantRec))
			}
		})
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

// checkEntry compares a listed entry with lstat of its file.
func checkEntry(t *testing.T, f *fixture, e executor.Entry) {
	t.Helper()
	fi, err := os.Lstat(f.host(e.Path.Rel))
	if err != nil {
		t.Fatal(err)
	}
	typ := executor.TypeOther
	switch {
	case fi.Mode().IsRegular():
		typ = executor.TypeFile
	case fi.IsDir():
		typ = executor.TypeDirectory
	case fi.Mode()&fs.ModeSymlink != 0:
		typ = executor.TypeSymlink
	}
	if e.Type != typ || e.Size != fi.Size() || !e.Modified.Equal(fi.ModTime()) || e.Modified.Location() != time.UTC ||
		e.Name != filepath.Base(e.Path.Rel) || e.Path.Root.Mount != "proj" {
		t.Fatalf("entry %+v, lstat says type %s size %d modified %v", e, typ, fi.Size(), fi.ModTime())
	}
}

// TestListSnapshotFollowsChangesBetweenPages: a large directory (listed from
// its snapshot) changed between pages is read again: entries added after
// the cursor are listed, entries removed or renamed away before they were
// reached are not, and every entry that existed throughout is listed exactly
// once.
func TestListSnapshotFollowsChangesBetweenPages(t *testing.T) {
	type change func(t *testing.T, f *fixture, page int, last string) (added, removed []string)
	cases := map[string]change{
		"add": func(t *testing.T, f *fixture, page int, last string) ([]string, []string) {
			after := last + "-new" // right after the cursor
			f.writeFile(t, after, "n")
			f.writeFile(t, fmt.Sprintf("dir/a%03d", page), "n") // before the cursor: never listed
			return []string{after}, nil
		},
		"remove": func(t *testing.T, f *fixture, page int, last string) ([]string, []string) {
			var gone []string
			for _, p := range []string{aheadOf(last, 100), aheadOf(last, -50)} {
				if err := os.Remove(f.host(p)); err == nil {
					gone = append(gone, p)
				} else if !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			return nil, gone
		},
		"rename": func(t *testing.T, f *fixture, page int, last string) ([]string, []string) {
			var added, gone []string
			// One not reached yet goes behind the cursor, one already
			// listed comes ahead of it (to the end).
			from, to := aheadOf(last, 30), fmt.Sprintf("dir/a-ren%03d", page)
			if err := os.Rename(f.host(from), f.host(to)); err == nil {
				gone = append(gone, from)
			}
			from, to = aheadOf(last, -30), fmt.Sprintf("dir/g-ren%03d", page)
			if err := os.Rename(f.host(from), f.host(to)); err == nil {
				gone, added = append(gone, from), append(added, to)
			}
			return added, gone
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			const n = 3000
			for i := range n {
				fl, err := os.Create(f.host(fmt.Sprintf("dir/f%04d", i)))
				if os.IsNotExist(err) {
					f.mkdir(t, "dir")
					fl, err = os.Create(f.host(fmt.Sprintf("dir/f%04d", i)))
				}
				if err != nil {
					t.Fatal(err)
				}
				_ = fl.Close()
			}
			tg := f.resolve(t, "proj/dir", true)
			touched := map[string]bool{} // added, removed or renamed at some point
			var added []string
			removedAt := map[string]int{} // path -> page after which it was gone
			pages := pagesUnderChange(t, f, tg, executor.ListOptions{Limit: 250}, "dir", func(page int, last string) {
				add, rm := change(t, f, page, last)
				for _, p := range add {
					touched[p] = true
				}
				added = append(added, add...)
				for _, p := range rm {
					touched[p] = true
					removedAt[p] = page
				}
			})
			seen := map[string]int{}
			var order []string
			for page, paths := range pages {
				for _, p := range paths {
					seen[p]++
					order = append(order, p)
					if at, ok := removedAt[p]; ok && at < page {
						t.Errorf("page %d lists %s, removed before it", page, p)
					}
				}
			}
			if !slices.IsSorted(order) {
				t.Error("the pages are not in order")
			}
			for i := range n {
				p := fmt.Sprintf("dir/f%04d", i)
				if !touched[p] && seen[p] != 1 {
					t.Errorf("%s, which existed throughout, listed %d times", p, seen[p])
				}
			}
			for p, c := range seen {
				if c > 1 {
					t.Errorf("%s listed %d times", p, c)
				}
				if strings.HasPrefix(p, "dir/a") {
					t.Errorf("%s, made behind the cursor, was listed", p)
				}
			}
			for _, p := range added {
				if seen[p] != 1 {
					t.Errorf("%s, added after the cursor, listed %d times: the directory was not read again", p, seen[p])
				}
			}
			if len(added) == 0 && name != "remove" {
				t.Error("nothing was added")
			}
		})
	}
}

// pagesUnderChange lists tg page by page with o and returns each page's
// paths. After every page but the last it calls change with the page's
// number and its last path, then waits until dir (host-relative) has a new
// modification time, so that the next page cannot take the directory for
// unchanged.
func pagesUnderChange(t *testing.T, f *fixture, tg executor.Target, o executor.ListOptions, dir string, change func(page int, last string)) [][]string {
	t.Helper()
	var pages [][]string
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("the listing never ends")
		}
		before := mustStat(t, f.host(dir))
		res, err := f.x.List(ctxT(t), tg, o)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, e := range res.Entries {
			paths = append(paths, e.Path.Rel)
		}
		pages = append(pages, paths)
		if res.NextCursor == "" {
			return pages
		}
		o.Cursor = res.NextCursor
		change(page, paths[len(paths)-1])
		touchDir(t, f.host(dir), before)
	}
}

// aheadOf returns the file "dir/fNNNN" n positions after (before, when n is
// negative) last, a name of the form "dir/fNNNN[-new]".
func aheadOf(last string, n int) string {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(last, "dir/f"), "%04d", &i); err != nil {
		return "dir/none"
	}
	return fmt.Sprintf("dir/f%04d", i+n)
}

// TestListRecursiveWithLargeSubdirectoryUnderChange: a recursive listing
// whose pages end inside a large subdirectory (kept as a snapshot) and in
// small ones, with entries added and removed between pages in each, lists
// every entry that existed throughout once.
func TestListRecursiveWithLargeSubdirectoryUnderChange(t *testing.T) {
	f := newFixture(t)
	var stable []string
	for _, d := range []string{"a", "m", "z"} {
		for i := range 5 {
			p := fmt.Sprintf("%s/s%d", d, i)
			f.writeFile(t, p, "s")
			stable = append(stable, p)
		}
		stable = append(stable, d)
	}
	for i := range 700 {
		p := fmt.Sprintf("m/big/f%03d", i)
		f.writeFile(t, p, "b")
		stable = append(stable, p)
	}
	stable = append(stable, "m/big")
	tg := f.resolve(t, "proj", true)
	o := executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 90}
	pages := pagesUnderChange(t, f, tg, o, "m/big", func(page int, _ string) {
		f.writeFile(t, fmt.Sprintf("m/big/t%03d", page), "t") // ahead of any cursor in m/big
		f.writeFile(t, fmt.Sprintf("m/t%03d", page), "t")
		if page > 0 {
			_ = os.Remove(f.host(fmt.Sprintf("m/big/t%03d", page-1)))
		}
	})
	seen := map[string]int{}
	var order []string
	for _, paths := range pages {
		for _, p := range paths {
			seen[p]++
			order = append(order, p)
		}
	}
	if !slices.IsSortedFunc(order, compareSegments) {
		t.Error("the pages are not in order")
	}
	for _, p := range stable {
		if seen[p] != 1 {
			t.Errorf("%s, which existed throughout, listed %d times", p, seen[p])
		}
	}
	for p, c := range seen {
		if c > 1 {
			t.Errorf("%s listed %d times", p, c)
		}
	}
}

// TestListDeepTree: a tree deeper than the directories a walk holds open at
// once is listed whole, in order, page after page, without leaking a
// descriptor; and a deep directory moved away between pages ends its part of
// the listing without an error.
func TestListDeepTree(t *testing.T) {
	f := newFixture(t)
	const depth = 80
	dir := "deep"
	for range depth {
		f.writeFile(t, dir+"/a", "a")
		f.writeFile(t, dir+"/z", "z")
		dir += "/d"
	}
	f.mkdir(t, dir)
	var walked []string
	err := filepath.WalkDir(f.host("deep"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.dir, p)
		if rel != "deep" {
			walked = append(walked, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(walked, compareSegments)
	tg := f.resolve(t, "proj/deep", true)
	fds, countErr := leakcheck.OpenFiles()
	if countErr != nil && runtime.GOOS == "linux" {
		t.Fatal(countErr)
	}
	for _, limit := range []int{1, 7, 10_000} {
		got := relsOf(listPages(t, f.x, tg, executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: limit}))
		if !slices.Equal(got, walked) {
			t.Fatalf("limit %d: %d entries, want %d; first difference at %d", limit, len(got), len(walked), firstDiff(got, walked))
		}
	}
	if after, _ := leakcheck.OpenFiles(); countErr == nil && after != fds {
		t.Errorf("open descriptors: %d before the listings, %d after", fds, after)
	}
	// Cursor 40 levels down; the directory 35 levels down moves away.
	o := executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 3 * 40}
	res, err := f.x.List(ctxT(t), tg, o)
	if err != nil || res.NextCursor == "" {
		t.Fatal(res.NextCursor, err)
	}
	moved := "deep" + strings.Repeat("/d", 35)
	if err := os.Rename(f.host(moved), f.host("deep/moved")); err != nil {
		t.Fatal(err)
	}
	o.Cursor = res.NextCursor
	if _, err := f.x.List(ctxT(t), tg, o); err != nil {
		t.Fatalf("after a directory on the cursor's path moved: %v", err)
	}
}

// TestListConcurrentPagesShareASnapshot: listings of one large directory
// running at once (sharing its snapshot, which the first of them to need it
// sorts) each list it whole.
func TestListConcurrentPagesShareASnapshot(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 3000 {
		p := fmt.Sprintf("c/f%04d", (i*7919)%3000)
		f.writeFile(t, p, "")
		want = append(want, p)
	}
	slices.Sort(want)
	tg := f.resolve(t, "proj/c", true)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := executor.ListOptions{Limit: 100 + g*37}
			var got []string
			for {
				res, err := f.x.List(context.Background(), tg, o)
				if err != nil {
					errs <- err.Error()
					return
				}
				got = append(got, relsOf(res.Entries)...)
				if res.NextCursor == "" {
					break
				}
				o.Cursor = res.NextCursor
			}
			if !slices.Equal(got, want) {
				errs <- fmt.Sprintf("listing %d: %d entries, first difference at %d", g, len(got), firstDiff(got, want))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestListHonoursTheDeadline: an ended context stops a listing with
// TIMEOUT, a large directory's included.
func TestListHonoursTheDeadline(t *testing.T) {
	f := newFixture(t)
	for i := range 600 {
		f.writeFile(t, fmt.Sprintf("d/f%03d", i), "")
	}
	tg := f.resolve(t, "proj/d", true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.x.List(ctx, tg, executor.ListOptions{Limit: 10})
	wantCode(t, err, errcode.Timeout, "")
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = f.x.List(ctx, tg, executor.ListOptions{Limit: 10, Recursive: true, MaxDepth: -1})
	wantCode(t, err, errcode.Timeout, "")
}

// TestListedDirectorySwapped: the listed directory replaced after it was
// resolved (by a file, or by a link to another directory) is
// CONCURRENCY_CONFLICT, never the other object's entries.
func TestListedDirectorySwapped(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "d/secretish", "x")
	f.writeFile(t, "other/o", "x")
	tg := f.resolve(t, "proj/d", true)
	if err := os.Rename(f.host("d"), f.host("d-old")); err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, "d", "now a file")
	_, err := f.x.List(ctxT(t), tg, executor.ListOptions{Limit: 10})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if err := os.Remove(f.host("d")); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "other", "d")
	_, err = f.x.List(ctxT(t), tg, executor.ListOptions{Limit: 10})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
}
