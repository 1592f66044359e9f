// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: fsbroker version tells where the binary comes from (the
// commit it was built from, when built in a checkout), Go's and OPA's
// versions, as text and as JSON; never a bare "dev".
func TestVersion(t *testing.T) {
	t.Parallel()
	out, stderr, code := runFsbroker(t, nil, "version", "--json")
	if code != 0 {
		t.Fatalf("version --json: exit %d\n%s", code, stderr)
	}
	var r buildReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if r.Version == "" || r.Version == "dev" || !strings.HasPrefix(r.Go, "go1.") ||
		r.Platform != runtime.GOOS+"/"+runtime.GOARCH || !strings.HasPrefix(r.OPA, "v1.") {
		t.Errorf("version --json = %+v", r)
	}
	// The tests run in a checkout: the binary they built names its commit.
	// (The go command stamps only a checkout whose .git is a directory, not
	// a linked work tree's .git file.)
	head, err := exec.Command("git", "rev-parse", "--path-format=absolute", "HEAD", "--git-dir", "--git-common-dir").Output()
	switch lines := strings.Fields(string(head)); {
	case err != nil || len(lines) != 3:
		t.Logf("not in a git checkout (%v): the revision is not checked", err)
	case !sameDir(lines[1], lines[2]):
		t.Logf("in a linked work tree (%s), which the go command does not stamp: the revision is not checked", lines[1])
	case r.Revision != lines[0] || r.Time == "":
		t.Errorf("revision %q at %q, want %s", r.Revision, r.Time, lines[0])
	}

	text, _, code := runFsbroker(t, nil, "version")
	if code != 0 || !strings.HasPrefix(text, "fsbroker "+r.Version+"\n") || !strings.Contains(text, r.OPA) ||
		(r.Revision != "" && !strings.Contains(text, r.Revision)) {
		t.Errorf("version: exit %d\n%s", code, text)
	}
	if _, _, code := runFsbroker(t, nil, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}

// sameDir reports whether two paths name one directory.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
