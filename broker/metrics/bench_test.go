// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package metrics_test

import (
	"context"
	"fmt"
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
// observer's hooks cost a request (they must allocate nothing). Each
// iteration reads a file not read before (first touch: no decision cache
// answers), as an agent reading a repository does.
func BenchmarkCorridorRead(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics-off"
		if on {
			name = "metrics-on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			content := []byte(strings.Repeat("x", 4096))
			for n := range b.N {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", n)), content, 0o644); err != nil {
					b.Fatal(err)
				}
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
			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				req := corridor.ReadRequest{Path: fmt.Sprintf("ro/f%d.txt", n), Length: -1}
				if _, err := c.Read(ctx, caller, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
