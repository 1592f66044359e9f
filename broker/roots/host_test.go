// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package roots

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/internal/testfs"
)

// mkdirs creates dirs under a new temporary directory and returns it,
// symlink-resolved.
func mkdirs(t *testing.T, dirs ...string) string {
	t.Helper()
	base := testfs.RealDir(t, t.TempDir())
	for _, d := range dirs {
		testfs.RealDir(t, filepath.Join(base, d))
	}
	return base
}

func hostRootsResult(t *testing.T, uris ...string) json.RawMessage {
	t.Helper()
	list := make([]map[string]string, 0, len(uris))
	for _, u := range uris {
		list = append(list, map[string]string{"uri": u})
	}
	b, err := json.Marshal(map[string]any{"roots": list})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mounts(s *Set) string {
	var out []string
	for _, r := range s.All() {
		out = append(out, r.Mount)
	}
	return strings.Join(out, ",")
}

// Host roots narrow the operator's, never widen them: an operator root stays
// when it is a host root or lies under one; one that contains a host root, or
// lies outside every host root, is left out; a host root outside every
// operator root adds nothing.
func TestNarrow(t *testing.T) {
	base := mkdirs(t, "ws/a/inner", "ws/b", "ws/bb", "other", "ws2")
	if err := os.Symlink(filepath.Join(base, "ws"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	op, err := New([]Spec{
		{Path: filepath.Join(base, "ws/a"), Writable: true, Preapproved: true},
		{Path: filepath.Join(base, "ws/b")},
		{Path: filepath.Join(base, "other"), Name: "Other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	uri := func(p string) string { return FileURI(filepath.Join(base, p)) }
	for _, tc := range []struct {
		name string
		host []string // nil: the host declared no roots
		want string
	}{
		{"no host roots", nil, "a,b,other"},
		{"host allows nothing", []string{}, ""},
		{"parent of two", []string{uri("ws")}, "a,b"},
		{"exact root", []string{uri("ws/b")}, "b"},
		{"inside a root withholds it", []string{uri("ws/a/inner")}, ""},
		{"sibling prefix is not a parent", []string{uri("ws/b") + "b"}, ""},
		{"outside every root adds nothing", []string{uri("ws2"), uri("ws/b")}, "b"},
		{"filesystem root", []string{"file:///"}, "a,b,other"},
		{"through a link", []string{uri("link")}, "a,b"},
		{"trailing slash and dots", []string{uri("ws") + "/./", uri("other") + "/../other"}, "a,b,other"},
		{"not file URIs", []string{"https://example.com/ws", "file://remote/" + base, "relative/dir"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *HostRoots
			if tc.host != nil {
				var skipped []string
				h, skipped, err = ParseHostRoots(hostRootsResult(t, tc.host...))
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "not file URIs" && len(skipped) != 3 {
					t.Errorf("skipped %q, want all three", skipped)
				}
			}
			got := Narrow(op, h)
			if mounts(got) != tc.want {
				t.Fatalf("Narrow = %q, want %q", mounts(got), tc.want)
			}
			for _, r := range got.All() {
				orig, _ := op.ByMount(r.Mount)
				if r != orig {
					t.Errorf("root %s changed: %+v, was %+v", r.Mount, r, orig)
				}
			}
			if tc.host == nil && got != op {
				t.Error("without host roots the operator's set must be returned as it is")
			}
		})
	}
}

func TestWithheld(t *testing.T) {
	base := mkdirs(t, "ws/a/inner", "ws/b", "other")
	op, err := New([]Spec{{Path: filepath.Join(base, "ws/a")}, {Path: filepath.Join(base, "ws/b")},
		{Path: filepath.Join(base, "other")}})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := ParseHostRoots(hostRootsResult(t, FileURI(filepath.Join(base, "ws/a/inner")),
		FileURI(filepath.Join(base, "ws/b"))))
	if err != nil {
		t.Fatal(err)
	}
	containing, outside := Withheld(op, h)
	if !slices.Equal(containing, []string{"a"}) || !slices.Equal(outside, []string{"other"}) {
		t.Errorf("Withheld = %q, %q; want [a], [other]", containing, outside)
	}
}

// A root removed after the operator named it is left out of a narrowed set;
// the others stay.
func TestNarrowDropsVanishedRoot(t *testing.T) {
	base := mkdirs(t, "ws/a", "ws/b", "other")
	op, err := New([]Spec{{Path: filepath.Join(base, "ws/a")}, {Path: filepath.Join(base, "ws/b")},
		{Path: filepath.Join(base, "other")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(base, "ws/b")); err != nil {
		t.Fatal(err)
	}
	h, _, _ := ParseHostRoots(hostRootsResult(t, FileURI(filepath.Join(base, "ws"))))
	if got := mounts(Narrow(op, h)); got != "a" {
		t.Errorf("Narrow = %q, want a", got)
	}
}

func TestParseHostRootsRejectsMalformedResult(t *testing.T) {
	for _, bad := range []string{`{}`, `{"roots":null}`, `[]`, `{"roots":"x"}`, `nope`} {
		if _, _, err := ParseHostRoots(json.RawMessage(bad)); err == nil {
			t.Errorf("ParseHostRoots(%s) succeeded", bad)
		}
	}
	h, _, err := ParseHostRoots(json.RawMessage(`{"roots":[]}`))
	if err != nil || h == nil || len(h.Dirs()) != 0 {
		t.Errorf("an empty list: %v, %v; want an empty set", h, err)
	}
}

// TestIntersect: the host's roots only narrow the operator's, and a host
// root inside an operator root narrows it to that subtree: the root stays
// (mount, name, mode, pre-approval and directory unchanged) and Allows
// admits only the subtree, segment by segment; a host root above an
// operator root keeps it whole; a disjoint, empty or sibling-prefix answer
// leaves nothing.
func TestIntersect(t *testing.T) {
	base := mkdirs(t, "ws/a/inner/x", "ws/a/innerx", "ws/b/n/deep", "ws/bb", "other", "ws2")
	op, err := New([]Spec{
		{Path: filepath.Join(base, "ws/a"), Writable: true, Preapproved: true},
		{Path: filepath.Join(base, "ws/b")},
		{Path: filepath.Join(base, "ws/b/n"), Writable: true},
		{Path: filepath.Join(base, "other"), Name: "Other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	uri := func(p string) string { return FileURI(filepath.Join(base, p)) }
	dir := func(p string) string { return filepath.Join(base, p) }
	type allow struct {
		mount, rel string
		want       bool
	}
	for _, tc := range []struct {
		name   string
		host   []string // nil: the host declared no roots
		mounts string
		dirs   []string
		allows []allow
	}{
		{"no host roots", nil, "a,b,n,other", []string{dir("ws/a"), dir("ws/b"), dir("ws/b/n"), dir("other")},
			[]allow{{"a", "", true}, {"other", "x", true}}},
		{"host allows nothing", []string{}, "", nil, []allow{{"a", "", false}, {"a", "inner", false}}},
		{"above two roots keeps them whole", []string{uri("ws")}, "a,b,n", []string{dir("ws/a"), dir("ws/b"), dir("ws/b/n")},
			[]allow{{"a", "", true}, {"b", "n/deep", true}, {"other", "", false}}},
		{"inside a root narrows it", []string{uri("ws/a/inner")}, "a", []string{dir("ws/a/inner")},
			[]allow{{"a", "inner", true}, {"a", "inner/x", true}, {"a", "", false}, {"a", "innerx", false},
				{"a", "innerx/y", false}, {"a", "other", false}, {"b", "", false}}},
		{"the outermost of nested host roots", []string{uri("ws/a/inner/x"), uri("ws/a/inner")}, "a", []string{dir("ws/a/inner")},
			[]allow{{"a", "inner/y", true}}},
		{"inside a nested root narrows both", []string{uri("ws/b/n/deep")}, "b,n", []string{dir("ws/b/n/deep")},
			[]allow{{"b", "n/deep/f", true}, {"n", "deep", true}, {"n", "", false}, {"b", "", false}, {"b", "n", false}}},
		{"disjoint", []string{uri("ws2")}, "", nil, []allow{{"a", "", false}, {"other", "", false}}},
		{"sibling prefix is not inside", []string{uri("ws/bb")}, "", nil, []allow{{"b", "", false}}},
		{"not file URIs", []string{"https://example.com/ws", "file://remote/" + base, "relative/dir"}, "", nil,
			[]allow{{"a", "", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *HostRoots
			if tc.host != nil {
				if h, _, err = ParseHostRoots(hostRootsResult(t, tc.host...)); err != nil {
					t.Fatal(err)
				}
			}
			got := Intersect(op, h)
			if mounts(got) != tc.mounts {
				t.Fatalf("Intersect = %q, want %q", mounts(got), tc.mounts)
			}
			if !slices.Equal(got.Dirs(), tc.dirs) {
				t.Errorf("Dirs = %q, want %q", got.Dirs(), tc.dirs)
			}
			for _, r := range got.All() {
				if orig, _ := op.ByMount(r.Mount); r != orig {
					t.Errorf("root %s changed: %+v, was %+v", r.Mount, r, orig)
				}
			}
			for _, a := range tc.allows {
				r, _ := op.ByMount(a.mount)
				if got.Allows(r, a.rel) != a.want {
					t.Errorf("Allows(%s, %q) = %v, want %v", a.mount, a.rel, !a.want, a.want)
				}
			}
			if tc.host == nil && got != op {
				t.Error("without host roots the operator's set must be returned as it is")
			}
		})
	}
}

// TestIntersectEqual: two intersections are equal only when they scope the
// same roots to the same subtrees.
func TestIntersectEqual(t *testing.T) {
	base := mkdirs(t, "ws/a/x", "ws/a/y")
	op, err := New([]Spec{{Path: filepath.Join(base, "ws/a")}})
	if err != nil {
		t.Fatal(err)
	}
	narrowed := func(dirs ...string) *Set {
		var uris []string
		for _, d := range dirs {
			uris = append(uris, FileURI(filepath.Join(base, d)))
		}
		h, _, err := ParseHostRoots(hostRootsResult(t, uris...))
		if err != nil {
			t.Fatal(err)
		}
		return Intersect(op, h)
	}
	if narrowed("ws/a/x").Equal(narrowed("ws/a/y")) || narrowed("ws/a/x").Equal(op) || !narrowed("ws/a/x").Equal(narrowed("ws/a/x")) ||
		!narrowed("ws").Equal(op) {
		t.Error("Equal does not tell scopes apart")
	}
}
