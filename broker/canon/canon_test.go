// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package canon_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

const (
	invalid = errcode.InvalidPath
	denied  = errcode.PermissionDenied
)

// seg returns a valid UTF-8 segment of exactly n bytes, mixing 1- to 4-byte
// runes so that limits are seen to count bytes, not runes.
func seg(n int) string {
	runes := []string{"世", "é", "😀", "a"}
	var b strings.Builder
	for i := 0; n-b.Len() >= 4; i++ {
		b.WriteString(runes[i%len(runes)])
	}
	for b.Len() < n {
		b.WriteByte('z')
	}
	return b.String()
}

// longPath returns prefix followed by "/"-separated multi-byte segments, of
// exactly total bytes, no segment over 255 bytes and no trailing slash.
func longPath(prefix string, total int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for total-b.Len() > 256 {
		b.WriteString("/" + seg(200))
	}
	if rem := total - b.Len(); rem >= 2 {
		b.WriteString("/" + seg(rem-1))
	}
	if b.Len() != total {
		panic(fmt.Sprintf("longPath(%d) built %d bytes", total, b.Len()))
	}
	return b.String()
}

// TestParseThreeSpellingsAgree: mount-relative, absolute and file URI
// spellings (raw, file://localhost/, percent-encoded by roots.FileURI and
// with every byte encoded) all give the very same Path.
func TestParseThreeSpellingsAgree(t *testing.T) {
	f := newFixture(t)
	rels := []string{
		"",
		"src/main.py",
		"a/b/c.txt",
		"ünïcödé/日本語/😀.txt",
		"with space/x y",
		".hidden/..test/.../a..b",
		"100%/a?b/c#d/e;f,g=h&i+j@k:l",
	}
	for _, r := range []roots.Root{f.project, f.project2, f.nested, f.data} {
		for _, rel := range rels {
			want := canon.Path{Root: r, Rel: rel}
			a := abs(r, rel)
			spellings := map[string]string{
				"mount":               mrel(r, rel),
				"mount trailing /":    mrel(r, rel) + "/",
				"absolute":            a,
				"absolute trailing /": a + "/",
				"FileURI":             roots.FileURI(a),
				"localhost FileURI":   "file://localhost" + strings.TrimPrefix(roots.FileURI(a), "file://"),
				"every byte encoded":  "file://" + encodeAll(a),
			}
			if !strings.ContainsAny(a, "%?#") {
				spellings["raw URI"] = uri(a)
				spellings["raw localhost URI"] = "file://localhost" + a
			}
			for kind, in := range spellings {
				got, err := canon.Parse(f.set, in)
				if err != nil || got != want {
					t.Errorf("%s %q: Parse = {%s %q}, %v; want {%s %q}", kind, in, got.Root.Mount, got.Rel, err, r.Mount, rel)
				}
			}
		}
	}
	// The root itself, file://localhost/ form included.
	for _, in := range []string{"project", "project/", uri(f.project.Path), "file://localhost" + f.project.Path, "file://localhost" + f.project.Path + "/", f.project.Path} {
		got, err := canon.Parse(f.set, in)
		if err != nil || got != (canon.Path{Root: f.project}) || !got.IsRoot() {
			t.Errorf("Parse(%q) = %+v, %v; want the root itself", in, got, err)
		}
	}
}

