// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"testing"
)

// spdxLine is the licence identifier every source file carries near its
// top, as Vault's and Cerbos' sources do: the machine-readable form of
// LICENSE (Apache-2.0) for the tools that scan a tree for licences.
const spdxLine = "SPDX-License-Identifier: Apache-2.0"

// headedExt are the source files that carry the header; the Makefile and the
// CI script carry it too (sourceNames).
var headedExt = map[string]bool{".go": true, ".rego": true, ".sh": true}

// sourceNames are files with no extension that carry the header.
var sourceNames = map[string]bool{"Makefile": true, ".ci/run": true}

// TestSourcesCarryTheLicence fails on a Go, Rego or shell file of the
// repository (test data aside) whose first lines do not name the licence.
func TestSourcesCarryTheLicence(t *testing.T) {
	root, err := repositoryRoot()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := listRepository(root, isGitWorkTree(root))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name := range repo.file {
		if underSkippedDir(name) || !(headedExt[path.Ext(name)] || sourceNames[name]) {
			continue
		}
		checked++
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(firstLines(src, 5), []byte(spdxLine)) {
			t.Errorf("%s: no %q in its first five lines", name, spdxLine)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d source files (listed by %s): the listing missed the sources", checked, repo.from)
	}
}

// firstLines returns the first n lines of src (all of it when it has fewer).
func firstLines(src []byte, n int) []byte {
	i := 0
	for ; n > 0; n-- {
		j := bytes.IndexByte(src[i:], '\n')
		if j < 0 {
			return src
		}
		i += j + 1
	}
	return src[:i]
}
