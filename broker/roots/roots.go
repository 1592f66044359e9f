// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package roots turns the operator's root settings into an immutable set of
// roots: absolute, symlink-resolved directories, each with a file:// URI, a
// display name and a mount (the short handle that starts a mount-relative
// path), as docs/protocol.md section 3 defines them.
package roots

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// Spec is one root as the operator wrote it.
type Spec struct {
	// Path is the directory, absolute or relative to the working directory.
	Path string
	// Mount is the handle; empty means the directory's base name.
	Mount string
	// Name is the display name; empty means the mount.
	Name string
	// Writable marks a root whose files may be changed (read-only otherwise).
	Writable bool
	// Preapproved marks a root the operator approved for every server: no
	// consent grant is needed under it (writes still need a writable root).
	Preapproved bool
	// Origin names where the spec came from ("--root ./a", "config roots[1]"),
	// so that errors name the bad setting.
	Origin string
}

// Root is one resolved root.
type Root struct {
	// Mount is the root's handle, the first segment of mount-relative paths.
	Mount string `json:"mount"`
	// Name is the display name sent in roots/list.
	Name string `json:"name"`
	// Path is the absolute, symlink-resolved directory.
	Path string `json:"path"`
	// URI is "file://" + Path, percent-encoded.
	URI string `json:"uri"`
	// Writable is true when the operator made the root writable.
	Writable bool `json:"writable"`
	// Preapproved is true when the operator approved the root for every
	// server, so that no consent grant is needed under it.
	Preapproved bool `json:"preapproved"`
	// ID is the directory's identity when the root was resolved. Every
	// handle opened on the root later is checked against it, so that a root
	// replaced after start-up (by a link to another tree, say) is refused
	// rather than followed; a config reload resolves the root again.
	ID FileID `json:"-"`
}

// FileID identifies a directory or file on its file system: device and
// inode numbers. The zero FileID means unknown (a platform without them).
type FileID struct {
	Dev, Ino uint64
}

// Known reports whether id holds an identity.
func (id FileID) Known() bool { return id != FileID{} }

// Set is an immutable, ordered set of roots with unique mounts. A set made
// by Intersect may scope some of its roots to subtrees (Allows).
type Set struct {
	roots   []Root
	byMount map[string]int
	// within holds, by mount, the subtrees (slash-separated paths relative
	// to the root) a scoped root is narrowed to, sorted, none beneath
	// another (outermost); a root not in it is whole.
	within map[string][]string
}

// ConfigError is a root setting that cannot be used. Setting names it.
type ConfigError struct {
	Setting string
	Err     error
}

