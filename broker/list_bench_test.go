// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// BenchmarkFilesList1000 measures a files/list of a 1,000-entry directory
// over real pipes through the whole pipeline (schema, canonicalization,
// consent, decision, listing, visibility, reply), with the root-mode
// decider and with the default policy set, against "raw": the same
// directory read and lstat'ed with plain os calls and the same reply
// encoded, in process (no pipes, no checks). The ratio to raw bounds what
// the broker adds; the budget of docs/performance.md (1.5x) is against bench/fsbaseline end
// to end (make bench-e2e).
func BenchmarkFilesList1000(b *testing.B) {
	mk := func(b *testing.B, dir string) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 1000 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.txt", i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		// Older than the executor's racy window: the steady state of a
		// directory listed again and again.
		time.Sleep(2100 * time.Millisecond)
	}
	for _, name := range []string{"rootmode", "policy"} {
		b.Run(name, func(b *testing.B) {
			var opts []Option
			if name == "policy" {
				e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, WithDecider(engine.Decider{Engine: e}))
			}
			f := startFiles(b, opts...)
			mk(b, filepath.Join(f.rw, "l1000"))
			b.ReportAllocs()
			b.ResetTimer()
			id := 0
			for range b.N {
				id++
				f.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"files/list","params":{"path":"rw/l1000"}}`, id))
				if m := f.Next(); !strings.Contains(m.Raw, `"f000999.txt"`) {
					b.Fatalf("%.300s", m.Raw)
				}
			}
		})
	}
	b.Run("raw", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "l1000")
		mk(b, dir)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			ents, err := os.ReadDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			out := listResult{Entries: make([]listEntry, 0, len(ents))}
			for _, e := range ents {
				fi, err := os.Lstat(filepath.Join(dir, e.Name()))
				if err != nil {
					b.Fatal(err)
				}
				typ := "other"
				switch {
				case fi.Mode().IsRegular():
					typ = "file"
				case fi.Mode()&fs.ModeSymlink != 0:
					typ = "symlink"
				case fi.IsDir():
					typ = "directory"
				}
				out.Entries = append(out.Entries, listEntry{Path: "rw/l1000/" + e.Name(), Name: e.Name(), Type: typ,
					Size: fi.Size(), Modified: fi.ModTime().UTC().Format(time.RFC3339Nano)})
			}
			if _, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": out}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
