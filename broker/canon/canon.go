// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package canon turns a path as a server wrote it into a root and a clean,
// mount-relative path, or refuses it, following the rules of docs/protocol.md
// section 3. It is pure (no file system access), so that every rule can be
// fuzzed: a path it accepts always lies inside its root.
//
// Three spellings mean the same file:
//
//	project/src/main.py                    mount-relative (first segment = mount)
//	/home/user/project/src/main.py         absolute, inside a root
//	file:///home/user/project/src/main.py  file URI, no host, percent-decoded once
//
// "." segments and repeated slashes are dropped; ".." is applied lexically
// and may never climb above the root's directory (PERMISSION_DENIED: it is
// never resolved into a sibling mount). Symbolic links are not this
// package's concern: the executor resolves them through the root handle.
package canon

import (
	"strings"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// Limits of docs/protocol.md section 3.
const (
	MaxPathBytes    = 4096
	MaxSegmentBytes = 255
)

// Path is an accepted path: a root and a clean path relative to it.
type Path struct {
	// Root is the root the path lies in.
	Root roots.Root
	// Rel is the path inside the root: "" for the root itself, otherwise
	// slash-separated segments, none of them empty, ".", or "..".
	Rel string
}

// MountPath is the path as the broker returns it: mount-relative with
// forward slashes ("project" for the root itself, "project/src/main.py").
func (p Path) MountPath() string {
	if p.Rel == "" {
		return p.Root.Mount
	}
	return p.Root.Mount + "/" + p.Rel
}

// IsRoot reports whether p names a root itself.
func (p Path) IsRoot() bool { return p.Rel == "" }

// Join returns the path of name inside p (name must be one clean segment).
func (p Path) Join(name string) Path {
	if p.Rel == "" {
		return Path{Root: p.Root, Rel: name}
	}
	return Path{Root: p.Root, Rel: p.Rel + "/" + name}
}

// Parent returns the directory that holds p and p's last segment. For a root
// it returns p itself and "".
func (p Path) Parent() (Path, string) {
	if p.Rel == "" {
		return p, ""
	}
	i := strings.LastIndexByte(p.Rel, '/')
	if i < 0 {
		return Path{Root: p.Root}, p.Rel
	}
	return Path{Root: p.Root, Rel: p.Rel[:i]}, p.Rel[i+1:]
}

// Parse canonicalizes raw against the roots. Errors are *errcode.Error:
// INVALID_PATH for a malformed or unsafe spelling, PERMISSION_DENIED for a
// path outside every root or climbing out of its root.
//
// When roots nest, a path always belongs to the deepest root that holds it,
// whatever the spelling, so that the nested root's settings (read-only, say)
// cannot be bypassed by naming a file through the outer mount.
func Parse(set *roots.Set, raw string) (Path, error) {
	var (
		p   Path
		err error
	)
	switch {
	case strings.HasPrefix(raw, "file:"):
		// The URI may be longer than a path: its escapes take three bytes
		// each. The decoded path is held to the path limit.
		if err := checkChars(raw, maxURIBytes); err != nil {
			return Path{}, err
		}
		var decoded string
		if decoded, err = decodeFileURI(raw); err != nil {
			return Path{}, err
		}
		if !strings.HasPrefix(decoded, "/") {
			return Path{}, invalid("a file URI must hold an absolute path")
		}
		if err := checkChars(decoded, MaxPathBytes); err != nil {
			return Path{}, err
		}
		p, err = parseAbsolute(set, decoded)
	case strings.HasPrefix(raw, "/"):
		if err := checkChars(raw, MaxPathBytes); err != nil {
			return Path{}, err
		}
		p, err = parseAbsolute(set, raw)
	default:
		if err := checkChars(raw, MaxPathBytes); err != nil {
			return Path{}, err
		}
		p, err = parseMountRelative(set, raw)
	}
	if err != nil {
		return Path{}, err
	}
	p = Reroot(set, p)
	if len(p.MountPath()) > MaxPathBytes {
		// The broker must be able to take back every path it returns.
		return Path{}, invalid("the path, written from its mount, is longer than 4096 bytes")
	}
	return p, nil
}

// Returnable reports whether the broker may report p (a listed entry or a
// changed path, found on disk) to a server: whether its mount-relative form
// is one Parse accepts as p itself, so that the server can name it back. It
// is not when that form is longer than MaxPathBytes, or when a segment of
// p.Rel is empty, "." or "..", longer than MaxSegmentBytes, not valid UTF-8,
// or holds a control character or a backslash. (Which root Parse would
// place it under, when roots nest, is the caller's concern.) It allocates
// nothing: every listed entry is checked.
func Returnable(p Path) bool {
	if p.Rel == "" {
		return true // a root's mount, checked when the roots were made
	}
	if len(p.Root.Mount)+1+len(p.Rel) > MaxPathBytes || checkChars(p.Rel, MaxPathBytes) != nil {
		return false
	}
	for it := segmentsOf(p.Rel, ""); ; {
		seg, ok := it.next()
		if !ok {
			break
		}
		if len(seg) > MaxSegmentBytes || seg == "." || seg == ".." {
			return false
		}
	}
	// segmentsOf skips empty segments: a clean path has none.
	return !strings.HasPrefix(p.Rel, "/") && !strings.HasSuffix(p.Rel, "/") && !strings.Contains(p.Rel, "//")
}

// maxURIBytes bounds a file URI: the longest prefix and a path of
// MaxPathBytes with every byte percent-encoded.
const maxURIBytes = len("file://localhost") + 3*MaxPathBytes

// Reroot returns p under the deepest root of set that holds it (p itself
// when none is deeper). The executor's link resolution can land a path in a
// nested root; the broker reroots its result too. Paths are compared segment
// by segment (empty segments ignored), without allocating: every request's
// path goes through here twice.
func Reroot(set *roots.Set, p Path) Path {
	best, bestLen := p.Root, countSegments(p.Root.Path)
	for _, r := range set.All() {
		if n := countSegments(r.Path); n > bestLen && underSegments(p.Root.Path, p.Rel, r.Path) {
			best, bestLen = r, n
		}
	}
	if best == p.Root {
		return p
	}
	var rel strings.Builder
	it, i := segmentsOf(p.Root.Path, p.Rel), 0
	for seg, ok := it.next(); ok; seg, ok = it.next() {
		if i++; i <= bestLen {
			continue
		}
		if rel.Len() > 0 {
			rel.WriteByte('/')
		}
		rel.WriteString(seg)
	}
	return Path{Root: best, Rel: rel.String()}
}

// segmentIter yields the non-empty segments of one or two slash-separated
// paths, the first's then the second's.
type segmentIter struct{ cur, rest string }

// segmentsOf iterates over the segments of a, then those of b.
func segmentsOf(a, b string) segmentIter { return segmentIter{cur: a, rest: b} }

// next returns the next segment, or false when there is none.
func (it *segmentIter) next() (string, bool) {
	for {
		if it.cur == "" {
			if it.rest == "" {
				return "", false
			}
			it.cur, it.rest = it.rest, ""
			continue
		}
		seg := it.cur
		if i := strings.IndexByte(seg, '/'); i >= 0 {
			seg, it.cur = seg[:i], seg[i+1:]
		} else {
			it.cur = ""
		}
		if seg != "" {
			return seg, true
		}
	}
}

// countSegments is the number of non-empty segments of p.
func countSegments(p string) int {
	n := 0
	for it := segmentsOf(p, ""); ; n++ {
		if _, ok := it.next(); !ok {
			return n
		}
	}
}

// underSegments reports whether the segments of prefix are the first ones of
// the path made of dir's segments then rel's.
func underSegments(dir, rel, prefix string) bool {
	full, want := segmentsOf(dir, rel), segmentsOf(prefix, "")
	for {
		w, ok := want.next()
		if !ok {
			return true
		}
		if f, ok := full.next(); !ok || f != w {
			return false
		}
	}
}

// checkChars applies the spelling rules every form shares.
func checkChars(p string, maxBytes int) error {
	switch {
	case p == "":
		return invalid("the path is empty")
	case len(p) > maxBytes:
		return invalid("the path is longer than 4096 bytes")
	case !utf8.ValidString(p):
		return invalid("the path is not valid UTF-8")
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == 0:
			return invalid("the path contains a NUL byte")
		case c < 0x20 || c == 0x7f:
			return invalid("the path contains a control character")
		case c == '\\':
			return invalid("the path contains a backslash; use / as the separator")
		}
	}
	return nil
}

