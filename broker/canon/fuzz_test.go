// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package canon_test

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// tmpToken in a fuzz input stands for the fixture's temporary directory, so
// that seeds (testdata/fuzz/FuzzParse) can spell absolute paths and URIs
// inside the roots although the directory differs on every run.
const tmpToken = "{T}"

// FuzzParse checks, for any input, that Parse either refuses it with
// INVALID_PATH or PERMISSION_DENIED (a bare *errcode.Error with a short,
// safe reason and a zero Path), or returns a Path whose root is one of the
// set's, whose Rel is clean and stays inside the root, which parses back to
// itself from its MountPath, which names the same file in its absolute and
// URI spellings, and which agrees with a lexical path.Clean of the input.
func FuzzParse(f *testing.F) {
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, raw string) {
		in := strings.ReplaceAll(raw, tmpToken, fx.tmp)
		p, err := canon.Parse(fx.set, in)
		if err != nil {
			if code := errcode.Of(err); code != errcode.InvalidPath && code != errcode.PermissionDenied {
				t.Fatalf("Parse(%q) = %v: code %q is neither INVALID_PATH nor PERMISSION_DENIED", in, err, code)
			}
			if p != (canon.Path{}) {
				t.Fatalf("Parse(%q) returned %+v with error %v", in, p, err)
			}
			checkReason(t, in, err, fx.tmp)
			return
		}
		checkPath(t, fx.set, in, p) // includes Parse(p.MountPath()) == p
		if len(in) > canon.MaxPathBytes {
			t.Fatalf("Parse accepted a %d-byte input", len(in))
		}

		// The same file in the other spellings is the same Path (nested
		// roots included: see TestNestedRootWinsInEverySpelling).
		file := filepath.Join(p.Root.Path, filepath.FromSlash(p.Rel))
		for _, again := range []string{file, roots.FileURI(file)} {
			if again == file && len(again) > canon.MaxPathBytes {
				continue // a long mount can make the absolute spelling the longer one
			}
			q, err := canon.Parse(fx.set, again)
			if err != nil {
				t.Fatalf("Parse(%q) = %+v but %q fails: %v", in, p, again, err)
			}
			if q != p {
				t.Fatalf("Parse(%q) = {%s %q} but %q = {%s %q}", in, p.Root.Mount, p.Rel, again, q.Root.Mount, q.Rel)
			}
		}

		// Lexical oracle: an accepted path never climbed above its root, so
		// path.Clean of the (decoded) input names the same file.
		switch {
		case strings.HasPrefix(in, "file:"):
			rest := strings.TrimPrefix(in, "file://")
			rest = strings.TrimPrefix(rest, "localhost")
			dec, err := url.PathUnescape(rest)
			if err != nil {
				t.Fatalf("Parse accepted %q, which net/url cannot unescape: %v", in, err)
			}
			if got := path.Clean(dec); got != file {
				t.Fatalf("Parse(%q) names %q, path.Clean of the decoded URI is %q", in, file, got)
			}
		case strings.HasPrefix(in, "/"):
			if got := path.Clean(in); got != file {
				t.Fatalf("Parse(%q) names %q, path.Clean is %q", in, file, got)
			}
		default:
			clean := strings.TrimPrefix(path.Clean("/"+in), "/")
			mount, rest, _ := strings.Cut(clean, "/")
			r, ok := fx.set.ByMount(mount)
			if !ok {
				t.Fatalf("Parse(%q) accepted it, but path.Clean gives %q, with no mount %q", in, clean, mount)
			}
			if got := filepath.Join(r.Path, filepath.FromSlash(rest)); got != file {
				t.Fatalf("Parse(%q) names %q, path.Clean names %q", in, file, got)
			}
		}
	})
}

// BenchmarkParse measures the three spellings of one file.
func BenchmarkParse(b *testing.B) {
	fx := newFixture(b)
	a := abs(fx.project, "src/pkg/internal/main.go")
	for _, bc := range []struct{ name, in string }{
		{"mount", "project/src/pkg/internal/main.go"},
		{"absolute", a},
		{"uri", roots.FileURI(a)},
		{"uri-encoded", "file://" + encodeAll(a)},
		{"traversal-denied", "project/src/../../project2/x"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				_, _ = canon.Parse(fx.set, bc.in)
			}
		})
	}
}

// TestFuzzSeeds checks that the seed corpus reaches what each seed is named
// for, so that a seed which no longer exercises its rule is noticed.
func TestFuzzSeeds(t *testing.T) {
	fx := newFixture(t)
	want := map[string]string{ // seed file -> "mount rel" or error code
		"absolute":                         "project src/main.py",
		"absolute_dotdot_sibling":          "PERMISSION_DENIED",
		"absolute_nested_root":             "vendored x",
		"absolute_sibling_prefix":          "PERMISSION_DENIED",
		"absolute_sibling_root":            "project2 x",
		"backslash":                        "INVALID_PATH",
		"control_chars":                    "INVALID_PATH",
		"dot_names":                        "project ..test/.../.hidden/a..b",
		"dotdot":                           "PERMISSION_DENIED",
		"dots_and_slashes":                 "project a/c",
		"empty":                            "INVALID_PATH",
		"encoded_everything":               "project x",
		"invalid_utf8":                     "INVALID_PATH",
		"mount_dotdot_sibling":             "PERMISSION_DENIED",
		"mount_relative":                   "project src/main.py",
		"mount_relative_nested_via_parent": "vendored x",
		"nested_mount_dotdot":              "PERMISSION_DENIED",
		"nul_byte":                         "INVALID_PATH",
		"path_4096":                        "project ",
		"path_4097":                        "INVALID_PATH",
		"segment_255_multibyte":            "project " + strings.Repeat("世", 85),
		"segment_256":                      "INVALID_PATH",
		"slash":                            "PERMISSION_DENIED",
		"unicode":                          "project 日本語/😀/é",
		"unknown_mount_255":                "PERMISSION_DENIED",
		"unrelated_root_escape":            "PERMISSION_DENIED",
		"uri":                              "project src/main.py",
		"uri_alone":                        "INVALID_PATH",
		"uri_decodes_forbidden":            "INVALID_PATH",
		"uri_encoded_dotdot_sibling":       "PERMISSION_DENIED",
		"uri_host":                         "INVALID_PATH",
		"uri_localhost_double_encoded":     "project a%20b",
		"uri_malformed_escape":             "INVALID_PATH",
		"uri_overlong":                     "INVALID_PATH",
		"uri_query_fragment":               "INVALID_PATH",
		"uri_relative":                     "INVALID_PATH",
		"uri_root_of_fs":                   "PERMISSION_DENIED",
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		exp, ok := want[e.Name()]
		if !ok {
			continue // a crasher the fuzzer added: FuzzParse replays it
		}
		seen++
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "go test fuzz v1\nstring(")
		lit, ok2 := strings.CutSuffix(lit, ")")
		raw, err := strconv.Unquote(lit)
		if !ok || !ok2 || err != nil {
			t.Fatalf("%s: not a go test fuzz v1 string: %v", e.Name(), err)
		}
		p, err := canon.Parse(fx.set, strings.ReplaceAll(raw, tmpToken, fx.tmp))
		got := p.Root.Mount + " " + p.Rel
		if err != nil {
			got = string(errcode.Of(err))
		}
		if !slices.Contains(strings.Split(exp, "|"), got) {
			t.Errorf("seed %s: got %q, want %q", e.Name(), got, exp)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d named seeds in %s", seen, len(want), dir)
	}
}