// Error implements the error interface.
func (e *ConfigError) Error() string { return e.Setting + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// ParseFlag parses a --root value: DIR, DIR:rw (writable) or DIR:ro.
func ParseFlag(value string) (Spec, error) {
	spec := Spec{Path: value, Origin: "--root " + value}
	switch {
	case strings.HasSuffix(value, ":rw"):
		spec.Path, spec.Writable = strings.TrimSuffix(value, ":rw"), true
	case strings.HasSuffix(value, ":ro"):
		spec.Path = strings.TrimSuffix(value, ":ro")
	}
	if spec.Path == "" {
		return Spec{}, &ConfigError{Setting: spec.Origin, Err: errors.New("empty directory")}
	}
	return spec, nil
}

// New resolves specs into a Set. Every root must be an existing directory and
// every mount unique and valid; the first problem is returned as a
// *ConfigError naming the spec's origin.
func New(specs []Spec) (*Set, error) {
	s := &Set{byMount: make(map[string]int, len(specs))}
	origins := make(map[string]string, len(specs))
	dirs := make(map[string]string, len(specs))
	for _, spec := range specs {
		r, err := resolve(spec)
		if err != nil {
			return nil, &ConfigError{Setting: originOf(spec), Err: err}
		}
		if prev, dup := origins[r.Mount]; dup {
			return nil, &ConfigError{Setting: originOf(spec),
				Err: fmt.Errorf("mount %q is already used by %s; give one of them another mount", r.Mount, prev)}
		}
		if prev, dup := dirs[r.Path]; dup {
			// One directory, two roots: which root's settings would apply?
			return nil, &ConfigError{Setting: originOf(spec),
				Err: fmt.Errorf("directory %s is already a root (%s)", r.Path, prev)}
		}
		dirs[r.Path] = originOf(spec)
		origins[r.Mount] = originOf(spec)
		s.byMount[r.Mount] = len(s.roots)
		s.roots = append(s.roots, r)
	}
	return s, nil
}

func originOf(spec Spec) string {
	if spec.Origin != "" {
		return spec.Origin
	}
	return "root " + spec.Path
}

func resolve(spec Spec) (Root, error) {
	if spec.Path == "" {
		return Root{}, errors.New("empty directory")
	}
	abs, err := filepath.Abs(spec.Path)
	if err != nil {
		return Root{}, fmt.Errorf("resolve directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Root{}, fmt.Errorf("directory %s does not exist", abs)
		}
		return Root{}, fmt.Errorf("resolve directory %s: %w", abs, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return Root{}, fmt.Errorf("stat %s: %w", real, err)
	}
	if !info.IsDir() {
		return Root{}, fmt.Errorf("%s is not a directory", real)
	}
	mount := spec.Mount
	if mount == "" {
		// The name the operator typed, not the link target's.
		mount = filepath.Base(abs)
		if mount == string(filepath.Separator) || mount == "." || filepath.VolumeName(abs)+string(filepath.Separator) == abs {
			return Root{}, fmt.Errorf("directory %s has no base name to use as its mount; set a mount", abs)
		}
	}
	if err := ValidateMount(mount); err != nil {
		return Root{}, err
	}
	name := spec.Name
	if name == "" {
		name = mount
	}
	return Root{Mount: mount, Name: name, Path: real, URI: FileURI(real), Writable: spec.Writable,
		Preapproved: spec.Preapproved, ID: FileIDOf(info)}, nil
}

// ValidateMount checks that m can be the first segment of a path: non-empty,
// valid UTF-8, at most 255 bytes, not "." or "..", without a slash,
// backslash, colon or control character.
func ValidateMount(m string) error {
	switch {
	case m == "":
		return errors.New("mount is empty")
	case len(m) > 255:
		return fmt.Errorf("mount %q is longer than 255 bytes", m)
	case m == "." || m == "..":
		return fmt.Errorf("mount %q is not allowed", m)
	case !utf8.ValidString(m):
		return fmt.Errorf("mount %q is not valid UTF-8", m)
	}
	for _, r := range m {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == ':' {
			return fmt.Errorf("mount %q contains %q, which is not allowed in a mount", m, r)
		}
	}
	return nil
}

// FileURI returns the file:// URI of an absolute path, percent-encoded, with
// forward slashes (file:///C:/dir on Windows).
func FileURI(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// All returns the roots in the order they were given. The slice must not be
// modified.
func (s *Set) All() []Root {
	if s == nil {
		return nil
	}
	return s.roots
}

// Len returns the number of roots.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.roots)
}

// ByMount returns the root with mount m.
func (s *Set) ByMount(m string) (Root, bool) {
	if s == nil {
		return Root{}, false
	}
	i, ok := s.byMount[m]
	if !ok {
		return Root{}, false
	}
	return s.roots[i], true
}

// Equal reports whether two sets hold the same roots in the same order,
// scoped to the same subtrees.
func (s *Set) Equal(o *Set) bool {
	a, b := s.All(), o.All()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] || !slices.Equal(s.Scope(a[i].Mount), o.Scope(b[i].Mount)) {
			return false
		}
	}
	return true
}

// Scope returns the subtrees (slash-separated, relative to the root) the
// root with mount m is scoped to by Intersect; nil when it is served whole.
func (s *Set) Scope(m string) []string {
	if s == nil {
		return nil
	}
	return s.within[m]
}

// Allows reports whether the path rel (clean, slash-separated, "" for the
// root itself) inside root r is in the set: r is one of its roots and, when
// the set scopes r to subtrees (Intersect), rel is one of them or lies
// beneath one, segment by segment ("sub" allows "sub/x", not "subx").
func (s *Set) Allows(r Root, rel string) bool {
	if s == nil {
		return false
	}
	i, ok := s.byMount[r.Mount]
	if !ok || s.roots[i].Path != r.Path {
		return false
	}
	subs, scoped := s.within[r.Mount]
	if !scoped {
		return true
	}
	return heldBy(subs, rel)
}

// Dirs returns the directories the set allows, in the roots' order: a whole
// root's directory, and the subtrees of a scoped one; a directory listed
// once (a nested root's may be another's subtree).
func (s *Set) Dirs() []string {
	var out []string
	seen := make(map[string]bool)
	for _, r := range s.All() {
		subs, scoped := s.within[r.Mount]
		if !scoped {
			subs = []string{""}
		}
		for _, sub := range subs {
			d := r.Path
			if sub != "" {
				d = filepath.Join(r.Path, filepath.FromSlash(sub))
			}
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}
