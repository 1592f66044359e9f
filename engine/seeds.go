// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/util"
)

// Constant rules. Some rules of a set have the same value in every evaluation: they read the
// set's data and other such rules, never the input (lib.secret_glob, the glob of the protected
// paths; lib.max_read_bytes, the read limit; the reasons' codes). OPA computes each of them again
// in every evaluation that reaches it. The engine computes them once, when the set is loaded,
// and puts their values in the rule cache every decision starts with (ruleCachePool's seeds):
// an evaluation finds them as it finds a rule it computed itself. A `with` starts a frame of
// the cache without them (a rule under `with data... as` or `with input as` is computed
// anew), as OPA does.

// notConstantCalls are built-ins that make a rule that calls them, or depends on one that
// does, not constant besides OPA's nondeterministic ones and clockBuiltins: their effect
// (printing, tracing) is part of every evaluation.
var notConstantCalls = map[string]bool{
	"internal.print": true,
	"print":          true,
	"trace":          true,
	"opa.runtime":    true,
}

// constantRules are the refs of the complete rules of c (a single value, no arguments, a name
// of one part) whose value is the same in every evaluation: neither they nor any rule or
// function they depend on, transitively, reads input, has a `with`, or calls a built-in whose
// answer or effect may change from one evaluation to the next.
func constantRules(c *ast.Compiler) []ast.Ref {
	verdicts := map[*ast.Rule]bool{}
	var constant func(r *ast.Rule, visiting map[*ast.Rule]bool) bool
	constant = func(r *ast.Rule, visiting map[*ast.Rule]bool) bool {
		if v, ok := verdicts[r]; ok {
			return v
		}
		if visiting[r] {
			return false // a cycle: OPA rejects them; not constant, to be safe
		}
		visiting[r] = true
		ok := selfContained(r)
		if ok {
			for dep := range c.Graph.Dependencies(r) {
				if d, isRule := dep.(*ast.Rule); !isRule || !constant(d, visiting) {
					ok = false
					break
				}
			}
		}
		for e := r.Else; ok && e != nil; e = e.Else {
			ok = constant(e, visiting)
		}
		delete(visiting, r)
		verdicts[r] = ok
		return ok
	}

	seen := map[string]bool{}
	var refs []ast.Ref
	for _, name := range util.KeysSorted(c.Modules) {
		for _, r := range c.Modules[name].Rules {
			if len(r.Head.Args) > 0 || r.Head.RuleKind() != ast.SingleValue || len(r.Head.Ref()) != 1 {
				continue
			}
			ref := r.Ref()
			key := ref.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			all := c.GetRulesExact(ref)
			ok := len(all) > 0
			for _, def := range all {
				if ok = ok && constant(def, map[*ast.Rule]bool{}); !ok {
					break
				}
			}
			if ok {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// selfContained reports whether rule r itself (head and body, not its else) reads no input,
// has no `with` and calls no built-in whose answer or effect may vary.
func selfContained(r *ast.Rule) bool {
	ok := true
	check := func(op any) {
		if clockCall("", op) != "" || notConstantCalls[fmt.Sprint(op)] {
			ok = false
		}
	}
	vis := ast.NewGenericVisitor(func(x any) bool {
		if !ok {
			return true
		}
		switch v := x.(type) {
		case *ast.Rule:
			if v != r { // its else, checked on its own
				return true
			}
		case *ast.With:
			ok = false
		case ast.Var:
			if v.Equal(ast.InputRootDocument.Value) {
				ok = false
			}
		case ast.Ref:
			if v.HasPrefix(ast.InputRootRef) {
				ok = false
			}
		case ast.Call:
			check(v[0])
		case *ast.Expr:
			if v.IsCall() {
				check(v.Operator())
			}
		}
		return !ok
	})
	vis.Walk(r.Head)
	vis.Walk(r.Body)
	return ok
}

// seedBudget bounds the time a load spends computing the constant rules: a rule that takes
// longer (and every rule after it) is left to each evaluation, which its request's deadline
// bounds, instead of holding the load. The built-in set's take about a millisecond.
const seedBudget = 2 * time.Second

// seedRules evaluates the constant rules of c once, with store's data and no input, and sets
// them as the seeds of pool. Each rule is computed as a fresh evaluation would compute it (a
// cache of its own), and a rule whose evaluation fails (a built-in error, a conflict, its own or
// a rule's it reads) is left out: every evaluation then computes, and fails on, the rule as
// before. So are the rules not computed within seedBudget.
func seedRules(ctx context.Context, c *ast.Compiler, store storage.Store, pool *ruleCachePool) error {
	refs := constantRules(c)
	if len(refs) == 0 {
		return nil
	}
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return fmt.Errorf("engine: compute the constant rules: %w", err)
	}
	defer store.Abort(ctx, txn)
	// OPA's query does not watch ctx: its cancellation, or the budget, stops the rule being
	// computed, and the rules left are not seeded.
	cancel := topdown.NewCancel()
	stopOnDone := context.AfterFunc(ctx, cancel.Cancel)
	defer stopOnDone()
	budget := time.AfterFunc(seedBudget, cancel.Cancel)
	defer budget.Stop()
	value := ast.VarTerm("value")
	var seedRefs []ast.Ref
	var seedValues []*ast.Term
	for _, ref := range refs {
		rs, err := topdown.NewQuery(ast.NewBody(ast.Equality.Expr(value, ast.NewTerm(ref)))).
			WithCompiler(c).
			WithStore(store).
			WithTransaction(txn).
			// A cache of its own: a rule that failed leaves the first value it computed in its
			// cache (OPA keeps a complete rule's value before its other definitions confirm it),
			// and a rule computed from that value would get a seed where every evaluation fails.
			WithVirtualCache(topdown.NewVirtualCache()).
			WithStrictBuiltinErrors(true).
			WithCancel(cancel).
			Run(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil || len(rs) > 1:
			continue
		case len(rs) == 0:
			seedRefs, seedValues = append(seedRefs, ref), append(seedValues, nil)
		default:
			seedRefs, seedValues = append(seedRefs, ref), append(seedValues, rs[0][value.Value.(ast.Var)])
		}
	}
	pool.seedRefs, pool.seedValues = seedRefs, seedValues
	return nil
}
