// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package roots

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manyHostRoots is a roots/list result naming n directories d0000000...
// under dir (none of which need exist).
func manyHostRoots(t testing.TB, dir string, n int) []string {
	t.Helper()
	uris := make([]string, 0, n)
	for i := range n {
		uris = append(uris, FileURI(filepath.Join(dir, fmt.Sprintf("d%07d", i))))
	}
	return uris
}

// TestParseHostRootsBounded (issue 19, review 19 finding 7): a host's
// roots/list answer holds at most MaxHostRoots roots. One more is refused
// whole (ErrTooManyHostRoots), so that its reader applies no root at all;
// an answer of MaxHostRoots roots is read in full, and its intersection
// with an operator root scopes the root to exactly those subtrees.
func TestParseHostRootsBounded(t *testing.T) {
	dir := mkdirs(t)
	op, err := New([]Spec{{Path: dir, Mount: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	h, skipped, err := ParseHostRoots(hostRootsResult(t, manyHostRoots(t, dir, MaxHostRoots+1)...))
	if !errors.Is(err, ErrTooManyHostRoots) || h != nil || skipped != nil {
		t.Fatalf("an answer of %d roots: %d read, %d skipped, error %v; want ErrTooManyHostRoots and nothing read",
			MaxHostRoots+1, h.Len(), len(skipped), err)
	}
	h, _, err = ParseHostRoots(hostRootsResult(t, manyHostRoots(t, dir, MaxHostRoots)...))
	if err != nil || h.Len() != MaxHostRoots {
		t.Fatalf("an answer of %d roots: %d read, %v", MaxHostRoots, h.Len(), err)
	}
	got := Intersect(op, h)
	scope := got.Scope("w")
	if len(scope) != MaxHostRoots || scope[0] != "d0000000" || scope[MaxHostRoots-1] != fmt.Sprintf("d%07d", MaxHostRoots-1) {
		t.Fatalf("scope of %d subtrees, from %q", len(scope), scope[:min(3, len(scope))])
	}
	root, _ := op.ByMount("w")
	for _, rel := range []string{"d0000000", "d0000999/x/y", "d0000500"} {
		if !got.Allows(root, rel) {
			t.Errorf("Allows(%q) = false", rel)
		}
	}
	for _, rel := range []string{"", "d0001000", "d000050", "d0000500x", "e"} {
		if got.Allows(root, rel) {
			t.Errorf("Allows(%q) = true", rel)
		}
	}
}

// outermostByDefinition is outermost as its definition reads, comparing
// every pair: the test's reference for the sorted computation.
func outermostByDefinition(subs []string) []string {
	var out []string
	for _, s := range subs {
		held := slices.ContainsFunc(subs, func(o string) bool { return o != s && underRel(o, s) })
		if !held && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// TestOutermostMatchesItsDefinition: on random sets of nested relative
// paths whose names sort around the separator ("a", "a-b", "a/b", "a.b",
// "a b"), outermost keeps exactly the paths no other one holds, once each,
// and Allows (a binary search over them) agrees with a scan of every
// subtree for the path and its neighbours.
func TestOutermostMatchesItsDefinition(t *testing.T) {
	names := []string{"a", "a-b", "a.b", "a b", "ab", "b", "a0"}
	rng := rand.New(rand.NewPCG(19, 7))
	randomPath := func() string {
		segs := make([]string, 1+rng.IntN(3))
		for i := range segs {
			segs[i] = names[rng.IntN(len(names))]
		}
		return strings.Join(segs, "/")
	}
	if compareSegments("a", "a/b") >= 0 || compareSegments("a/b", "a-b") >= 0 || compareSegments("a-b", "a-b") != 0 {
		t.Fatal("compareSegments does not sort a path's contents right after it")
	}
	for round := range 500 {
		subs := make([]string, 1+rng.IntN(12))
		for i := range subs {
			subs[i] = randomPath()
		}
		got, want := outermost(subs), outermostByDefinition(subs)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: outermost(%q) = %q, want %q", round, subs, got, want)
		}
		for range 20 {
			rel := randomPath()
			scan := slices.ContainsFunc(want, func(s string) bool { return underRel(s, rel) })
			if heldBy(got, rel) != scan {
				t.Fatalf("round %d: heldBy(%q, %q) = %v, want %v", round, got, rel, !scan, scan)
			}
		}
	}
}

// BenchmarkIntersect is the cost of one intersection of an operator root
// with n host roots inside it (the reviewer's 20,000, past MaxHostRoots,
// built directly): it grew with n squared before the sorted computation.
func BenchmarkIntersect(b *testing.B) {
	dir := b.TempDir()
	op, err := New([]Spec{{Path: dir, Mount: "w"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{MaxHostRoots, 20000} {
		h := &HostRoots{}
		for i := range n {
			h.dirs = append(h.dirs, filepath.Join(dir, fmt.Sprintf("d%07d", i)))
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if s := Intersect(op, h); len(s.Scope("w")) != n {
					b.Fatalf("scope of %d", len(s.Scope("w")))
				}
			}
		})
	}
}
