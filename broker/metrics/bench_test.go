// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
)

// BenchmarkCorridorRead measures a 4 KiB read through the corridor of a
// runtime (the built-in policies, the audit trail, the executor) with the
// metrics off and on, in the same run: the difference is what the
// observer's hooks cost a request (they must allocate nothing).
func BenchmarkCorridorRead(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics-off"
		if on {
			name = "metrics-on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "4k.txt"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
				b.Fatal(err)
			}
			rt, err := runtime.Open(context.Background(), runtime.Config{StateDir: b.TempDir(),
				Roots: []roots.Spec{{Path: dir, Mount: "ro", Preapproved: true}}, Metrics: on}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			c := rt.NewCorridor()
			defer c.Close()
			caller := corridor.Caller{ID: "bench", Name: "bench", SessionID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"}
			ctx := context.Background()
			req := corridor.ReadRequest{Path: "ro/4k.txt", Length: -1}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Read(ctx, caller, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
