// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// oneFilePolicy is a policy directory's only file: it defines only decision (reads of anything
// but a secret or proj/docs/private, writes under rw/src), and calls the built-in helpers.
const oneFilePolicy = `package fsbroker.authz

import data.fsbroker.lib

default decision := {"allow": false, "reasons": ["local: not allowed"]}

decision := {"allow": true} if input.method == "roots/list"

decision := {"allow": true} if {
	input.operation in lib.read_operations
	not lib.secret_path(input.path.relative)
	not lib.covers("proj/docs/private", input.path.mountPath)
}

decision := {"allow": true} if {
	input.operation in lib.change_operations
	every _, p in lib.request_paths {
		lib.covers("rw/src", p.mountPath)
	}
}
`

// listNames lists path (hidden entries included) and returns the entries' paths.
func listNames(t *testing.T, p *proc, id any, path string) []string {
	t.Helper()
	res := csResult(t, p, id, "files/list", map[string]any{"path": path, "includeHidden": true})
	var names []string
	for _, e := range res["entries"].([]any) {
		names = append(names, e.(map[string]any)["path"].(string))
	}
	return names
}

// TestOneFilePolicyDirectory: a broker on a policy directory holding one file that defines only
// decision works (PROTOCOL.md section 7, issue 16): files/consent grants what the decision
// would allow, listings and change events show what a read of the entry would be allowed, and
// the rest is hidden.
func TestOneFilePolicyDirectory(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	if err := os.MkdirAll(filepath.Join(w.proj, "docs", "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"proj/docs/private/plan.md": "plan", "proj/docs/notes.md": "notes"} {
		writeFile(t, filepath.Join(w.base, filepath.FromSlash(name)), content)
	}
	pol := t.TempDir()
	writeFile(t, filepath.Join(pol, "policy.rego"), oneFilePolicy)
	script, log := approveAllScript(t)
	p := startBroker(t, "", w.args("command:"+script, "--policies", pol)...)
	p.handshake("2025-11-25")

	// Consent: what the decision allows once granted, and nothing else is put to the command.
	if granted, approved := csConsent(t, p, 1, "read", "proj", "rw", "rw/.env", "proj/docs/private"); !granted || !slices.Equal(approved, []string{"proj", "rw"}) {
		t.Fatalf("read consent approved %q, want proj and rw", approved)
	}
	if granted, approved := csConsent(t, p, 2, "write", "rw/src", "rw/.git", "proj/docs"); !granted || !slices.Equal(approved, []string{"rw/src"}) {
		t.Fatalf("write consent approved %q, want rw/src", approved)
	}
	if reqs := commandRequests(t, log); len(reqs) != 2 || !slices.Equal(reqs[0].Paths, []string{"proj", "rw"}) || !slices.Equal(reqs[1].Paths, []string{"rw/src"}) {
		t.Fatalf("the command was asked %+v", reqs)
	}

	// Listings: what a read of the entry would be allowed.
	if got, want := listNames(t, p, 3, "proj/docs"), []string{"proj/docs/guide.md", "proj/docs/notes.md"}; !slices.Equal(got, want) {
		t.Errorf("list proj/docs = %q, want %q (private hidden)", got, want)
	}
	if got, want := listNames(t, p, 4, "rw"), []string{"rw/.git", "rw/src"}; !slices.Equal(got, want) {
		t.Errorf("list rw = %q, want %q (.env and .ssh hidden)", got, want)
	}
	csRead(t, p, 5, "proj/docs/notes.md", "notes")
	csRefused(t, p, 6, "files/read", map[string]any{"path": "proj/docs/private/plan.md"}, "PERMISSION_DENIED")
	csRefused(t, p, 7, "files/read", map[string]any{"path": "rw/.env"}, "PERMISSION_DENIED")
	csResult(t, p, 8, "files/write", map[string]any{"path": "rw/src/new.go", "content": "package main"})

	// Change events: the same filter. The hidden file changes first; the visible one's event
	// then shows the hidden one's was not sent (events of one watch arrive in order).
	csResult(t, p, 9, "files/watch", map[string]any{"path": "proj/docs", "recursive": true})
	time.Sleep(200 * time.Millisecond)
	writeFile(t, filepath.Join(w.proj, "docs", "private", "new.md"), "hidden")
	time.Sleep(300 * time.Millisecond)
	writeFile(t, filepath.Join(w.proj, "docs", "new.md"), "shown")
	p.Await("the change event of proj/docs/new.md", csChangeOf("proj/docs/new.md"))
	if p.Has(func(m *message) bool {
		return m.IsNotification("notifications/files/changed") && strings.Contains(string(m.Params), "private")
	}) {
		t.Error("a change under proj/docs/private was sent")
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p.log())
	}
	if strings.Contains(p.log(), "grants nothing") || strings.Contains(p.log(), "show nothing") {
		t.Errorf("the broker warned about the set:\n%s", p.log())
	}
	if _, err := os.Stat(filepath.Join(w.rw, "src", "new.go")); err != nil {
		t.Errorf("the write under rw/src: %v", err)
	}
}
