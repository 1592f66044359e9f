// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"encoding/json"
	"testing"
)

// replyTexts are texts whose encoding has every case of encoding/json's
// string escaping: plain ASCII, quotes and backslashes, control characters,
// HTML characters, U+2028 and U+2029, other multi-byte characters and
// invalid UTF-8 (a refusal's text is not decoded as a file's is).
var replyTexts = []string{"", "hello\n", `a "quoted" \ path`, "tab\tcr\rnul\x00bell\a", "<b>&amp;</b>",
	"line\u2028para\u2029end", "héllo wörld ✓ 🙂", "bad \xff\xfe utf-8 \xe2\x82", "PERMISSION_DENIED: secrets: .env"}

// TestTextReplyMatchesEncodingJSON: a text result's reply (with
// structuredContent, or isError) encodes to the bytes encoding/json writes
// for the ToolResult, as AppendJSON and as MarshalJSON.
func TestTextReplyMatchesEncodingJSON(t *testing.T) {
	for _, text := range replyTexts {
		for _, res := range []ToolResult{TextResult(text), ErrorResult(text)} {
			requireSameEncoding(t, res)
		}
	}
}

// requireSameEncoding fails the test unless res's reply is a textReply that
// encodes as json.Marshal encodes res.
func requireSameEncoding(t *testing.T, res ToolResult) {
	t.Helper()
	want, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := res.reply().(*textReply)
	if !ok {
		t.Fatalf("%+v: the reply is a %T, want a *textReply", res, res.reply())
	}
	if got := reply.AppendJSON([]byte("prefix")); !bytes.Equal(got[len("prefix"):], want) {
		t.Errorf("AppendJSON:\n got %s\nwant %s", got[len("prefix"):], want)
	}
	if got, err := json.Marshal(reply); err != nil || !bytes.Equal(got, want) {
		t.Errorf("json.Marshal of the reply: %s, %v\nwant %s", got, err, want)
	}
}

// TestOtherResultsReplyAsTheyAre: results that are not one text item (a
// media file's, or a text result whose structuredContent says something
// else) are answered as they are, by encoding/json.
func TestOtherResultsReplyAsTheyAre(t *testing.T) {
	for _, res := range []ToolResult{
		MediaResult("/x/a.png", []byte("\x89PNG")),
		{Content: []any{TextContent{Type: "text", Text: "a"}}, StructuredContent: StructuredText{Content: "b"}},
		{Content: []any{TextContent{Type: "text", Text: "a"}, TextContent{Type: "text", Text: "b"}}},
		{Content: []any{}},
	} {
		if _, isText := res.reply().(*textReply); isText {
			t.Errorf("%+v: answered as a text reply", res)
		}
	}
}

// FuzzTextReply: any text's reply encodes as encoding/json encodes the
// result.
func FuzzTextReply(f *testing.F) {
	for _, text := range replyTexts {
		f.Add(text, false)
	}
	f.Fuzz(func(t *testing.T, text string, isError bool) {
		res := TextResult(text)
		if isError {
			res = ErrorResult(text)
		}
		requireSameEncoding(t, res)
	})
}
