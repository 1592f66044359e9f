// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import "strings"

// ToolResult is a tools/call result as the reference writes it: content
// items, structuredContent on every success ({"content": <text>}, or the
// content items for read_media_file), and isError (with no
// structuredContent) on a failure.
type ToolResult struct {
	Content           []any `json:"content"`
	StructuredContent any   `json:"structuredContent,omitempty"`
	IsError           bool  `json:"isError,omitempty"`
}

// TextContent is a text content item.
type TextContent struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// StructuredText is the structuredContent of every tool but
// read_media_file: the result text again.
type StructuredText struct {
	Content string `json:"content"`
}

// TextResult is a successful result carrying text: one text item and the
// same text as structuredContent.
func TextResult(text string) ToolResult {
	return ToolResult{Content: []any{TextContent{Type: "text", Text: text}}, StructuredContent: StructuredText{Content: text}}
}

// ErrorResult is a failed tool call: one text item, isError, no
// structuredContent.
func ErrorResult(text string) ToolResult {
	return ToolResult{Content: []any{TextContent{Type: "text", Text: text}}, IsError: true}
}

// WriteText is write_file's result text; path is the argument as sent.
func WriteText(path string) string { return "Successfully wrote to " + path }

// CreateDirectoryText is create_directory's result text; path is the
// argument as sent.
func CreateDirectoryText(path string) string { return "Successfully created directory " + path }

// MoveText is move_file's result text; source and destination are the
// arguments as sent.
func MoveText(source, destination string) string {
	return "Successfully moved " + source + " to " + destination
}

// DestinationExistsText is move_file's refusal of an occupied destination
// (the validated destination path).
func DestinationExistsText(destination string) string {
	return "Destination already exists: " + destination
}

// AllowedDirectoriesText is list_allowed_directories' result text: a
// heading line and one directory a line, in order.
func AllowedDirectoriesText(dirs []string) string {
	return "Allowed directories:\n" + strings.Join(dirs, "\n")
}

// SearchText is search_files' result text: the matching paths one a line,
// or "No matches found".
func SearchText(matches []string) string {
	if len(matches) == 0 {
		return "No matches found"
	}
	return strings.Join(matches, "\n")
}

// FileRead is the outcome of one file of read_multiple_files: the path as
// sent, and either its decoded content or the error text.
type FileRead struct {
	Path    string
	Content string
	Err     string // non-empty: the read failed with this text
}

// MultipleFilesText is read_multiple_files' result text: each file as
// "<path>:\n<content>\n" or "<path>: Error - <message>", in the order sent,
// joined with "\n---\n". Per-file failures never fail the call.
func MultipleFilesText(reads []FileRead) string {
	parts := make([]string, len(reads))
	for n, r := range reads {
		if r.Err != "" {
			parts[n] = r.Path + ": Error - " + r.Err
		} else {
			parts[n] = r.Path + ":\n" + r.Content + "\n"
		}
	}
	return strings.Join(parts, "\n---\n")
}
