// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The --tools mode: the raw baseline of fsbroker serve. fsbaseline is then
// the MCP server side, as the reference filesystem server is: it answers the
// client's initialize, tools/list, and tools/call of read_text_file (and its
// alias read_file), list_directory and write_file, with the reference's
// result shapes (one text item and the same text as structuredContent;
// isError with the text on a failure) and plain OS calls: a path is an
// absolute path lexically inside a root, no link is resolved, nothing is
// validated, decided, consented, recorded or locked.

// toolsVersion is the protocol version answered when the client asks for
// one this mode does not know.
const toolsVersion = "2025-11-25"

// initializeResult answers the client's initialize: its version when it is
// one the reference answers, else toolsVersion.
func initializeResult(params json.RawMessage) any {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	version := toolsVersion
	switch p.ProtocolVersion {
	case "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05":
		version = p.ProtocolVersion
	}
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": "fsbaseline", "version": "dev"},
	}
}

// toolsList is the tools/list result: the three tools, each with its one
// or two string arguments.
func toolsList() any {
	tool := func(name string, args ...string) map[string]any {
		props := map[string]any{}
		for _, a := range args {
			props[a] = map[string]any{"type": "string"}
		}
		return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object", "properties": props, "required": args}}
	}
	return map[string]any{"tools": []any{
		tool("read_text_file", "path"), tool("read_file", "path"), tool("list_directory", "path"), tool("write_file", "path", "content"),
	}}
}

// toolText is a tools/call result as the reference writes it.
type toolText struct {
	Content           []textItem    `json:"content"`
	StructuredContent *structuredFS `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

type textItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type structuredFS struct {
	Content string `json:"content"`
}

func textResult(text string) *toolText {
	return &toolText{Content: []textItem{{Type: "text", Text: text}}, StructuredContent: &structuredFS{Content: text}}
}

func errorResult(text string) *toolText {
	return &toolText{Content: []textItem{{Type: "text", Text: text}}, IsError: true}
}

// callTool answers tools/call. A tool that fails is an isError result; an
// unknown tool or params that do not decode are JSON-RPC errors.
func (s *server) callTool(params json.RawMessage) (any, *rpcError) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"arguments"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	write := p.Name == "write_file"
	switch p.Name {
	case "read_text_file", "read_file", "list_directory", "write_file":
	default:
		return nil, &rpcError{Code: -32602, Message: "Tool " + p.Name + " not found"}
	}
	if result, ok := s.prepared[filepath.Clean(p.Arguments.Path)]; ok && !write {
		return result, nil
	}
	name, rerr := s.resolveAbs(p.Arguments.Path, write)
	if rerr != nil {
		return errorResult("Error: " + rerr.Message), nil
	}
	switch p.Name {
	case "list_directory":
		entries, err := os.ReadDir(name)
		if err != nil {
			return errorResult("Error: " + osError(err).Message), nil
		}
		return textResult(listingText(entries)), nil
	case "write_file":
		tmp, rerr := s.startTemp(name, true, false)
		if rerr == nil {
			if _, err := tmp.WriteString(p.Arguments.Content); err != nil {
				discard(tmp)
				rerr = osError(err)
			} else {
				_, rerr = s.commit(p.Arguments.Path, name, tmp, true)
			}
		}
		if rerr != nil {
			return errorResult("Error: " + rerr.Message), nil
		}
		return textResult("Successfully wrote to " + p.Arguments.Path), nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return errorResult("Error: " + osError(err).Message), nil
	}
	return textResult(string(data)), nil
}

// resolveAbs maps an absolute path to the OS path when it lies lexically
// inside a root (writable when write).
func (s *server) resolveAbs(path string, write bool) (string, *rpcError) {
	if !filepath.IsAbs(path) {
		return "", fail("INVALID_PATH", "not an absolute path")
	}
	path = filepath.Clean(path)
	for _, m := range s.order {
		r := s.roots[m]
		if rel, err := filepath.Rel(r.dir, path); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			if write && !r.rw {
				return "", fail("PERMISSION_DENIED", "read-only root")
			}
			return path, nil
		}
	}
	return "", fail("PERMISSION_DENIED", "not inside a root")
}

// listingText is list_directory's text: one "[DIR] name" or "[FILE] name"
// line an entry.
func listingText(entries []os.DirEntry) string {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		tag := "[FILE] "
		if e.IsDir() {
			tag = "[DIR] "
		}
		lines = append(lines, tag+e.Name())
	}
	return strings.Join(lines, "\n")
}

// prepareResults makes --from-memory's results: for every directory and
// regular file under the roots, the marshaled list_directory or
// read_text_file result, by absolute path. Answering from it measures what
// fsbench and the pipes cost around a server that does no work per request:
// the floor under every target's figures.
func prepareResults(order []string, roots map[string]root) (map[string]json.RawMessage, error) {
	prepared := map[string]json.RawMessage{}
	for _, mount := range order {
		err := filepath.WalkDir(roots[mount].dir, func(name string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var text string
			switch {
			case d.IsDir():
				entries, err := os.ReadDir(name)
				if err != nil {
					return err
				}
				text = listingText(entries)
			case d.Type().IsRegular():
				data, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				text = string(data)
			default:
				return nil
			}
			result, err := json.Marshal(textResult(text))
			prepared[name] = result
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("preparing the results of %s: %w", roots[mount].dir, err)
		}
	}
	return prepared, nil
}
