// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// carriedRule is an operator's rule on what a rename of a directory carries
// along and where to: docs/policy.md says the second decision of a delete
// or rename of a directory is the request's own, with the entries added.
const carriedRule = `package fsbroker.authz

deny contains {"code": "PERMISSION_DENIED", "reason": "local: no certificates into public"} if {
	input.operation == "rename"
	startswith(input.newPath.relative, "public/")
	some e in input.entries
	endswith(e.relative, ".crt")
}
`

// TestCarriedDecisionSeesTheRenameTarget: a rename of a directory is decided
// again with its entries, and that decision sees where it goes
// (input.newPath): a local rule on both refuses moving certs/ into public/,
// and allows it elsewhere.
func TestCarriedDecisionSeesTheRenameTarget(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, policies.FS); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.rego"), []byte(carriedRule), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Source{Dir: dir}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	f := startFiles(t, WithDecider(engine.Decider{Engine: e}))
	for _, d := range []string{"certs", "public"} {
		if err := os.Mkdir(filepath.Join(f.rw, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.rw, "certs", "site.crt"), []byte("cert"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := f.mustFail("files/rename", map[string]any{"oldPath": "rw/certs", "newPath": "rw/public/certs"}, -32002, "PERMISSION_DENIED")
	if reason, _ := data["reason"].(string); reason != "local: no certificates into public" {
		t.Fatalf("refused with %v, want the local rule", data)
	}
	if _, err := os.Stat(filepath.Join(f.rw, "certs", "site.crt")); err != nil {
		t.Fatal(err)
	}
	if res, _, data := f.call("files/rename", map[string]any{"oldPath": "rw/certs", "newPath": "rw/private"}); res == nil {
		t.Fatalf("rename elsewhere refused: %v", data)
	}
}
