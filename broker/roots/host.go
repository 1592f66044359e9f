// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package roots

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// The roots an MCP host declares (roots/list) only ever narrow the
// operator's: fsbroker wrap keeps the operator roots a host root covers
// whole (Narrow), fsbroker serve also keeps the part of an operator root a
// host root lies in (Intersect).

// HostRoots is the set of directories a host declared as its roots, as
// absolute, cleaned and (where they exist) symlink-resolved paths. A nil
// *HostRoots means the host declared none: nothing is narrowed. An empty one
// means the host allows nothing (or its roots are not known yet): no operator
// root is visible.
type HostRoots struct {
	dirs []string
}

// Dirs returns the host's directories, sorted.
func (h *HostRoots) Dirs() []string {
	if h == nil {
		return nil
	}
	return slices.Clone(h.dirs)
}

// Len returns the number of the host's directories.
func (h *HostRoots) Len() int {
	if h == nil {
		return 0
	}
	return len(h.dirs)
}

// Equal reports whether two host root sets hold the same directories.
func (h *HostRoots) Equal(o *HostRoots) bool {
	if (h == nil) != (o == nil) {
		return false
	}
	return h == nil || slices.Equal(h.dirs, o.dirs)
}

// MaxHostRoots is the most roots a host's roots/list answer may hold. An
// answer with more is refused whole (ParseHostRoots: ErrTooManyHostRoots),
// and its reader applies no root: nothing is accessible (fail closed), so
// that no host can make every request of the session resolve thousands of
// links or scan thousands of subtrees.
const MaxHostRoots = 1000

// ErrTooManyHostRoots is the error of ParseHostRoots for an answer with
// more than MaxHostRoots roots.
var ErrTooManyHostRoots = fmt.Errorf("the host's roots/list result holds more than %d roots", MaxHostRoots)

// ParseHostRoots reads the result of a roots/list request to the host:
// {"roots":[{"uri":"file:///...", "name":...}]}. Roots that are not local
// file:// URIs with an absolute path are skipped and reported in skipped
// (a host root can only narrow, so skipping one never widens anything).
// A result that is not shaped as roots/list says is an error, and so is
// one with more than MaxHostRoots roots (ErrTooManyHostRoots), before any
// of them is resolved.
func ParseHostRoots(result json.RawMessage) (h *HostRoots, skipped []string, err error) {
	var res struct {
		Roots *[]struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	if err := json.Unmarshal(result, &res); err != nil || res.Roots == nil {
		return nil, nil, errors.New(`the host's roots/list result has no "roots" array`)
	}
	if len(*res.Roots) > MaxHostRoots {
		return nil, nil, fmt.Errorf("%w (%d)", ErrTooManyHostRoots, len(*res.Roots))
	}
	h = &HostRoots{}
	for _, r := range *res.Roots {
		dir, err := hostRootDir(r.URI)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%.200q: %v", r.URI, err))
			continue
		}
		h.dirs = append(h.dirs, dir)
	}
	slices.Sort(h.dirs)
	h.dirs = slices.Compact(h.dirs)
	return h, skipped, nil
}

// hostRootDir turns a root URI into an absolute, clean, symlink-resolved
// directory path.
func hostRootDir(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", errors.New("not a URI")
	}
	if !strings.EqualFold(u.Scheme, "file") {
		return "", errors.New("not a file:// URI")
	}
	if u.Host != "" && !strings.EqualFold(u.Host, "localhost") {
		return "", errors.New("names a remote host")
	}
	p := u.Path
	if strings.ContainsRune(p, 0) {
		return "", errors.New("contains a NUL byte")
	}
	// file:///C:/dir on Windows.
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' {
		p = p[1:]
	}
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		return "", errors.New("not an absolute path")
	}
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p, nil
}

