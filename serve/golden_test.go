// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// The golden tests replay the reference server's captured tool calls
// (testdata/reference/transcripts.json, from research capture.mjs against
// @modelcontextprotocol/server-filesystem 2026.8.31) through this package's
// pure functions, with the files the capture made (fixtureTree below, the
// same as capture.mjs's mkTree), and require what the reference wrote.
// A case whose answer depends on what only the corridor does (path
// validation and its refusals, OS errors, moves) is counted as not
// replayed.

const (
	refRoot    = "/tmp/fsref/root"
	refOutside = "/tmp/fsref/outside"
)

type transcriptMessage struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

type transcriptCase struct {
	Name     string              `json:"name"`
	Messages []transcriptMessage `json:"messages"`
}

type transcriptGroup struct {
	Group string           `json:"group"`
	Args  []string         `json:"args"`
	Cases []transcriptCase `json:"cases"`
}

func loadTranscripts(t *testing.T) []transcriptGroup {
	t.Helper()
	data, err := os.ReadFile("testdata/reference/transcripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var groups []transcriptGroup
	if err := json.Unmarshal(data, &groups); err != nil {
		t.Fatal(err)
	}
	return groups
}

// rpcMessage is one JSON-RPC message of a transcript.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// toolCall is one captured tools/call with its answer.
type toolCall struct {
	group, name string
	params      json.RawMessage
	tool        string
	args        json.RawMessage
	result      json.RawMessage // nil when the answer was a JSON-RPC error
	rpcError    string
}

// toolCalls returns every tools/call of every case with its answer.
func toolCalls(t *testing.T, groups []transcriptGroup) []toolCall {
	t.Helper()
	var calls []toolCall
	for _, g := range groups {
		for _, c := range g.Cases {
			var pending *toolCall
			for _, m := range c.Messages {
				if len(m.Msg) == 0 {
					continue
				}
				var msg rpcMessage
				if err := json.Unmarshal(m.Msg, &msg); err != nil {
					t.Fatal(err)
				}
				switch {
				case m.Dir == "c2s" && msg.Method == "tools/call":
					var p struct {
						Name      any             `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					}
					_ = json.Unmarshal(msg.Params, &p)
					name, _ := p.Name.(string)
					pending = &toolCall{group: g.Group, name: c.Name, params: msg.Params, tool: name, args: p.Arguments}
				case m.Dir == "s2c" && pending != nil && msg.Method == "":
					pending.result = msg.Result
					if msg.Error != nil {
						pending.rpcError = msg.Error.Message
					}
					calls = append(calls, *pending)
					pending = nil
				}
			}
		}
	}
	return calls
}

// capturedResult is the parsed result of a tool call.
type capturedResult struct {
	Content           []map[string]any `json:"content"`
	StructuredContent any              `json:"structuredContent"`
	IsError           bool             `json:"isError"`
}

func (c toolCall) parsed(t *testing.T) capturedResult {
	t.Helper()
	var r capturedResult
	if err := json.Unmarshal(c.result, &r); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return r
}

func (c toolCall) text(t *testing.T) string {
	t.Helper()
	r := c.parsed(t)
	if len(r.Content) != 1 {
		t.Fatalf("%s: %d content items", c.name, len(r.Content))
	}
	s, _ := r.Content[0]["text"].(string)
	return s
}

// requireResult compares a built result with the captured one as parsed JSON.
func requireResult(t *testing.T, c toolCall, got ToolResult) {
	t.Helper()
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gotValue, wantValue any
	if err := json.Unmarshal(raw, &gotValue); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c.result, &wantValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotValue, wantValue) {
		compact := new(bytes.Buffer)
		_ = json.Compact(compact, c.result)
		t.Errorf("%s / %s:\n got  %s\n want %s", c.group, c.name, raw, compact)
	}
}

// fixtureTree is the tree of capture.mjs's mkTree under /tmp/fsref/root:
// files with their content, directories, and symlinks with their targets
// (relative to the root, or absolute).
type fixtureTree struct {
	files map[string]string
	dirs  map[string]bool
	links map[string]string
	modes map[string]os.FileMode
}

func newFixtureTree() *fixtureTree {
	ft := &fixtureTree{
		files: map[string]string{
			"a.txt": "line1\nline2\nline3\n", "noeol.txt": "x\ny\nz", "crlf.txt": "one\r\ntwo\r\nthree\r\n",
			"empty.txt": "", "bom.txt": "\uFEFFbom\n", "latin1.bin": "hi\xff\xfe\x00\n",
			"code.js":  "function f() {\n    if (x) {\n        return 1;\n    }\n}\n",
			"ticks.md": "```js\nx\n```\n", "dollar.txt": "price: X\n", "dup.txt": "foo\nfoo\n",
			"big.bin": strings.Repeat("a", 1536), "img.png": "\x89PNG\r\n\x1a\n", "IMG2.JPG": "\xff\xd8\xff",
			"snd.mp3": "ID3", "doc.pdf": "%PDF-1.4\n", "pic.svg": "<svg/>", "noext": "plain",
			"Zebra.txt": "z", "apple.txt": "ap", "_under.txt": "u",
			"sub/b.txt": "bee\n", "sub/c.md": "# c\n", "sub/nested/deep.txt": "deep\n", ".hidden/h.txt": "h",
			".env": "SECRET=1\n", "node_modules/pkg/index.js": "module.exports = 1;\n",
			"ro.txt": "private\n", "space name.txt": "spaces\n", "caf\u00e9.txt": "nfc\n",
		},
		dirs: map[string]bool{"": true, "Banana": true, "emptydir": true},
		links: map[string]string{
			"link-in.txt": "a.txt", "link-dir": "sub", "link-out.txt": refOutside + "/secret.txt",
			"link-outdir": refOutside, "dangling": "nonexistent-target",
		},
		modes: map[string]os.FileMode{"ro.txt": 0o600},
	}
	for name := range ft.files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			ft.dirs[d] = true
		}
	}
	return ft
}

// rel returns the path inside the root of an argument (absolute under the
// root, or relative to it), symlinks inside the root resolved; ok is false
// for anything else.
func (ft *fixtureTree) rel(arg string) (string, bool) {
	p := arg
	if !path.IsAbs(p) {
		p = refRoot + "/" + p
	}
	p = path.Clean(p)
	if p == refRoot {
		return "", true
	}
	if !strings.HasPrefix(p, refRoot+"/") {
		return "", false
	}
	r := strings.TrimPrefix(p, refRoot+"/")
	parts := strings.Split(r, "/")
	if target, ok := ft.links[parts[0]]; ok {
		if path.IsAbs(target) {
			return "", false
		}
		parts[0] = target
	}
	return strings.Join(parts, "/"), true
}

// size is what stat reports for an entry (links followed; 0 when dangling).
func (ft *fixtureTree) size(rel string) int64 {
	if target, ok := ft.links[rel]; ok {
		switch {
		case target == refOutside:
			return 4096
		case target == refOutside+"/secret.txt":
			return int64(len("secret\n"))
		case ft.dirs[target]:
			return 4096
		default:
			if content, ok := ft.files[target]; ok {
				return int64(len(content))
			}
			return 0
		}
	}
	if ft.dirs[rel] {
		return 4096
	}
	return int64(len(ft.files[rel]))
}

// list returns a directory's entries; withOutside false leaves out the links
// that leave the root or dangle (search_files' validation drops them).
func (ft *fixtureTree) list(dir string, withOutside bool) ([]Entry, error) {
	if !ft.dirs[dir] {
		return nil, errors.New("not a directory: " + dir)
	}
	seen := map[string]bool{}
	var entries []Entry
	add := func(p string, isDir bool) {
		if path.Dir(p) != dir && !(dir == "" && path.Dir(p) == ".") {
			return
		}
		name := path.Base(p)
		if seen[name] {
			return
		}
		seen[name] = true
		entries = append(entries, Entry{Name: name, IsDir: isDir, Size: ft.size(p)})
	}
	for p := range ft.files {
		add(p, false)
	}
	for p := range ft.dirs {
		if p != "" {
			add(p, true)
		}
	}
	for p, target := range ft.links {
		if !withOutside {
			if _, inside := ft.files[target]; !inside && !ft.dirs[target] {
				continue
			}
		}
		add(p, false)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

// groupFiles are the files each session wrote into the tree before its calls.
func groupFiles(group string) map[string]string {
	switch {
	case strings.HasPrefix(group, "head/tail details"):
		lines := make([]string, 1500)
		for n := range lines {
			lines[n] = "L" + leftPad(n+1, 4)
		}
		euro := strings.Repeat("\u20ac", 400)
		return map[string]string{
			"many.txt": strings.Join(lines, "\n"), "mb.txt": "first " + euro + "\nsecond\nthird\n",
			"mb2.txt": euro + "\n" + euro + "\n", "long.txt": strings.Repeat("x", 3000) + "\nend\n",
			"cr.txt": "a\rb\rc", "blank.txt": "\n\n\n",
		}
	case strings.HasPrefix(group, "edit_file diff details"):
		var twenty strings.Builder
		for n := 1; n <= 20; n++ {
			twenty.WriteString("line " + leftPad(n, 1) + "\n")
		}
		return map[string]string{
			"twenty.txt": twenty.String(), "ws.py": "def f():\n    if a:\n        b()\n    c()\n",
			"bom.txt": "\uFEFFfirst\nsecond\n", "lonecr.txt": "a\rb\nc\n", "inv.bin": "a\xff\nb\n",
			"mixed.txt": "a\r\nb\nc\r\n",
		}
	}
	return nil
}

// filesBefore are the files a session wrote just before one of its calls.
func filesBefore(group, call string) map[string]string {
	if strings.HasPrefix(group, "main") && call == "edit_file: single edit" {
		return map[string]string{"e1.txt": "alpha\nbeta\ngamma\n"}
	}
	return nil
}

func leftPad(n, width int) string { return fmt.Sprintf("%0*d", width, n) }

// TestGoldenArguments decodes the arguments of every captured call: a
// call the reference refused for its arguments gives the same text; every
// other call decodes.
func TestGoldenArguments(t *testing.T) {
	calls := toolCalls(t, loadTranscripts(t))
	checked := 0
	for _, c := range calls {
		if c.rpcError != "" {
			_, _, err := DecodeCall(c.params)
			var ae *ArgumentsError
			if !errors.As(err, &ae) || !ae.Envelope {
				t.Errorf("%s: DecodeCall(%s) = %v, want an envelope error", c.name, c.params, err)
				continue
			}
			if got := ae.ReferenceText(); got != c.rpcError {
				t.Errorf("%s:\n got  %q\n want %q", c.name, got, c.rpcError)
			}
			checked++
			continue
		}
		name, args, err := DecodeCall(c.params)
		if err != nil {
			t.Errorf("%s: DecodeCall: %v", c.name, err)
			continue
		}
		_, err = DecodeArgs(name, args)
		r := c.parsed(t)
		refused := r.IsError && strings.HasPrefix(c.text(t), "MCP error -32602: ")
		switch {
		case refused:
			var text string
			var ae *ArgumentsError
			var ue *UnknownToolError
			switch {
			case errors.As(err, &ae):
				text = ae.ReferenceText()
			case errors.As(err, &ue):
				text = ue.ReferenceText()
			default:
				t.Errorf("%s: DecodeArgs(%s, %s) = %v, want a refusal", c.name, name, args, err)
				continue
			}
			if want := c.text(t); text != want {
				t.Errorf("%s:\n got  %q\n want %q", c.name, text, want)
			}
		case err != nil:
			t.Errorf("%s: DecodeArgs(%s, %s): %v (the reference accepted it)", c.name, name, args, err)
		}
		checked++
	}
	if checked < 300 {
		t.Fatalf("only %d calls checked", checked)
	}
}

// decoded decodes a captured call's arguments, failing the test on error.
func decoded[T any](t *testing.T, c toolCall) (T, bool) {
	t.Helper()
	var zero T
	v, err := DecodeArgs(c.tool, c.args)
	if err != nil {
		return zero, false
	}
	out, ok := v.(T)
	if !ok {
		t.Fatalf("%s: DecodeArgs gave %T", c.name, v)
	}
	return out, true
}

// TestGoldenResults replays every captured call whose answer the pure
// functions can give from the fixture tree, and requires the reference's
// result; at least the counted minimum must be replayed.
func TestGoldenResults(t *testing.T) {
	calls := toolCalls(t, loadTranscripts(t))
	replayed := map[string]int{}
	var ft *fixtureTree
	group := ""
	for _, c := range calls {
		if c.group != group {
			group = c.group
			ft = newFixtureTree()
			for name, content := range groupFiles(group) {
				ft.files[name] = content
			}
		}
		for name, content := range filesBefore(group, c.name) {
			ft.files[name] = content
		}
		if c.rpcError != "" {
			continue
		}
		r := c.parsed(t)
		if r.IsError && strings.HasPrefix(c.text(t), "MCP error") {
			continue // TestGoldenArguments
		}
		if !strings.HasPrefix(group, "main") && !strings.HasPrefix(group, "head/tail") &&
			!strings.HasPrefix(group, "edit_file diff") && !strings.HasPrefix(group, "search_files and") &&
			!strings.HasPrefix(group, "path edge") {
			continue // roots and command-line variants: the allowed directories differ
		}
		if replayCall(t, ft, c, r) {
			replayed[c.tool]++
		}
	}
	t.Logf("replayed: %v", replayed)
	minimum := map[string]int{
		ToolReadTextFile: 40, ToolReadFile: 2, ToolReadMediaFile: 10, ToolReadMultipleFiles: 3,
		ToolEditFile: 35, ToolListDirectory: 4, ToolListDirectoryWithSizes: 3, ToolDirectoryTree: 20,
		ToolSearchFiles: 45, ToolGetFileInfo: 4, ToolWriteFile: 5, ToolCreateDirectory: 3,
		ToolMoveFile: 3, ToolListAllowedDirectories: 3,
	}
	for tool, n := range minimum {
		if replayed[tool] < n {
			t.Errorf("%s: %d calls replayed, want at least %d", tool, replayed[tool], n)
		}
	}
}

// replayCall builds one call's result and compares it; false when the call
// is not one the pure functions answer.
func replayCall(t *testing.T, ft *fixtureTree, c toolCall, r capturedResult) bool {
	t.Helper()
	switch c.tool {
	case ToolReadTextFile, ToolReadFile:
		a, ok := decoded[ReadTextArgs](t, c)
		if !ok {
			return false
		}
		rel, inside := ft.rel(a.Path)
		content, isFile := ft.files[rel]
		if !inside || !isFile || strings.ContainsAny(a.Path, "\x00~\"") {
			return false
		}
		if a.Head != 0 && a.Tail != 0 {
			requireResult(t, c, ErrorResult(ErrHeadAndTail.Error()))
			return true
		}
		var text string
		var err error
		switch {
		case a.Tail != 0:
			text, err = TailText(strings.NewReader(content), int64(len(content)), a.Tail)
		case a.Head != 0:
			text, err = HeadText(strings.NewReader(content), a.Head)
		default:
			text = DecodeText([]byte(content))
		}
		if err != nil {
			t.Fatal(err)
		}
		requireResult(t, c, TextResult(text))
		return true
	case ToolReadMediaFile:
		a, ok := decoded[PathArgs](t, c)
		if !ok {
			return false
		}
		rel, inside := ft.rel(a.Path)
		content, isFile := ft.files[rel]
		if !inside || !isFile {
			return false
		}
		requireResult(t, c, MediaResult(refRoot+"/"+rel, []byte(content)))
		return true
	case ToolReadMultipleFiles:
		a, ok := decoded[ReadMultipleArgs](t, c)
		if !ok {
			return false
		}
		var reads []FileRead
		for _, p := range a.Paths {
			rel, inside := ft.rel(p)
			content, isFile := ft.files[rel]
			if !inside || !isFile {
				return false
			}
			reads = append(reads, FileRead{Path: p, Content: DecodeText([]byte(content))})
		}
		requireResult(t, c, TextResult(MultipleFilesText(reads)))
		return true
	case ToolWriteFile:
		a, ok := decoded[WriteArgs](t, c)
		if !ok || r.IsError {
			return false
		}
		if rel, inside := ft.rel(a.Path); inside {
			ft.files[rel] = a.Content
		}
		requireResult(t, c, TextResult(WriteText(a.Path)))
		return true
	case ToolEditFile:
		return replayEdit(t, ft, c, r)
	case ToolCreateDirectory:
		a, ok := decoded[PathArgs](t, c)
		if !ok || r.IsError {
			return false
		}
		requireResult(t, c, TextResult(CreateDirectoryText(a.Path)))
		return true
	case ToolMoveFile:
		a, ok := decoded[MoveArgs](t, c)
		if !ok || r.IsError {
			return false
		}
		requireResult(t, c, TextResult(MoveText(a.Source, a.Destination)))
		return true
	case ToolListAllowedDirectories:
		requireResult(t, c, TextResult(AllowedDirectoriesText([]string{refRoot})))
		return true
	case ToolListDirectory, ToolListDirectoryWithSizes:
		var p, sortBy string
		if c.tool == ToolListDirectory {
			a, ok := decoded[PathArgs](t, c)
			if !ok {
				return false
			}
			p = a.Path
		} else {
			a, ok := decoded[ListWithSizesArgs](t, c)
			if !ok {
				return false
			}
			p, sortBy = a.Path, a.SortBy
		}
		rel, inside := ft.rel(p)
		entries, err := ft.list(rel, true)
		if !inside || err != nil || strings.HasPrefix(p, "~") {
			return false
		}
		if c.tool == ToolListDirectory {
			requireResult(t, c, TextResult(ListingText(entries)))
		} else {
			requireResult(t, c, TextResult(ListingWithSizesText(entries, sortBy)))
		}
		return true
	case ToolDirectoryTree:
		a, ok := decoded[TreeArgs](t, c)
		if !ok {
			return false
		}
		root, inside := ft.rel(a.Path)
		if _, err := ft.list(root, true); !inside || err != nil {
			return false
		}
		tree, err := BuildTree(func(rel string) ([]Entry, error) {
			return ft.list(path.Join(root, rel), true)
		}, a.ExcludePatterns)
		if err != nil {
			t.Fatal(err)
		}
		requireResult(t, c, TextResult(TreeText(tree)))
		return true
	case ToolSearchFiles:
		a, ok := decoded[SearchArgs](t, c)
		if !ok {
			return false
		}
		root, inside := ft.rel(a.Path)
		if _, err := ft.list(root, false); !inside || err != nil {
			return false
		}
		matches, err := SearchMatches(func(rel string) ([]Entry, error) {
			return ft.list(path.Join(root, rel), false)
		}, a.Pattern, a.ExcludePatterns)
		if err != nil {
			t.Fatal(err)
		}
		for n, m := range matches {
			matches[n] = path.Join(refRoot, root, m)
		}
		requireResult(t, c, TextResult(SearchText(matches)))
		return true
	case ToolGetFileInfo:
		return replayFileInfo(t, ft, c, r)
	}
	return false
}

// replayEdit replays edit_file against the fixture's current content and
// keeps the result when the call was not a dry run.
func replayEdit(t *testing.T, ft *fixtureTree, c toolCall, r capturedResult) bool {
	t.Helper()
	a, ok := decoded[EditArgs](t, c)
	if !ok {
		return false
	}
	rel, inside := ft.rel(a.Path)
	content, isFile := ft.files[rel]
	if !inside || !isFile {
		return false
	}
	original, modified, err := ApplyEdits(DecodeText([]byte(content)), a.Edits)
	if err != nil {
		var ne *EditNoMatchError
		if !errors.As(err, &ne) {
			t.Fatalf("%s: %v", c.name, err)
		}
		requireResult(t, c, ErrorResult(err.Error()))
		return true
	}
	requireResult(t, c, TextResult(EditDiffText(path.Join(refRoot, rel), original, modified)))
	if !a.DryRun {
		ft.files[rel] = modified
	}
	return true
}

// replayFileInfo rebuilds get_file_info's text: size, type and mode from the
// fixture, the modification time capture.mjs set (2026-01-02T03:04:05.678Z
// on a.txt, sub and ro.txt), the birth and access times (which no test can
// set) read back from the captured text, in the session's time zone.
func replayFileInfo(t *testing.T, ft *fixtureTree, c toolCall, r capturedResult) bool {
	t.Helper()
	a, ok := decoded[PathArgs](t, c)
	if !ok || r.IsError {
		return false
	}
	rel, inside := ft.rel(a.Path)
	if !inside || (rel != "a.txt" && rel != "sub" && rel != "ro.txt") {
		return false
	}
	want := c.text(t)
	loc := time.UTC
	if strings.Contains(want, "GMT-0") {
		var err error
		if loc, err = time.LoadLocation("America/New_York"); err != nil {
			t.Skipf("no time zone data: %v", err)
		}
	}
	field := func(key string) time.Time {
		for _, line := range strings.Split(want, "\n") {
			if v, ok := strings.CutPrefix(line, key+": "); ok {
				at, err := time.ParseInLocation("Mon Jan 02 2006 15:04:05", v[:24], loc)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				return at
			}
		}
		t.Fatalf("%s: no %s", c.name, key)
		return time.Time{}
	}
	mode := os.FileMode(0o644)
	if m, ok := ft.modes[rel]; ok {
		mode = m
	}
	isDir := ft.dirs[rel]
	if isDir {
		mode = 0o755
	}
	info := FileInfo{
		Size: ft.size(rel), Created: field("created"), Accessed: field("accessed"),
		Modified: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC).In(loc),
		IsDir:    isDir, IsFile: !isDir, Mode: mode,
	}
	requireResult(t, c, TextResult(FileInfoText(info)))
	return true
}

// TestToolsList requires the embedded tool list to be the captured one,
// byte for byte, and Tools to give its fourteen tools in order.
func TestToolsList(t *testing.T) {
	line, err := os.ReadFile("testdata/reference/tools-list.json")
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ToolsListResult(), msg.Result) {
		t.Fatalf("tools.json differs from the captured tools/list result")
	}
	tools, err := Tools()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ToolReadFile, ToolReadTextFile, ToolReadMediaFile, ToolReadMultipleFiles, ToolWriteFile,
		ToolEditFile, ToolCreateDirectory, ToolListDirectory, ToolListDirectoryWithSizes, ToolDirectoryTree,
		ToolMoveFile, ToolSearchFiles, ToolGetFileInfo, ToolListAllowedDirectories}
	var got []string
	for _, tool := range tools {
		got = append(got, tool.Name)
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: input schema %s", tool.Name, tool.InputSchema)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
}
