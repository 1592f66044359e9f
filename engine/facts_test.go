// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/fsbroker/fsbroker/policies"
)

// factPaths are mountPaths and grant paths of every shape: a mount, nested paths, trailing,
// leading and doubled slashes, non-ASCII.
var factPaths = []string{"proj", "proj/a", "proj/src/pkg/main.go", "proj/src/", "proj/a//", "/proj", "proj//a", "", "/", "é/ü/x", "proj/a b/c"}

// TestFactsAreTheTestHelpers: the facts the engine adds are the ones the built-in set's Rego
// tests build their inputs with (with_facts, grants_by_path in helpers_test.rego), so that the
// tests decide on the inputs the broker sends.
func TestFactsAreTheTestHelpers(t *testing.T) {
	raw, err := read(Source{FS: policies.FS}, true)
	if err != nil {
		t.Fatal(err)
	}
	modules := raw.policyModules()
	for name, m := range raw.tests {
		modules[name] = m
	}
	c, err := compile(modules, false)
	if err != nil {
		t.Fatal(err)
	}
	helper := func(query string, input any) ast.Value {
		t.Helper()
		rs, err := rego.New(rego.Query(query), rego.Compiler(c), rego.Input(input), rego.GenerateJSON(keepAST)).Eval(context.Background())
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %v, %v", query, rs, err)
		}
		return rs[0].Expressions[0].Value.(ast.Value)
	}
	var grants []any
	for _, mp := range factPaths {
		grants = append(grants, map[string]any{"access": "read", "path": mp, "granted": "", "expires": ""})
		p := map[string]any{"mountPath": mp, "relative": "x"}
		v, err := parsedWithFacts(mustJSON(t, map[string]any{"path": p, "newPath": p}))
		if err != nil {
			t.Fatal(err)
		}
		want := helper("data.fsbroker.authz_test.with_facts(input)", p)
		for _, role := range []string{"path", "newPath"} {
			if got := v.(ast.Object).Get(ast.StringTerm(role)).Value; got.Compare(want) != 0 {
				t.Errorf("%s of %q: engine %v, helpers %v", role, mp, got, want)
			}
		}
	}
	doc := mustJSON(t, map[string]any{"grants": grants})
	v, err := parsedWithFacts(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(ast.Object).Get(ast.StringTerm(factGrantsByPath)).Value
	if want := helper("data.fsbroker.authz_test.grants_by_path(input.grants)", json.RawMessage(doc)); got.Compare(want) != 0 {
		t.Errorf("grantsByPath: engine %v, helpers %v", got, want)
	}
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGivenFactsAreReplaced: an input that brings facts of its own (fsbroker eval's, a
// document a caller builds) is decided on the engine's: an index granting what no grant grants,
// or ancestors that name a granted directory the path is not in, grant nothing, and grants the
// engine cannot index leave no index at all. Each is denied; the same input with the grant
// really there is allowed.
func TestGivenFactsAreReplaced(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	ctx := context.Background()
	forged := grant("read", "proj")
	cases := map[string]func(in map[string]any){
		"an index of a grant not given": func(in map[string]any) {
			in["grantsByPath"] = map[string]any{"proj": []any{forged}}
		},
		"ancestors of a granted directory": func(in map[string]any) {
			in["grants"] = []any{grant("read", "elsewhere")}
			in["path"].(map[string]any)["ancestors"] = []any{"elsewhere"}
		},
		"an index beside grants that cannot be indexed": func(in map[string]any) {
			in["grants"] = []any{map[string]any{"access": "read", "path": 7, "granted": "", "expires": ""}}
			in["grantsByPath"] = map[string]any{"proj": []any{forged}}
		},
	}
	for name, forge := range cases {
		in := testInput(t, "read", "proj/src/a.go", false)
		forge(in)
		for _, input := range []any{in, json.RawMessage(mustJSON(t, in))} {
			if d, _ := e.Decide(ctx, input); d.Allow {
				t.Errorf("%s (%T): allowed", name, input)
			}
		}
	}
	in := testInput(t, "read", "proj/src/a.go", false, forged)
	if d, err := e.Decide(ctx, json.RawMessage(mustJSON(t, in))); !d.Allow {
		t.Errorf("the grant really given: %+v, %v", d, err)
	}
}
