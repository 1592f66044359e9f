// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// minCoverage is the least coverage, in percent of lines, that the tests
// must reach on the policies (the _test.rego files excluded).
const minCoverage = 90.0

// inputSchemaPath is the input contract, relative to this package.
const inputSchemaPath = "../schema/policy-input.json"

// loadModules parses every embedded .rego file, the library's included, keyed
// by file name.
func loadModules(t testing.TB) (policies, tests map[string]*ast.Module) {
	t.Helper()
	policies, tests = map[string]*ast.Module{}, map[string]*ast.Module{}
	for _, src := range []struct {
		fsys    fs.FS
		pattern string
	}{{FS, "*.rego"}, {Library, "lib/*.rego"}} {
		names, err := fs.Glob(src.fsys, src.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("no %s embedded", src.pattern)
		}
		for _, name := range names {
			b, err := fs.ReadFile(src.fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ast.ParseModuleWithOpts(name, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatalf("parse %s: %v", name, err)
			}
			if strings.HasSuffix(name, "_test.rego") {
				tests[name] = m
			} else {
				policies[name] = m
			}
		}
	}
	return policies, tests
}

// loadData returns the embedded data.json.
func loadData(t testing.TB) map[string]any {
	t.Helper()
	raw, err := FS.ReadFile("data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatalf("data.json: %v", err)
	}
	return data
}

// inputSchemas is the input contract as a schema set for the type checker.
func inputSchemas(t testing.TB) *ast.SchemaSet {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(inputSchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("%s: %v", inputSchemaPath, err)
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.SchemaRootRef, schema)
	return ss
}

// strictCompiler is the compiler the policies must pass: strict mode, and
// input type-checked against the input contract.
func strictCompiler(t testing.TB) *ast.Compiler {
	t.Helper()
	return ast.NewCompiler().
		WithDefaultRegoVersion(ast.RegoV1).
		WithStrict(true).
		WithSchemas(inputSchemas(t))
}

// merge returns the union of module sets.
func merge(ms ...map[string]*ast.Module) map[string]*ast.Module {
	out := map[string]*ast.Module{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// TestRego runs every Rego test with data.json as data, reports each failing
// one, and holds the policies to minCoverage.
func TestRego(t *testing.T) {
	ctx := context.Background()
	policies, tests := loadModules(t)
	if len(tests) == 0 {
		t.Fatal("no _test.rego file embedded")
	}
	store := inmem.NewFromObject(loadData(t))
	txn := storage.NewTransactionOrDie(ctx, store)
	defer store.Abort(ctx, txn)

	cov := cover.New()
	runner := tester.NewRunner().
		SetCompiler(strictCompiler(t)).
		SetStore(store).
		SetModules(merge(policies, tests)).
		SetCoverageQueryTracer(cov).
		SetCoverageRuns(nil).
		RaiseBuiltinErrors(true)
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	var total int
	var failed []string
	for r := range ch {
		total++
		switch {
		case r.Error != nil:
			failed = append(failed, fmt.Sprintf("%s.%s (%s): error: %v", r.Package, r.Name, r.Location, r.Error))
		case r.Fail:
			failed = append(failed, fmt.Sprintf("%s.%s (%s): fail", r.Package, r.Name, r.Location))
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		t.Errorf("%d of %d Rego tests failed:\n  %s", len(failed), total, strings.Join(failed, "\n  "))
	}
	if total == 0 {
		t.Fatal("no Rego test ran")
	}
	t.Logf("%d Rego tests", total)

	report := cov.Report(policies)
	var covered, notCovered int
	var files []string
	for name := range policies {
		files = append(files, name)
	}
	sort.Strings(files)
	var lines []string
	for _, name := range files {
		fr := report.Files[name]
		if fr == nil {
			t.Errorf("%s: no coverage report", name)
			continue
		}
		covered += fr.CoveredLines
		notCovered += fr.NotCoveredLines
		var missing []string
		for _, r := range fr.NotCovered {
			missing = append(missing, fmt.Sprintf("%d-%d", r.Start.Row, r.End.Row))
		}
		lines = append(lines, fmt.Sprintf("%-18s %6.2f%%  not covered: %v", name, fr.Coverage, missing))
	}
	pct := 0.0
	if covered+notCovered > 0 {
		pct = 100 * float64(covered) / float64(covered+notCovered)
	}
	t.Logf("coverage of the policies: %.2f%% (%d of %d lines)\n  %s", pct, covered, covered+notCovered, strings.Join(lines, "\n  "))
	if pct < minCoverage {
		t.Errorf("coverage of the policies is %.2f%%, under %.0f%%", pct, minCoverage)
	}
}

// TestTypeCheck compiles the policies in strict mode against the input
// contract, and shows that a reference to a field the contract does not
// define is a compile error.
func TestTypeCheck(t *testing.T) {
	policies, tests := loadModules(t)

	c := strictCompiler(t)
	if c.Compile(merge(policies, tests)); c.Failed() {
		t.Fatalf("the policies do not compile against %s:\n%v", inputSchemaPath, c.Errors)
	}

	bad, err := ast.ParseModuleWithOpts("typo.rego", `package fsbroker.authz

deny contains {"code": "PERMISSION_DENIED", "reason": "typo"} if {
	input.path.canonicl == "/etc/passwd"
}
`, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	c = strictCompiler(t)
	c.Compile(merge(policies, map[string]*ast.Module{"typo.rego": bad}))
	if !c.Failed() {
		t.Fatal("a module that references input.path.canonicl compiled")
	}
	var found bool
	for _, e := range c.Errors {
		if e.Code == ast.TypeErr && e.Location != nil && e.Location.File == "typo.rego" &&
			strings.Contains(e.Message, "undefined ref: input.path.canonicl") {
			found = true
		}
	}
	if !found {
		t.Fatalf("want a type error on input.path.canonicl in typo.rego, got:\n%v", c.Errors)
	}
}

// TestSamplesMatchSchema validates the inputs the Rego tests are built from
// (data.fsbroker.authz_test.schema_samples) against the input contract, so
// the tests exercise documents the broker can actually send.
func TestSamplesMatchSchema(t *testing.T) {
	ctx := context.Background()
	policies, tests := loadModules(t)
	r := rego.New(
		rego.Query("data.fsbroker.authz_test.schema_samples"),
		rego.Compiler(compileOrFail(t, merge(policies, tests))),
		rego.Store(inmem.NewFromObject(loadData(t))),
	)
	rs, err := r.Eval(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("schema_samples is undefined")
	}
	samples, ok := rs[0].Expressions[0].Value.([]any)
	if !ok || len(samples) == 0 {
		t.Fatalf("schema_samples: want a non-empty array, got %T", rs[0].Expressions[0].Value)
	}

	raw, err := os.ReadFile(filepath.FromSlash(inputSchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("policy-input.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("policy-input.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		// Round-trip through JSON: the validator wants values as its own
		// decoder makes them (numbers as json.Number).
		b, _ := json.Marshal(s)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("schema_samples[%d] does not satisfy %s: %v\n%s", i, inputSchemaPath, err, b)
		}
	}
}

// TestDefaultSecretGlob holds the precomputed default_secret_glob to the glob
// the default patterns compile to (compile_secret_glob), through OPA's own
// glob.match, on many generated paths built from the patterns' pieces,
// separators, wildcards and odd characters: the precomputed one is the same
// set of paths, written so that it matches faster.
func TestDefaultSecretGlob(t *testing.T) {
	pieces := []string{"/", "/", "/", ".", "env", ".env", ".env.", "pem", ".pem", "key", ".key",
		"id_rsa", "id_rsa.pub", "ssh", ".ssh", ".aws", "aws", ".gnupg", ".git", "git", "config",
		"/config", "netrc", ".netrc", "x", "é", "\n", "*", "?", "{", "}", ",", "[", "]", "\\",
		"\xff", "//", "..", ""}
	rng := rand.New(rand.NewPCG(9, 9))
	paths := make([]any, 0, 20000)
	for range cap(paths) {
		var b strings.Builder
		b.WriteString("/")
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		paths = append(paths, strings.ToValidUTF8(b.String(), "\uFFFD"))
	}
	policies, _ := loadModules(t)
	rs, err := rego.New(
		rego.Query(`compiled := data.fsbroker.lib.compile_secret_glob(data.fsbroker.lib.default_secret_names, data.fsbroker.lib.default_secret_dirs | data.fsbroker.lib.default_secret_paths)
			differ := [p | some p in input; glob.match(compiled, ["/"], p) != glob.match(data.fsbroker.lib.default_secret_glob, ["/"], p)]
			matched := count([p | some p in input; glob.match(compiled, ["/"], p)])`),
		rego.Compiler(compileOrFail(t, policies)),
		rego.Store(inmem.NewFromObject(loadData(t))),
		rego.Input(paths),
	).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("eval: %v, %v", rs, err)
	}
	if differ := rs[0].Bindings["differ"].([]any); len(differ) > 0 {
		t.Errorf("%d paths the two globs disagree on, such as %q", len(differ), differ[0])
	}
	t.Logf("%d paths, %v secret", len(paths), rs[0].Bindings["matched"])
}

func compileOrFail(t testing.TB, modules map[string]*ast.Module) *ast.Compiler {
	t.Helper()
	c := strictCompiler(t)
	if c.Compile(modules); c.Failed() {
		t.Fatal(c.Errors)
	}
	return c
}

// prepared prepares query on the policies (the tests left out) and data.json.
func prepared(b *testing.B, query string) rego.PreparedEvalQuery {
	b.Helper()
	policies, _ := loadModules(b)
	pq, err := rego.New(
		rego.Query(query),
		rego.Compiler(compileOrFail(b, policies)),
		rego.Store(inmem.NewFromObject(loadData(b))),
	).PrepareForEval(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return pq
}

// benchInput is a files/read in a read-only root with three grants; entries,
// when n > 0, makes it a visible query on n entries.
func benchInput(n int) map[string]any {
	path := func(rel string) map[string]any {
		return map[string]any{
			"requested": "proj/" + rel, "canonical": "/home/user/proj/" + rel,
			"root": "/home/user/proj", "mount": "proj", "relative": rel,
			"mountPath": "proj/" + rel, "writable": false, "exists": true,
			"type": "file", "size": 1024, "nlink": 1, "hidden": false,
		}
	}
	in := map[string]any{
		"version": 1, "method": "files/read", "operation": "read",
		"server":  map[string]any{"id": "srv", "name": "srv", "version": "1", "pinned": false},
		"session": map[string]any{"id": "s", "protocolVersion": "2025-06-18", "transport": "stdio"},
		"path":    path("src/pkg/main.go"),
		"params":  map[string]any{"path": "proj/src/pkg/main.go"},
		"bytes":   1024,
		"grants": []any{
			map[string]any{"access": "read", "path": "proj/docs", "granted": "2025-05-01T00:00:00Z", "expires": ""},
			map[string]any{"access": "write", "path": "proj/tmp", "granted": "2025-05-01T00:00:00Z", "expires": "2026-01-01T00:00:00Z"},
			map[string]any{"access": "read", "path": "proj/src", "granted": "2025-05-01T00:00:00Z", "expires": "2026-01-01T00:00:00Z"},
		},
		"usage": map[string]any{"bytesWrittenToday": 0, "watches": 0},
		"time":  map[string]any{"rfc3339": "2025-06-01T12:00:00.000000000Z", "unixNano": int64(1748779200000000000)},
	}
	if n > 0 {
		in["method"], in["operation"] = "files/list", "visible"
		delete(in, "path")
		entries := make([]any, n)
		for i := range entries {
			entries[i] = path(fmt.Sprintf("src/pkg/file%04d.go", i))
		}
		in["entries"] = entries
	}
	return in
}

func benchEval(b *testing.B, query string, in map[string]any, check func(rego.ResultSet) bool) {
	pq := prepared(b, query)
	v, err := ast.InterfaceToValue(in)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil || !check(rs) {
		b.Fatalf("unexpected result %v, %v", rs, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := pq.Eval(ctx, rego.EvalParsedInput(v)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecision is one allowed files/read (docs/performance.md budget: p50 <= 15
// us, p99 <= 60 us for the decision).
func BenchmarkDecision(b *testing.B) {
	benchEval(b, "data.fsbroker.authz.decision", benchInput(0), func(rs rego.ResultSet) bool {
		d, _ := rs[0].Expressions[0].Value.(map[string]any)
		return len(rs) == 1 && d["allow"] == true
	})
}

// BenchmarkVisible1000 filters one 1,000-entry listing page.
func BenchmarkVisible1000(b *testing.B) {
	benchEval(b, "data.fsbroker.authz.visible", benchInput(1000), func(rs rego.ResultSet) bool {
		s, _ := rs[0].Expressions[0].Value.([]any)
		return len(rs) == 1 && len(s) == 1000
	})
}
