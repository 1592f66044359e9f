// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package policies holds fsbroker's default Rego policy set, embedded in the
// binary: the policies (package fsbroker.authz, one concern per file), their
// _test.rego files and data.json, the documented defaults of every knob the
// policies read from data.fsbroker; and the library every policy set is
// loaded with (lib/: the helper rules of package fsbroker.lib, and package
// fsbroker.derived, visible and consentable derived from the decision).
//
// The broker queries data.fsbroker.authz.decision for every request,
// data.fsbroker.authz.visible for every listing page and batch of watch
// events and data.fsbroker.authz.consentable for files/consent; the input of
// each is the document of schema/policy-input.json. An admin extends the set
// by adding a .rego file in package fsbroker.authz with
// "deny contains {...} if {...}" (or "allow if", "hide contains") rules;
// authz.rego describes the rules and how they combine.
package policies

import "embed"

// FS holds the default policy set: every .rego file of this directory (the
// _test.rego files included, so that "fsbroker policy test" runs them on the
// built-in set) and data.json. Loaders that only evaluate skip the files
// ending in _test.rego.
//
//go:embed *.rego data.json
var FS embed.FS

// Library holds the modules the engine adds to every policy set that does not
// define their package itself, in lib/: lib.rego (package fsbroker.lib, the
// helper rules the built-in set and operators' files call) and derived.rego
// (package fsbroker.derived, visible and consentable derived from the
// decision, for a set that does not define them), with their _test.rego
// files, which run with the built-in set in this package's tests.
//
//go:embed lib/*.rego
var Library embed.FS
