// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkAppend measures records/s for each sync mode with 1 and 8 concurrent writers
// (goroutines sharing one Writer), and fsyncs per record for the modes that fsync.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []SyncMode{SyncNone, SyncBatch, SyncAlways} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				keys := newTestKeys(b)
				w := keys.open(b, b.TempDir(), WithSync(mode))
				defer w.Close()
				rec := sampleRecord(KindDecision, 1)
				ctx := b.Context()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for g := range writers {
					n := b.N / writers
					if g < b.N%writers {
						n++
					}
					wg.Go(func() {
						for range n {
							if _, err := w.Append(ctx, rec); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
				if mode != SyncNone {
					b.ReportMetric(float64(w.fsyncs.Load())/float64(b.N), "fsyncs/record")
				}
			})
		}
	}
}

// BenchmarkGuardedAppend measures an append through the guard every session writes its trail
// through (Guard), with 1 and 8 concurrent writers, in the mode that does not fsync: what the
// guard adds to BenchmarkAppend's SyncNone figures.
func BenchmarkGuardedAppend(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			keys := newTestKeys(b)
			w := keys.open(b, b.TempDir(), WithSync(SyncNone))
			defer w.Close()
			g := Guard(w, 0, nil)
			rec := sampleRecord(KindDecision, 1)
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range writers {
				n := b.N / writers
				if i < b.N%writers {
					n++
				}
				wg.Go(func() {
					for range n {
						if _, err := g.Append(ctx, rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