// TestParsePercentDecoding: a file URI is percent-decoded exactly once, and
// only a file URI is decoded; ".." that decoding produces is applied
// lexically like any other.
func TestParsePercentDecoding(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	runCases(t, f.set, f.tmp, []parseCase{
		accept("%2520 decodes once to %20", uri(p+"/a%2520b"), "project", "a%20b"),
		accept("%25 is a percent sign", uri(p+"/100%25"), "project", "100%"),
		accept("%252e%252e stays literal", uri(p+"/%252e%252e"), "project", "%2e%2e"),
		accept("%20 is a space", uri(p+"/a%20b"), "project", "a b"),
		accept("lower and upper hex", uri(p+"/%c3%A9t%C3%a9"), "project", "été"),
		accept("%3F and %23 are name characters", uri(p+"/a%3Fb%23c"), "project", "a?b#c"),
		accept("%2e%2e applied lexically", uri(p+"/a/%2e%2e/b"), "project", "b"),
		accept("%2E%2E applied lexically", uri(p+"/a/b/%2E%2E/%2E%2E/c"), "project", "c"),
		accept(".%2e and %2e. are ..", uri(p+"/a/b/.%2e/%2e./c"), "project", "c"),
		accept("%2e is .", uri(p+"/%2e/a/%2E"), "project", "a"),
		accept("%2F is a separator", uri(p+"/a%2Fb"), "project", "a/b"),
		accept("encoded root prefix", "file://"+encodeAll(p)+"/x", "project", "x"),
		accept("encoded nested root prefix", "file://"+encodeAll(f.nested.Path)+"/x", "vendored", "x"),
		accept("%2F..%2F inside", uri(p+"/a%2Fb%2F%2e%2e%2Fc"), "project", "a/c"),
		reject("%2e%2e above root", uri(p+"/%2e%2e"), denied),
		reject("%2e%2e into sibling", uri(p+"/%2e%2e/project2/x"), denied),
		reject("%2F%2e%2e%2F into sibling", uri(p+"/a%2F%2e%2e%2F%2e%2e%2Fproject2"), denied),
		reject("%2e%2e%2f chain", uri(p+"/%2e%2e%2f%2e%2e%2fetc%2fpasswd"), denied),
		reject("encoded root then ..", "file://"+encodeAll(p+"/../project2/x"), denied),
		// Mount-relative and absolute spellings are never decoded.
		accept("mount-relative %2e%2e is a name", "project/%2e%2e", "project", "%2e%2e"),
		accept("mount-relative %2F is a name", "project/a%2Fb", "project", "a%2Fb"),
		accept("mount-relative lone %", "project/%", "project", "%"),
		accept("mount-relative %zz", "project/%zz", "project", "%zz"),
		accept("absolute %2e%2e is a name", p+"/%2e%2e", "project", "%2e%2e"),
		accept("absolute %00 is a name", p+"/%00", "project", "%00"),
		reject("mount-relative encoded mount", "%70roject/x", denied),
		// Malformed escapes.
		reject("lone % at end", uri(p+"/%"), invalid),
		reject("% then one hex digit", uri(p+"/%4"), invalid),
		reject("% then one hex digit mid-path", uri(p+"/%4/x"), invalid),
		reject("%zz", uri(p+"/%zz"), invalid),
		reject("%4g", uri(p+"/%4g"), invalid),
		reject("%g4", uri(p+"/%g4"), invalid),
		reject("%%", uri(p+"/%%"), invalid),
		reject("%+1", uri(p+"/%+1"), invalid),
		reject("%-1", uri(p+"/%-1"), invalid),
		reject("% 1", uri(p+"/% 1"), invalid),
		reject("%% then escape", uri(p+"/%%41"), invalid),
		reject("trailing %2", uri(p+"/a%2"), invalid),
		reject("malformed in root prefix", uri("/%zz"+p), invalid),
		reject("malformed after ..", uri(p+"/../%z"), invalid),
		reject("single hex digit %e", uri(p+"/%e"), invalid),
	})
}

// TestParseURIForm: only "file://" with an empty host or "localhost", no
// query, no fragment; decoding must not smuggle in what the raw rules forbid.
func TestParseURIForm(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	cases := []parseCase{
		reject("host", "file://evil/etc/passwd", invalid),
		reject("host before root path", "file://evil"+p+"/x", invalid),
		reject("host that starts with localhost", "file://localhostevil"+p, invalid),
		reject("localhost with port", "file://localhost:80"+p, invalid),
		reject("userinfo", "file://user@localhost"+p, invalid),
		reject("IP host", "file://127.0.0.1"+p, invalid),
		reject("encoded slash as host", "file://%2F"+p[1:], invalid),
		reject("localhost without path", "file://localhost", invalid),
		reject("empty authority without path", "file://", invalid),
		reject("query", uri(p+"/a?x=1"), invalid),
		reject("empty query", uri(p+"/a?"), invalid),
		reject("query on root", uri(p+"?"), invalid),
		reject("fragment", uri(p+"/a#frag"), invalid),
		reject("empty fragment", uri(p+"#"), invalid),
		reject("query in localhost form", "file://localhost"+p+"?q", invalid),
		reject("relative URI", "file:relative", invalid),
		reject("relative URI with path", "file:relative/path", invalid),
		reject("relative URI dot", "file:./project", invalid),
		reject("relative URI dotdot", "file:../project", invalid),
		reject("file: alone", "file:", invalid),
		reject("file:/ alone", "file:/", invalid),
		reject("single-slash URI", "file:"+p, invalid),
		reject("file:?", "file:?x", invalid),
		reject("file:#", "file:#x", invalid),
		// Decoding to what is forbidden raw.
		reject("%00", uri(p+"/a%00b"), invalid),
		reject("%00 at end", uri(p+"/a%00"), invalid),
		reject("%5C", uri(p+"/a%5Cb"), invalid),
		reject("%5c", uri(p+"/..%5c..%5cetc"), invalid),
		reject("%0A", uri(p+"/a%0Ab"), invalid),
		reject("%0d", uri(p+"/a%0db"), invalid),
		reject("%09", uri(p+"/a%09b"), invalid),
		reject("%1F", uri(p+"/a%1Fb"), invalid),
		reject("%7F", uri(p+"/a%7Fb"), invalid),
		reject("%FF", uri(p+"/a%FFb"), invalid),
		reject("%C0%AF overlong slash", uri(p+"/..%C0%AF..%C0%AFetc"), invalid),
		reject("%C0%AE overlong dot", uri(p+"/%C0%AE%C0%AE/x"), invalid),
		reject("%ED%A0%80 surrogate", uri(p+"/%ED%A0%80"), invalid),
		reject("%E4%B8 truncated", uri(p+"/%E4%B8"), invalid),
		reject("%80 lone continuation", uri(p+"/%80"), invalid),
		// Raw forbidden characters in a URI.
		reject("raw NUL in URI", uri(p+"/a\x00"), invalid),
		reject("raw backslash in URI", uri(p+`/a\b`), invalid),
		reject("raw newline in URI", uri(p+"/a\nb"), invalid),
		reject("raw invalid UTF-8 in URI", uri(p+"/a\xffb"), invalid),
		// Outside every root.
		reject("URI of /etc/passwd", "file:///etc/passwd", denied),
		reject("URI of /", "file:///", denied),
		reject("localhost URI of /", "file://localhost/", denied),
		reject("URI with doubled leading slash outside", "file:////etc/passwd", denied),
		// Scheme is matched exactly; other spellings are no mount.
		reject("upper-case scheme", "FILE://"+p, denied),
	}
	runCases(t, f.set, f.tmp, cases)
}

