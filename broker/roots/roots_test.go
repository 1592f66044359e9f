// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package roots

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFlag(t *testing.T) {
	cases := []struct {
		in       string
		path     string
		writable bool
		bad      bool
	}{
		{"/srv/project", "/srv/project", false, false},
		{"/srv/project:rw", "/srv/project", true, false},
		{"/srv/project:ro", "/srv/project", false, false},
		{"./rel:rw", "./rel", true, false},
		{"a:b", "a:b", false, false},
		{":rw", "", false, true},
		{"", "", false, true},
	}
	for _, c := range cases {
		spec, err := ParseFlag(c.in)
		if c.bad {
			var cerr *ConfigError
			if !errors.As(err, &cerr) || !strings.Contains(cerr.Error(), "--root") {
				t.Errorf("ParseFlag(%q) = %v, want a ConfigError naming --root", c.in, err)
			}
			continue
		}
		if err != nil || spec.Path != c.path || spec.Writable != c.writable {
			t.Errorf("ParseFlag(%q) = %+v, %v", c.in, spec, err)
		}
		if spec.Origin != "--root "+c.in {
			t.Errorf("ParseFlag(%q).Origin = %q", c.in, spec.Origin)
		}
	}
}

func TestNewResolvesRoots(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real project")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "proj")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := New([]Spec{
		{Path: link, Writable: true},
		{Path: other, Mount: "o", Name: "Other dir"},
	})
	if err != nil {
		t.Fatal(err)
	}
	realResolved, _ := filepath.EvalSymlinks(real)
	r, ok := set.ByMount("proj")
	if !ok {
		t.Fatalf("mount defaults to the base name the operator typed; have %+v", set.All())
	}
	if r.Path != realResolved {
		t.Errorf("Path = %q, want the symlink-resolved %q", r.Path, realResolved)
	}
	if want := "file://" + strings.ReplaceAll(filepath.ToSlash(realResolved), " ", "%20"); r.URI != want {
		t.Errorf("URI = %q, want %q", r.URI, want)
	}
	if r.Name != "proj" || !r.Writable {
		t.Errorf("root = %+v: name defaults to the mount, writable kept", r)
	}
	o, _ := set.ByMount("o")
	if o.Name != "Other dir" || o.Writable {
		t.Errorf("root o = %+v", o)
	}
	if set.Len() != 2 || set.All()[0].Mount != "proj" || set.All()[1].Mount != "o" {
		t.Errorf("order not kept: %+v", set.All())
	}
	if _, ok := set.ByMount("nope"); ok {
		t.Error("ByMount found a mount that does not exist")
	}
}

func TestNewRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := New([]Spec{{Path: "sub"}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, "sub"))
	if got := set.All()[0]; got.Path != want || got.Mount != "sub" {
		t.Errorf("root = %+v, want path %s mount sub", got, want)
	}
	// "." takes the working directory's name.
	set, err = New([]Spec{{Path: "."}})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.All()[0].Mount; got != filepath.Base(dir) {
		t.Errorf("mount of . = %q, want %q", got, filepath.Base(dir))
	}
}

func TestNewRejects(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(base, "a", "same")
	b := filepath.Join(base, "b", "same")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dangling := filepath.Join(base, "dangling")
	if err := os.Symlink(filepath.Join(base, "missing"), dangling); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		specs []Spec
		want  []string // substrings of the error
	}{
		{"missing dir", []Spec{{Path: filepath.Join(base, "nope"), Origin: "--root X"}}, []string{"--root X", "does not exist"}},
		{"dangling link", []Spec{{Path: dangling, Origin: "--root D"}}, []string{"--root D", "does not exist"}},
		{"a file", []Spec{{Path: file, Origin: "config c: /roots/0"}}, []string{"/roots/0", "not a directory"}},
		{"duplicate mount", []Spec{{Path: a, Origin: "--root A"}, {Path: b, Origin: "--root B"}},
			[]string{"--root B", `"same"`, "--root A"}},
		{"duplicate explicit mount", []Spec{{Path: a, Mount: "m", Origin: "one"}, {Path: file + "/..", Mount: "m", Origin: "two"}},
			[]string{"two"}},
		{"mount with slash", []Spec{{Path: a, Mount: "x/y", Origin: "o"}}, []string{"o", "not allowed"}},
		{"mount ..", []Spec{{Path: a, Mount: "..", Origin: "o"}}, []string{"not allowed"}},
		{"root of the filesystem", []Spec{{Path: "/", Origin: "--root /"}}, []string{"--root /", "set a mount"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.specs)
			var cerr *ConfigError
			if !errors.As(err, &cerr) {
				t.Fatalf("New = %v, want a ConfigError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateMount(t *testing.T) {
	good := []string{"project", "my project", "ünïcode", "a.b", "..test", "...", strings.Repeat("a", 255)}
	for _, m := range good {
		if err := ValidateMount(m); err != nil {
			t.Errorf("ValidateMount(%q) = %v", m, err)
		}
	}
	bad := []string{"", ".", "..", "a/b", `a\b`, "c:", "tab\there", "nul\x00", "del\x7f", "\xff", strings.Repeat("a", 256)}
	for _, m := range bad {
		if err := ValidateMount(m); err == nil {
			t.Errorf("ValidateMount(%q) accepted a bad mount", m)
		}
	}
}

func TestFileURI(t *testing.T) {
	cases := map[string]string{
		"/home/user/project": "file:///home/user/project",
		"/a b/c%d":           "file:///a%20b/c%25d",
		"/ünï":               "file:///%C3%BCn%C3%AF",
		"/x?y#z":             "file:///x%3Fy%23z",
	}
	for in, want := range cases {
		if got := FileURI(in); got != want {
			t.Errorf("FileURI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEqual(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	s1, _ := New([]Spec{{Path: d1, Mount: "a"}, {Path: d2, Mount: "b"}})
	s2, _ := New([]Spec{{Path: d1, Mount: "a"}, {Path: d2, Mount: "b"}})
	s3, _ := New([]Spec{{Path: d1, Mount: "a"}, {Path: d2, Mount: "b", Writable: true}})
	s4, _ := New([]Spec{{Path: d2, Mount: "b"}, {Path: d1, Mount: "a"}})
	if !s1.Equal(s2) {
		t.Error("identical sets are not equal")
	}
	if s1.Equal(s3) || s1.Equal(s4) || s1.Equal(nil) {
		t.Error("different sets are equal")
	}
	var empty *Set
	if !empty.Equal(&Set{}) || empty.Len() != 0 || empty.All() != nil {
		t.Error("a nil set must behave as empty")
	}
}

// A root's identity is the directory's as resolved, and a directory
// replaced at the same path makes a set that is no longer equal, so that a
// reload re-pins the root instead of keeping a handle on the old one.
func TestRootIdentity(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := New([]Spec{{Path: dir}})
	if err != nil {
		t.Fatal(err)
	}
	r := before.All()[0]
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := FileIDOf(fi); r.ID != want || (filepath.Separator == '/' && !r.ID.Known()) {
		t.Fatalf("root ID = %+v, want %+v (known)", r.ID, want)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	after, err := New([]Spec{{Path: dir}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID.Known() && before.Equal(after) {
		t.Error("a directory replaced at the root's path gives an equal set")
	}
}
