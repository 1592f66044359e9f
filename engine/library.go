// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"sync"

	"github.com/fsbroker/fsbroker/policies"
	"github.com/open-policy-agent/opa/v1/ast"
)

// The library (policies.Library) is added to every policy set that does not define its packages
// itself: package fsbroker.lib holds the helper rules the built-in set and operators' files
// call, package fsbroker.derived the visible and consentable rules derived from the decision,
// which the engine queries for a set that does not define its own.
const (
	libPackage          = "data.fsbroker.lib"
	derivedPackage      = "data.fsbroker.derived"
	derivedVisibleQuery = derivedPackage + ".visible"
	derivedConsentQuery = derivedPackage + ".consentable"
)

// libraryPrefix is put before the library's file names (lib/lib.rego) in its module names, as
// errors, traces and print output name them: they are not files of the source.
const libraryPrefix = "builtin:policies/"

// parsedLibrary parses the library's modules (its tests left out) once; the parsed modules are
// never changed (the compiler and the test runner work on copies), so every set shares them.
var parsedLibrary = sync.OnceValues(func() (map[string]*ast.Module, error) {
	names, err := fs.Glob(policies.Library, "lib/*.rego")
	if err != nil {
		return nil, fmt.Errorf("engine: list the policy library: %w", err)
	}
	out := map[string]*ast.Module{}
	for _, name := range names {
		if isTestFile(path.Base(name)) {
			continue
		}
		src, err := fs.ReadFile(policies.Library, name)
		if err != nil {
			return nil, fmt.Errorf("engine: read the policy library: %w", err)
		}
		m, err := ast.ParseModuleWithOpts(libraryPrefix+name, string(src), parserOptions())
		if err != nil {
			return nil, fmt.Errorf("engine: parse the policy library: %w", err)
		}
		out[libraryPrefix+name] = m
	}
	return out, nil
})

// libraryFor returns the library modules a source whose policy modules are modules is loaded
// with: each one whose package no module of the source defines. A source that defines package
// fsbroker.lib (a copy of the library, say) is loaded with its own, not with both.
func libraryFor(modules map[string]*ast.Module) (map[string]*ast.Module, error) {
	lib, err := parsedLibrary()
	if err != nil {
		return nil, newLoadError(err, Problem{Message: err.Error()})
	}
	defined := make(map[string]bool, len(modules))
	for _, m := range modules {
		defined[m.Package.Path.String()] = true
	}
	out := make(map[string]*ast.Module, len(lib))
	for name, m := range lib {
		if !defined[m.Package.Path.String()] {
			out[name] = m
		}
	}
	return out, nil
}

// policyModules are the modules a set is compiled from: the source's policy modules and the
// library added to them.
func (r *rawSet) policyModules() map[string]*ast.Module {
	all := maps.Clone(r.modules)
	maps.Copy(all, r.library)
	return all
}

// evaluatedModules returns the compiled modules of c that a decision may evaluate: the source's
// own, and package fsbroker.lib when one of them refers to it. What makes a set's results
// uncacheable or time-dependent is looked for in these (and derivedModules): a library module
// the set never evaluates changes nothing.
func evaluatedModules(c *ast.Compiler, raw *rawSet) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(raw.modules)+1)
	for name := range raw.modules {
		out[name] = c.Modules[name]
	}
	if sourceRefersTo(c, raw, libPackage) {
		for name := range raw.library {
			if m := c.Modules[name]; m.Package.Path.String() == libPackage {
				out[name] = m
			}
		}
	}
	return out
}

// derivedModules returns the compiled library modules of c other than package fsbroker.lib:
// the derived visible and consentable, which answer the batches of a set that lacks its own or
// whose own rules use them.
func derivedModules(c *ast.Compiler, raw *rawSet) map[string]*ast.Module {
	out := map[string]*ast.Module{}
	for name := range raw.library {
		if m := c.Modules[name]; m.Package.Path.String() != libPackage {
			out[name] = m
		}
	}
	return out
}

// sourceRefersTo reports whether a compiled module of the source (not of the library) may read
// the document at ref.
func sourceRefersTo(c *ast.Compiler, raw *rawSet, ref string) bool {
	target := ast.MustParseRef(ref)
	for name := range raw.modules {
		if refersTo(c.Modules[name], target) {
			return true
		}
	}
	return false
}

// refersTo reports whether a compiled module may read the document at target (a ref under
// data): a reference to it, to a document within it or to one that holds it, or a reference
// under data with a computed key where the path could lead to it.
func refersTo(m *ast.Module, target ast.Ref) bool {
	found := false
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if found {
			return true
		}
		switch v := x.(type) {
		case ast.Var: // data as a whole
			found = v.Equal(ast.DefaultRootDocument.Value)
		case ast.Ref:
			if found = overlaps(v, target); !found {
				for _, t := range v[1:] { // the keys, which may hold references; not the head
					vis.Walk(t)
				}
			}
			return true
		}
		return found
	})
	vis.Walk(m)
	return found
}

// overlaps reports whether ref may name target, a document inside it or one that holds it.
func overlaps(ref, target ast.Ref) bool {
	if len(ref) == 0 || !ref[0].Equal(target[0]) {
		return false
	}
	for i := 1; i < len(ref) && i < len(target); i++ {
		if !ref[i].IsGround() {
			return true
		}
		if !ref[i].Equal(target[i]) {
			return false
		}
	}
	return true
}
