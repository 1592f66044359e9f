// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// oneFileDecisions are policy directories holding one file that defines only decision.
var oneFileDecisions = []struct {
	name, policy string
	// What a read with a read grant on proj may see, what a read without grants may see, and
	// what files/consent may grant for read and for write, of derivedEntries.
	visible, visibleUngranted, consentRead, consentWrite []string
}{
	{
		name:             "allow all",
		policy:           "package fsbroker.authz\n\ndecision := {\"allow\": true}\n",
		visible:          derivedEntries,
		visibleUngranted: derivedEntries,
		consentRead:      derivedEntries,
		consentWrite:     derivedEntries,
	},
	{
		name:   "deny all",
		policy: "package fsbroker.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"local: nothing\"]}\n",
	},
	{
		// Reads under proj/docs and proj/src with a covering grant, never a secret; writes
		// under proj/tmp with a write grant. The helpers come from data.fsbroker.lib.
		name: "a few rules",
		policy: `package fsbroker.authz

import data.fsbroker.lib

default decision := {"allow": false, "reasons": ["local: not allowed"]}

decision := {"allow": true} if {
	input.operation in lib.read_operations
	some prefix in ["proj/docs", "proj/src"]
	lib.covers(prefix, input.path.mountPath)
	lib.covered(input.path, {"read", "write"})
	not lib.secret_path(input.path.relative)
}

decision := {"allow": true} if {
	input.operation == "write"
	lib.covers("proj/tmp", input.path.mountPath)
	lib.covered(input.path, {"write"})
}
`,
		visible:      []string{"proj/docs/a.md", "proj/src/main.go"},
		consentRead:  []string{"proj/docs/a.md", "proj/src/main.go"},
		consentWrite: []string{"proj/tmp/x"},
	},
}

// derivedEntries are the entries of every batch of TestOneFileDecision.
var derivedEntries = []string{"proj/docs/a.md", "proj/src/main.go", "proj/src/.env", "proj/tmp/x", "proj/other/y"}

// batchInput is a batch of entries (in a writable root) for operation "visible" or "consent"
// (with access), by a server holding grants.
func batchInput(t testing.TB, operation, access string, entries []string, grants ...map[string]any) map[string]any {
	t.Helper()
	in := testInput(t, "visible", "p", false, grants...)
	delete(in, "path")
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		list = append(list, pathDoc(e, true))
	}
	in["entries"] = list
	if operation == "consent" {
		in["method"], in["operation"] = "files/consent", "consent"
		in["params"] = map[string]any{"paths": entries, "access": access}
	}
	checkInput(t, in)
	return in
}

// sortedKeys are the paths of a Visible or Consentable result.
func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestOneFileDecision: a policy directory holding one file that defines only decision (allow
// all, deny all, a few rules) gives a working broker. files/consent may grant what the decision
// would allow once granted, listings and change events show the entries whose read it allows,
// and each agrees, entry by entry, with Decide on that request.
func TestOneFileDecision(t *testing.T) {
	ctx := context.Background()
	readAll := grant("read", "proj")
	for _, tc := range oneFileDecisions {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			logger := hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info})
			e, err := New(ctx, Source{Dir: policyDir(t, map[string]string{"policy.rego": tc.policy})}, WithLogger(logger))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(log.String(), "[WARN]") {
				t.Errorf("loading warned:\n%s", log.String())
			}
			batches := []struct {
				what  string
				input map[string]any
				eval  func(context.Context, any) (map[string]bool, error)
				want  []string
				// check decides one entry on its own: the request the batch stands for.
				check func(entry string) map[string]any
			}{
				{"visible, read grant on proj", batchInput(t, "visible", "", derivedEntries, readAll), e.Visible, tc.visible,
					func(p string) map[string]any { return testInput(t, "read", p, true, readAll) }},
				{"visible, no grant", batchInput(t, "visible", "", derivedEntries), e.Visible, tc.visibleUngranted,
					func(p string) map[string]any { return testInput(t, "read", p, true) }},
				{"consent read", batchInput(t, "consent", "read", derivedEntries), e.Consentable, tc.consentRead,
					func(p string) map[string]any { return testInput(t, "read", p, true, grant("read", p)) }},
				{"consent write", batchInput(t, "consent", "write", derivedEntries), e.Consentable, tc.consentWrite,
					func(p string) map[string]any { return testInput(t, "write", p, true, grant("write", p)) }},
			}
			for _, b := range batches {
				got, err := b.eval(ctx, b.input)
				if err != nil || !slices.Equal(sortedKeys(got), sortedSlice(b.want)) {
					t.Errorf("%s: %v, %v; want %v", b.what, sortedKeys(got), err, sortedSlice(b.want))
				}
				for _, p := range derivedEntries {
					d, err := e.Decide(ctx, b.check(p))
					if err != nil || d.Allow != got[p] {
						t.Errorf("%s: %s is in the result: %t, but the decision on it alone allows: %t (%v)", b.what, p, got[p], d.Allow, err)
					}
				}
				// The broker's JSON input answers the same, twice (the second from the cache).
				doc, err := json.Marshal(b.input)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 {
					again, err := b.eval(ctx, json.RawMessage(doc))
					if err != nil || !maps.Equal(again, got) {
						t.Errorf("%s (JSON): %v, %v; want %v", b.what, sortedKeys(again), err, sortedKeys(got))
					}
				}
			}
			if n := len(e.current().batches.m); n != len(batches) {
				t.Errorf("%d batch results kept, want %d", n, len(batches))
			}
		})
	}
}

// sortedSlice is s sorted.
func sortedSlice(s []string) []string {
	return slices.Sorted(slices.Values(s))
}

// TestOwnVisibleFromTheDerivedOne: a set that defines its own visible may build it on the
// derived one (docs/policy.md).
func TestOwnVisibleFromTheDerivedOne(t *testing.T) {
	e := newTestEngine(t, map[string]string{"policy.rego": `package fsbroker.authz

decision := {"allow": true}

visible := data.fsbroker.derived.visible - {"proj/tmp/x"}
`})
	got, err := e.Visible(context.Background(), batchInput(t, "visible", "", derivedEntries))
	want := []string{"proj/docs/a.md", "proj/other/y", "proj/src/.env", "proj/src/main.go"}
	if err != nil || !slices.Equal(sortedKeys(got), want) {
		t.Errorf("visible = %v, %v; want %v", sortedKeys(got), err, want)
	}
	if got, err := e.Consentable(context.Background(), batchInput(t, "consent", "read", derivedEntries)); err != nil || len(got) != len(derivedEntries) {
		t.Errorf("consentable (derived) = %v, %v; want every entry", sortedKeys(got), err)
	}
}
