// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// BenchmarkRequest measures files/read, files/write and files/list end to
// end over real pipes, through the whole pipeline (schema, canonicalization,
// consent, decision, execution, reply), with the root-mode decider and with
// the real engine and default policies. Each request names a path used
// before, so that decisions come from the engine's cache after the first
// pass: it is the steady state of the pipeline's own cost, which a change of
// the pipeline's structure must not make worse.
func BenchmarkRequest(b *testing.B) {
	for _, decider := range []string{"rootmode", "policy"} {
		for _, op := range []string{"read-4KiB", "write-4KiB", "list-100"} {
			b.Run(op+"/"+decider, func(b *testing.B) {
				var opts []Option
				if decider == "policy" {
					e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
					if err != nil {
						b.Fatal(err)
					}
					opts = append(opts, WithDecider(engine.Decider{Engine: e}))
				}
				f := startFiles(b, opts...)
				content := strings.Repeat("x", 4096)
				if err := os.WriteFile(filepath.Join(f.ro, "4k.txt"), []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
				dir := filepath.Join(f.ro, "l100")
				if err := os.Mkdir(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				for i := range 100 {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), []byte("x"), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				requests := map[string]struct {
					method string
					params map[string]any
				}{
					"read-4KiB":  {"files/read", map[string]any{"path": "ro/4k.txt"}},
					"write-4KiB": {"files/write", map[string]any{"path": "rw/4k.txt", "content": content}},
					"list-100":   {"files/list", map[string]any{"path": "ro/l100"}},
				}
				req := requests[op]
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, code, data := f.call(req.method, req.params); code != 0 {
						b.Fatalf("%s: error %d %v", req.method, code, data)
					}
				}
			})
		}
	}
}
