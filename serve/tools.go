// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// toolsJSON is the result of the reference server's tools/list, byte for
// byte as it wrote it (member order, escapes and all): the fourteen tools
// with their titles, descriptions, input and output schemas, annotations and
// execution member.
//
//go:embed tools.json
var toolsJSON []byte

// ToolsListResult returns the tools/list result exactly as the reference
// server writes it ({"tools":[...]}, no nextCursor). The caller gets its own
// copy.
func ToolsListResult() json.RawMessage {
	return append(json.RawMessage(nil), toolsJSON...)
}

// Tool is one tool definition of tools/list. The schemas and annotations
// are kept as their raw JSON so that they are served exactly as the
// reference writes them.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Execution    json.RawMessage `json:"execution"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// The fourteen tool names, in the reference's tools/list order.
const (
	ToolReadFile               = "read_file"
	ToolReadTextFile           = "read_text_file"
	ToolReadMediaFile          = "read_media_file"
	ToolReadMultipleFiles      = "read_multiple_files"
	ToolWriteFile              = "write_file"
	ToolEditFile               = "edit_file"
	ToolCreateDirectory        = "create_directory"
	ToolListDirectory          = "list_directory"
	ToolListDirectoryWithSizes = "list_directory_with_sizes"
	ToolDirectoryTree          = "directory_tree"
	ToolMoveFile               = "move_file"
	ToolSearchFiles            = "search_files"
	ToolGetFileInfo            = "get_file_info"
	ToolListAllowedDirectories = "list_allowed_directories"
)

// Tools returns the fourteen tool definitions in tools/list order.
func Tools() ([]Tool, error) {
	var list struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(toolsJSON, &list); err != nil {
		return nil, fmt.Errorf("serve: embedded tools.json: %w", err)
	}
	return list.Tools, nil
}
