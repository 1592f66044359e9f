// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/executor"
)

// The benchmarks compare the executor with the plain os calls on the same
// file in the same run; the ratio of their ns/op is what docs/performance.md's
// budgets are about. Speed is measured here only, never asserted in tests.

// benchRead resolves and reads the file rel of size bytes: through the
// executor with its fast paths (on Linux), through the executor without them
// ("portable": os.Root throughout, as where openat2 is missing), and with
// os.ReadFile.
func benchRead(b *testing.B, rel string, size int) {
	f := newFixture(b)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	if err := os.MkdirAll(filepath.Dir(f.host(rel)), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(f.host(rel), data, 0o644); err != nil {
		b.Fatal(err)
	}
	p := f.path(b, "proj/"+rel)
	ctx := context.Background()
	for _, m := range []struct {
		name string
		x    *executor.Executor
	}{
		{"executor", f.x},
		{"executor-portable", newExecutor(b, b.TempDir(), executor.WithoutFastPaths())},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				tg, err := m.x.Resolve(ctx, p, true)
				if err != nil {
					b.Fatal(err)
				}
				res, err := m.x.Read(ctx, tg, executor.ReadOptions{Length: int64(size), UTF8: true})
				if err != nil || len(res.Data) != size {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("os.ReadFile", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			got, err := os.ReadFile(f.host(rel))
			if err != nil || len(got) != size {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRead1KiB reads a file one directory down, as fsbench's files/read
// 1 KiB workload does.
func BenchmarkRead1KiB(b *testing.B) { benchRead(b, "r1k/bench.txt", 1<<10) }
func BenchmarkRead4KiB(b *testing.B) { benchRead(b, "bench.txt", 4<<10) }
func BenchmarkRead1MiB(b *testing.B) { benchRead(b, "bench.txt", 1<<20) }

// BenchmarkWrite4KiB: the executor's atomic write (temporary file, fsync,
// rename, fsync of the directory, lock) against os.WriteFile (in place, no
// fsync), and against the same atomic sequence by hand ("os.atomic"), which
// shows what the durability costs apart from the executor's own work.
func BenchmarkWrite4KiB(b *testing.B) {
	f := newFixture(b)
	data := make([]byte, 4<<10)
	p := f.path(b, "proj/w.bin")
	ctx := context.Background()
	b.Run("executor", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			tg, err := f.x.Resolve(context.Background(), p, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.x.Write(ctx, tg, data, executor.WriteOptions{Create: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.WriteFile", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := os.WriteFile(f.host("w2.bin"), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.atomic", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			tmp := filepath.Join(f.dir, ".tmp-bench")
			fl, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := fl.Write(data); err != nil {
				b.Fatal(err)
			}
			if err := fl.Sync(); err != nil {
				b.Fatal(err)
			}
			_ = fl.Close()
			if err := os.Rename(tmp, f.host("w3.bin")); err != nil {
				b.Fatal(err)
			}
			d, err := os.Open(f.dir)
			if err != nil {
				b.Fatal(err)
			}
			_ = d.Sync()
			_ = d.Close()
		}
	})
}

// BenchmarkResolveDepth resolves a file at the bottom of real directory
// trees of growing depth (no links). Each step of Resolve is an os.Root
// lookup of the whole prefix, so the cost grows with the square of the
// depth; a server that may create directories can build such a tree
// (files/create with parents) within the 4096-byte path limit (2000
// levels of "d/").
func BenchmarkResolveDepth(b *testing.B) {
	for _, depth := range []int{10, 100, 1000} {
		b.Run(itoa(depth), func(b *testing.B) {
			f := newFixture(b)
			rel := strings.Repeat("d/", depth) + "f"
			if err := os.MkdirAll(filepath.Dir(f.host(rel)), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(f.host(rel), nil, 0o644); err != nil {
				b.Fatal(err)
			}
			p := f.path(b, "proj/"+rel)
			for b.Loop() {
				if tg, err := f.x.Resolve(context.Background(), p, true); err != nil || !tg.Exists {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListDepth lists a deep chain of directories recursively: each
// directory is opened by its whole path from the listed directory.
func BenchmarkListDepth(b *testing.B) {
	for _, depth := range []int{10, 100, 1000} {
		b.Run(itoa(depth), func(b *testing.B) {
			f := newFixture(b)
			if err := os.MkdirAll(f.host(strings.Repeat("d/", depth)), 0o755); err != nil {
				b.Fatal(err)
			}
			tg := f.resolve(b, "proj", true)
			o := executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 10_000}
			for b.Loop() {
				res, err := f.x.List(context.Background(), tg, o)
				if err != nil || len(res.Entries) != depth {
					b.Fatal(len(res.Entries), err)
				}
			}
		})
	}
}
