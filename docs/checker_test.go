// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMarkdownLinksResolve checks every relative link and anchor of every
// Markdown file of the repository (README.md, docs/, ...): in a clone, each
// must name a file or directory the repository holds, and each #anchor into
// a Markdown file one of its headings.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := repositoryRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, gitErr := exec.LookPath("git")
	repo, err := listRepository(root, gitErr == nil && isGitWorkTree(root))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(repo.md, "README.md") || !slices.Contains(repo.md, "docs/protocol.md") {
		t.Fatalf("the Markdown files listed (by %s) miss README.md or docs/protocol.md: %v", repo.from, repo.md)
	}
	problems, err := newChecker(repo).check()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("dead link: %s", p)
	}
	t.Logf("%d Markdown files checked, listed by %s", len(repo.md), repo.from)
}

// TestCheckerFindsDeadLinks runs the checker on a fixture repository
// (testdata/links) whose README.md holds links of every kind, resolving and
// dead, and wants exactly the dead ones.
func TestCheckerFindsDeadLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("testdata", "links"))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := listRepository(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/page two.md", "docs/page.md"}; !slices.Equal(repo.md, want) {
		t.Fatalf("Markdown files = %q, want %q (testdata is not checked)", repo.md, want)
	}
	problems, err := newChecker(repo).check()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(problems))
	for i, p := range problems {
		got[i] = p.String()
	}
	want := []string{
		"README.md:25: docs/missing.md: no such file or directory in the repository",
		"README.md:25: docs/page.md#no-such-heading: docs/page.md has no heading or anchor #no-such-heading",
		"README.md:26: docs/page.md#repeat-2: docs/page.md has no heading or anchor #repeat-2",
		"README.md:26: docs/page.md#Second-Heading: docs/page.md has no heading or anchor #Second-Heading",
		"README.md:27: ../outside.md: it leads outside the repository",
		"README.md:27: docs/missing.png: no such file or directory in the repository",
		"README.md:28: #nowhere: README.md has no heading or anchor #nowhere",
		"README.md:30: docs/html-missing.md: no such file or directory in the repository",
		"README.md:33: docs/unused-missing.md: no such file or directory in the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckerRefusesFilesOutsideTheClone makes a git repository in which a
// Markdown file links to a file that exists in the work tree but is ignored
// by git: a clone would not have it, so the link is dead.
func TestCheckerRefusesFilesOutsideTheClone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed:", err)
	}
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "/bin/\n")
	write("bin/tool", "built\n")
	write("docs/guide.md", "# Guide\n\nRun [the tool](../bin/tool), after [reading](../README.md#start).\n")
	write("README.md", "# Start\n\nSee [the guide](docs/guide.md).\n")
	if out, err := exec.Command("git", "init", "-q", root).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	if !isGitWorkTree(root) {
		t.Fatalf("%s is not seen as a git work tree", root)
	}
	repo, err := listRepository(root, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/guide.md"}; !slices.Equal(repo.md, want) {
		t.Fatalf("Markdown files = %q, want %q", repo.md, want)
	}
	problems, err := newChecker(repo).check()
	if err != nil {
		t.Fatal(err)
	}
	want := "docs/guide.md:3: ../bin/tool: the target exists here but is not part of the repository (ignored or generated)"
	if len(problems) != 1 || problems[0].String() != want {
		t.Errorf("problems = %v, want only %q", problems, want)
	}
}

// TestSlug holds the anchors GitHub gives headings.
func TestSlug(t *testing.T) {
	s := newSlugger()
	for _, c := range []struct{ heading, want string }{
		{"The files/* methods", "the-files-methods"},
		{"fsbroker grants list|revoke", "fsbroker-grants-listrevoke"},
		{"wrap --url", "wrap---url"},
		{"5. Methods", "5-methods"},
		{"Witnesses: proving the trail's end", "witnesses-proving-the-trails-end"},
		{"What may never be granted: policies/consent.rego", "what-may-never-be-granted-policiesconsentrego"},
		{"snake_case and CamelCase", "snake_case-and-camelcase"},
		{"Ünïcode", "ünïcode"},
		{"Repeat", "repeat"},
		{"Repeat", "repeat-1"},
		{"Repeat 1", "repeat-1-1"},
		{"Repeat", "repeat-2"},
	} {
		if got := s.slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}
