// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// fuzzTree builds, once per fuzzing process, a root full of links: inside,
// outside (absolute and relative), dangling both ways, loops, links to the
// root, chains, and a sibling root.
func fuzzTree(f *testing.F) *fixture {
	fx := newFixture(f)
	fx.writeFile(f, "file.txt", "x")
	fx.writeFile(f, "dir/sub/deep.txt", "x")
	fx.mkdir(f, "dir/empty")
	fx.writeFile(f, ".hidden/h", "x")
	if err := os.WriteFile(filepath.Join(fx.outside, "secret"), []byte("s"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(fx.outside, "d"), 0o755); err != nil {
		f.Fatal(err)
	}
	for link, target := range map[string]string{
		"dir/link_up":       "..",
		"dir/link_file":     "sub/deep.txt",
		"dir/sub/up2":       "../..",
		"dir/sub/up3":       "../../..",
		"in":                "dir",
		"chain1":            "chain2",
		"chain2":            "dir/link_file",
		"chain_dir":         "in/sub",
		"out_abs":           fx.outside,
		"out_abs_file":      filepath.Join(fx.outside, "secret"),
		"out_rel":           "../outside",
		"out_file":          "../outside/secret",
		"dir/out_deep":      "../../outside/d",
		"sibling":           "../other",
		"dangling_in":       "nowhere/x",
		"dangling_in2":      "dir/newfile",
		"dangling_out":      "../outside/nothere",
		"dangling_out_abs":  filepath.Join(fx.outside, "nothere"),
		"loop1":             "loop2",
		"loop2":             "loop1",
		"selfdir":           "selfdir/x",
		"abs_in":            filepath.Join(fx.dir, "file.txt"),
		"through_file":      "file.txt/x",
		"dot":               ".",
		"dotdot_in":         "dir/../file.txt",
		"empty_hop":         "dir//sub/./deep.txt",
		"dir/sub/back":      "../../in/sub/deep.txt",
		"dir/sub/lexical":   "../link_up/../file.txt",
		"dir/sub/lex_out":   "../link_up/../../x",
		".hidden/hl":        "../dir",
		"dir/empty/to_root": "../..",
	} {
		fx.symlink(f, target, link)
	}
	if err := os.WriteFile(filepath.Join(fx.other, "o"), []byte("o"), 0o644); err != nil {
		f.Fatal(err)
	}
	return fx
}

// FuzzResolve: whatever the path, Resolve either fails with a known code,
// or returns a canonical path in the same root whose every component (but a
// final link when not following) is a real directory or file, never a
// link, and which is the object that Go's os.Root reaches by the same path.
func FuzzResolve(f *testing.F) {
	fx := fuzzTree(f)
	for _, s := range []string{"file.txt", "dir/sub/deep.txt", "in/sub/deep.txt", "chain1", "chain_dir/up2/file.txt",
		"out_abs/secret", "out_rel", "dangling_out", "dangling_in", "loop1", "selfdir", "abs_in", "through_file",
		"dir/link_up/dir/link_up/in", "dot/dot/file.txt", "dir/sub/up3", "sibling/o", "dir/sub/lexical",
		"dir/sub/lex_out", ".hidden/hl/sub", "dir/empty/to_root/in/../out_file", "file.txt/x", "missing/a/b"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	h, err := os.OpenRoot(fx.dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	f.Fuzz(func(t *testing.T, s string, follow bool) {
		p, err := canon.Parse(fx.set, "proj/"+s)
		if err != nil {
			wantKnownCode(t, err, "")
			return
		}
		tg, err := fx.x.Resolve(context.Background(), p, follow)
		kernel, kerr := kernelLookup(h, p.Rel, follow)
		if err != nil {
			wantKnownCode(t, err, fx.tmp)
			switch errcode.Of(err) {
			case errcode.PermissionDenied, errcode.FileNotFound, errcode.IOError:
			default:
				t.Fatalf("Resolve(%q): unexpected code: %v", p.Rel, err)
			}
			// Whatever Resolve refuses, os.Root does not reach either
			// (unless Resolve refused a path os.Root sees as missing).
			if kerr == nil {
				t.Fatalf("Resolve(%q, %v) = %v, but os.Root reaches %v", p.Rel, follow, err, kernel.Name())
			}
			return
		}
		if tg.Path.Root != p.Root {
			t.Fatalf("Resolve(%q) moved to root %q", p.Rel, tg.Path.Root.Mount)
		}
		segs := []string{}
		if tg.Path.Rel != "" {
			segs = strings.Split(tg.Path.Rel, "/")
		}
		for _, seg := range segs {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "\x00") {
				t.Fatalf("Resolve(%q) = %q: not a clean path", p.Rel, tg.Path.Rel)
			}
		}
		full := filepath.Join(fx.dir, filepath.FromSlash(tg.Path.Rel))
		if rel, err := filepath.Rel(fx.dir, full); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("Resolve(%q) = %q lies outside the root", p.Rel, tg.Path.Rel)
		}
		// Step by step, on the host: no component is a link (but a final
		// one when not following), every parent is a directory.
		cur := fx.dir
		var last fs.FileInfo
		for i, seg := range segs {
			cur = filepath.Join(cur, seg)
			fi, err := os.Lstat(cur)
			if errors.Is(err, fs.ErrNotExist) {
				if tg.Exists {
					t.Fatalf("Resolve(%q) = %q exists, but %s does not", p.Rel, tg.Path.Rel, cur)
				}
				if tg.ParentExists != (i == len(segs)-1) {
					t.Fatalf("Resolve(%q) = %q: ParentExists %v, but the first missing component is %d of %d",
						p.Rel, tg.Path.Rel, tg.ParentExists, i+1, len(segs))
				}
				last = nil
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			isLast := i == len(segs)-1
			if fi.Mode()&fs.ModeSymlink != 0 && (follow || !isLast) {
				t.Fatalf("Resolve(%q, %v) = %q: component %s is a symbolic link", p.Rel, follow, tg.Path.Rel, cur)
			}
			if !isLast && !fi.IsDir() {
				// Nothing exists below a file: the target must say so.
				if tg.Exists || tg.ParentExists {
					t.Fatalf("Resolve(%q) = %q exists, but component %s is not a directory", p.Rel, tg.Path.Rel, cur)
				}
				last = nil
				break
			}
			last = fi
		}
		if len(segs) == 0 {
			last, _ = os.Lstat(fx.dir)
		}
		if tg.Exists {
			if last == nil {
				t.Fatalf("Resolve(%q) = %q exists, but the host has nothing there", p.Rel, tg.Path.Rel)
			}
			if dev, ino := hostIdentity(last); ino != tg.Info.Ino || dev != tg.Info.Dev {
				t.Fatalf("Resolve(%q) = %q: another object than the host's", p.Rel, tg.Path.Rel)
			}
			if follow && tg.Info.Type == executor.TypeSymlink {
				t.Fatalf("Resolve(%q, true) = %q is a link", p.Rel, tg.Path.Rel)
			}
			// os.Root, following the same path, reaches the same object
			// (it allows only 8 links where Resolve allows 40).
			if kerr != nil && !errors.Is(kerr, syscall.ELOOP) {
				t.Fatalf("Resolve(%q, %v) = %q, but os.Root fails: %v", p.Rel, follow, tg.Path.Rel, kerr)
			}
			if kerr == nil {
				if !os.SameFile(kernel, last) {
					t.Fatalf("Resolve(%q, %v) = %q, but os.Root reaches another object", p.Rel, follow, tg.Path.Rel)
				}
			}
		} else if kerr == nil {
			t.Fatalf("Resolve(%q, %v) = %q does not exist, but os.Root reaches %s", p.Rel, follow, tg.Path.Rel, kernel.Name())
		}
		// Deterministic.
		again, err := fx.x.Resolve(context.Background(), p, follow)
		if err != nil || again.Path != tg.Path || again.Exists != tg.Exists {
			t.Fatalf("Resolve(%q) is not stable: %+v then %+v, %v", p.Rel, tg, again, err)
		}
		if !slices.Contains([]string{"", executor.TypeFile, executor.TypeDirectory, executor.TypeSymlink, executor.TypeOther}, tg.Info.Type) {
			t.Fatalf("type %q", tg.Info.Type)
		}
	})
}

// kernelLookup is what Go's os.Root reaches by rel: Stat follows links
// inside the root, Lstat leaves a final link alone.
func kernelLookup(h *os.Root, rel string, follow bool) (fs.FileInfo, error) {
	if rel == "" {
		rel = "."
	}
	if follow {
		return h.Stat(rel)
	}
	return h.Lstat(rel)
}