// decodeFileURI returns the path of a file URI: "file://" with an empty host
// (or "localhost"), no query or fragment, percent-decoded exactly once.
func decodeFileURI(raw string) (string, error) {
	rest, ok := strings.CutPrefix(raw, "file://")
	if !ok {
		return "", invalid(`a file URI must start with "file://"`)
	}
	if r, ok := strings.CutPrefix(rest, "localhost/"); ok {
		rest = "/" + r
	}
	if !strings.HasPrefix(rest, "/") {
		return "", invalid("a file URI must not name a host")
	}
	if strings.ContainsAny(rest, "?#") {
		return "", invalid("a file URI must not have a query or fragment; percent-encode ? and #")
	}
	var b strings.Builder
	b.Grow(len(rest))
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(rest) || !isHex(rest[i+1]) || !isHex(rest[i+2]) {
			return "", invalid("the file URI has a malformed percent-escape")
		}
		b.WriteByte(unhex(rest[i+1])<<4 | unhex(rest[i+2]))
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// segments splits p on "/", dropping empty and "." segments, and checks each
// segment's length. ".." segments are kept for the caller to apply.
func segments(p string) ([]string, error) {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if len(s) > MaxSegmentBytes {
			return nil, invalid("a path segment is longer than 255 bytes")
		}
		if s == "" || s == "." {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// parseMountRelative handles "mount/rest".
func parseMountRelative(set *roots.Set, raw string) (Path, error) {
	segs, err := segments(raw)
	if err != nil {
		return Path{}, err
	}
	if len(segs) == 0 {
		return Path{}, invalid("the path names no mount")
	}
	if segs[0] == ".." {
		return Path{}, denied("the path climbs above the mounts")
	}
	root, ok := set.ByMount(segs[0])
	if !ok {
		return Path{}, denied("the path is outside every root: no mount is named " + quoteShort(segs[0]))
	}
	return inside(root, segs[1:])
}

// parseAbsolute handles an absolute path, which must start with a root's
// directory, segment by segment. The longest matching root wins (roots may
// nest). ".." is applied only after the root's prefix, so it can never
// carry a path from one root into another.
func parseAbsolute(set *roots.Set, abs string) (Path, error) {
	segs, err := segments(abs)
	if err != nil {
		return Path{}, err
	}
	best, bestLen := roots.Root{}, -1
	for _, r := range set.All() {
		prefix, _ := segments(r.Path)
		if len(prefix) > bestLen && hasPrefix(segs, prefix) {
			best, bestLen = r, len(prefix)
		}
	}
	if bestLen < 0 {
		return Path{}, denied("the path is outside every root")
	}
	return inside(best, segs[bestLen:])
}

func hasPrefix(segs, prefix []string) bool {
	if len(prefix) > len(segs) {
		return false
	}
	for i := range prefix {
		if segs[i] != prefix[i] {
			return false
		}
	}
	return true
}

// inside applies ".." lexically to the segments below root.
func inside(root roots.Root, segs []string) (Path, error) {
	stack := make([]string, 0, len(segs))
	for _, s := range segs {
		if s == ".." {
			if len(stack) == 0 {
				return Path{}, denied("the path climbs above its root")
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, s)
	}
	return Path{Root: root, Rel: strings.Join(stack, "/")}, nil
}

// quoteShort quotes s for an error reason, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "") + "..."
	}
	return `"` + s + `"`
}

func invalid(reason string) error { return errcode.New(errcode.InvalidPath, reason) }

func denied(reason string) error { return errcode.New(errcode.PermissionDenied, reason) }
