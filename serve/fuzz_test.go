// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// The fuzz targets (go test -fuzz=FuzzX ./serve/) check properties that
// hold for any input; their seed corpora are in testdata/fuzz.

var fuzzTools = []string{ToolReadFile, ToolReadTextFile, ToolReadMediaFile, ToolReadMultipleFiles, ToolWriteFile,
	ToolEditFile, ToolCreateDirectory, ToolListDirectory, ToolListDirectoryWithSizes, ToolDirectoryTree,
	ToolMoveFile, ToolSearchFiles, ToolGetFileInfo, ToolListAllowedDirectories, "no_such_tool"}

// FuzzDecodeArgs: any arguments decode to the tool's type or to a typed
// refusal with at least one issue, each with a pointer and a message, and
// the refusal is INVALID_PARAMS.
func FuzzDecodeArgs(f *testing.F) {
	f.Add(uint8(5), []byte(`{"path":"a","edits":[{"oldText":"x","newText":"y"}],"dryRun":true}`))
	f.Add(uint8(1), []byte(`{"path":5,"head":"2","tail":1e400}`))
	f.Add(uint8(8), []byte(`{"path":"x","sortBy":null}`))
	f.Add(uint8(3), []byte(`{"paths":[]}`))
	f.Fuzz(func(t *testing.T, toolIndex uint8, raw []byte) {
		tool := fuzzTools[int(toolIndex)%len(fuzzTools)]
		v, err := DecodeArgs(tool, raw)
		var ae *ArgumentsError
		var ue *UnknownToolError
		switch {
		case err == nil:
			if v == nil {
				t.Fatalf("%s: nil arguments and no error", tool)
			}
		case errors.As(err, &ae):
			if len(ae.Issues) == 0 {
				t.Fatalf("%s: refusal without issues", tool)
			}
			for _, is := range ae.Issues {
				if is.Message == "" || !strings.HasPrefix(is.Pointer(), "/") && len(is.Path) > 0 {
					t.Fatalf("%s: bad issue %+v", tool, is)
				}
			}
			if ae.Errcode().Code != errcode.InvalidParams || ae.ReferenceText() == "" {
				t.Fatalf("%s: refusal %v", tool, ae)
			}
		case errors.As(err, &ue):
			if tool != "no_such_tool" {
				t.Fatalf("%s reported unknown", tool)
			}
		default:
			if json.Valid(raw) {
				t.Fatalf("%s: valid JSON %q refused with %v", tool, raw, err)
			}
		}
	})
}

// FuzzDiff: the patch of any two texts, applied to the first, gives the
// second, and never has a hunk without a change.
func FuzzDiff(f *testing.F) {
	f.Add("alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n")
	f.Add("foo\nfoo\n", "bar\nfoo\n")
	f.Add("a\nb", "a\nb\n")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, oldText, newText string) {
		patch := CreateTwoFilesPatch("f", "f", oldText, newText, "original", "modified")
		got, err := applyPatch(oldText, patch)
		if err != nil {
			t.Fatalf("patch of %q -> %q unreadable: %v\n%s", oldText, newText, err, patch)
		}
		if got != newText {
			t.Fatalf("patch of %q -> %q gives %q\n%s", oldText, newText, got, patch)
		}
	})
}

