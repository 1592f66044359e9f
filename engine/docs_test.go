// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// docBlockMarker precedes each Rego block of the docs that this file loads as written: the
// marker names the block, the block follows it (indented as the Markdown list holding it).
var docBlockMarker = regexp.MustCompile("(?m)^([ \t]*)<!-- engine/docs_test.go loads this block as written: ([a-z-]+) -->\n[ \t]*```rego\n((?s:.*?))\n[ \t]*```")

// docBlocks returns the marked Rego blocks of a page under docs/, by name, without the
// indentation of the list that holds them.
func docBlocks(t *testing.T, page string) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docBlockMarker.FindAllStringSubmatch(string(doc), -1) {
		indent, name, body := m[1], m[2], m[3]
		lines := strings.Split(body, "\n")
		for i, line := range lines {
			lines[i] = strings.TrimPrefix(line, indent)
		}
		blocks[name] = strings.Join(lines, "\n") + "\n"
	}
	return blocks
}

// docBlock is one marked block of page; the test fails when it is not there.
func docBlock(t *testing.T, blocks map[string]string, page, name string) string {
	t.Helper()
	b, ok := blocks[name]
	if !ok {
		t.Fatalf("docs/%s has no block marked %q (have %v)", page, name, slices.Sorted(maps.Keys(blocks)))
	}
	return b
}

// decisionCase is a request and whether the decision on it must allow it.
type decisionCase struct {
	what  string
	input map[string]any
	allow bool
}

// checkDecisions decides each case with e and fails the test for each that is not as wanted.
func checkDecisions(t *testing.T, e *Engine, cases []decisionCase) {
	t.Helper()
	for _, tc := range cases {
		if d, err := e.Decide(context.Background(), tc.input); err != nil || d.Allow != tc.allow {
			t.Errorf("%s: %#v, %v; want allow %t", tc.what, d, err, tc.allow)
		}
	}
}

// fromServer is in as sent by the server id, pinned by the operator or not.
func fromServer(in map[string]any, id string, pinned bool) map[string]any {
	in["server"] = map[string]any{"id": id, "name": id, "version": "1", "pinned": pinned}
	return in
}

// TestDocsSmallestPolicy loads the policy docs/policy.md starts with, as written, alone in a
// directory: it loads without a warning, and consent, listings and requests go as the page says.
func TestDocsSmallestPolicy(t *testing.T) {
	ctx := context.Background()
	rego := docBlock(t, docBlocks(t, "policy.md"), "policy.md", "smallest")
	var log strings.Builder
	logger := hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info})
	e, err := New(ctx, Source{Dir: policyDir(t, map[string]string{"policy.rego": rego})}, WithLogger(logger))
	if err != nil {
		t.Fatalf("the smallest policy of docs/policy.md does not load: %v\n%s", err, rego)
	}
	if strings.Contains(log.String(), "[WARN]") {
		t.Errorf("loading warned:\n%s", log.String())
	}
	paths := []string{"project/src", "project/README.md", "project/.env", "project/certs/a.pem"}
	readable := []string{"project/README.md", "project/src"}
	for _, tc := range []struct {
		what  string
		eval  func(context.Context, any) (map[string]bool, error)
		input map[string]any
		want  []string
	}{
		{"consent read", e.Consentable, batchInput(t, "consent", "read", paths), readable},
		{"consent write", e.Consentable, batchInput(t, "consent", "write", paths), nil},
		{"listing", e.Visible, batchInput(t, "visible", "", paths, grant("read", "project")), readable},
	} {
		got, err := tc.eval(ctx, tc.input)
		if err != nil || !slices.Equal(sortedKeys(got), tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.what, sortedKeys(got), err, tc.want)
		}
	}
	roots := testInput(t, "list", "project", false)
	roots["method"] = "roots/list"
	delete(roots, "path")
	checkDecisions(t, e, []decisionCase{
		{"read project/src/a.go", testInput(t, "read", "project/src/a.go", true, grant("read", "project")), true},
		{"list project/src", testInput(t, "list", "project/src", true, grant("read", "project")), true},
		{"read project/.env", testInput(t, "read", "project/.env", true, grant("read", "project")), false},
		{"write project/src/a.go", testInput(t, "write", "project/src/a.go", true, grant("write", "project")), false},
		{"roots/list", roots, true},
	})
}

