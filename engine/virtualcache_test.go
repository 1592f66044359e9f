// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// TestRuleCacheAnswersAsOPAs runs random sequences of Push, Pop, Put (of values and of
// undefined) and Get on a ruleCache and on OPA's own virtual cache, and requires the same
// answers, frames included; the refs put are changed after each Put, as OPA may reuse them.
// Between sequences the cache is released and taken again from its pool.
func TestRuleCacheAnswersAsOPAs(t *testing.T) {
	names := []string{"a", "b", "c", "allow", "deny"}
	refOf := func(r *rand.Rand) ast.Ref {
		ref := ast.Ref{ast.VarTerm("data")}
		for range 1 + r.IntN(3) {
			ref = append(ref, ast.StringTerm(names[r.IntN(len(names))]))
		}
		return ref
	}
	var pool ruleCachePool
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		mine, theirs := pool.get(), topdown.NewVirtualCache()
		depth := 0
		for step := range 300 {
			switch op := r.IntN(10); {
			case op == 0:
				mine.Push()
				theirs.Push()
				depth++
			case op == 1 && depth > 0:
				mine.Pop()
				theirs.Pop()
				depth--
			case op < 6:
				ref := refOf(r)
				var value *ast.Term
				if r.IntN(4) > 0 {
					value = ast.IntNumberTerm(r.IntN(100))
				}
				mine.Put(ref, value)
				theirs.Put(ref.Copy(), value)
				ref[len(ref)-1] = ast.StringTerm("changed")
			default:
				ref := refOf(r)
				v1, u1 := mine.Get(ref)
				v2, u2 := theirs.Get(ref)
				if u1 != u2 || (v1 == nil) != (v2 == nil) || (v1 != nil && !v1.Equal(v2)) {
					t.Fatalf("round %d step %d: Get(%v) = %v, %v; OPA's cache: %v, %v", round, step, ref, v1, u1, v2, u2)
				}
			}
		}
		if got, want := len(mine.Keys()), len(theirs.Keys()); got != want {
			t.Fatalf("round %d: %d keys, OPA's cache %d", round, got, want)
		}
		mine.release()
	}
}

// TestRuleCacheKeepsOnlyItsSeeds checks that a cache taken again from its pool holds the seeds
// and nothing an earlier evaluation put, and that a pushed frame does not see the seeds.
func TestRuleCacheKeepsOnlyItsSeeds(t *testing.T) {
	seed := ast.MustParseRef("data.fsbroker.lib.limit")
	undefinedSeed := ast.MustParseRef("data.fsbroker.lib.missing")
	pool := ruleCachePool{seedRefs: []ast.Ref{seed, undefinedSeed}, seedValues: []*ast.Term{ast.IntNumberTerm(7), nil}}
	other := ast.MustParseRef("data.fsbroker.authz.allow")
	for range 3 {
		c := pool.get()
		if v, _ := c.Get(seed); v == nil || !v.Equal(ast.IntNumberTerm(7)) {
			t.Fatalf("seed = %v, want 7", v)
		}
		if v, undefined := c.Get(undefinedSeed); v != nil || !undefined {
			t.Fatalf("undefined seed = %v, %v; want nil, true", v, undefined)
		}
		if v, undefined := c.Get(other); v != nil || undefined {
			t.Fatalf("a ref an earlier evaluation put = %v, %v; want nothing", v, undefined)
		}
		c.Push()
		if v, undefined := c.Get(seed); v != nil || undefined {
			t.Fatalf("the seed under a pushed frame = %v, %v; want nothing", v, undefined)
		}
		c.Put(seed, ast.IntNumberTerm(1))
		c.Pop()
		if v, _ := c.Get(seed); v == nil || !v.Equal(ast.IntNumberTerm(7)) {
			t.Fatalf("seed after Pop = %v, want 7", v)
		}
		c.Put(other, ast.BooleanTerm(true))
		c.Push() // left pushed, as after a panic
		c.release()
	}
}
