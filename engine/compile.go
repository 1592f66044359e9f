// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"github.com/fsbroker/fsbroker/schema"
	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown/print"
	"github.com/open-policy-agent/opa/v1/util"
)

// The documents the engine queries.
const (
	decisionQuery = "data.fsbroker.authz.decision"
	visibleQuery  = "data.fsbroker.authz.visible"
	consentQuery  = "data.fsbroker.authz.consentable"
)

// testTimeout bounds one policy test.
const testTimeout = 5 * time.Second

// policySet is one compiled, tested and prepared policy set. It is immutable once built and
// shared by every goroutine that decides while it is current.
type policySet struct {
	revision string
	decision rego.PreparedEvalQuery
	// visible answers visibleRef: the set's own visible when it defines one (hasVisible),
	// else the one derived from its decision.
	visible    rego.PreparedEvalQuery
	visibleRef string
	hasVisible bool
	// consent answers consentRef, the set's own consentable or the derived one, likewise.
	consent    rego.PreparedEvalQuery
	consentRef string
	hasConsent bool
	cache      *decisionCache // nil unless the set is cacheable
	// rules gives each decision its rule cache, seeded with the set's constant rules.
	rules ruleCachePool
	// obligations keeps the last obligations its decisions gave, converted (parseDecision).
	obligations obligationsMemo
	batches     *batchCache // Visible and Consentable results; nil unless the set is cacheable
	// entryMembers are the members of a batch's entries the set's rules can read: the only
	// ones a batch's entries are built with (readEntryMembers).
	entryMembers entryMembers
	modules      int
	tests        int
}

// loadOptions are what building a policy set depends on besides its source.
type loadOptions struct {
	runTests bool
	logger   hclog.Logger
}

// build reads, compiles, type-checks, tests and prepares a policy set. Every failure to load is
// a *LoadError; a cancelled ctx is returned as is.
func build(ctx context.Context, src Source, opts loadOptions) (*policySet, error) {
	raw, err := read(src, opts.runTests)
	if err != nil {
		return nil, err
	}
	return buildRaw(ctx, raw, opts)
}

// buildRaw is build after the source was read.
func buildRaw(ctx context.Context, raw *rawSet, opts loadOptions) (*policySet, error) {
	printing := opts.logger.IsDebug()
	c, err := compile(raw.policyModules(), printing)
	if err != nil {
		return nil, err
	}
	if !defines(c, decisionQuery) {
		return nil, newLoadError(nil, Problem{Message: "no rule defines " + decisionQuery})
	}
	store := newStore(raw.data)

	if opts.runTests && len(raw.tests) > 0 {
		results, err := runTests(ctx, raw, store, nil)
		if err != nil {
			return nil, err
		}
		var failed []Problem
		for _, r := range results {
			if !r.Pass {
				failed = append(failed, testFailure(r))
			}
		}
		if len(failed) > 0 {
			return nil, newLoadError(errTestsFailed, failed...)
		}
	}

	set := &policySet{
		revision:   raw.revision,
		modules:    len(raw.modules),
		tests:      raw.testFiles,
		hasVisible: defines(c, visibleQuery),
		visibleRef: visibleQuery,
		hasConsent: defines(c, consentQuery),
		consentRef: consentQuery,
	}
	if !set.hasVisible {
		set.visibleRef = derivedVisibleQuery
	}
	if !set.hasConsent {
		set.consentRef = derivedConsentQuery
	}
	// The derived rules answer batches of a set without its own visible or consentable, or
	// whose rules use them.
	usesDerived := !set.hasVisible || !set.hasConsent || sourceRefersTo(c, raw, derivedPackage)
	set.entryMembers = readEntryMembers(batchModules(c, raw, usesDerived))
	if ok, readsTime, why := cacheable(evaluatedModules(c, raw)); ok {
		set.cache, set.batches = &decisionCache{}, &batchCache{}
		if readsTime {
			set.cache.ttl, set.batches.ttl = timeTTL, timeTTL
		}
		// The derived rules answer batches only: what they read counts for those.
		if usesDerived {
			ok, readsTime, why = cacheable(derivedModules(c, raw))
			switch {
			case !ok:
				set.batches = nil
				opts.logger.Debug("visibility and consent of this policy set are not cached", "why", why)
			case readsTime:
				set.batches.ttl = timeTTL
			}
		}
	} else {
		opts.logger.Debug("decisions of this policy set are not cached", "why", why)
	}
	hook := printHook{logger: opts.logger}
	if set.decision, err = prepare(ctx, c, store, decisionQuery, hook); err != nil {
		return nil, err
	}
	if set.visible, err = prepare(ctx, c, store, set.visibleRef, hook); err != nil {
		return nil, err
	}
	if set.consent, err = prepare(ctx, c, store, set.consentRef, hook); err != nil {
		return nil, err
	}
	if err := seedRules(ctx, c, store, &set.rules); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		opts.logger.Debug("the constant rules of this policy set are computed in every evaluation", "why", err)
	}
	return set, nil
}

