// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"strings"
	"unicode/utf8"
)

// TreeEntry is one entry of directory_tree: a real directory has children
// (possibly none), anything else (a symlink to a directory included) is a
// file without them.
type TreeEntry struct {
	Name     string
	IsDir    bool
	Children []TreeEntry // for a directory; nil means empty
}

// TreeText is directory_tree's result text: JSON.stringify(tree, null, 2) of
// the entries in byte order, each {"name", "type": "directory"|"file"} and,
// for a directory, "children"; "[]" for an empty list; no trailing newline.
// Names are written as JavaScript writes them (no HTML escapes, U+2028 and
// U+2029 raw).
func TreeText(entries []TreeEntry) string {
	var b strings.Builder
	writeTree(&b, entries, "")
	return b.String()
}

func writeTree(b *strings.Builder, entries []TreeEntry, indent string) {
	if len(entries) == 0 {
		b.WriteString("[]")
		return
	}
	sorted := append([]TreeEntry(nil), entries...)
	sortTree(sorted)
	inner := indent + "  "
	member := inner + "  "
	b.WriteString("[\n")
	for n, e := range sorted {
		if n > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(inner + "{\n" + member + `"name": ` + jsString(DecodeText([]byte(e.Name))) + ",\n" + member + `"type": `)
		if !e.IsDir {
			b.WriteString("\"file\"\n" + inner + "}")
			continue
		}
		b.WriteString("\"directory\",\n" + member + `"children": `)
		writeTree(b, e.Children, member)
		b.WriteString("\n" + inner + "}")
	}
	b.WriteString("\n" + indent + "]")
}

// sortTree orders entries by name bytes, as Node's readdir gives them.
func sortTree(entries []TreeEntry) {
	for i := 1; i < len(entries); i++ {
		for j := i; j > 0 && entries[j].Name < entries[j-1].Name; j-- {
			entries[j], entries[j-1] = entries[j-1], entries[j]
		}
	}
}

// jsString is JSON.stringify of a string: '"' and '\\' escaped, \b \t \n
// \f \r short, other controls below U+0020 as \u00xx, everything else raw
// (invalid UTF-8 bytes become U+FFFD, as in a JavaScript string).
func jsString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 {
				const hex = "0123456789abcdef"
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&15])
				continue
			}
			if r == utf8.RuneError {
				b.WriteString("\uFFFD")
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TreeExcluded reports whether directory_tree leaves out an entry whose path
// relative to the tree's root argument is rel ('/'-separated): a pattern
// with '*' excludes what it matches (minimatch, dot: true); any other
// pattern p excludes what p, "**/"+p or "**/"+p+"/**" matches (so a bare
// name excludes that name at any depth, and "" excludes everything).
func TreeExcluded(rel string, patterns []string) bool {
	for _, p := range patterns {
		if strings.Contains(p, "*") {
			if Match(rel, p) {
				return true
			}
			continue
		}
		if Match(rel, p) || Match(rel, "**/"+p) || Match(rel, "**/"+p+"/**") {
			return true
		}
	}
	return false
}

// SearchExcluded reports whether search_files skips (and does not descend
// into) an entry whose path relative to the search root is rel: any exclude
// pattern matching it as plain minimatch (dot: true), no "**/" wrapping.
func SearchExcluded(rel string, patterns []string) bool {
	for _, p := range patterns {
		if Match(rel, p) {
			return true
		}
	}
	return false
}

// Lister lists one directory of a walk: rel is the directory's path
// relative to the walk's root ("" for the root itself), the entries are in
// any order. For search_files the caller leaves out the entries the
// reference's validation would refuse (links out of the allowed
// directories, dangling links).
type Lister func(rel string) ([]Entry, error)

// BuildTree is directory_tree's walk: each directory's entries in byte
// order, an excluded entry (TreeExcluded on its path relative to the root)
// left out and not descended, real directories descended; any listing
// error fails the whole tree.
func BuildTree(list Lister, excludePatterns []string) ([]TreeEntry, error) {
	return buildTree(list, "", excludePatterns)
}

func buildTree(list Lister, rel string, excludePatterns []string) ([]TreeEntry, error) {
	entries, err := list(rel)
	if err != nil {
		return nil, err
	}
	out := []TreeEntry{}
	for _, e := range sortByBytes(entries) {
		childRel := joinRel(rel, e.Name)
		if TreeExcluded(childRel, excludePatterns) {
			continue
		}
		node := TreeEntry{Name: e.Name, IsDir: e.IsDir}
		if e.IsDir {
			children, err := buildTree(list, childRel, excludePatterns)
			if err != nil {
				return nil, err
			}
			node.Children = children
		}
		out = append(out, node)
	}
	return out, nil
}

// SearchMatches is search_files' walk: depth first, pre-order, entries in
// byte order; an entry excluded (SearchExcluded) is skipped and not
// descended; a match of pattern (Match on the path relative to the root) is
// listed before its children; real directories are descended. It returns
// the relative paths of the matches. Only the root's listing error fails
// the search; a subdirectory that cannot be listed is passed over, as the
// reference does.
func SearchMatches(list Lister, pattern string, excludePatterns []string) ([]string, error) {
	entries, err := list("")
	if err != nil {
		return nil, err
	}
	var matches []string
	var walk func(rel string, entries []Entry)
	walk = func(rel string, entries []Entry) {
		for _, e := range sortByBytes(entries) {
			childRel := joinRel(rel, e.Name)
			if SearchExcluded(childRel, excludePatterns) {
				continue
			}
			if Match(childRel, pattern) {
				matches = append(matches, childRel)
			}
			if e.IsDir {
				children, err := list(childRel)
				if err != nil {
					continue
				}
				walk(childRel, children)
			}
		}
	}
	walk("", entries)
	return matches, nil
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
