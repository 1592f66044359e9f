// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// The decoded arguments of each tool, with the reference's defaults applied.
// read_file and read_text_file share ReadTextArgs; create_directory,
// list_directory, read_media_file and get_file_info share PathArgs.

// ReadTextArgs are read_text_file's (and read_file's) arguments. Head and
// Tail are 0 when absent; the reference tests them for truthiness, so an
// explicit 0 means absent too. They are numbers, not integers: 1.5 and -1
// pass validation (text.go says what they do).
type ReadTextArgs struct {
	Path string
	Tail float64
	Head float64
}

// PathArgs are the arguments of the tools that take one path.
type PathArgs struct {
	Path string
}

// ReadMultipleArgs are read_multiple_files' arguments (at least one path).
type ReadMultipleArgs struct {
	Paths []string
}

// WriteArgs are write_file's arguments.
type WriteArgs struct {
	Path    string
	Content string
}

// Edit is one edit of edit_file: the first occurrence of OldText becomes
// NewText (edit.go).
type Edit struct {
	OldText string
	NewText string
}

// EditArgs are edit_file's arguments; DryRun defaults to false.
type EditArgs struct {
	Path   string
	Edits  []Edit
	DryRun bool
}

// ListWithSizesArgs are list_directory_with_sizes' arguments; SortBy is
// "name" (the default) or "size".
type ListWithSizesArgs struct {
	Path   string
	SortBy string
}

// TreeArgs are directory_tree's arguments; ExcludePatterns defaults to none.
type TreeArgs struct {
	Path            string
	ExcludePatterns []string
}

// MoveArgs are move_file's arguments.
type MoveArgs struct {
	Source      string
	Destination string
}

// SearchArgs are search_files' arguments; ExcludePatterns defaults to none.
type SearchArgs struct {
	Path            string
	Pattern         string
	ExcludePatterns []string
}

// NoArgs are list_allowed_directories' (none; members sent are ignored).
type NoArgs struct{}

// Issue is one validation failure, as zod reports it: where (Path: member
// names and array indexes from the arguments object, or from the request's
// params for an envelope issue), what (Message, zod's text) and zod's issue
// code and expected type.
type Issue struct {
	Code     string // "invalid_type", "too_small" or "invalid_value"
	Expected string // for invalid_type: the type expected
	Path     []any  // string member names and int array indexes
	Message  string
}

// Pointer returns the issue's place as a JSON pointer ("/edits/0/newText").
func (i Issue) Pointer() string {
	var b strings.Builder
	for _, seg := range i.Path {
		b.WriteByte('/')
		switch s := seg.(type) {
		case int:
			b.WriteString(strconv.Itoa(s))
		case string:
			b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
		}
	}
	return b.String()
}

