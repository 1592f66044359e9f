// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package canon_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// fixture is a real set of roots over directories in a temporary directory:
//
//	<tmp>/home/user/project                mount "project"
//	<tmp>/home/user/project/vendor/lib     mount "vendored" (nested root, custom mount)
//	<tmp>/home/user/project2               mount "project2" (sibling root)
//	<tmp>/srv/data                         mount "data"     (unrelated root)
//
// and directories that are NOT roots, next to them, whose names share a
// prefix with a root: project_evil, project-x, projectX, project.bak,
// srv/data2, srv/data_evil, srv/data-x, srv/dataX.
type fixture struct {
	tmp      string // symlink-resolved temporary directory
	user     string // <tmp>/home/user, the parent of two roots, not a root
	set      *roots.Set
	project  roots.Root
	project2 roots.Root
	nested   roots.Root
	data     roots.Root
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	tmp, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range []string{
		"home/user/project/vendor/lib",
		"home/user/project/vendor/lib2",
		"home/user/project2",
		"home/user/project_evil",
		"home/user/project-x",
		"home/user/projectX",
		"home/user/project.bak",
		"srv/data",
		"srv/data2",
		"srv/data_evil",
		"srv/data-x",
		"srv/dataX",
	} {
		if err := os.MkdirAll(filepath.Join(tmp, filepath.FromSlash(d)), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	user := filepath.Join(tmp, "home", "user")
	// The nested root comes first on purpose: the longest root must win
	// whatever the order.
	set, err := roots.New([]roots.Spec{
		{Path: filepath.Join(user, "project", "vendor", "lib"), Mount: "vendored"},
		{Path: filepath.Join(user, "project"), Writable: true},
		{Path: filepath.Join(user, "project2")},
		{Path: filepath.Join(tmp, "srv", "data"), Mount: "data"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{tmp: tmp, user: user, set: set}
	f.project = mustMount(tb, set, "project")
	f.project2 = mustMount(tb, set, "project2")
	f.nested = mustMount(tb, set, "vendored")
	f.data = mustMount(tb, set, "data")
	return f
}

func mustMount(tb testing.TB, set *roots.Set, m string) roots.Root {
	tb.Helper()
	r, ok := set.ByMount(m)
	if !ok {
		tb.Fatalf("no mount %q in %+v", m, set.All())
	}
	return r
}

// abs is the absolute spelling of rel inside r.
func abs(r roots.Root, rel string) string {
	if rel == "" {
		return r.Path
	}
	return r.Path + "/" + rel
}

// mrel is the mount-relative spelling of rel inside r.
func mrel(r roots.Root, rel string) string {
	if rel == "" {
		return r.Mount
	}
	return r.Mount + "/" + rel
}

// uri is the raw (not percent-encoded) file URI of an absolute path.
func uri(absPath string) string { return "file://" + absPath }

// encodeAll percent-encodes every byte of p except "/".
func encodeAll(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			b.WriteByte('/')
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[p[i]>>4])
		b.WriteByte(hex[p[i]&15])
	}
	return b.String()
}

// parseCase is one row of a table: in is parsed against the fixture's set;
// code "" means the path must be accepted as Path{Root: <mount>, Rel: rel}.
type parseCase struct {
	name  string
	in    string
	code  errcode.Code
	mount string
	rel   string
}

func accept(name, in, mount, rel string) parseCase {
	return parseCase{name: name, in: in, mount: mount, rel: rel}
}

func reject(name, in string, code errcode.Code) parseCase {
	return parseCase{name: name, in: in, code: code}
}

func runCases(t *testing.T, set *roots.Set, tmp string, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := canon.Parse(set, c.in)
			if c.code != "" {
				if got := errcode.Of(err); got != c.code {
					t.Fatalf("Parse(%.200q) error = %v (code %q), want %s", c.in, err, got, c.code)
				}
				if got != (canon.Path{}) {
					t.Errorf("Parse(%.200q) returned %+v with its error, want the zero Path", c.in, got)
				}
				checkReason(t, c.in, err, tmp)
				return
			}
			if err != nil {
				t.Fatalf("Parse(%.200q) = %v, want mount %q rel %q", c.in, err, c.mount, c.rel)
			}
			want, ok := set.ByMount(c.mount)
			if !ok {
				t.Fatalf("bad case: no mount %q", c.mount)
			}
			if got.Root != want || got.Rel != c.rel {
				t.Fatalf("Parse(%.200q) = {%s %.200q}, want {%s %.200q}", c.in, got.Root.Mount, got.Rel, c.mount, c.rel)
			}
			checkPath(t, set, c.in, got)
		})
	}
}

