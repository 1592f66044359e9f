// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
)

// BenchmarkRead4KiB measures a files/read of 4 KiB over real pipes, through the whole
// pipeline, without an audit trail and with one in each sync mode, in the same run: the
// added latency of audit is the difference to "no-audit".
func BenchmarkRead4KiB(b *testing.B) {
	cases := []struct {
		name string
		mode audit.SyncMode
		on   bool
	}{
		{"no-audit", 0, false},
		{"audit-none", audit.SyncNone, true},
		{"audit-batch", audit.SyncBatch, true},
		{"audit-always", audit.SyncAlways, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var opts []Option
			if tc.on {
				w, _ := audittest.Open(b, audit.WithSync(tc.mode))
				opts = append(opts, WithAudit(w, false))
			}
			f := startFiles(b, opts...)
			if err := os.WriteFile(filepath.Join(f.ro, "4k.txt"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
				b.Fatal(err)
			}
			params := map[string]any{"path": "ro/4k.txt"}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f.call("files/read", params)
			}
		})
	}
}
