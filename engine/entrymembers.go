// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The members of a batch's entries a policy set reads. An entry of input.entries is an OPA
// object of 14 members (policy-input.json's path and the two facts), and building it (a hash map
// per object) is a fifth of a first listing's decision. The built-in set reads six of them. The
// engine finds, when it loads a set, which members its rules can read, and builds each entry of
// a batch with those alone (entriesTerm): no rule can tell the difference, since none reads the
// others. Wherever the set could read an entry in any other way (as a whole, through a computed
// key, input or input.entries as a whole), every member is built.

// entryMembers is a set of the members of an entry, a bit each (entryMemberNames' order).
type entryMembers uint16

// entryMemberNames are the names of an entry's members, in the order of their bits.
var entryMemberNames = [...]string{"requested", "canonical", "root", "mount", "relative", "mountPath",
	"writable", "exists", "type", "size", "nlink", "hidden", factLowerSlashRelative, factJoinedMountPath}

// The bit of each member.
const (
	memberRequested entryMembers = 1 << iota
	memberCanonical
	memberRoot
	memberMount
	memberRelative
	memberMountPath
	memberWritable
	memberExists
	memberType
	memberSize
	memberNlink
	memberHidden
	memberLowerSlashRelative
	memberJoinedMountPath
)

// entryMemberKeys are the terms of entryMemberNames, in their order.
var entryMemberKeys = sync.OnceValue(func() []*ast.Term {
	keys := make([]*ast.Term, len(entryMemberNames))
	for i, name := range entryMemberNames {
		keys[i] = inputKey(name)
	}
	return keys
})

// allEntryMembers is every member of an entry.
const allEntryMembers entryMembers = 1<<len(entryMemberNames) - 1

// has reports whether m holds the member name.
func (m entryMembers) has(name string) bool {
	for i, n := range entryMemberNames {
		if n == name {
			return m&(1<<i) != 0
		}
	}
	return false
}

// with is m and the member name (m itself for a name no entry has: nothing to build).
func (m entryMembers) with(name string) entryMembers {
	for i, n := range entryMemberNames {
		if n == name {
			return m | 1<<i
		}
	}
	return m
}

// readEntryMembers returns the members of input.entries' elements that the compiled modules
// can read: allEntryMembers unless every use of an entry is a member by a constant name. In
// compiled modules an entry is reached by a ref rooted at input, either input.entries[k].name
// (a member, read directly) or input.entries[k] bound to a variable (v = input.entries[k]), whose
// every use must then be v.name or object.get(v, "name", default). Anything else is a read of
// the whole entry: input or input.entries as a whole, input by a computed key, input.entries[k]
// in any other place, an entry's variable anywhere but in those two forms (a call's argument, a
// comparison, an object built from it, print) or bound to an entry twice in a rule (a
// comparison of two entries), a member by a computed name, object.get replaced by `with`.
func readEntryMembers(modules map[string]*ast.Module) entryMembers {
	entryVars := map[ast.Var]bool{}
	all := false
	for _, m := range modules {
		for _, r := range m.Rules {
			// A variable bound to an entry twice in one rule (e = input.entries[i]; e =
			// input.entries[j]) compares the two entries whole.
			bound := map[ast.Var]bool{}
			ast.WalkExprs(r, func(x *ast.Expr) bool {
				if v, ok := entryBinding(x); ok {
					all = all || bound[v]
					bound[v], entryVars[v] = true, true
				}
				return false
			})
		}
	}
	var read entryMembers
	var vis *ast.GenericVisitor
	// member records a use of an entry's member by the term key; a computed one is a read of all.
	member := func(key *ast.Term) {
		if s, ok := key.Value.(ast.String); ok {
			read = read.with(string(s))
		} else {
			all = true
		}
	}
	vis = ast.NewGenericVisitor(func(x any) bool {
		if all {
			return true
		}
		switch v := x.(type) {
		case *ast.With: // its target is replaced, not read
			// object.get replaced by a function: that function gets the entry whole, whatever
			// the key.
			if target, ok := v.Target.Value.(ast.Ref); ok && target.Equal(ast.ObjectGet.Ref()) {
				all = true
				return true
			}
			vis.Walk(v.Value)
			return true
		case *ast.Expr:
			if ev, ok := entryBinding(v); ok {
				all = !entryVars[ev] // bound to an entry: the variables first found are those
				return true
			}
			if op := v.Operator(); op != nil && op.Equal(ast.ObjectGet.Ref()) {
				if args := v.Operands(); len(args) >= 2 && isEntryVar(args[0], entryVars) {
					member(args[1])
					for _, t := range args[2:] {
						vis.Walk(t)
					}
					for _, w := range v.With {
						vis.Walk(w)
					}
					return true
				}
			}
		case ast.Var:
			if v.Equal(ast.InputRootDocument.Value) || entryVars[v] {
				all = true // input, or an entry, as a whole
			}
		case ast.Ref:
			switch {
			case isEntryVar(v[0], entryVars):
				if len(v) < 2 {
					all = true
					return true
				}
				member(v[1])
			case v.HasPrefix(ast.InputRootRef):
				if len(v) < 2 {
					all = true
					return true
				}
				key, isString := v[1].Value.(ast.String)
				switch {
				case !isString:
					all = true // input by a computed key: it may be entries
				case key == "entries" && len(v) < 4:
					all = true // input.entries, or one of its entries, as a whole
				case key == "entries":
					member(v[3])
				}
			default:
				return false
			}
			for _, t := range v[1:] { // the keys, which may hold references; not the head
				vis.Walk(t)
			}
			return true
		}
		return all
	})
	for _, m := range modules {
		vis.Walk(m)
	}
	if all {
		return allEntryMembers
	}
	return read
}

// entryBinding reports whether x is v = input.entries[k] (either way round) with v and k
// variables, and returns v.
func entryBinding(x *ast.Expr) (ast.Var, bool) {
	if !(x.IsEquality() || x.IsAssignment()) || x.Negated || len(x.With) > 0 {
		return "", false
	}
	a, b := x.Operand(0), x.Operand(1)
	for _, pair := range [2][2]*ast.Term{{a, b}, {b, a}} {
		v, isVar := pair[0].Value.(ast.Var)
		ref, isRef := pair[1].Value.(ast.Ref)
		if isVar && isRef && len(ref) == 3 && ref.HasPrefix(ast.InputRootRef) &&
			ref[1].Equal(ast.InternedTerm("entries")) {
			if _, keyIsVar := ref[2].Value.(ast.Var); keyIsVar {
				return v, true
			}
		}
	}
	return "", false
}

// isEntryVar reports whether t is a variable bound to an entry.
func isEntryVar(t *ast.Term, entryVars map[ast.Var]bool) bool {
	v, ok := t.Value.(ast.Var)
	return ok && entryVars[v]
}

// batchModules are the compiled modules of c that a batch's evaluation may run: every one but
// the derived rules' (derivedModules), which are there too when withDerived.
func batchModules(c *ast.Compiler, raw *rawSet, withDerived bool) map[string]*ast.Module {
	derived := derivedModules(c, raw)
	out := make(map[string]*ast.Module, len(c.Modules))
	for name, m := range c.Modules {
		if _, isDerived := derived[name]; withDerived || !isDerived {
			out[name] = m
		}
	}
	return out
}