// defines reports whether some rule of the compiled set defines the document at query.
func defines(c *ast.Compiler, query string) bool {
	return len(c.GetRulesExact(ast.MustParseRef(query))) > 0
}

// errTestsFailed is the cause of a LoadError for a set whose tests fail.
var errTestsFailed = errors.New("policy tests failed")

// capabilities are OPA's built-ins of this version with no network access: a policy that calls
// http.send, or a schema that refers to a remote document, fails instead of reaching out.
func capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.AllowNet = []string{}
	return caps
}

// inputSchema returns a schema set holding policy-input.json as the schema of input.
func inputSchema() (*ast.SchemaSet, error) {
	data, err := fs.ReadFile(schema.Files(), schema.PolicyInputFile)
	if err != nil {
		return nil, fmt.Errorf("engine: read the input schema: %w", err)
	}
	var doc any
	if err := util.UnmarshalJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("engine: parse the input schema: %w", err)
	}
	ss := ast.NewSchemaSet()
	ss.Put(ast.SchemaRootRef, doc)
	return ss, nil
}

// newCompiler returns a compiler in strict mode that type-checks input against
// policy-input.json (and honours METADATA schema annotations).
func newCompiler(printing bool) (*ast.Compiler, error) {
	ss, err := inputSchema()
	if err != nil {
		return nil, err
	}
	return ast.NewCompiler().
		WithStrict(true).
		WithSchemas(ss).
		WithUseTypeCheckAnnotations(true).
		WithCapabilities(capabilities()).
		WithDefaultRegoVersion(ast.RegoV1).
		WithEnablePrintStatements(printing), nil
}

// compile compiles modules; errors are a *LoadError naming file and line.
func compile(modules map[string]*ast.Module, printing bool) (*ast.Compiler, error) {
	c, err := newCompiler(printing)
	if err != nil {
		return nil, err
	}
	if c.Compile(modules); c.Failed() {
		return nil, astLoadError(c.Errors)
	}
	return c, nil
}

