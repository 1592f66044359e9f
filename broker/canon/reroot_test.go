// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package canon

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// rerootBySplitting is Reroot as first written, splitting every path into a
// slice of segments: the definition the allocation-free Reroot must match.
func rerootBySplitting(set *roots.Set, p Path) Path {
	split := func(s string) []string {
		var out []string
		for _, seg := range strings.Split(s, "/") {
			if seg != "" {
				out = append(out, seg)
			}
		}
		return out
	}
	full := append(split(p.Root.Path), split(p.Rel)...)
	best, bestLen := p.Root, len(split(p.Root.Path))
	for _, r := range set.All() {
		prefix := split(r.Path)
		if len(prefix) > bestLen && len(prefix) <= len(full) && strings.Join(full[:len(prefix)], "\x00") == strings.Join(prefix, "\x00") {
			best, bestLen = r, len(prefix)
		}
	}
	if best == p.Root {
		return p
	}
	return Path{Root: best, Rel: strings.Join(full[bestLen:], "/")}
}

// TestRerootMatchesSplitting: Reroot agrees with the splitting definition on
// nested roots and on generated paths, unclean spellings included.
func TestRerootMatchesSplitting(t *testing.T) {
	tmp := t.TempDir()
	var specs []roots.Spec
	for mount, dir := range map[string]string{"top": "srv", "proj": "srv/proj", "vend": "srv/proj/vendor/lib",
		"projx": "srv/projx", "other": "data", "deep": "srv/proj/vendor/lib/deep"} {
		if err := os.MkdirAll(filepath.Join(tmp, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, roots.Spec{Path: filepath.Join(tmp, dir), Mount: mount})
	}
	set, err := roots.New(specs)
	if err != nil {
		t.Fatal(err)
	}
	all := set.All()
	byMount := func(m string) roots.Root {
		for _, r := range all {
			if r.Mount == m {
				return r
			}
		}
		t.Fatalf("no root %q", m)
		return roots.Root{}
	}
	segs := []string{"", "proj", "projx", "vendor", "lib", "deep", "x", "a b", "."}
	rng := rand.New(rand.NewPCG(1, 2))
	top, proj := byMount("top"), byMount("proj")
	cases := []Path{
		{Root: top, Rel: "proj/vendor/lib/x"},
		{Root: proj, Rel: "vendor/lib"},
		{Root: proj, Rel: "vendor/lib/deep/x/y"},
		{Root: proj, Rel: "vendor/libx"},
		{Root: top, Rel: "projx"},
		{Root: top, Rel: ""},
		{Root: byMount("other"), Rel: "srv/proj"},
		{Root: top, Rel: "proj//vendor/lib/"},
	}
	moved := 0
	for range 5000 {
		parts := make([]string, rng.IntN(7))
		for i := range parts {
			parts[i] = segs[rng.IntN(len(segs))]
		}
		cases = append(cases, Path{Root: all[rng.IntN(len(all))], Rel: strings.Join(parts, "/")})
	}
	for _, p := range cases {
		got, want := Reroot(set, p), rerootBySplitting(set, p)
		if got != want {
			t.Fatalf("Reroot(%q under %q) = %q under %q, want %q under %q", p.Rel, p.Root.Path, got.Rel, got.Root.Path, want.Rel, want.Root.Path)
		}
		if got.Root != p.Root {
			moved++
		}
	}
	if moved < 100 {
		t.Errorf("only %d of %d paths were rerooted: the cases do not exercise nesting", moved, len(cases))
	}
}

// TestReturnableMatchesParse: Returnable is true exactly when Parse takes the
// path's mount-relative form back as the same root and path.
func TestReturnableMatchesParse(t *testing.T) {
	dir := t.TempDir()
	set, err := roots.New([]roots.Spec{{Path: dir, Mount: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	long, err := roots.New([]roots.Spec{{Path: dir, Mount: strings.Repeat("L", 255)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*roots.Set{set, long} {
		root := s.All()[0]
		rels := []string{"", "a", "a/b", "a b/ü", "\uFFFD", ".hidden/x", "a\\b", "a\nb", "a\x7fb", "\xff", "a/\xc3",
			"./a", "a/./b", "a/../b", "..", "/a", "a/", "a//b", strings.Repeat("s", 255), strings.Repeat("s", 256),
			strings.Repeat("ab/", 1360) + "x", strings.Repeat("ab/", 1300) + strings.Repeat("c", 20)}
		for n := range 40 {
			// Around the length limit, for either mount.
			rels = append(rels, strings.Repeat("d/", 2020+n)+"e")
		}
		for _, rel := range rels {
			p := Path{Root: root, Rel: rel}
			got, err := Parse(s, p.MountPath())
			want := err == nil && got == p
			if Returnable(p) != want {
				t.Errorf("mount %d bytes, rel %q (%d bytes): Returnable = %v, Parse = %v, %v", len(root.Mount), rel, len(rel), !want, got, err)
			}
		}
	}
}
