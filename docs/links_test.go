// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package docs is the project's documentation. It has no Go code of its own:
// its tests check that every relative link and anchor in the repository's
// Markdown files resolves in a clone of the repository, the way GitHub
// resolves them, and that every source file names its licence.
package docs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// repository is the set of files a link may point at: the Markdown files to
// check, and every file (and so every directory) a clone holds.
type repository struct {
	root string          // absolute directory
	from string          // how the files were listed: "git" or "walk"
	md   []string        // the Markdown files to check, slash-separated, relative to root
	file map[string]bool // every file, relative to root
	dir  map[string]bool // every directory holding one of them ("" is root)
}

// skippedDirs are directories whose Markdown is not the project's documentation
// (test fixtures, installed packages) and which a walk does not enter.
var skippedDirs = map[string]bool{".git": true, "testdata": true, "node_modules": true}

// listRepository lists root's files with git (tracked files and untracked ones
// git does not ignore: what a commit of the work tree would hold) when root is
// a git work tree, else by walking it. Markdown under a skipped directory is
// not checked, but remains a valid link target.
func listRepository(root string, useGit bool) (*repository, error) {
	r := &repository{root: root, file: map[string]bool{}, dir: map[string]bool{"": true}}
	var names []string
	if useGit {
		out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others",
			"--exclude-standard", "--full-name").Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-files in %s: %w", root, err)
		}
		for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			// A tracked file deleted from the work tree is not there to link to.
			if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name))); err == nil {
				names = append(names, name)
			}
		}
		r.from = "git"
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && (d.Name() == ".git" || d.Name() == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return fmt.Errorf("relative path of %s: %w", p, err)
			}
			names = append(names, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walking %s: %w", root, err)
		}
		r.from = "walk"
	}
	for _, name := range names {
		r.file[name] = true
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			r.dir[d] = true
		}
		if isMarkdown(name) && !underSkippedDir(name) {
			r.md = append(r.md, name)
		}
	}
	slices.Sort(r.md)
	return r, nil
}

// isMarkdown reports whether name is a Markdown file.
func isMarkdown(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".md" || ext == ".markdown"
}

// underSkippedDir reports whether name lies in a directory the check skips.
func underSkippedDir(name string) bool {
	return slices.ContainsFunc(strings.Split(path.Dir(name), "/"), func(seg string) bool { return skippedDirs[seg] })
}

// problem is one link that does not resolve.
type problem struct {
	file string // the Markdown file, relative to the root
	line int    // 1-based; 0 when the parser gives no position
	dest string // the link's destination as written
	why  string
}

func (p problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.file, p.line, p.dest, p.why)
}

// link is one destination found in a Markdown file.
type link struct {
	dest string
	line int
}

// checker checks the links of a repository, parsing each Markdown file once.
type checker struct {
	repo    *repository
	md      goldmark.Markdown
	anchors map[string]map[string]bool // file -> its anchors
}

func newChecker(repo *repository) *checker {
	return &checker{
		repo:    repo,
		md:      goldmark.New(goldmark.WithExtensions(extension.GFM)),
		anchors: map[string]map[string]bool{},
	}
}

// check returns every problem of every Markdown file of the repository.
func (c *checker) check() ([]problem, error) {
	var problems []problem
	for _, name := range c.repo.md {
		src, err := os.ReadFile(filepath.Join(c.repo.root, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		links, anchors := c.parse(src)
		c.anchors[name] = anchors
		seen := map[string]bool{}
		for _, l := range links {
			if seen[l.dest] {
				continue // a destination is judged once per file, at its first use
			}
			seen[l.dest] = true
			why, err := c.resolve(name, l.dest)
			if err != nil {
				return nil, err
			}
			if why != "" {
				problems = append(problems, problem{file: name, line: l.line, dest: l.dest, why: why})
			}
		}
	}
	return problems, nil
}

// htmlAttr finds the link and anchor attributes of raw HTML.
var htmlAttr = regexp.MustCompile(`(?i)\b(href|src|id|name)\s*=\s*(?:"([^"]*)"|'([^']*)')`)

// htmlComment matches an HTML comment, whose content is not rendered.
var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// parse returns the link destinations of a Markdown source (inline links,
// images, reference definitions, href and src of raw HTML), and the anchors
// GitHub gives it (one per heading, and HTML id and name attributes).
func (c *checker) parse(src []byte) ([]link, map[string]bool) {
	ctx := parser.NewContext()
	doc := c.md.Parser().Parse(text.NewReader(src), parser.WithContext(ctx))
	var (
		links   []link
		anchors = map[string]bool{}
		slugs   = newSlugger()
	)
	lineAt := func(offset int) int { return bytes.Count(src[:min(offset, len(src))], []byte("\n")) + 1 }
	fromHTML := func(raw []byte, line int) {
		for _, m := range htmlAttr.FindAllSubmatch(htmlComment.ReplaceAll(raw, nil), -1) {
			value := string(m[2]) + string(m[3])
			switch strings.ToLower(string(m[1])) {
			case "href", "src":
				links = append(links, link{dest: value, line: line})
			default:
				anchors[value] = true
			}
		}
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			anchors[slugs.slug(plainText(n, src))] = true
		case *ast.Link:
			links = append(links, link{dest: string(n.Destination), line: lineAt(firstOffset(n))})
		case *ast.Image:
			links = append(links, link{dest: string(n.Destination), line: lineAt(firstOffset(n))})
		case *ast.RawHTML:
			var raw []byte
			for i := range n.Segments.Len() {
				seg := n.Segments.At(i)
				raw = append(raw, seg.Value(src)...)
			}
			fromHTML(raw, lineAt(n.Segments.At(0).Start))
		case *ast.HTMLBlock:
			var raw []byte
			for i := range n.Lines().Len() {
				seg := n.Lines().At(i)
				raw = append(raw, seg.Value(src)...)
			}
			if n.HasClosure() {
				closure := n.ClosureLine
				raw = append(raw, closure.Value(src)...)
			}
			line := 0
			if n.Lines().Len() > 0 {
				line = lineAt(n.Lines().At(0).Start)
			}
			fromHTML(raw, line)
		}
		return ast.WalkContinue, nil
	})
	// Reference definitions ([label]: dest), used or not: a link through one
	// is checked above too, and the duplicate is dropped by the caller.
	for _, ref := range ctx.References() {
		line := 0
		if i := bytes.Index(bytes.ToLower(src), bytes.ToLower(append(append([]byte("["), ref.Label()...), "]:"...))); i >= 0 {
			line = lineAt(i)
		}
		links = append(links, link{dest: string(ref.Destination()), line: line})
	}
	slices.SortStableFunc(links, func(a, b link) int { return a.line - b.line })
	return links, anchors
}