// newStore holds a set's data documents, converted to AST values once: without
// OptReturnASTValuesOnRead every read of data by a rule (data.fsbroker.limits.max_read_bytes,
// data.fsbroker.secrets, ...) would convert the Go value to an AST value again, on every
// evaluation.
func newStore(data map[string]any) storage.Store {
	return inmem.NewFromObjectWithOpts(data, inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
}

// prepare prepares one query against a compiled set. Built-in errors are fatal, and results
// are kept as AST values (no conversion to Go maps on every evaluation).
func prepare(ctx context.Context, c *ast.Compiler, store storage.Store, query string, hook print.Hook) (rego.PreparedEvalQuery, error) {
	pq, err := rego.New(
		rego.Query(query),
		rego.Compiler(c),
		rego.Store(store),
		rego.Capabilities(capabilities()),
		rego.StrictBuiltinErrors(true),
		rego.PrintHook(hook),
		rego.GenerateJSON(keepAST),
	).PrepareForEval(ctx)
	if err != nil {
		return pq, fmt.Errorf("engine: prepare %s: %w", query, err)
	}
	return pq, nil
}

// keepAST is the result "conversion" of the prepared queries: the AST value itself.
func keepAST(t *ast.Term, _ *rego.EvalContext) (any, error) {
	return t.Value, nil
}

// printHook sends the output of print() in policies to the debug log. print() calls are
// compiled in only when the logger is at debug level when the set is loaded.
type printHook struct {
	logger hclog.Logger
}

// Print implements print.Hook.
func (h printHook) Print(pctx print.Context, msg string) error {
	loc := ""
	if pctx.Location != nil {
		loc = fmt.Sprintf("%s:%d", pctx.Location.File, pctx.Location.Row)
	}
	h.logger.Debug("policy print", "location", loc, "message", msg)
	return nil
}

// TestResult is the outcome of one Rego test.
type TestResult struct {
	// Package is the test's package, such as data.fsbroker.authz.
	Package string
	// Name is the test rule's name, such as test_hidden_files_denied.
	Name string
	// Pass is true when the test passed or was skipped.
	Pass bool
	// Skip is true for a skipped test (its name starts with todo_).
	Skip bool
	// Fail says why the test failed; "" when it passed.
	Fail string
	// Duration is how long the test took.
	Duration time.Duration
	// File and Line locate the test.
	File string
	Line int
}

// TestReport is the outcome of a source's Rego tests.
type TestReport struct {
	// Results has one entry per test, sorted by file, line and name.
	Results []TestResult
	// Coverage is the percentage (0 to 100) of the lines of the non-test modules that the
	// tests evaluated; 0 when there is nothing to cover.
	Coverage float64
}

// Passed reports whether every test passed (skipped tests count as passed).
func (r TestReport) Passed() bool {
	for _, t := range r.Results {
		if !t.Pass {
			return false
		}
	}
	return true
}

// Test runs the Rego tests of src (the *_test.rego files) against its policies and data, with
// coverage, for `fsbroker policy test`. A set that does not compile is a *LoadError; failing
// tests are reported in the TestReport, not as an error.
func Test(ctx context.Context, src Source) (TestReport, error) {
	raw, err := read(src, true)
	if err != nil {
		return TestReport{}, err
	}
	cov := cover.New()
	results, err := runTests(ctx, raw, newStore(raw.data), cov)
	if err != nil {
		return TestReport{}, err
	}
	rep := cov.Report(raw.modules)
	var covered, notCovered int
	for name := range raw.modules {
		if fr := rep.Files[name]; fr != nil {
			covered += fr.CoveredLines
			notCovered += fr.NotCoveredLines
		}
	}
	report := TestReport{Results: results}
	if total := covered + notCovered; total > 0 {
		report.Coverage = 100 * float64(covered) / float64(total)
	}
	return report, nil
}

// Check compiles and type-checks src (policies and tests, in strict mode, against the input
// schema) for `fsbroker policy check`. It returns nil or a *LoadError. Tests are not run.
func Check(ctx context.Context, src Source) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := read(src, true)
	if err != nil {
		return err
	}
	all := raw.policyModules()
	maps.Copy(all, raw.tests)
	_, err = compile(all, false)
	return err
}

// runTests compiles the set's policies with its tests and runs the tests, recording coverage
// into cov when it is not nil. A compile error is a *LoadError.
func runTests(ctx context.Context, raw *rawSet, store storage.Store, cov *cover.Cover) ([]TestResult, error) {
	c, err := newCompiler(true)
	if err != nil {
		return nil, err
	}
	all := raw.policyModules()
	maps.Copy(all, raw.tests)
	runner := tester.NewRunner().
		SetCompiler(c).
		SetStore(store).
		SetModules(all).
		RaiseBuiltinErrors(true).
		CapturePrintOutput(true).
		SetTimeout(testTimeout)
	if cov != nil {
		runner = runner.SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return nil, astLoadError(err)
	}
	var results []TestResult
	for r := range ch {
		tr := TestResult{
			Package:  r.Package,
			Name:     r.Name,
			Pass:     r.Pass() || r.Skip,
			Skip:     r.Skip,
			Duration: r.Duration,
		}
		if r.Location != nil {
			tr.File, tr.Line = r.Location.File, r.Location.Row
		}
		switch {
		case r.Error != nil:
			tr.Pass = false
			tr.Fail = "error: " + r.Error.Error()
		case r.Fail:
			tr.Fail = "the test is false or undefined"
		}
		results = append(results, tr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(results, func(a, b TestResult) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Name, b.Name))
	})
	return results, nil
}
