// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// hidingDecider is the root-mode decider, except that the entries for which
// hide is true are not visible. It records every batch it is given.
type hidingDecider struct {
	rootModeDecider
	hide func(decision.InputPath) bool

	mu      sync.Mutex
	batches [][]decision.InputPath
}

func (d *hidingDecider) Visible(_ context.Context, _ *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	d.mu.Lock()
	d.batches = append(d.batches, entries)
	d.mu.Unlock()
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !d.hide(e) {
			out[e.MountPath] = true
		}
	}
	return out, nil
}

// TestFilesListLargeDirectoryOverTheWire: a 2,500-entry directory listed
// page by page over the wire: entries in order, each with its own fields,
// those the policy hides left out (and the cursor still continues after
// them), the others exactly once; the policy sees each entry with its
// canonical path.
func TestFilesListLargeDirectoryOverTheWire(t *testing.T) {
	d := &hidingDecider{hide: func(p decision.InputPath) bool { return strings.Contains(p.Relative, "7") }}
	f := startFiles(t, WithDecider(d))
	dir := filepath.Join(f.rw, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 2500 {
		name := fmt.Sprintf("f%04d", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat("x", i%5)), 0o644); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(name, "7") {
			want = append(want, "rw/big/"+name)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".hidden"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{"path": "rw/big", "limit": 1000}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, code, data := f.call("files/list", params)
		if res == nil {
			t.Fatalf("page %d: error %d %v", page, code, data)
		}
		for _, raw := range res["entries"].([]any) {
			e := raw.(map[string]any)
			p := e["path"].(string)
			got = append(got, p)
			fi, err := os.Lstat(filepath.Join(f.rw, strings.TrimPrefix(p, "rw/")))
			if err != nil {
				t.Fatal(err)
			}
			mod, err := time.Parse(time.RFC3339Nano, e["modified"].(string))
			if err != nil || !mod.Equal(fi.ModTime()) || !strings.HasSuffix(e["modified"].(string), "Z") {
				t.Fatalf("%s: modified %v (%v), want %v in UTC", p, e["modified"], err, fi.ModTime())
			}
			if e["name"] != filepath.Base(p) || e["type"] != "file" || e["size"] != float64(fi.Size()) || len(e) != 5 {
				t.Fatalf("entry %v", e)
			}
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%d entries listed, want %d", len(got), len(want))
	}
	rw, err := filepath.EvalSymlinks(f.rw)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.batches {
		for _, p := range b {
			if p.Canonical != filepath.Join(rw, p.Relative) || p.Requested != p.MountPath || p.Root != rw ||
				p.MountPath != "rw/"+p.Relative || !p.Exists || p.Hidden || p.Type != "file" || !p.Writable {
				t.Fatalf("input path %+v", p)
			}
		}
	}
}
