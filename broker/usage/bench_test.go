// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package usage_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/usage"
)

// benchServer is a typical server identity.
const benchServer = "github.com/example/filesystem-server"

// countBytes is a count file's content, for the baselines.
func countBytes(b *testing.B) []byte {
	out, err := json.Marshal(map[string]any{"server": benchServer, "day": "2025-03-09", "bytesWritten": 123456789})
	if err != nil {
		b.Fatal(err)
	}
	return append(out, '\n')
}

// BenchmarkAdd compares Store.Add with, in the same run and directory, a
// plain os.WriteFile of the same bytes (the budget's baseline) and a bare
// durable replacement (temporary file, write, fsync, rename, directory
// fsync), the floor of any crash-safe counter.
func BenchmarkAdd(b *testing.B) {
	b.Run("baseline=os.WriteFile", func(b *testing.B) {
		data, path := countBytes(b), filepath.Join(b.TempDir(), "count.json")
		for b.Loop() {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=durable-replace", func(b *testing.B) {
		data, dir := countBytes(b), b.TempDir()
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		path := filepath.Join(dir, "count.json")
		for b.Loop() {
			f, err := os.CreateTemp(dir, ".tmp-*")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(data); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(f.Name(), path); err != nil {
				b.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Store.Add", func(b *testing.B) {
		s := open(b, b.TempDir())
		for b.Loop() {
			if _, err := s.Add(benchServer, day0, 4096); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToday compares Store.Today, answered from memory after one stat,
// with a bare os.Stat of the count file, and with Today reading the file
// every time (WithMaxStale(0)).
func BenchmarkToday(b *testing.B) {
	setup := func(b *testing.B, opts ...usage.Option) *usage.Store {
		s := open(b, b.TempDir(), opts...)
		if _, err := s.Add(benchServer, day0, 4096); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("baseline=os.Stat", func(b *testing.B) {
		path := setup(b).Path(benchServer)
		for b.Loop() {
			if _, err := os.Stat(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Store.Today", func(b *testing.B) {
		s := setup(b)
		for b.Loop() {
			if _, err := s.Today(benchServer, day0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Store.Today/parallel", func(b *testing.B) {
		s := setup(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Today(benchServer, day0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Store.Today/uncached", func(b *testing.B) {
		s := setup(b, usage.WithMaxStale(0))
		for b.Loop() {
			if _, err := s.Today(benchServer, day0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
