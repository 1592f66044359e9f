// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// The listing benchmarks compare the executor with what a plain Go server
// does for the same page of the same directory, in the same run
// ("os.ReadDir": read the whole directory, sorted, then lstat the page's
// entries; the way bench/fsbaseline answers files/list). Speed is measured
// here only, never asserted in tests.

// makeFlatDir creates n empty files in dir/name and waits until the
// directory's times are older than the executor's racy window, so that its
// snapshot may serve a listing's first page too (the steady state of a
// directory listed again and again).
func makeFlatDir(b *testing.B, f *fixture, name string, n int) {
	b.Helper()
	f.mkdir(b, name)
	for i := range n {
		fl, err := os.Create(f.host(fmt.Sprintf("%s/f%06d.txt", name, i)))
		if err != nil {
			b.Fatal(err)
		}
		_ = fl.Close()
	}
	time.Sleep(2100 * time.Millisecond)
}

// basePage is the baseline's page: the whole directory read and sorted
// (os.ReadDir), the names after the cursor, each lstat'ed.
func basePage(b *testing.B, dir, after string, limit int) (last string, n int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	i, _ := slices.BinarySearchFunc(ents, after, func(e os.DirEntry, s string) int { return strings.Compare(e.Name(), s) })
	if i < len(ents) && ents[i].Name() == after {
		i++
	}
	for _, e := range ents[i:min(i+limit, len(ents))] {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		_ = fi.ModTime().UTC()
		last, n = e.Name(), n+1
	}
	return last, n
}

// benchPaged lists dir page after page, starting again after the last page;
// one op is one page.
// "executor" keeps the directory's snapshot between pages (the default);
// "executor-uncached" reads the directory again for every page, as the
// first page of a directory not listed before does.
func benchPaged(b *testing.B, f *fixture, name string, limit int) {
	tg := f.resolve(b, "proj/"+name, true)
	ctx := context.Background()
	uncached := newExecutor(b, b.TempDir(), executor.WithListCache(0, 0, 0))
	state := b.TempDir()
	for _, x := range []struct {
		name string
		x    *executor.Executor
	}{{"executor", f.x}, {"executor-uncached", uncached}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			cursor := ""
			for b.Loop() {
				res, err := x.x.List(ctx, tg, executor.ListOptions{Limit: limit, Cursor: cursor})
				if err != nil || len(res.Entries) == 0 {
					b.Fatal(len(res.Entries), err)
				}
				cursor = res.NextCursor
			}
		})
	}
	// "fresh": the first page of a directory this executor has not listed
	// before (a new executor for every op, its snapshot cache on): the
	// page that reads the directory whole and keeps it. "fresh-second": the
	// page after it, the first served by the names the first one kept.
	for _, second := range []bool{false, true} {
		name := "fresh"
		if second {
			name = "fresh-second"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				x := newFreshExecutor(b, state)
				opts := executor.ListOptions{Limit: limit}
				if second {
					first, err := x.List(ctx, tg, opts)
					if err != nil || first.NextCursor == "" {
						b.Fatal(err)
					}
					opts.Cursor = first.NextCursor
				}
				c0 := cpuTime()
				b.StartTimer()
				res, err := x.List(ctx, tg, opts)
				if err != nil || len(res.Entries) != limit {
					b.Fatal(len(res.Entries), err)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				_ = x.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	b.Run("os.ReadDir", func(b *testing.B) {
		b.ReportAllocs()
		after := ""
		for b.Loop() {
			last, n := basePage(b, f.host(name), after, limit)
			if n < limit {
				last = ""
			}
			after = last
		}
	})
}

// newFreshExecutor is an executor that has listed nothing yet.
func newFreshExecutor(b *testing.B, state string) *executor.Executor {
	x, err := executor.New(state)
	if err != nil {
		b.Fatal(err)
	}
	return x
}

// BenchmarkListPage100k: one page of 1,000 entries of a 100,000-entry
// directory, page after page (docs/performance.md's budget: under 50 ms a page).
func BenchmarkListPage100k(b *testing.B) {
	f := newFixture(b)
	makeFlatDir(b, f, "big", 100_000)
	benchPaged(b, f, "big", 1000)
}

// BenchmarkList1000: the whole listing of a 1,000-entry directory, one page
// (docs/performance.md's budget: files/list of 1,000 entries).
func BenchmarkList1000(b *testing.B) {
	f := newFixture(b)
	makeFlatDir(b, f, "l1000", 1000)
	tg := f.resolve(b, "proj/l1000", true)
	ctx := context.Background()
	b.Run("executor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := f.x.List(ctx, tg, executor.ListOptions{Limit: 1000})
			if err != nil || len(res.Entries) != 1000 || res.NextCursor != "" {
				b.Fatal(len(res.Entries), err)
			}
		}
	})
	b.Run("os.ReadDir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, n := basePage(b, f.host("l1000"), "", 1000); n != 1000 {
				b.Fatal(n)
			}
		}
	})
}

// BenchmarkListTree: a recursive listing of 100 directories of 100 files,
// page after page (1,000 entries a page), against a recursive os.ReadDir
// walk of the whole tree (what a plain server without cursors would do for
// each page).
func BenchmarkListTree(b *testing.B) {
	f := newFixture(b)
	for d := range 100 {
		dir := fmt.Sprintf("tree/d%03d", d)
		f.mkdir(b, dir)
		for i := range 100 {
			fl, err := os.Create(f.host(fmt.Sprintf("%s/f%03d", dir, i)))
			if err != nil {
				b.Fatal(err)
			}
			_ = fl.Close()
		}
	}
	tg := f.resolve(b, "proj/tree", true)
	ctx := context.Background()
	b.Run("executor", func(b *testing.B) {
		b.ReportAllocs()
		cursor := ""
		for b.Loop() {
			res, err := f.x.List(ctx, tg, executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 1000, Cursor: cursor})
			if err != nil || len(res.Entries) == 0 {
				b.Fatal(len(res.Entries), err)
			}
			cursor = res.NextCursor
		}
	})
	b.Run("os.ReadDir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var walk func(dir string)
			walk = func(dir string) {
				ents, err := os.ReadDir(dir)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range ents {
					if _, err := os.Lstat(filepath.Join(dir, e.Name())); err != nil {
						b.Fatal(err)
					}
					if e.IsDir() {
						walk(filepath.Join(dir, e.Name()))
					}
				}
			}
			walk(f.host("tree"))
		}
	})
}

// BenchmarkList100: the listing of a 100-entry directory (fsbroker serve's list_directory of
// the end-to-end benchmark), each iteration another of 200 such directories: with each entry
// stat'ed (files/list's sizes and times) and with the types the directory gives (TypesOnly).
func BenchmarkList100(b *testing.B) {
	f := newFixture(b)
	const dirs = 200
	targets := make([]executor.Target, dirs)
	for d := range dirs {
		name := fmt.Sprintf("l100/d%03d", d)
		makeFlatDir(b, f, name, 100)
		targets[d] = f.resolve(b, "proj/"+name, true)
	}
	ctx := context.Background()
	for _, typesOnly := range []bool{false, true} {
		name := "stat"
		if typesOnly {
			name = "types-only"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := f.x.List(ctx, targets[i%dirs], executor.ListOptions{Limit: 1000, TypesOnly: typesOnly})
				if err != nil || len(res.Entries) != 100 {
					b.Fatal(len(res.Entries), err)
				}
				i++
			}
		})
	}
}
