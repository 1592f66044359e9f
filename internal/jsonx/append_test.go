// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonx

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// stringCases are strings that need every kind of escaping.
var stringCases = []string{
	"", "plain text", "quote \" and backslash \\", "line\nfeed\r\ttab", "\x00\x01\x1f\x7f \b \f",
	"<script>&amp;</script>", "line\u2028separator\u2029paragraph", "é ü 日本語 🙂",
	"bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate", strings.Repeat("x", 5000) + "\"", "end \xe6\x97",
}

// TestAppendStringMatchesEncodingJSON: AppendString writes a string's bytes
// exactly as encoding/json would, from a string or from bytes.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range stringCases {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want = append([]byte("prefix"), want...)
		if got := AppendString([]byte("prefix"), s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendString([]byte("prefix"), []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("AppendString([]byte(%q)) = %s, want %s", s, got, want)
		}
	}
}

// FuzzAppendString compares AppendString with encoding/json on any bytes.
func FuzzAppendString(f *testing.F) {
	for _, s := range stringCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, err := json.Marshal(string(s))
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendString(nil, string(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(string %q) = %s, want %s", s, got, want)
		}
	})
}

// BenchmarkAppendString64KiB encodes 64 KiB of text against encoding/json.
func BenchmarkAppendString64KiB(b *testing.B) {
	text := strings.Repeat("The quick brown fox <jumps> over the \"lazy\" dog.\n", 1400)[:64<<10]
	b.Run("AppendString", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		buf := make([]byte, 0, 80<<10)
		for range b.N {
			buf = AppendString(buf[:0], text)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for range b.N {
			if _, err := json.Marshal(text); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAppendStringMemberMatchesEncodingJSON: a member written after another
// is what encoding/json writes for a struct's second field.
func TestAppendStringMemberMatchesEncodingJSON(t *testing.T) {
	for _, s := range stringCases {
		want, err := json.Marshal(struct {
			A int    `json:"a"`
			B string `json:"mimeType"`
		}{1, s})
		if err != nil {
			t.Fatal(err)
		}
		got := append(AppendStringMember([]byte(`{"a":1`), "mimeType", s), '}')
		if !bytes.Equal(got, want) {
			t.Errorf("AppendStringMember(%q) = %s, want %s", s, got, want)
		}
	}
}

// rawCases are JSON texts with white space to drop and characters that
// json.Marshal escapes in a RawMessage.
var rawCases = []string{
	`{}`, `[]`, `null`, `1.50`, `"x"`, ` { "a" : [ 1 , 2 ] , "b" : { } } `,
	`{"html":"<a href=\"x\">&amp;</a>"}`, "[\"line\u2028sep\u2029par\"]", `{"k":"\u003c"}`,
	"{\n\t\"deep\": [[[[{\"x\": true}]]]]\n}",
}

// TestAppendRawMessageMatchesMarshal: a raw value is appended as
// json.Marshal writes a json.RawMessage, and invalid JSON is an error.
func TestAppendRawMessageMatchesMarshal(t *testing.T) {
	for _, raw := range rawCases {
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		want = append([]byte("prefix"), want...)
		got, err := AppendRawMessage([]byte("prefix"), json.RawMessage(raw))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendRawMessage(%s) = %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `tru`} {
		if got, err := AppendRawMessage(nil, json.RawMessage(bad)); err == nil {
			t.Errorf("AppendRawMessage(%q) = %s, want an error", bad, got)
		}
	}
}

// FuzzAppendRawMessage compares AppendRawMessage with json.Marshal of a
// json.RawMessage on any valid JSON.
func FuzzAppendRawMessage(f *testing.F) {
	for _, raw := range rawCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := AppendRawMessage(nil, raw); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendRawMessage(%q) = %s, %v; want %s", raw, got, err, want)
		}
	})
}
