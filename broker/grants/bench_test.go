// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
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
