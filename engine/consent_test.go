// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// consentInput is a files/consent request for entries (in a writable root) with the given
// access.
func consentInput(t testing.TB, access string, entries ...string) map[string]any {
	t.Helper()
	in := visibleInput(t, entries...)
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		list = append(list, pathDoc(e, true))
	}
	in["entries"] = list
	in["method"], in["operation"] = "files/consent", "consent"
	in["params"] = map[string]any{"message": "m", "requestedPaths": entries, "access": access}
	checkInput(t, in)
	return in
}

func TestConsentable(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Source{Dir: policyDir(t, defaultFiles(t))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Consentable(ctx, consentInput(t, "write", "proj/src/a.go", "proj/.git/config", "proj/.env"))
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"proj/src/a.go"}) {
		t.Errorf("consentable = %v, want only proj/src/a.go (no write under .git, no secrets)", keys)
	}
	// The broker's JSON input decides the same, and a repeat comes from the batch cache, apart
	// from the visible results of the same entries.
	for _, access := range []string{"write", "write", "read"} {
		doc, err := json.Marshal(consentInput(t, access, "proj/src/a.go", "proj/.git/hooks", "proj/.env"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Consentable(ctx, json.RawMessage(doc))
		want := []string{"proj/src/a.go"}
		if access == "read" {
			want = []string{"proj/.git/hooks", "proj/src/a.go"}
		}
		if keys := slices.Sorted(maps.Keys(got)); err != nil || !slices.Equal(keys, want) {
			t.Errorf("consentable for %s (JSON) = %v, %v; want %v", access, keys, err, want)
		}
	}
	vis, _ := json.Marshal(visibleInput(t, "proj/src/a.go", "proj/.git/hooks", "proj/.env"))
	if got, err := e.Visible(ctx, json.RawMessage(vis)); err != nil || len(got) != 2 {
		t.Errorf("visible = %v, %v", got, err)
	}
	if n := len(e.current().batches.m); n != 3 {
		t.Errorf("%d batch results kept, want 3 (write, read, visible)", n)
	}
	// No policy grants nothing (a set without the rule: derived_test.go).
	var none Engine
	if got, err := none.Consentable(ctx, consentInput(t, "read", "proj/a")); len(got) != 0 || err == nil {
		t.Errorf("no policy: %v, %v", got, err)
	}
}
