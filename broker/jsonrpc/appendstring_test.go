package jsonrpc

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
