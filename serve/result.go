// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"strings"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

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

// reply returns the result as tools/call answers it: a text result (one
// text item, and the same text as structuredContent or isError) as a
// textReply, which encodes itself; any other as it is.
func (r ToolResult) reply() any {
	if len(r.Content) != 1 {
		return r
	}
	item, ok := r.Content[0].(TextContent)
	if !ok || item.Type != "text" {
		return r
	}
	switch sc := r.StructuredContent.(type) {
	case nil:
		return &textReply{text: item.Text, isError: r.IsError}
	case StructuredText:
		if sc.Content == item.Text {
			return &textReply{text: item.Text, structured: true, isError: r.IsError}
		}
	}
	return r
}

// textReply is a ToolResult of one text item, with the same text as
// structuredContent when structured. It encodes itself (AppendJSON): the
// text goes into the reply as a JSON string straight, without
// encoding/json's reflection over the result's interfaces; the bytes are
// those json.Marshal writes for the ToolResult (TestTextReplyMatchesEncodingJSON).
type textReply struct {
	text       string
	structured bool
	isError    bool
}

// AppendJSON implements jsonrpc.ResultAppender.
func (r *textReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"content":[{"type":"text","text":`...)
	start := len(b)
	b = jsonx.AppendString(b, r.text)
	end := len(b)
	b = append(b, "}]"...)
	if r.structured { // the same text again: its encoding copied, not made twice
		b = append(b, `,"structuredContent":{"content":`...)
		b = append(b, b[start:end]...)
		b = append(b, '}')
	}
	if r.isError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, '}')
}

// MarshalJSON encodes the reply as AppendJSON does, for any encoder other
// than the connection's.
func (r *textReply) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

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
