// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// TestInputGrantsLeaveBlockedPreapprovalOut: an operator's block under a
// pre-approved root takes the root's pre-approval out of the policy input of
// a request under the block, and leaves it in that of a request beside it,
// so that no policy can honour a pre-approval the consent check would not.
func TestInputGrantsLeaveBlockedPreapprovalOut(t *testing.T) {
	f := newFixture(t)
	if err := os.Mkdir(filepath.Join(f.ro, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ro, "sub", "c.txt"), []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := grants.Open(filepath.Join(t.TempDir(), grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := f.corridor(t, WithConsent(nil, store))
	if _, _, err := store.Block(grants.Block{Server: f.caller.StateKey(), Path: "ro/sub", By: "test"}); err != nil {
		t.Fatal(err)
	}
	grantsOf := func(raw string) []string {
		in := c.policyInput(context.Background(), f.caller, request{method: "files/read", operation: decision.OpRead,
			path: f.target(t, c, raw), requested: raw})
		var out []string
		for _, g := range in.Grants {
			out = append(out, g.Access+":"+g.Path)
		}
		return out
	}
	if got := grantsOf("ro/sub/c.txt"); !slices.Equal(got, []string{"write:rw"}) {
		t.Errorf("input.grants of a read under the block: %q", got)
	}
	if got := grantsOf("ro/a.txt"); !slices.Equal(got, []string{"read:ro", "write:rw"}) {
		t.Errorf("input.grants of a read beside the block: %q", got)
	}
}