// TestParseForbiddenCharacters: empty, NUL, every ASCII control character,
// backslash anywhere and invalid UTF-8 are INVALID_PATH in every spelling
// and position, even where the path would otherwise be DENIED.
func TestParseForbiddenCharacters(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	cases := []parseCase{
		reject("empty", "", invalid),
		reject("backslash separator", `project\a`, invalid),
		reject("backslash leading", `\project`, invalid),
		reject("backslash trailing", `project/a\`, invalid),
		reject("backslash traversal", `project\..\project2`, invalid),
		reject("backslash traversal at start", `..\..\etc\passwd`, invalid),
		reject("backslash in mount", `proj\ect/a`, invalid),
		reject("backslash absolute", p+`\a`, invalid),
		reject("backslash outside", `\\server\share`, invalid),
		reject("backslash drive", `C:\Windows`, invalid),
	}
	bad := []struct{ name, s string }{
		{"invalid byte ff", "\xff"},
		{"invalid byte fe", "\xfe"},
		{"lone continuation", "\x80"},
		{"overlong slash", "\xc0\xaf"},
		{"overlong dot", "\xc0\xae"},
		{"surrogate", "\xed\xa0\x80"},
		{"truncated rune", "\xe4\xb8"},
		{"beyond U+10FFFF", "\xf4\x90\x80\x80"},
		{"NUL", "\x00"},
	}
	for c := 1; c < 0x20; c++ {
		bad = append(bad, struct{ name, s string }{fmt.Sprintf("control %#02x", c), string(rune(c))})
	}
	bad = append(bad, struct{ name, s string }{"DEL 0x7f", "\x7f"})
	for _, b := range bad {
		s := b.s
		for _, in := range []struct{ where, in string }{
			{"alone", s},
			{"before mount", s + "project/a"},
			{"inside mount", "proj" + s + "ect/a"},
			{"after mount", "project" + s},
			{"middle", "project/a" + s + "b"},
			{"own segment", "project/" + s + "/b"},
			{"end", "project/a" + s},
			{"unknown mount", "nomount" + s + "/x"},
			{"after ..", "project/../" + s},
			{"absolute middle", p + "/a" + s + "b"},
			{"absolute outside", "/etc/" + s},
			{"in root prefix", p[:len(p)-1] + s + "/x"},
			{"raw URI", uri(p + "/a" + s)},
			{"URI host", "file://" + s + p},
		} {
			cases = append(cases, reject(b.name+" "+in.where, in.in, invalid))
		}
	}
	runCases(t, f.set, f.tmp, cases)

	// Characters that are allowed: not ASCII control, not backslash.
	runCases(t, f.set, f.tmp, []parseCase{
		accept("space", "project/a b", "project", "a b"),
		accept("tilde and dollar", "project/~$HOME", "project", "~$HOME"),
		accept("colon", "project/C:", "project", "C:"),
		accept("quotes", `project/"'`+"`", "project", `"'`+"`"),
		accept("4-byte rune", "project/😀", "project", "😀"),
		accept("max rune", "project/\U0010FFFF", "project", "\U0010FFFF"),
		accept("U+FFFD", "project/\uFFFD", "project", "\uFFFD"),
	})
}

// TestParseLengthLimits: a segment may be 255 bytes, a path 4096 bytes
// (bytes, not runes), in every spelling; one byte more is INVALID_PATH.
func TestParseLengthLimits(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	if len(p) > 3000 {
		t.Skipf("temporary directory %q is too long for this test", p)
	}
	rel := func(s, prefix string) string { return strings.TrimPrefix(s, prefix+"/") }
	m4096 := longPath("project", 4096)
	a4096 := longPath(p, 4096)
	u4096 := "file://" + longPath(p, 4096-len("file://"))
	cases := []parseCase{
		accept("segment 255 ASCII", "project/"+strings.Repeat("a", 255), "project", strings.Repeat("a", 255)),
		reject("segment 256 ASCII", "project/"+strings.Repeat("a", 256), invalid),
		accept("segment 255 3-byte runes", "project/"+strings.Repeat("世", 85), "project", strings.Repeat("世", 85)),
		reject("segment 256 3-byte runes", "project/"+strings.Repeat("世", 85)+"a", invalid),
		accept("segment 255 mixed", "project/x/"+seg(255)+"/y", "project", "x/"+seg(255)+"/y"),
		reject("segment 256 mixed", "project/x/"+seg(256)+"/y", invalid),
		reject("segment 256 as mount", seg(256)+"/x", invalid),
		reject("segment 256 removed by ..", "project/"+seg(256)+"/..", invalid),
		reject("segment 256 after ..", "project/../"+seg(256), invalid),
		accept("absolute segment 255", p+"/"+seg(255), "project", seg(255)),
		reject("absolute segment 256", p+"/"+seg(256), invalid),
		reject("absolute segment 256 outside roots", "/"+seg(256), invalid),
		accept("URI segment 255", uri(p+"/"+seg(255)), "project", seg(255)),
		reject("URI segment 256", uri(p+"/"+seg(256)), invalid),
		accept("URI encoded segment decodes to 255", uri(p+"/"+encodeAll(seg(255))), "project", seg(255)),
		reject("URI encoded segment decodes to 256", uri(p+"/"+encodeAll(seg(256))), invalid),

		accept("mount-relative 4096", m4096, "project", rel(m4096, "project")),
		reject("mount-relative 4097", longPath("project", 4097), invalid),
		accept("absolute 4096", a4096, "project", rel(a4096, p)),
		reject("absolute 4097", longPath(p, 4097), invalid),
		accept("URI 4096", u4096, "project", rel(strings.TrimPrefix(u4096, "file://"), p)),
		reject("URI whose path is 4097 bytes", uri(longPath(p, 4097)), invalid),
		accept("4096 of dot segments", "project"+strings.Repeat("/.", (4096-7)/2)+"/", "project", ""),
		reject("4097 of dot segments", "project"+strings.Repeat("/.", (4096-7)/2)+"//", invalid),
		accept("4096 of slashes", "project"+strings.Repeat("/", 4096-7), "project", ""),
		reject("4097 of slashes", "project"+strings.Repeat("/", 4097-7), invalid),
		reject("1 MiB", "project/"+strings.Repeat("a/", 1<<19), invalid),
		reject("4097 outside roots", "/"+longPath("nowhere", 4096), invalid),
		reject("4097 unknown mount", longPath("nowhere", 4097), invalid),
	}
	for _, c := range cases {
		if c.code == "" && len(c.in) != 4096 && strings.Contains(c.name, "4096") {
			t.Fatalf("bad case %s: %d bytes", c.name, len(c.in))
		}
		if c.code != "" && strings.HasSuffix(c.name, "4097") && len(c.in) != 4097 {
			t.Fatalf("bad case %s: %d bytes", c.name, len(c.in))
		}
	}
	runCases(t, f.set, f.tmp, cases)
}

// TestParseDotsAndSlashes: "." and empty segments vanish, ".." is applied
// lexically inside the mount, and names made of dots that are not exactly
// "." or ".." are ordinary names.
func TestParseDotsAndSlashes(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	cases := []parseCase{
		accept("dot segment", "project/./a", "project", "a"),
		accept("trailing dot", "project/a/.", "project", "a"),
		accept("leading dot", "./project/a", "project", "a"),
		accept("leading dots and slashes", "././/./project/a", "project", "a"),
		accept("repeated slashes", "project//a///b////", "project", "a/b"),
		accept("trailing slash", "project/a/", "project", "a"),
		accept("root trailing slash", "project/", "project", ""),
		accept("root dot", "project/.", "project", ""),
		accept("back to root", "project/a/..", "project", ""),
		accept("back to root trailing slash", "project/a/../", "project", ""),
		accept("dotdot inside", "project/a/b/../c", "project", "a/c"),
		accept("dotdot twice inside", "project/a/b/c/../../d", "project", "a/d"),
		accept("dot and dotdot mixed", "project/a/./b/./../c/.", "project", "a/c"),
		accept("down and up repeatedly", "project/a/../b/../c/../d", "project", "d"),
		accept("nested mount dotdot inside", "vendored/a/../b", "vendored", "b"),
		accept("name ..test", "project/..test", "project", "..test"),
		accept("name ...", "project/...", "project", "..."),
		accept("name ....", "project/....", "project", "...."),
		accept("name .hidden", "project/.hidden", "project", ".hidden"),
		accept("name a..b", "project/a..b", "project", "a..b"),
		accept("name a..", "project/a..", "project", "a.."),
		accept("name ..a", "project/..a", "project", "..a"),
		accept("name .. with space", "project/.. /x", "project", ".. /x"),
		accept("name . with space", "project/. /x", "project", ". /x"),
		accept("name ..test then ..", "project/..test/..", "project", ""),
		accept("name ... then ..", "project/a/.../..", "project", "a"),
		accept("two-dot leader is a name", "project/\u2025", "project", "\u2025"),
		accept("full-width dots are a name", "project/\uff0e\uff0e", "project", "\uff0e\uff0e"),
		accept("absolute dot segments", p+"/./a//b/.", "project", "a/b"),
		accept("absolute dotdot inside", p+"/a/../b", "project", "b"),
		accept("absolute back to root", p+"/a/..", "project", ""),
		accept("absolute doubled leading slash", "/"+p, "project", ""),
		accept("absolute slashes inside root prefix", strings.ReplaceAll(p, "/", "//")+"//x", "project", "x"),
		accept("absolute dots inside root prefix", strings.ReplaceAll(p, "/", "/./")+"/x", "project", "x"),
		accept("URI dot segments", uri(p+"/./a//b/"), "project", "a/b"),
		accept("URI dotdot inside", uri(p+"/a/b/../../c"), "project", "c"),
		accept("URI names of dots", uri(p+"/..test/.../.hidden/a..b"), "project", "..test/.../.hidden/a..b"),
		reject("dot alone", ".", invalid),
		reject("dot slash", "./", invalid),
		reject("dots and slashes only", "././/.", invalid),
		reject("slash alone", "/", denied),
		reject("slashes only", "///", denied),
		reject("slash dot", "/./", denied),
	}
	runCases(t, f.set, f.tmp, cases)
}

// TestParseTraversal: a ".." that would climb above the mount's directory
// is PERMISSION_DENIED in every spelling and at every depth, and is never
// resolved into a sibling mount, not even back into the same mount.
func TestParseTraversal(t *testing.T) {
	f := newFixture(t)
	p, p2, n, d := f.project.Path, f.project2.Path, f.nested.Path, f.data.Path
	cases := []parseCase{
		reject("dotdot alone", "..", denied),
		reject("dotdot slash", "../", denied),
		reject("leading dotdot", "../project", denied),
		reject("leading dotdot to a file", "../project/a", denied),
		reject("leading dotdots", "../../etc/passwd", denied),
		reject("dot then dotdot", "./../project/x", denied),
		reject("mount dotdot", "project/..", denied),
		reject("mount dotdot slash", "project/../", denied),
		reject("mount dotdot dot", "project/../.", denied),
		reject("depth 1", "project/a/../..", denied),
		reject("depth 1 trailing slash", "project/a/../../", denied),
		reject("depth 3", "project/a/b/c/../../../..", denied),
		reject("into sibling mount", "project/../project2/x", denied),
		reject("into sibling mount root", "project/../project2", denied),
		reject("back into same mount", "project/../project/x", denied),
		reject("from sibling into project", "project2/../project/x", denied),
		reject("deep into sibling", "project/a/b/../../../project2", denied),
		reject("into non-root sibling", "project/../project_evil/x", denied),
		reject("to parent directory", "project/../../user/project/x", denied),
		reject("through dot", "project/./../x", denied),
		reject("through slashes", "project//../x", denied),
		reject("dotdot dotdot", "project/../..", denied),
		reject("nested mount up", "vendored/..", denied),
		reject("nested mount into parent root", "vendored/../../../project/x", denied),
		reject("nested mount into lib2", "vendored/../lib2", denied),
		reject("unrelated mount up", "data/../../etc/passwd", denied),
		reject("many dotdots", "project/a/"+strings.Repeat("../", 100)+"etc", denied),

		reject("absolute dotdot", p+"/..", denied),
		reject("absolute dotdot slash", p+"/../", denied),
		reject("absolute into sibling", p+"/../project2/x", denied),
		reject("absolute into sibling root", p+"/../project2", denied),
		reject("absolute depth 1 into sibling", p+"/a/../../project2/x", denied),
		reject("absolute back into same root", p+"/../project/x", denied),
		reject("absolute into non-root sibling", p+"/../project_evil/x", denied),
		reject("absolute sibling to project", p2+"/../project/x", denied),
		reject("absolute unrelated to project", d+"/../../home/user/project/x", denied),
		reject("absolute up to /etc", p+"/"+strings.Repeat("../", 40)+"etc/passwd", denied),
		reject("absolute leading dotdot", "/.."+p, denied),
		reject("absolute leading dotdot alone", "/..", denied),
		reject("absolute dotdot before root prefix", f.user+"/../user/project/x", denied),
		reject("absolute nested root up", n+"/..", denied),
		// Conservative by design: the longest root is chosen before ".." is
		// applied, so climbing out of a nested root is refused even where the
		// result would lie in the enclosing root.
		reject("absolute nested root up into enclosing root", n+"/../x", denied),

		reject("URI dotdot", uri(p+"/.."), denied),
		reject("URI into sibling", uri(p+"/../project2/x"), denied),
		reject("URI depth 1 into sibling", uri(p+"/a/../../project2/x"), denied),
		reject("URI localhost into sibling", "file://localhost"+p+"/../project2/x", denied),
		reject("URI encoded into sibling", uri(p+"/%2E%2E/project2/x"), denied),
		reject("URI leading dotdot", uri("/.."+p), denied),
		reject("URI up to /etc", uri(p+"/../../../../../../../../etc/passwd"), denied),
		reject("FileURI into sibling", roots.FileURI(p+"/../project2/x"), denied),
	}
	runCases(t, f.set, f.tmp, cases)
}

// TestParseOutsideRoots: absolute paths and URIs outside every root,
// sibling-prefix names included, and unknown mounts are PERMISSION_DENIED.
func TestParseOutsideRoots(t *testing.T) {
	f := newFixture(t)
	p, d := f.project.Path, f.data.Path
	var cases []parseCase
	outside := map[string]string{
		"project_evil":         f.user + "/project_evil",
		"project_evil file":    f.user + "/project_evil/x",
		"project-x":            f.user + "/project-x/x",
		"projectX":             f.user + "/projectX",
		"project.bak":          f.user + "/project.bak/x",
		"project space":        p + " /x",
		"project unicode":      p + "é/x",
		"project prefix":       p[:len(p)-1],
		"project prefix file":  p[:len(p)-1] + "/x",
		"data2":                d + "2",
		"data2 file":           d + "2/x",
		"data_evil":            d + "_evil/x",
		"data-x":               d + "-x",
		"dataX":                d + "X/x",
		"data trailing char":   d + "~",
		"data prefix":          d[:len(d)-1],
		"parent of roots":      f.user,
		"parent of roots /":    f.user + "/",
		"parent of data":       filepath.Dir(d),
		"temporary directory":  f.tmp,
		"a file beside roots":  f.user + "/notes.txt",
		"/etc/passwd":          "/etc/passwd",
		"/tmp":                 "/tmp",
		"relative-looking abs": "/project/x",
		"mount as abs":         "/project",
		"upper-case root":      strings.ToUpper(p),
	}
	for name, a := range outside {
		cases = append(cases,
			reject("absolute "+name, a, denied),
			reject("URI "+name, uri(a), denied),
			reject("localhost URI "+name, "file://localhost"+a, denied),
			reject("FileURI "+name, roots.FileURI(a), denied),
		)
	}
	// A sibling that is itself a root resolves to that root, not to the
	// root whose name is its prefix.
	cases = append(cases,
		accept("project2 is its own root", f.project2.Path+"/x", "project2", "x"),
		accept("project2 URI is its own root", uri(f.project2.Path), "project2", ""),
		accept("nested lib2 is inside project", p+"/vendor/lib2/x", "project", "vendor/lib2/x"),
		accept("nested prefix lib is inside project", p+"/vendor/li", "project", "vendor/li"),
	)
	for _, m := range []string{
		"project_evil/x", "projectX", "project-x/x", "Project/x", "PROJECT", "proj/x",
		"project2x/x", "project /x", " project/x", "project:/x", "lib/x", "vendor/lib/x",
		"home/user/project/x", strings.TrimPrefix(p, "/") + "/x", "C:/x", "file/x",
		"~/x", "...", "..project/x", "%70roject",
	} {
		cases = append(cases, reject("unknown mount "+m, m, denied))
	}
	runCases(t, f.set, f.tmp, cases)

	// No roots at all.
	for _, set := range []*roots.Set{nil, mustSet(t)} {
		for _, in := range []string{"project/x", p + "/x", uri(p), "/", ".."} {
			if _, err := canon.Parse(set, in); errcode.Of(err) != denied {
				t.Errorf("empty set: Parse(%q) = %v, want %s", in, err, denied)
			}
		}
		if _, err := canon.Parse(set, "a\x00"); errcode.Of(err) != invalid {
			t.Errorf("empty set: Parse(NUL) = %v, want %s", err, invalid)
		}
	}
}

func mustSet(tb testing.TB, specs ...roots.Spec) *roots.Set {
	tb.Helper()
	s, err := roots.New(specs)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestParseNestedRoots: an absolute path or URI inside a nested root picks
// the nested (longest) root, whatever the order of the roots.
func TestParseNestedRoots(t *testing.T) {
	f := newFixture(t)
	n, p := f.nested.Path, f.project.Path
	cases := []parseCase{
		accept("absolute nested root", n, "vendored", ""),
		accept("absolute nested file", n+"/x/y", "vendored", "x/y"),
		accept("absolute nested dotdot inside", n+"/x/../y", "vendored", "y"),
		accept("URI nested file", uri(n+"/x"), "vendored", "x"),
		accept("localhost URI nested file", "file://localhost"+n+"/x", "vendored", "x"),
		accept("FileURI nested file", roots.FileURI(n+"/x"), "vendored", "x"),
		accept("absolute nested via dots", p+"/./vendor//lib/./x", "vendored", "x"),
		accept("absolute enclosing directory", p+"/vendor", "project", "vendor"),
		accept("absolute beside nested", p+"/vendor/libX/y", "project", "vendor/libX/y"),
		accept("mount-relative nested", "vendored/x", "vendored", "x"),
		reject("absolute nested above", n+"/../..", denied),
	}
	runCases(t, f.set, f.tmp, cases)

	// Reversed order: the enclosing root first.
	rev := mustSet(t,
		roots.Spec{Path: f.project.Path, Writable: true},
		roots.Spec{Path: f.nested.Path, Mount: "vendored"},
	)
	for _, in := range []string{n + "/x", uri(n + "/x")} {
		got, err := canon.Parse(rev, in)
		if err != nil || got.Root.Mount != "vendored" || got.Rel != "x" {
			t.Errorf("enclosing root first: Parse(%q) = %+v, %v; want vendored/x", in, got, err)
		}
	}
}

// TestParseFilesystemRoot: "/" as a root contains every absolute path, and
// ".." still cannot climb above it.
func TestParseFilesystemRoot(t *testing.T) {
	f := newFixture(t)
	set := mustSet(t,
		roots.Spec{Path: "/", Mount: "slash"},
		roots.Spec{Path: f.project.Path},
	)
	runCases(t, set, "", []parseCase{
		accept("slash itself", "/", "slash", ""),
		accept("slash URI", "file:///", "slash", ""),
		accept("file under slash", "/etc/passwd", "slash", "etc/passwd"),
		accept("mount-relative slash", "slash/etc", "slash", "etc"),
		accept("deeper root wins", f.project.Path+"/x", "project", "x"),
		reject("above slash", "/..", denied),
		reject("above slash via file", "/etc/../../x", denied),
		reject("mount above slash", "slash/..", denied),
	})
}

// TestPathHelpers: MountPath, IsRoot, Join and Parent agree with Parse and
// with one another.
func TestPathHelpers(t *testing.T) {
	f := newFixture(t)
	for _, in := range []string{"project/a/b/c.txt", "vendored/x/ü/😀", "data/one", "project2"} {
		p, err := canon.Parse(f.set, in)
		if err != nil {
			t.Fatal(err)
		}
		if p.MountPath() != in {
			t.Errorf("MountPath() = %q, want %q", p.MountPath(), in)
		}
		// Walk up to the root with Parent and back down with Join.
		cur := p
		for depth := 0; !cur.IsRoot(); depth++ {
			if depth > 10 {
				t.Fatalf("Parent never reaches the root from %q", in)
			}
			parent, name := cur.Parent()
			if name == "" || strings.Contains(name, "/") {
				t.Fatalf("%q.Parent() name = %q", cur.MountPath(), name)
			}
			if parent.Root != cur.Root {
				t.Fatalf("%q.Parent() changed root to %q", cur.MountPath(), parent.Root.Mount)
			}
			if got := parent.Join(name); got != cur {
				t.Fatalf("%q.Parent().Join(%q) = %q", cur.MountPath(), name, got.MountPath())
			}
			if want := parent.MountPath() + "/" + name; cur.MountPath() != want {
				t.Fatalf("MountPath %q, want %q", cur.MountPath(), want)
			}
			viaParse, err := canon.Parse(f.set, parent.MountPath()+"/"+name)
			if err != nil || viaParse != cur {
				t.Fatalf("Parse(parent + name) = %+v, %v; want %+v", viaParse, err, cur)
			}
			back, err := canon.Parse(f.set, cur.MountPath()+"/..")
			if err != nil || back != parent {
				t.Fatalf("Parse(%q/..) = %+v, %v; want the parent %+v", cur.MountPath(), back, err, parent)
			}
			cur = parent
		}
		if cur.Root != p.Root || cur.Rel != "" || cur.MountPath() != p.Root.Mount {
			t.Fatalf("walk up from %q ended at %+v", in, cur)
		}
		parent, name := cur.Parent()
		if parent != cur || name != "" {
			t.Errorf("root.Parent() = %+v, %q; want the root itself and \"\"", parent, name)
		}
		if j := cur.Join("x"); j.Rel != "x" || j.MountPath() != p.Root.Mount+"/x" || j.IsRoot() {
			t.Errorf("root.Join(x) = %+v", j)
		}
	}
}

// TestParseRoundTrip: for every path the other tables accept, the
// mount-relative, absolute and URI spellings of the result parse back to it.
func TestParseRoundTrip(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	inputs := []string{
		"project", "project/a/b", "project2/x", "data/.hidden", "vendored", "vendored/x/y",
		"project/100%/a?b#c", "project/%2e%2e", "project/ü 😀/..test",
		p + "/a/../b", uri(p + "/a%2520b"), f.nested.Path + "/z", uri(f.data.Path + "/q"),
		longPath("project", 4096),
	}
	for _, in := range inputs {
		got, err := canon.Parse(f.set, in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		checkPath(t, f.set, in, got)
		a := filepath.Join(got.Root.Path, got.Rel)
		for kind, again := range map[string]string{
			"MountPath": got.MountPath(),
			"FileURI":   roots.FileURI(a),
		} {
			if len(again) > canon.MaxPathBytes {
				continue // see TestURILengthCountsDecodedBytes
			}
			if back, err := canon.Parse(f.set, again); err != nil || back != got {
				t.Errorf("Parse(%q) = %+v but %s %q parses to %+v, %v", in, got, kind, again, back, err)
			}
		}
		if len(a) <= canon.MaxPathBytes {
			if back, err := canon.Parse(f.set, a); err != nil || back != got {
				t.Errorf("Parse(%q) = %+v but absolute %q parses to %+v, %v", in, got, a, back, err)
			}
		}
		if raw := "file://" + got.Root.Path + "/" + got.Rel; !strings.ContainsAny(got.Rel, "%?#") && len(raw) <= canon.MaxPathBytes {
			if back, err := canon.Parse(f.set, raw); err != nil || back != got {
				t.Errorf("Parse(%q) = %+v but raw URI %q parses to %+v, %v", in, got, raw, back, err)
			}
		}
	}
}

// TestParseErrorReasons: a reason never echoes more than 64 bytes of the
// input, never a host path, and is valid UTF-8.
func TestParseErrorReasons(t *testing.T) {
	f := newFixture(t)
	ascii := func(n int) string { // no repeats of any 65-byte window
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "m%04d", i)
		}
		return b.String()[:n]
	}
	long255 := ascii(255)
	cases := []parseCase{
		reject("4000-byte unknown mount", ascii(4000), invalid),
		reject("4000-byte unknown mount with file", ascii(4000)+"/x", invalid),
		reject("255-byte unknown mount", long255, denied),
		reject("255-byte unknown mount, 4000-byte path", longPath(long255, 4000), denied),
		reject("255-byte multibyte unknown mount", strings.Repeat("世", 85), denied),
		reject("mixed-rune unknown mount", seg(255), denied),
		reject("4000-byte absolute outside", "/"+longPath(long255, 3999), denied),
		reject("4000-byte URI outside", uri("/"+longPath(long255, 3992)), denied),
		reject("4000-byte URI with host", "file://"+longPath(long255, 3993), invalid),
		reject("long traversal", "project/"+longPath(long255, 3000)+strings.Repeat("/..", 40), denied),
		reject("long query", uri(f.project.Path+"/?"+ascii(3000)), invalid),
		reject("long malformed escape", uri(f.project.Path+"/"+ascii(3000)+"%zz"), invalid),
		reject("long with NUL at end", ascii(200)+"/"+ascii(3000)+"\x00", invalid),
	}
	runCases(t, f.set, f.tmp, cases)
	// The unknown mount is named, cut to 64 bytes.
	_, err := canon.Parse(f.set, long255+"/x")
	if reason := err.(*errcode.Error).Reason; !strings.Contains(reason, long255[:64]) {
		t.Errorf("reason %q does not name the first 64 bytes of the mount", reason)
	}
}

// TestNestedRootWinsInEverySpelling: a file inside a nested root belongs to
// the nested root whatever the spelling (it once got the outer root through
// its mount-relative spelling, which bypassed the nested root's settings).
func TestNestedRootWinsInEverySpelling(t *testing.T) {
	f := newFixture(t)
	want, err := canon.Parse(f.set, f.nested.Path+"/secret")
	if err != nil || want.Root.Mount != "vendored" {
		t.Fatalf("absolute: %+v, %v", want, err)
	}
	for _, in := range []string{"project/vendor/lib/secret", "project/vendor/lib2/../lib/secret"} {
		got, err := canon.Parse(f.set, in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = {%s %q}, %v; want {%s %q} like its absolute spelling",
				in, got.Root.Mount, got.Rel, err, want.Root.Mount, want.Rel)
		}
	}
	// Round trip of the brief: file:// + Root.Path + "/" + Rel == p.
	p, _ := canon.Parse(f.set, "project/vendor/lib/secret")
	back, err := canon.Parse(f.set, "file://"+p.Root.Path+"/"+p.Rel)
	if err != nil || back != p {
		t.Errorf("Parse(%q) = {%s %q} but its URI parses to {%s %q}", "project/vendor/lib/secret", p.Root.Mount, p.Rel, back.Root.Mount, back.Rel)
	}
	// Two roots on one directory would give one file two roots: refused.
	if _, err := roots.New([]roots.Spec{{Path: f.project.Path, Mount: "a"}, {Path: f.project.Path, Mount: "b"}}); err == nil {
		t.Error("roots.New accepted two roots on one directory")
	}
}

// TestURILengthCountsDecodedBytes: a file whose absolute path is within
// 4096 bytes is refused in URI spelling because the limit is applied to the
// raw, percent-encoded URI.
func TestURILengthCountsDecodedBytes(t *testing.T) {
	f := newFixture(t)
	p := f.project.Path
	for _, a := range []string{
		longPath(p, 4096), // "file://" alone pushes it over
		p + "/" + strings.Repeat("日本語 x/", 150) + "end", // ~1.9 KB of path, ~5 KB encoded
	} {
		want, err := canon.Parse(f.set, a)
		if err != nil {
			t.Fatalf("absolute %d bytes: %v", len(a), err)
		}
		for _, u := range []string{uri(a), roots.FileURI(a)} {
			got, err := canon.Parse(f.set, u)
			if err != nil || got != want {
				t.Errorf("URI of a %d-byte absolute path (%d bytes as a URI): %v", len(a), len(u), err)
			}
		}
	}
}

// TestLongMountKeepsRoundTrip: with a custom mount longer than its
// directory path, an accepted absolute path has a MountPath over 4096 bytes
// that Parse refuses: the broker would return a path it cannot take back.
func TestLongMountKeepsRoundTrip(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mount := strings.Repeat("m", 255)
	set := mustSet(t, roots.Spec{Path: dir, Mount: mount})
	for _, in := range []string{longPath(dir, 4096), uri(longPath(dir, 4096-7))} {
		p, err := canon.Parse(set, in)
		if err != nil {
			continue // refusing the input is a correct fix too
		}
		if back, err := canon.Parse(set, p.MountPath()); err != nil || back != p {
			t.Errorf("input of %d bytes accepted, MountPath of %d bytes: Parse = %v", len(in), len(p.MountPath()), err)
		}
	}
}
