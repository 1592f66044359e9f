// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/internal/cputime"
)

// BenchmarkCovers is the check on every request: a server with n grants,
// a path five segments deep, answered from the cache.
func BenchmarkCovers(b *testing.B) {
	for _, n := range []int{1, 100, 4000} {
		b.Run(fmt.Sprintf("grants=%d", n), func(b *testing.B) {
			s := open(b, b.TempDir())
			gs := make([]grants.Grant, n)
			for i := range gs {
				gs[i] = read(fmt.Sprintf("proj/d%d", i))
			}
			grant(b, s, "srv", gs...)
			p := fmt.Sprintf("proj/d%d/a/b/c.txt", n-1)
			now := time.Now()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, ok, err := s.Covers("srv", grants.Read, p, testRoot, now); !ok || err != nil {
						b.Fatal("not covered", err)
					}
				}
			})
		})
	}
}

// BenchmarkGrantOne is what --consent auto costs the grant store for a file
// no grant covers yet: one Grant of a new path, on disk and synced, while
// the server already holds grants=N grants. Each iteration grants a path no
// earlier one granted; the cost per grant should not grow with N. Besides
// ns/op it reports cpu-ns/op, the CPU time of the whole process per grant
// (the machines this runs on are shared), where the platform tells it.
func BenchmarkGrantOne(b *testing.B) {
	for _, held := range []int{100, 20000} {
		b.Run(fmt.Sprintf("grants=%d", held), func(b *testing.B) {
			s := open(b, b.TempDir(), grants.WithMaxGrants(held+b.N+1))
			old := make([]grants.Grant, held)
			for i := range old {
				old[i] = read(fmt.Sprintf("proj/old/d%03d/f%06d.txt", i/100, i))
			}
			grant(b, s, "srv", old...)
			b.ReportAllocs()
			cpu0, haveCPU := cputime.Process()
			b.ResetTimer()
			for i := range b.N {
				grant(b, s, "srv", read(fmt.Sprintf("proj/new/d%03d/f%06d.txt", i/100, i)))
			}
			b.StopTimer()
			if cpu1, _ := cputime.Process(); haveCPU {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
