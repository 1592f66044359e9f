// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/corridor"
)

// TestServeNoConsentSaysSo: through the real fsbroker serve, with roots
// nobody pre-approved and a provider that approves nothing (--consent
// deny), a call on a path no grant covers is refused in serve's own words:
// no grant covers the path for the access the tool needs, and consent was
// not given; never the client role's advice to ask with files/consent,
// which a host cannot send.
func TestServeNoConsentSaysSo(t *testing.T) {
	at := newAttackTree(t)
	p := startServe(t, at.state, "--root", at.ro, "--root", at.rw+":rw", "--consent", "deny")
	for _, c := range []struct {
		tool   string
		args   map[string]any
		access string
	}{
		{ToolReadTextFile, map[string]any{"path": filepath.Join(at.ro, "a.txt")}, "read"},
		{ToolListDirectory, map[string]any{"path": at.ro}, "read"},
		{ToolGetFileInfo, map[string]any{"path": filepath.Join(at.ro, "a.txt")}, "read"},
		{ToolWriteFile, map[string]any{"path": filepath.Join(at.rw, "new.txt"), "content": "x"}, "write"},
	} {
		res := p.call(c.tool, c.args)
		want := "PERMISSION_DENIED: " + corridor.ReasonNoConsent + " the path for " + c.access + " access, and consent was not given"
		if res["isError"] != true || resultText(res) != want {
			t.Errorf("%s: %v, want isError with the text %q", c.tool, res, want)
		}
	}
	res := p.call(ToolReadMultipleFiles, map[string]any{"paths": []any{filepath.Join(at.ro, "a.txt")}})
	if text := resultText(res); strings.Contains(text, "files/consent") || !strings.Contains(text, "consent was not given") {
		t.Errorf("read_multiple_files: %q", text)
	}
	if _, err := os.Lstat(filepath.Join(at.rw, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write happened (%v)", err)
	}
}

// TestServeConsentRefusalGivesThePolicysReason: through the real fsbroker
// serve with --consent auto and no pre-approval, a first call on a path the
// policy lets nobody grant (a secret: .env) asks the provider, which is
// never put the path; the call is refused with the policy's reason
// (PERMISSION_DENIED: secrets: ...), not for want of consent: a read, a
// description, one file of read_multiple_files, a write, and a move whose
// destination is the secret (its source was approvable). Nothing is
// written, and the trail records the refusals.
func TestServeConsentRefusalGivesThePolicysReason(t *testing.T) {
	at := newAttackTree(t)
	if err := os.WriteFile(filepath.Join(at.rw, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, at.state, "--root", at.ro, "--root", at.rw+":rw", "--consent", "auto")
	secret := filepath.Join(at.ro, ".env")
	const secrets = "PERMISSION_DENIED: secrets: "
	requireRefused(t, p.call(ToolReadTextFile, map[string]any{"path": secret}), secrets)
	requireRefused(t, p.call(ToolGetFileInfo, map[string]any{"path": secret}), secrets)
	requireRefused(t, p.call(ToolWriteFile, map[string]any{"path": filepath.Join(at.rw, ".env"), "content": "x"}), secrets)
	requireRefused(t, p.call(ToolMoveFile, map[string]any{"source": filepath.Join(at.rw, "b.txt"),
		"destination": filepath.Join(at.rw, ".env")}), secrets)
	multi := resultText(p.call(ToolReadMultipleFiles, map[string]any{"paths": []any{filepath.Join(at.ro, "a.txt"), secret}}))
	if want := secret + ": Error - " + secrets; !strings.HasPrefix(multi, filepath.Join(at.ro, "a.txt")+":\na\n") || !strings.Contains(multi, want) {
		t.Errorf("read_multiple_files: %q, want a.txt read and %q", multi, want)
	}
	if strings.Contains(multi, "hunter2") {
		t.Errorf("read_multiple_files shows the secret: %q", multi)
	}
	for _, name := range []string{".env"} {
		if _, err := os.Lstat(filepath.Join(at.rw, name)); !os.IsNotExist(err) {
			t.Errorf("rw/%s: a refused call wrote it (%v)", name, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(at.rw, "b.txt")); err != nil || string(data) != "b\n" {
		t.Errorf("the refused move's source is now %q (%v)", data, err)
	}
	for _, tool := range []string{ToolReadTextFile, ToolGetFileInfo, ToolWriteFile, ToolMoveFile} {
		at.refusedRecord(t, tool, ".env")
	}
}

// TestServeConsentAsksForTheAccessTheToolNeeds: the question a tool call
// puts to the provider asks the policy's consentable rule for the access
// the tool needs. With --consent auto, a write in a read-only root is not
// approvable (the readonly rule withholds write access there), so no write
// grant is stored for it, the write is refused and nothing is written; a
// read of the same root is approved and kept as a read grant.
func TestServeConsentAsksForTheAccessTheToolNeeds(t *testing.T) {
	at := newAttackTree(t)
	p := startServe(t, at.state, "--root", at.ro, "--root", at.rw+":rw", "--consent", "auto")
	requireRefused(t, p.call(ToolWriteFile, map[string]any{"path": filepath.Join(at.ro, "planted.txt"), "content": "x"}),
		"PERMISSION_DENIED: ")
	if _, err := os.Lstat(filepath.Join(at.ro, "planted.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write happened (%v)", err)
	}
	if res := p.call(ToolReadTextFile, map[string]any{"path": filepath.Join(at.ro, "a.txt")}); res["isError"] == true {
		t.Fatalf("a read of the read-only root under --consent auto: %v", res)
	}
	var reads int
	for _, g := range listGrants(t, at.state) {
		if g.Access == "write" {
			t.Errorf("a write grant was stored where the policy withholds write access: %+v", g)
		}
		if g.Access == "read" {
			reads++
		}
	}
	if reads == 0 {
		t.Errorf("no read grant stored for the approved read")
	}
}