// firstOffset is the source offset of the first text inside n, or 0.
func firstOffset(n ast.Node) int {
	offset := 0
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); entering && ok {
			offset = t.Segment.Start
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return offset
}

// plainText is the text of a heading as rendered: code spans, link texts and
// emphasized text keep their content, markup and raw HTML are dropped.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.Label(src))
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.TrimSpace(b.String())
}

// slugger gives headings the anchors GitHub gives them: the heading's text in
// lower case, without punctuation and symbols, spaces turned into hyphens; a
// repeated anchor gets -1, -2, ... (as github-slugger, which GitHub uses).
type slugger struct{ occurrences map[string]int }

func newSlugger() *slugger { return &slugger{occurrences: map[string]int{}} }

// slug returns the anchor of the next heading with this text.
func (s *slugger) slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	result := base
	for {
		if _, taken := s.occurrences[result]; !taken {
			break
		}
		s.occurrences[base]++
		result = fmt.Sprintf("%s-%d", base, s.occurrences[base])
	}
	s.occurrences[result] = 0
	return result
}

// absoluteURL matches a destination with a scheme (https:, mailto:, ...) or a
// network path (//host/...): those are not checked.
var absoluteURL = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*:|//)`)

// resolve says why dest, a link in the Markdown file name, does not resolve
// in the repository, or "" when it does.
func (c *checker) resolve(name, dest string) (string, error) {
	if dest == "" || absoluteURL.MatchString(dest) {
		return "", nil
	}
	target, fragment, _ := strings.Cut(dest, "#")
	target, _, _ = strings.Cut(target, "?")
	rel := name
	if target != "" {
		decoded, err := url.PathUnescape(target)
		if err != nil {
			return "the path is not validly %-escaped", nil
		}
		if strings.HasPrefix(decoded, "/") {
			rel = path.Clean(strings.TrimLeft(decoded, "/")) // GitHub: relative to the repository's root
		} else {
			rel = path.Join(path.Dir(name), decoded)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "it leads outside the repository", nil
		}
		if rel == "." {
			rel = ""
		}
		if !c.repo.file[rel] && !c.repo.dir[rel] {
			if _, err := os.Stat(filepath.Join(c.repo.root, filepath.FromSlash(rel))); err == nil {
				return "the target exists here but is not part of the repository (ignored or generated)", nil
			}
			return "no such file or directory in the repository", nil
		}
	}
	if fragment == "" || !isMarkdown(rel) || !c.repo.file[rel] {
		return "", nil // anchors are checked in Markdown files only (a code file's #L12 is GitHub's)
	}
	anchor, err := url.PathUnescape(fragment)
	if err != nil {
		return "the anchor is not validly %-escaped", nil
	}
	anchors, err := c.anchorsOf(rel)
	if err != nil {
		return "", err
	}
	if !anchors[anchor] {
		return fmt.Sprintf("%s has no heading or anchor #%s", rel, anchor), nil
	}
	return "", nil
}

// anchorsOf returns the anchors of a Markdown file of the repository, parsing
// it if it has not been yet (a file under a skipped directory, say).
func (c *checker) anchorsOf(rel string) (map[string]bool, error) {
	if a, ok := c.anchors[rel]; ok {
		return a, nil
	}
	src, err := os.ReadFile(filepath.Join(c.repo.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", rel, err)
	}
	_, anchors := c.parse(src)
	c.anchors[rel] = anchors
	return anchors, nil
}

// repositoryRoot is the directory holding go.mod, from the test's directory up.
func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// isGitWorkTree reports whether dir is the top of a git work tree that the
// git command can list.
func isGitWorkTree(dir string) bool {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return false
	}
	top, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		return false
	}
	resolved, err := filepath.EvalSymlinks(dir)
	return err == nil && top == resolved
}
