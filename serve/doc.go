// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package serve is the server-role front end of fsbroker: `fsbroker serve`
// plays the filesystem MCP server that hosts already run (a drop-in for the
// reference server @modelcontextprotocol/server-filesystem 2026.8.31) and
// will adapt each MCP tool call to a request of the broker's corridor.
//
// This package holds the tool layer's pure parts, each in a file named for
// it: the fourteen tool definitions (tools.go), argument decoding with the
// reference's defaults and error texts (args.go), the result builders
// (result.go, listing.go, tree.go, fileinfo.go, media.go), the text reads
// with the reference's head and tail semantics (text.go), edit_file's edit
// application (edit.go) and its unified diff in jsdiff's format (diff.go),
// and the minimatch glob semantics of search_files and directory_tree
// (glob.go). They take data (bytes, entry lists, readers), never paths: the
// file I/O is the corridor's. docs/serve.md says what they guarantee.
//
// The session (session.go, calls.go, resources.go, subscriptions.go,
// hostroots.go, elicit.go) serves the earlier revisions after initialize;
// modern.go, modern_inputs.go and elicit_modern.go serve protocol
// 2026-07-28 per request, asking the host inside InputRequiredResults under
// the sealed requestState of requeststate.go.
package serve