// String returns the issue as the reference's SDK writes it: the message,
// then " at " and the path dotted with [i] for indexes (edits[0].newText).
func (i Issue) String() string {
	if len(i.Path) == 0 {
		return i.Message
	}
	var b strings.Builder
	for n, seg := range i.Path {
		switch s := seg.(type) {
		case int:
			if n == 0 {
				b.WriteString(strconv.Itoa(s))
			} else {
				fmt.Fprintf(&b, "[%d]", s)
			}
		case string:
			if n > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return i.Message + " at " + b.String()
}

// ArgumentsError is a tools/call whose arguments fail the tool's input
// schema (or whose params are malformed: Envelope). Its issues are in
// zod's order: the schema's members in order, array items in order.
type ArgumentsError struct {
	Tool     string // the tool, "" for an envelope error
	Envelope bool   // params.name or params.arguments itself is malformed
	Issues   []Issue
}

// Error returns the reference's text without its protocol prefix:
// "Invalid arguments for tool T: <issues joined by \n>" (or, for an envelope
// error, the issues the same way).
func (e *ArgumentsError) Error() string {
	lines := make([]string, len(e.Issues))
	for n, is := range e.Issues {
		lines[n] = is.String()
	}
	if e.Envelope {
		return strings.Join(lines, "\n")
	}
	return "Invalid arguments for tool " + e.Tool + ": " + strings.Join(lines, "\n")
}

// ReferenceText returns what the reference server answers: for a schema
// failure the text of its isError result ("MCP error -32602: Input
// validation error: ..."); for an envelope error the message of its JSON-RPC
// error -32603 (zod's issue list, JSON with two-space indentation).
func (e *ArgumentsError) ReferenceText() string {
	if !e.Envelope {
		return "MCP error -32602: Input validation error: " + e.Error()
	}
	var b strings.Builder
	b.WriteString("[")
	for n, is := range e.Issues {
		if n > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {\n    \"expected\": ")
		b.WriteString(jsString(is.Expected))
		b.WriteString(",\n    \"code\": ")
		b.WriteString(jsString(is.Code))
		b.WriteString(",\n    \"path\": [")
		for k, seg := range is.Path {
			if k > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n      ")
			switch s := seg.(type) {
			case int:
				b.WriteString(strconv.Itoa(s))
			case string:
				b.WriteString(jsString(s))
			}
		}
		b.WriteString("\n    ],\n    \"message\": ")
		b.WriteString(jsString(is.Message))
		b.WriteString("\n  }")
	}
	b.WriteString("\n]")
	return b.String()
}

// Errcode returns the failure as fsbroker reports it: INVALID_PARAMS with
// data.errors, a list of {pointer, message} (docs/protocol.md section 4).
func (e *ArgumentsError) Errcode() *errcode.Error {
	list := make([]map[string]string, len(e.Issues))
	for n, is := range e.Issues {
		list[n] = map[string]string{"pointer": is.Pointer(), "message": is.Message}
	}
	return errcode.Wrap(errcode.InvalidParams, e.Error(), e).With("errors", list)
}

// UnknownToolError is a tools/call naming no tool of the fourteen.
type UnknownToolError struct {
	Name string
}

// Error returns "Tool <name> not found", as the reference says it.
func (e *UnknownToolError) Error() string { return "Tool " + e.Name + " not found" }

// ReferenceText returns the text of the reference's isError result.
func (e *UnknownToolError) ReferenceText() string { return "MCP error -32602: " + e.Error() }

// Errcode returns the failure as fsbroker reports it: INVALID_PARAMS with
// the pointer of params.name.
func (e *UnknownToolError) Errcode() *errcode.Error {
	return errcode.Wrap(errcode.InvalidParams, e.Error(), e).
		With("errors", []map[string]string{{"pointer": "/name", "message": "no tool of this name"}})
}

// DecodeCall decodes the params of tools/call: the tool name and its raw
// arguments (an absent arguments member is {}). Params that are not an
// object, a name that is not a string or arguments that are not an object
// are an *ArgumentsError with Envelope set, as the reference's zod reports
// them.
func DecodeCall(params json.RawMessage) (name string, args json.RawMessage, err error) {
	name, _, args, err = decodeCall(params)
	return name, args, err
}

// DecodeToolCall decodes and validates a tools/call at once: DecodeCall,
// then DecodeArgs on the arguments as DecodeCall parsed them, without
// encoding and parsing them again. name is the tool named ("" when the
// envelope is malformed), args one of the *Args types, rawArgs the
// arguments as DecodeCall returns them; err is DecodeCall's or DecodeArgs'.
func DecodeToolCall(params json.RawMessage) (name string, args any, rawArgs json.RawMessage, err error) {
	name, argsValue, rawArgs, err := decodeCall(params)
	if err != nil {
		return name, nil, nil, err
	}
	args, err = decodeArgsValue(name, argsValue)
	return name, args, rawArgs, err
}

// decodeCall is DecodeCall that also returns the arguments object as
// parsed (numbers as json.Number). Params whose arguments are already
// written as encoding/json writes them (canonicalCall) are read by a scan;
// any other takes the general way, which parses them and writes them again.
func decodeCall(params json.RawMessage) (name string, argsValue map[string]any, args json.RawMessage, err error) {
	if name, argsValue, args, ok := canonicalCall(params); ok {
		return name, argsValue, args, nil
	}
	return generalCall(params)
}

// generalCall is decodeCall's general way: params parsed whole, the
// arguments written again by json.Marshal.
func generalCall(params json.RawMessage) (name string, argsValue map[string]any, args json.RawMessage, err error) {
	var v any = absentValue{}
	if len(bytes.TrimSpace(params)) > 0 {
		parsed, perr := parseJSON(params)
		if perr != nil {
			return "", nil, nil, fmt.Errorf("serve: tools/call params: %w", perr)
		}
		v = parsed
	}
	var issues []Issue
	envelope, ok := v.(map[string]any)
	if !ok {
		issues = append(issues, typeIssue("object", v, "params"))
		return "", nil, nil, &ArgumentsError{Envelope: true, Issues: issues}
	}
	nameValue, present := envelope["name"]
	if s, isString := nameValue.(string); present && isString {
		name = s
	} else {
		issues = append(issues, typeIssue("string", absentOr(nameValue, present), "params", "name"))
	}
	argsMember, present := envelope["arguments"]
	if present {
		if argsValue, ok = argsMember.(map[string]any); !ok {
			issues = append(issues, typeIssue("record", argsMember, "params", "arguments"))
		}
	}
	if len(issues) > 0 {
		return "", nil, nil, &ArgumentsError{Envelope: true, Issues: issues}
	}
	if !present {
		return name, map[string]any{}, json.RawMessage("{}"), nil
	}
	raw, err := json.Marshal(argsValue)
	if err != nil {
		return "", nil, nil, fmt.Errorf("serve: tools/call arguments: %w", err)
	}
	return name, argsValue, raw, nil
}

// canonicalCall reads params the way decodeCall's general way does when it
// can tell the outcome by a scan: params a valid JSON object whose name is
// a string written without escapes, and whose arguments are absent or an
// object that json.Marshal would write again byte for byte (canonicalArgs).
// The arguments returned are then those bytes of params themselves. ok is
// false for anything else, which the general way decodes (and refuses
// where it must).
func canonicalCall(params json.RawMessage) (name string, argsValue map[string]any, args json.RawMessage, ok bool) {
	if !json.Valid(params) {
		return "", nil, nil, false
	}
	var rawName, rawArgs []byte
	s := jsonx.ScanObject(params)
	for s.Next() {
		m := s.Member()
		member, ok := jsonx.UnquoteBytes(m.Name)
		if !ok {
			return "", nil, nil, false
		}
		switch string(member) {
		case "name": // a later duplicate replaces an earlier one, as in the general way
			rawName = m.Value
		case "arguments":
			rawArgs = m.Value
		}
	}
	if _, closed := s.End(); !closed || rawName == nil {
		return "", nil, nil, false
	}
	if name, ok = plainJSONString(rawName); !ok {
		return "", nil, nil, false
	}
	if rawArgs == nil {
		return name, map[string]any{}, json.RawMessage("{}"), true
	}
	if argsValue, ok = canonicalArgs(rawArgs); !ok {
		return "", nil, nil, false
	}
	return name, argsValue, rawArgs, true
}

// canonicalArgs parses raw, valid JSON, when it is an object written as
// json.Marshal writes the map it parses to: no white space, member names in
// increasing byte order (so none twice), names and string values without
// escapes (plainJSONString), and only strings, numbers (written as they
// came: json.Number), true, false and null as values. ok is false for any
// other text.
func canonicalArgs(raw []byte) (map[string]any, bool) {
	if string(raw) == "{}" {
		return map[string]any{}, true
	}
	obj := make(map[string]any, 4)
	next, last := 1, ""
	s := jsonx.ScanObject(raw)
	for s.Next() {
		m := s.Member()
		name, ok := plainJSONString(m.Name)
		if !ok || m.Start != next || m.ValueStart != m.Start+len(m.Name)+1 || (len(obj) > 0 && name <= last) {
			return nil, false
		}
		v, ok := canonicalScalar(m.Value)
		if !ok {
			return nil, false
		}
		obj[name], last, next = v, name, m.End+1
	}
	if end, closed := s.End(); !closed || end != len(raw) || end != next {
		return nil, false
	}
	return obj, true
}

// canonicalScalar is the value of raw, a valid JSON value, when it is one
// json.Marshal writes again as raw: a string without escapes, a number
// (json.Number keeps its text), true, false or null.
func canonicalScalar(raw []byte) (any, bool) {
	switch c := raw[0]; {
	case c == '"':
		return plainJSONString(raw)
	case c == '-' || (c >= '0' && c <= '9'):
		return json.Number(raw), true
	case string(raw) == "true":
		return true, true
	case string(raw) == "false":
		return false, true
	case string(raw) == "null":
		return nil, true
	}
	return nil, false
}

// plainJSONString returns the value of the JSON string raw when json.Marshal
// writes that value again as raw: printable ASCII with no escape and none
// of the characters it escapes for HTML (<, > and &).
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// DecodeArgs validates and decodes a tool's arguments (a JSON object; nil or
// empty means {}) the way the reference's zod schemas do: members in schema
// order, unknown members dropped, defaults applied. It returns one of the
// *Args types above (by value), an *UnknownToolError for a name that is no
// tool, or an *ArgumentsError listing every issue.
func DecodeArgs(tool string, raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	v, err := parseJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("serve: %s arguments: %w", tool, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &ArgumentsError{Tool: tool, Issues: []Issue{typeIssue("object", v)}}
	}
	return decodeArgsValue(tool, obj)
}

// decodeArgsValue is DecodeArgs on the arguments object as parsed.
func decodeArgsValue(tool string, obj map[string]any) (any, error) {
	d := &decoder{obj: obj}
	var out any
	switch tool {
	case ToolReadFile, ToolReadTextFile:
		out = ReadTextArgs{Path: d.str("path"), Tail: d.optNumber("tail"), Head: d.optNumber("head")}
	case ToolReadMediaFile, ToolCreateDirectory, ToolListDirectory, ToolGetFileInfo:
		out = PathArgs{Path: d.str("path")}
	case ToolReadMultipleFiles:
		out = ReadMultipleArgs{Paths: d.strings("paths", false, 1)}
	case ToolWriteFile:
		out = WriteArgs{Path: d.str("path"), Content: d.str("content")}
	case ToolEditFile:
		out = EditArgs{Path: d.str("path"), Edits: d.edits("edits"), DryRun: d.optBool("dryRun")}
	case ToolListDirectoryWithSizes:
		out = ListWithSizesArgs{Path: d.str("path"), SortBy: d.optEnum("sortBy", "name", "name", "size")}
	case ToolDirectoryTree:
		out = TreeArgs{Path: d.str("path"), ExcludePatterns: d.strings("excludePatterns", true, 0)}
	case ToolMoveFile:
		out = MoveArgs{Source: d.str("source"), Destination: d.str("destination")}
	case ToolSearchFiles:
		out = SearchArgs{Path: d.str("path"), Pattern: d.str("pattern"), ExcludePatterns: d.strings("excludePatterns", true, 0)}
	case ToolListAllowedDirectories:
		out = NoArgs{}
	default:
		return nil, &UnknownToolError{Name: tool}
	}
	if len(d.issues) > 0 {
		return nil, &ArgumentsError{Tool: tool, Issues: d.issues}
	}
	return out, nil
}

// decoder reads the members of one arguments object and collects issues.
type decoder struct {
	obj    map[string]any
	issues []Issue
}

func (d *decoder) str(name string) string {
	v, present := d.obj[name]
	if s, ok := v.(string); present && ok {
		return s
	}
	d.issues = append(d.issues, typeIssue("string", absentOr(v, present), name))
	return ""
}

func (d *decoder) optNumber(name string) float64 {
	v, present := d.obj[name]
	if !present {
		return 0
	}
	if n, ok := v.(json.Number); ok {
		f, err := strconv.ParseFloat(string(n), 64)
		if err == nil && !math.IsInf(f, 0) {
			return f
		}
		// JSON.parse reads an out-of-range number as Infinity, which zod refuses.
		d.issues = append(d.issues, Issue{Code: "invalid_type", Expected: "number", Path: []any{name},
			Message: "Invalid input: expected number, received Infinity"})
		return 0
	}
	d.issues = append(d.issues, typeIssue("number", v, name))
	return 0
}

func (d *decoder) optBool(name string) bool {
	v, present := d.obj[name]
	if !present {
		return false
	}
	if b, ok := v.(bool); ok {
		return b
	}
	d.issues = append(d.issues, typeIssue("boolean", v, name))
	return false
}

func (d *decoder) optEnum(name, def string, values ...string) string {
	v, present := d.obj[name]
	if !present {
		return def
	}
	if s, ok := v.(string); ok {
		for _, allowed := range values {
			if s == allowed {
				return s
			}
		}
	}
	quoted := make([]string, len(values))
	for n, allowed := range values {
		quoted[n] = jsString(allowed)
	}
	d.issues = append(d.issues, Issue{Code: "invalid_value", Path: []any{name},
		Message: "Invalid option: expected one of " + strings.Join(quoted, "|")})
	return ""
}

// strings reads an array of strings; optional arrays default to empty, and
// minItems is checked after the items' types, as zod does.
func (d *decoder) strings(name string, optional bool, minItems int) []string {
	v, present := d.obj[name]
	if !present && optional {
		return []string{}
	}
	list, ok := v.([]any)
	if !present || !ok {
		d.issues = append(d.issues, typeIssue("array", absentOr(v, present), name))
		return nil
	}
	out := make([]string, 0, len(list))
	for n, item := range list {
		s, ok := item.(string)
		if !ok {
			d.issues = append(d.issues, typeIssue("string", item, name, n))
			continue
		}
		out = append(out, s)
	}
	if len(list) < minItems {
		d.issues = append(d.issues, Issue{Code: "too_small", Path: []any{name},
			Message: fmt.Sprintf("Too small: expected array to have >=%d items", minItems)})
	}
	return out
}

func (d *decoder) edits(name string) []Edit {
	v, present := d.obj[name]
	list, ok := v.([]any)
	if !present || !ok {
		d.issues = append(d.issues, typeIssue("array", absentOr(v, present), name))
		return nil
	}
	out := make([]Edit, 0, len(list))
	for n, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			d.issues = append(d.issues, typeIssue("object", item, name, n))
			continue
		}
		var e Edit
		var bad bool
		for _, member := range []struct {
			key string
			dst *string
		}{{"oldText", &e.OldText}, {"newText", &e.NewText}} {
			mv, mp := obj[member.key]
			if s, ok := mv.(string); mp && ok {
				*member.dst = s
				continue
			}
			bad = true
			d.issues = append(d.issues, typeIssue("string", absentOr(mv, mp), name, n, member.key))
		}
		if !bad {
			out = append(out, e)
		}
	}
	return out
}

// absentValue stands for a member that is not there (JavaScript's undefined).
type absentValue struct{}

func absentOr(v any, present bool) any {
	if !present {
		return absentValue{}
	}
	return v
}

// typeIssue is zod's invalid_type issue for a value at path.
func typeIssue(expected string, v any, path ...any) Issue {
	return Issue{Code: "invalid_type", Expected: expected, Path: path,
		Message: "Invalid input: expected " + expected + ", received " + jsTypeName(v)}
}

// jsTypeName is the name zod gives the type of a parsed JSON value.
func jsTypeName(v any) string {
	switch v.(type) {
	case absentValue:
		return "undefined"
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// parseJSON parses one JSON value, numbers kept as json.Number.
func parseJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}