// TestDocsHelpersExample loads docs/policy.md's example of calling the helpers, alone.
func TestDocsHelpersExample(t *testing.T) {
	ctx := context.Background()
	rego := docBlock(t, docBlocks(t, "policy.md"), "policy.md", "helpers")
	e, err := New(ctx, Source{Dir: policyDir(t, map[string]string{"policy.rego": rego})})
	if err != nil {
		t.Fatalf("the helpers example of docs/policy.md does not load: %v\n%s", err, rego)
	}
	big := fromServer(testInput(t, "read", "project/docs/a.md", false), "indexer", true)
	big["bytes"] = 16<<20 + 1
	checkDecisions(t, e, []decisionCase{
		{"pinned, read project/docs/a.md", fromServer(testInput(t, "read", "project/docs/a.md", false), "indexer", true), true},
		{"pinned, read project/docsx/a.md", fromServer(testInput(t, "read", "project/docsx/a.md", false), "indexer", true), false},
		{"pinned, write project/docs/a.md", fromServer(testInput(t, "write", "project/docs/a.md", true), "indexer", true), false},
		{"pinned, read over the limit", big, false},
		{"declared name, read project/docs/a.md", testInput(t, "read", "project/docs/a.md", false), false},
	})
}

// TestDocsLocalRuleBesideTheBuiltinSet loads docs/policy.md's local.rego beside the built-in
// set, as its "Writing a rule" steps say.
func TestDocsLocalRuleBesideTheBuiltinSet(t *testing.T) {
	files := defaultFiles(t)
	files["local.rego"] = docBlock(t, docBlocks(t, "policy.md"), "policy.md", "local-beside-builtin")
	e := newTestEngine(t, files, WithRunTests(false))
	checkDecisions(t, e, []decisionCase{
		{"docs-bot writes proj/docs/a.md", fromServer(testInput(t, "write", "proj/docs/a.md", true, grant("write", "proj")), "docs-bot", false), false},
		{"docs-bot writes proj/src/a.go", fromServer(testInput(t, "write", "proj/src/a.go", true, grant("write", "proj")), "docs-bot", false), true},
		{"another server writes proj/docs/a.md", testInput(t, "write", "proj/docs/a.md", true, grant("write", "proj")), true},
	})
}

// TestDocsFleetRule: docs/hosts.md's organisation rule compiles in a directory of its own (it
// failed with "undefined function covers" when it called the built-in set's helpers), and beside
// the built-in set it keeps the docs bot's writes under docs/generated.
func TestDocsFleetRule(t *testing.T) {
	ctx := context.Background()
	rule := docBlock(t, docBlocks(t, "hosts.md"), "hosts.md", "fleet-rule")
	if err := Check(ctx, Source{Dir: policyDir(t, map[string]string{"org.rego": rule})}); err != nil {
		t.Fatalf("docs/hosts.md's rule does not compile alone: %v\n%s", err, rule)
	}
	files := defaultFiles(t)
	files["org.rego"] = rule
	e := newTestEngine(t, files, WithRunTests(false))
	for _, tc := range []struct {
		what   string
		input  map[string]any
		allow  bool
		reason string
	}{
		{"docs-bot writes docs/generated/a.md", fromServer(testInput(t, "write", "docs/generated/a.md", true, grant("write", "docs")), "docs-bot", true), true, ""},
		{"docs-bot writes docs/guide.md", fromServer(testInput(t, "write", "docs/guide.md", true, grant("write", "docs")), "docs-bot", true), false, "local: docs-bot writes only docs/generated"},
		{"docs-bot reads docs/guide.md", fromServer(testInput(t, "read", "docs/guide.md", true, grant("write", "docs")), "docs-bot", true), true, ""},
		{"another server writes docs/guide.md", testInput(t, "write", "docs/guide.md", true, grant("write", "docs")), true, ""},
	} {
		d, err := e.Decide(ctx, tc.input)
		if err != nil || d.Allow != tc.allow || (tc.reason != "" && !slices.Contains(d.Reasons, tc.reason)) {
			t.Errorf("%s: %#v, %v; want allow %t %s", tc.what, d, err, tc.allow, tc.reason)
		}
	}
}