// checkReason checks an error is a bare *errcode.Error whose reason is valid
// UTF-8, never echoes more than 64 bytes of the input, and never names a
// host directory.
func checkReason(tb testing.TB, in string, err error, tmp string) {
	tb.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		tb.Fatalf("Parse(%.200q) error %T %v is not an *errcode.Error", in, err, err)
	}
	if !utf8.ValidString(e.Reason) {
		tb.Errorf("reason %q is not valid UTF-8", e.Reason)
	}
	if e.Reason == "" {
		tb.Errorf("Parse(%.200q): empty reason", in)
	}
	if tmp != "" && strings.Contains(e.Reason, tmp) {
		tb.Errorf("reason %q names the host directory %q", e.Reason, tmp)
	}
	if len(e.Reason) > 256 {
		tb.Errorf("reason of %d bytes: %.300q", len(e.Reason), e.Reason)
	}
	// An echo of the input is quoted (and cut to 64 bytes, then "...");
	// outside the quotes the reason is fixed text. The quotes themselves may
	// match quotes in the input, so they are not counted.
	const maxEcho = 64
	rest := e.Reason
	if i, j := strings.IndexByte(rest, '"'), strings.LastIndexByte(rest, '"'); i >= 0 && j > i {
		if echo := strings.TrimSuffix(rest[i+1:j], "..."); len(echo) > maxEcho {
			tb.Fatalf("reason quotes %d bytes (more than %d): %q", len(echo), maxEcho, e.Reason)
		}
		rest = rest[:i] + rest[j+1:]
	}
	for i := 0; i+maxEcho < len(in); i++ {
		if w := in[i : i+maxEcho+1]; strings.Contains(rest, w) {
			tb.Fatalf("reason echoes %d+ bytes of the input (%q at offset %d): %q", maxEcho+1, w, i, e.Reason)
		}
	}
}

// checkPath holds for every accepted path: its root is in the set, Rel is
// clean, it stays inside the root and its mount-relative spelling parses
// back to the same Path.
func checkPath(tb testing.TB, set *roots.Set, in string, p canon.Path) {
	tb.Helper()
	found := false
	for _, r := range set.All() {
		if r == p.Root {
			found = true
		}
	}
	if !found {
		tb.Fatalf("Parse(%.200q): root %+v is not one of the set's roots", in, p.Root)
	}
	if len(p.Rel) > canon.MaxPathBytes {
		tb.Fatalf("Parse(%.200q): Rel is %d bytes", in, len(p.Rel))
	}
	if p.Rel != "" {
		for _, s := range strings.Split(p.Rel, "/") {
			if s == "" || s == "." || s == ".." {
				tb.Fatalf("Parse(%.200q): Rel %q has segment %q", in, p.Rel, s)
			}
			if len(s) > canon.MaxSegmentBytes {
				tb.Fatalf("Parse(%.200q): Rel has a %d-byte segment", in, len(s))
			}
		}
	}
	if !utf8.ValidString(p.Rel) {
		tb.Fatalf("Parse(%.200q): Rel %q is not valid UTF-8", in, p.Rel)
	}
	for i := 0; i < len(p.Rel); i++ {
		if c := p.Rel[i]; c < 0x20 || c == 0x7f || c == '\\' {
			tb.Fatalf("Parse(%.200q): Rel %q holds byte %#x", in, p.Rel, c)
		}
	}
	joined := filepath.Join(p.Root.Path, filepath.FromSlash(p.Rel))
	if p.Rel == "" {
		if joined != p.Root.Path {
			tb.Fatalf("Parse(%.200q): root path %q joins to %q", in, p.Root.Path, joined)
		}
	} else if !strings.HasPrefix(joined, strings.TrimSuffix(p.Root.Path, string(filepath.Separator))+string(filepath.Separator)) {
		tb.Fatalf("Parse(%.200q): %q lies outside root %q", in, joined, p.Root.Path)
	}
	if p.IsRoot() != (p.Rel == "") {
		tb.Fatalf("IsRoot() = %v for Rel %q", p.IsRoot(), p.Rel)
	}
	back, err := canon.Parse(set, p.MountPath())
	if err != nil || back != p {
		tb.Fatalf("Parse(%.200q) = %+v, but Parse(MountPath %.200q) = %+v, %v", in, p, p.MountPath(), back, err)
	}
}
