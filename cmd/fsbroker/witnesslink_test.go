// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Issue 15 review (item 12): a witness file inside a root (read-only ones
// included) is in reach of a second local process that swaps entries there:
// it could empty the witness, or swap it for a link and make the broker
// append to a file outside every root.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditWitnessInAReadOnlyRootIsRefused: --root ro (read-only) with
// --audit-witness file:ro/witness.log is refused at start (exit 2, naming
// the root). Were it accepted, a local process swapping ro/witness.log for a
// link to a file outside every root makes the broker append its witness
// lines there.
func TestAuditWitnessInAReadOnlyRootIsRefused(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	ro, outside := filepath.Join(base, "ro"), filepath.Join(base, "outside")
	for _, d := range []string{ro, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(outside, "victim.txt")
	writeFile(t, victim, "untouched\n")
	witness := filepath.Join(ro, "witness.log")
	p := startBroker(t, "", "stdio", "--root", ro, "--state-dir", filepath.Join(base, "state"),
		"--audit-witness", "file:"+witness)
	if init := p.TryAwait(waitLimit, func(m *message) bool { return m.IsRequest("initialize") }); init != nil {
		// Accepted: the attack.
		if err := os.Remove(witness); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, witness); err != nil {
			t.Fatal(err)
		}
		// The broker checkpoints (and witnesses) the session's end.
		p.replyInitialize(init, "2025-11-25")
		p.Await("notifications/initialized", func(m *message) bool { return m.IsNotification("notifications/initialized") })
		p.listRoots("roots")
		p.closeStdin()
		p.waitExit()
		if b, _ := os.ReadFile(victim); string(b) != "untouched\n" {
			t.Errorf("a file outside every root was appended to through a link in a root: %q", b)
		}
		t.Fatalf("a witness file inside the read-only root ro was accepted")
	}
	if code := p.waitExit(); code != 2 || !strings.Contains(p.log(), "root ro") {
		t.Fatalf("exit status %d, log %q; want 2 naming the root", code, p.log())
	}
}