// covers reports whether dir is the directory root or one of its ancestors.
func covers(dir, root string) bool {
	if dir == root {
		return true
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(root, prefix)
}

// Narrow returns the operator's roots that the host's roots allow: an
// operator root stays when it is one of the host's directories or lies under
// one; every other operator root is left out, including one that merely
// contains a host directory (showing it would show more than the host
// allowed). A root that stays keeps its mount, name, mode and pre-approval,
// so policies, grants and mount-relative paths mean what they meant. Host
// directories outside every operator root add nothing. With a nil host set
// the operator's roots are returned as they are.
func Narrow(operator *Set, host *HostRoots) *Set {
	if host == nil {
		return operator
	}
	all := operator.All()
	var specs []Spec
	var kept []Root
	for _, r := range all {
		if !slices.ContainsFunc(host.dirs, func(d string) bool { return covers(d, r.Path) }) {
			continue
		}
		kept = append(kept, r)
		specs = append(specs, Spec{Path: r.Path, Mount: r.Mount, Name: r.Name, Writable: r.Writable,
			Preapproved: r.Preapproved, Origin: "operator root " + r.Mount})
	}
	if len(kept) == len(all) {
		return operator
	}
	set, err := New(specs)
	if err == nil && sameRoots(set.All(), kept) {
		return set
	}
	// A root that no longer resolves as it did (removed, or replaced by a
	// link) is left out, one by one.
	var ok []Spec
	for i, spec := range specs {
		if one, err := New([]Spec{spec}); err == nil && sameRoots(one.All(), kept[i:i+1]) {
			ok = append(ok, spec)
		}
	}
	set, _ = New(ok) // each of them resolved alone, and together they did before
	return set
}

func sameRoots(a, b []Root) bool { return slices.Equal(a, b) }

// Withheld describes the operator roots that host leaves out, for the log:
// those that contain one of the host's directories (the host allowed less
// than the whole root) and those outside every host directory.
func Withheld(operator *Set, host *HostRoots) (containing, outside []string) {
	if host == nil {
		return nil, nil
	}
	for _, r := range operator.All() {
		if slices.ContainsFunc(host.dirs, func(d string) bool { return covers(d, r.Path) }) {
			continue
		}
		if slices.ContainsFunc(host.dirs, func(d string) bool { return covers(r.Path, d) }) {
			containing = append(containing, r.Mount)
		} else {
			outside = append(outside, r.Mount)
		}
	}
	return containing, outside
}

// Intersect returns what both the operator's roots and the host's allow (for
// fsbroker serve): an operator root that is one of the host's directories or
// lies under one stays whole; one that holds host directories stays, scoped
// to them (Set.Allows: only paths in those subtrees are allowed, and
// Set.Dirs lists the subtrees), with its mount, name, mode and pre-approval
// unchanged, so that grants, policies and mount-relative paths mean what
// they mean for the whole root; every other operator root is left out. Host
// directories outside every operator root add nothing, and an empty host set
// leaves nothing. With a nil host set the operator's roots are returned as
// they are. operator is the operator's set (not itself scoped).
func Intersect(operator *Set, host *HostRoots) *Set {
	if host == nil {
		return operator
	}
	out := &Set{byMount: make(map[string]int)}
	for _, r := range operator.All() {
		whole := false
		var subs []string
		for _, d := range host.dirs {
			if covers(d, r.Path) {
				whole = true
				break
			}
			if covers(r.Path, d) {
				if rel, err := filepath.Rel(r.Path, d); err == nil {
					subs = append(subs, filepath.ToSlash(rel))
				}
			}
		}
		if !whole && len(subs) == 0 {
			continue
		}
		out.byMount[r.Mount] = len(out.roots)
		out.roots = append(out.roots, r)
		if !whole {
			if out.within == nil {
				out.within = make(map[string][]string)
			}
			out.within[r.Mount] = outermost(subs)
		}
	}
	return out
}

// outermost returns the relative paths of subs that no other one of them
// holds, once each, sorted (byte order). It sorts a copy segment by segment
// (compareSegments), so that whatever a path holds comes right after it,
// and keeps each path the last kept one does not hold: O(n log n).
func outermost(subs []string) []string {
	sorted := slices.Clone(subs)
	slices.SortFunc(sorted, compareSegments)
	out := make([]string, 0, len(sorted))
	for _, s := range sorted {
		if n := len(out); n > 0 && underRel(out[n-1], s) {
			continue
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// compareSegments orders slash-separated relative paths segment by segment
// ("a" < "a/b" < "a-b"), so that a path and every path beneath it are
// contiguous: the separator sorts before every other byte.
func compareSegments(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		switch {
		case a[i] == '/':
			return -1
		case b[i] == '/':
			return 1
		case a[i] < b[i]:
			return -1
		default:
			return 1
		}
	}
	return len(a) - len(b)
}

// heldBy reports whether rel is one of the sorted, outermost subtrees subs
// (outermost) or lies beneath one: a binary search for rel and for each
// directory above it, O(depth log n).
func heldBy(subs []string, rel string) bool {
	for p := rel; ; {
		if _, found := slices.BinarySearch(subs, p); found {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// underRel reports whether the relative path rel is dir or lies beneath it
// (segment by segment).
func underRel(dir, rel string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}
