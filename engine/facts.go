// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Facts the engine adds to every input before a policy sees it, so that a rule finds what it
// needs by a lookup instead of string surgery or a walk (schema/policy-input.json describes
// them; a given value is replaced):
//
//   - input.path.ancestors and input.newPath.ancestors: the path's mountPath cut before each of
//     its slashes, the directories above it from the mount down ("proj", "proj/src" for
//     "proj/src/a.go"); empty for a mount itself;
//   - input.grantsByPath: input.grants grouped by path, each path without one trailing slash
//     (as lib.covered compares them), in the order of input.grants.
//
// The broker's own decision input gets them as it is built (requestValue); every other input
// (JSON: listings, files/consent, a directory's entries, fsbroker eval; a map) in inputValue.
// A path whose mountPath is not a string gets no ancestors, and grants that are not all objects
// with a string path no index: the rules then walk the grants as before.

// The names of the facts.
const (
	factAncestors    = "ancestors"
	factGrantsByPath = "grantsByPath"
)

// addFacts adds the facts to doc, an input document it may change.
func addFacts(doc ast.Object) ast.Object {
	doc = addEntryFacts(doc) // batchinput.go
	for _, role := range [...]string{"path", "newPath"} {
		if t := doc.Get(inputKey(role)); t != nil {
			if p, ok := t.Value.(ast.Object); ok {
				if mp, ok := stringAt(p, "mountPath"); ok {
					p.Insert(inputKey(factAncestors), ancestorsTerm(mp))
				}
			}
		}
	}
	var index *ast.Term
	if t := doc.Get(inputKey("grants")); t != nil {
		if grants, ok := t.Value.(*ast.Array); ok {
			index = grantIndex(grants)
		}
	}
	switch {
	case index != nil:
		doc.Insert(inputKey(factGrantsByPath), index)
	case doc.Get(inputKey(factGrantsByPath)) != nil:
		// Grants this cannot index: the rules must not find a given index instead.
		pairs := make([][2]*ast.Term, 0, doc.Len())
		doc.Foreach(func(k, v *ast.Term) {
			if !k.Equal(inputKey(factGrantsByPath)) {
				pairs = append(pairs, [2]*ast.Term{k, v})
			}
		})
		return ast.NewObject(pairs...)
	}
	return doc
}

// stringAt is the string member name of obj.
func stringAt(obj ast.Object, name string) (string, bool) {
	t := obj.Get(inputKey(name))
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}

// ancestorsTerm is the ancestors fact of mountPath: mountPath cut before each of its slashes.
func ancestorsTerm(mountPath string) *ast.Term {
	n := strings.Count(mountPath, "/")
	if n == 0 {
		return ast.InternedEmptyArray
	}
	terms := make([]ast.Term, n)
	elems := make([]*ast.Term, n)
	j := 0
	for i := range len(mountPath) {
		if mountPath[i] == '/' {
			terms[j].Value = ast.String(mountPath[:i])
			elems[j] = &terms[j]
			j++
		}
	}
	return ast.ArrayTerm(elems...)
}

// grantIndex is the grantsByPath fact of grants, or nil when a grant is not an object with a
// string path.
func grantIndex(grants *ast.Array) *ast.Term {
	byPath := map[string][]*ast.Term{}
	var order []string
	for i := range grants.Len() {
		g := grants.Elem(i)
		obj, ok := g.Value.(ast.Object)
		if !ok {
			return nil
		}
		path, ok := stringAt(obj, "path")
		if !ok {
			return nil
		}
		path = strings.TrimSuffix(path, "/")
		if _, seen := byPath[path]; !seen {
			order = append(order, path)
		}
		byPath[path] = append(byPath[path], g)
	}
	pairs := make([][2]*ast.Term, len(order))
	for i, path := range order {
		pairs[i] = [2]*ast.Term{ast.StringTerm(path), ast.ArrayTerm(byPath[path]...)}
	}
	return ast.NewTerm(ast.NewObject(pairs...))
}