// FuzzApplyEdits: edits never panic; an exact edit replaces the first
// occurrence; the diff text is fenced and its patch turns the original into
// the result (both with line endings normalized again).
func FuzzApplyEdits(f *testing.F) {
	f.Add("function f() {\n    if (x) {\n        return 1;\n    }\n}\n", "if (x) {\n  return 1;\n}", "if (y) {\n  return 2;\n}")
	f.Add("a\r\nb\nc\r\n", "b", "B")
	f.Add("foo\nfoo\n", "foo", "bar")
	f.Add("\t x\n", " \u00a0x", "y\n  z")
	f.Fuzz(func(t *testing.T, content, oldText, newText string) {
		original, modified, err := ApplyEdits(content, []Edit{{OldText: oldText, NewText: newText}})
		if err != nil {
			var ne *EditNoMatchError
			if !errors.As(err, &ne) || ne.OldText != oldText {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if normalized := NormalizeLineEndings(oldText); strings.Contains(original, normalized) {
			i := strings.Index(original, normalized)
			want := original[:i] + NormalizeLineEndings(newText) + original[i+len(normalized):]
			if modified != want {
				t.Fatalf("exact edit: %q, want %q", modified, want)
			}
		}
		text := EditDiffText("/r/f", original, modified)
		if !strings.HasPrefix(text, "```") || !strings.HasSuffix(text, "```\n\n") {
			t.Fatalf("not fenced: %q", text)
		}
		body := strings.TrimLeft(text, "`")
		body = strings.TrimPrefix(body, "diff\n")
		body = strings.TrimRight(strings.TrimSuffix(body, "\n\n"), "`")
		// The diff normalizes line endings once more, as the reference's does
		// ("a\r\r\n" is "a\r\n" after one pass).
		got, err := applyPatch(NormalizeLineEndings(original), body)
		if err != nil || got != NormalizeLineEndings(modified) {
			t.Fatalf("diff does not turn the original into the result (%v): %q", err, got)
		}
	})
}

// FuzzMatch: matching never panics and a pattern without magic characters
// matches exactly its own path.
func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{{"sub/b.txt", "**/*.txt"}, {"a.txt", "!*.txt"}, {"Zebra.txt", "[[:upper:]]*"},
		{"noeol.txt", "+(a|noeol).txt"}, {"x/y", "{x,z}/**"}, {"a", "[!a-]"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, pattern string) {
		_ = Match(p, pattern)
		_ = TreeExcluded(p, []string{pattern})
		if p != "" && !strings.ContainsAny(p, "*?[]{}()!+@#\\") && !strings.Contains(p, "//") &&
			!strings.HasSuffix(p, "/") && !strings.HasPrefix(p, "/") && !strings.Contains("/"+p+"/", "/../") &&
			!strings.Contains("/"+p+"/", "/./") && !Match(p, p) {
			t.Fatalf("%q does not match itself", p)
		}
	})
}

// FuzzHeadTail: head and tail, which read in 1024-byte chunks, give what
// taking lines of the whole decoded text gives.
func FuzzHeadTail(f *testing.F) {
	f.Add([]byte("line1\nline2\nline3\n"), 2.0)
	f.Add([]byte("one\r\ntwo\r\nthree\r\n"), 1.5)
	f.Add([]byte(strings.Repeat("\u20ac", 400)+"\nx\n"), 1.0)
	f.Add([]byte("a\rb\rc"), 3.0)
	f.Fuzz(func(t *testing.T, data []byte, n float64) {
		if math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 || n > 1e6 {
			return
		}
		head, err := HeadText(strings.NewReader(string(data)), n)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(DecodeText(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		wantHead := strings.Join(lines[:min(len(lines), int(math.Ceil(n)))], "\n")
		if head != wantHead {
			t.Fatalf("head %s of %q: %q, want %q", strconv.FormatFloat(n, 'g', -1, 64), data, head, wantHead)
		}
		if n < 1 {
			// The reference reads chunks until it has counted n newlines, then
			// keeps lines.slice(-n) of what it read: for n below 1 that is
			// slice(-0), every line read, the first one cut where the chunk
			// began (in a multi-byte character too). That is what TailText
			// does; the whole-text oracle below holds only from one line up.
			return
		}
		tail, err := TailText(strings.NewReader(string(data)), int64(len(data)), n)
		if err != nil {
			t.Fatal(err)
		}
		pieces := strings.Split(NormalizeLineEndings(DecodeText(data)), "\n")
		wantTail := strings.Join(jsSliceFrom(pieces, -n), "\n")
		if len(data) == 0 {
			wantTail = ""
		}
		if tail != wantTail {
			t.Fatalf("tail %v of %q: %q, want %q", n, data, tail, wantTail)
		}
	})
}

// applyPatch applies a unified patch as CreateTwoFilesPatch writes it.
func applyPatch(oldText, patch string) (string, error) {
	oldLines := splitKeepNewline(oldText)
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	var out []string
	next := 0 // the next old line not yet copied
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "@@ ") {
		i++
	}
	for i < len(lines) {
		var oldStart, oldCount, newStart, newCount int
		header := strings.NewReplacer("@@ -", "", " +", " ", " @@", "", ",", " ").Replace(lines[i])
		if _, err := fmt.Sscan(header, &oldStart, &oldCount, &newStart, &newCount); err != nil {
			return "", err
		}
		if oldCount == 0 {
			oldStart++
		}
		for next < oldStart-1 {
			out = append(out, oldLines[next])
			next++
		}
		changed := false
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "@@ "); i++ {
			l := lines[i]
			if l == `\ No newline at end of file` {
				continue
			}
			noNewline := i+1 < len(lines) && lines[i+1] == `\ No newline at end of file`
			text := l[1:]
			if !noNewline {
				text += "\n"
			}
			switch l[0] {
			case ' ':
				out = append(out, text)
				next++
			case '-':
				next++
				changed = true
			case '+':
				out = append(out, text)
				changed = true
			default:
				return "", errors.New("bad patch line " + strconv.Quote(l))
			}
		}
		if !changed {
			return "", errors.New("hunk without a change")
		}
	}
	out = append(out, oldLines[min(next, len(oldLines)):]...)
	return strings.Join(out, ""), nil
}

func splitKeepNewline(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// FuzzCanonicalCall: wherever the scan of tools/call params (canonicalCall)
// gives an answer, it is the general way's (generalCall): the same tool
// name, the same arguments as parsed, and the same bytes of them, which the
// policy input and the requestStates' bindings are made of.
func FuzzCanonicalCall(f *testing.F) {
	for _, seed := range []string{
		`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt"}}`,
		`{"name":"read_text_file","arguments":{"head":2,"path":"/tmp/a.txt"}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt","head":2}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt","path":"/etc/passwd"}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/a<b>.txt"}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/\u0061.txt"}}`,
		`{"name":"read_text_file","arguments": {"path":"/tmp/a.txt"}}`,
		`{"name":"read_text_file","arguments":{"path" :"/tmp/a.txt"}}`,
		`{"name":"read_text_file","arguments":{"dryRun":true,"edits":[],"path":null,"tail":-1.5e3}}`,
		`{"arguments":{"path":"a"},"name":"list_directory","name":"read_file"}`,
		`{"name":"list_allowed_directories"}`,
		`{"name":"x","arguments":{}}`,
		`{"name":"x","arguments":[]}`,
		`{"name":5,"arguments":{}}`,
		`{"name":"x","arguments":{"":"a","":"b"}}`,
		`{"name":"x","arguments":{"":1,"a":2}}`,
		`[1]`, `"x"`, ``, `{"name":"x"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		name, argsValue, args, ok := canonicalCall(params)
		if !ok {
			return
		}
		wantName, wantValue, wantArgs, err := generalCall(params)
		if err != nil {
			t.Fatalf("%s: the scan read it (%q, %s), the general way refused it: %v", params, name, args, err)
		}
		if name != wantName || !bytes.Equal(args, wantArgs) || !reflect.DeepEqual(argsValue, wantValue) {
			t.Fatalf("%s:\nscan:    %q %s %#v\ngeneral: %q %s %#v", params, name, args, argsValue, wantName, wantArgs, wantValue)
		}
	})
}

// TestCanonicalCallTakesTheCommonCall: the params a host sends for a read
// (compact, one path) are read by the scan, with the arguments' own bytes;
// params the scan cannot vouch for (white space, keys out of order or
// twice, escapes) are left to the general way.
func TestCanonicalCallTakesTheCommonCall(t *testing.T) {
	params := []byte(`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt"}}`)
	name, value, args, ok := canonicalCall(params)
	if !ok || name != ToolReadTextFile || string(args) != `{"path":"/tmp/a.txt"}` || value["path"] != "/tmp/a.txt" {
		t.Fatalf("canonicalCall(%s) = %q, %v, %s, %v", params, name, value, args, ok)
	}
	for _, p := range []string{
		`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt","head":2}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/a.txt","path":"/etc/passwd"}}`,
		`{"name":"read_text_file","arguments":{ "path":"/tmp/a.txt"}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/\u0061.txt"}}`,
		`{"name":"read_text_file","arguments":{"path":"/tmp/a&b.txt"}}`,
		`{"name":"read_text_file","arguments":{"paths":["/tmp/a.txt"]}}`,
	} {
		if _, _, _, ok := canonicalCall([]byte(p)); ok {
			t.Errorf("canonicalCall(%s) read it; the general way must", p)
		}
	}
}
