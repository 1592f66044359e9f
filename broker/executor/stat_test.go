// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// TestStatDescribesTheResolvedObject: Stat reports a file's, a directory's
// and the root's own size, type, mode and times, and a link inside the root
// is described as its target (Resolve followed it).
func TestStatDescribesTheResolvedObject(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "dir/f.txt", "twelve bytes")
	if err := os.Chmod(f.host("dir/f.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(f.host("dir/f.txt"), modified, modified); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, "dir/f.txt", "link")
	for _, c := range []struct {
		raw, typ string
		size     int64
	}{
		{"proj/dir/f.txt", executor.TypeFile, 12},
		{"proj/link", executor.TypeFile, 12},
		{"proj/dir", executor.TypeDirectory, -1},
		{"proj", executor.TypeDirectory, -1},
	} {
		t.Run(c.raw, func(t *testing.T) {
			res, err := f.x.Stat(ctxT(t), f.resolve(t, c.raw, true))
			if err != nil {
				t.Fatal(err)
			}
			if res.Type != c.typ || c.size >= 0 && res.Size != c.size {
				t.Fatalf("type %q size %d, want %q %d", res.Type, res.Size, c.typ, c.size)
			}
			if c.typ != executor.TypeFile {
				return
			}
			if !res.ModTime.Equal(modified) {
				t.Errorf("modified %v, want %v", res.ModTime, modified)
			}
			if runtime.GOOS != "windows" && res.Mode.Perm() != 0o640 {
				t.Errorf("mode %v, want 0640", res.Mode)
			}
			if runtime.GOOS == "linux" && res.Accessed.IsZero() {
				t.Error("no access time on Linux")
			}
			if !res.Born.IsZero() && (res.Born.Before(time.Now().Add(-time.Hour)) || res.Born.After(time.Now().Add(time.Minute))) {
				t.Errorf("birth time %v is not the file's creation", res.Born)
			}
		})
	}
}

// TestStatMissingIsFileNotFound: a path that does not exist is
// FILE_NOT_FOUND.
func TestStatMissingIsFileNotFound(t *testing.T) {
	f := newFixture(t)
	_, err := f.x.Stat(ctxT(t), f.resolve(t, "proj/nope", true))
	wantCode(t, err, errcode.FileNotFound, "")
}

// TestStatChecksIdentity: an object replaced between Resolve and Stat (the
// window in which the policy decides), by another file or by a link to a
// file outside the root, is CONCURRENCY_CONFLICT, and nothing of the new
// object is reported: what is described is only ever the object decided on.
func TestStatChecksIdentity(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(f.outside+"/secret", []byte("outside, 21 bytes lng"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(t *testing.T){
		"renamed over": func(t *testing.T) {
			f.writeFile(t, "other.txt", "OTHER")
			if err := os.Rename(f.host("other.txt"), f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
		},
		"link out swapped in": func(t *testing.T) {
			if err := os.Rename(f.host("f.txt"), f.host("old.txt")); err != nil {
				t.Fatal(err)
			}
			f.symlink(t, f.outside+"/secret", "f.txt")
		},
		"removed": func(t *testing.T) {
			if err := os.Remove(f.host("f.txt")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, replace := range cases {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() {
				for _, n := range []string{"f.txt", "other.txt", "old.txt"} {
					_ = os.Remove(f.host(n))
				}
			})
			f.writeFile(t, "f.txt", "decided")
			tg := f.resolve(t, "proj/f.txt", true)
			replace(t)
			res, err := f.x.Stat(ctxT(t), tg)
			wantCode(t, err, errcode.ConcurrencyConflict, "")
			if res.Size != 0 || res.Type != "" {
				t.Fatalf("a replaced object was described: %+v", res)
			}
		})
	}
}
