// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package conformance holds fsbroker's protocol test vectors and the runner that plays the MCP
// server against any broker command over stdio.
//
// A vector (a [Case]) is a YAML or JSON file under cases/<section>/<name>.yaml, checked against
// case.schema.json (JSON Schema 2020-12, embedded). It names a fixture tree, the broker's roots
// and flags, the initialize exchange, a list of steps (requests with the reply they must get,
// raw lines, notifications to expect, changes the runner makes on disk, pauses, tools run beside
// the broker such as {grants-revoke}, restarts of the broker on the same state directory) and the
// state of the tree afterwards. docs/conformance.md describes the format.
//
// A [Runner] runs cases: each one in a fresh temporary directory, against a fresh broker process
// started from a command template (by default "fsbroker stdio", with --root, --state-dir and
// --consent appended; --config FILE in place of --root when the case's roots are pre-approved,
// the default under --consent auto), in parallel up to a bound. The runner knows nothing of fsbroker's
// internals: it drives the command over its stdin and stdout only, so any implementation of the
// protocol can be held to the same cases.
//
// The serve section (cases/serve, [ServeSuite]) turns the roles round: in a case with a [Host],
// the runner plays the host of a filesystem MCP server command ([Runner.Server]: fsbroker serve,
// the reference server, any other), started with the case's root directories, and calls its
// tools. Drop-in cases ([TagDropIn]) hold it to the reference server's tools; enforcement cases
// ([TagEnforce]) to what a policy-enforcing server adds.
package conformance
