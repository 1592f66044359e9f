package broker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// jsonTextCases are strings that need every kind of escaping.
var jsonTextCases = []string{
	"", "plain text", "quote \" and backslash \\", "line\nfeed\r\ttab", "\x00\x01\x1f\x7f \b \f",
	"<script>&amp;</script>", "line\u2028separator\u2029paragraph", "é ü 日本語 🙂",
	"bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate", strings.Repeat("x", 5000) + "\"",
}

// TestAppendJSONStringMatchesEncodingJSON: the reply encoder writes a
// string's bytes exactly as encoding/json would.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonTextCases {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("prefix"), []byte(s)); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[len("prefix"):], want)
		}
	}
}

// FuzzAppendJSONString compares the reply encoder with encoding/json on any
// bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonTextCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, err := json.Marshal(string(s))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestReadReplyMatchesEncodingJSON: a files/read result is the JSON
// encoding/json writes for the same fields, in both encodings.
func TestReadReplyMatchesEncodingJSON(t *testing.T) {
	type plain struct {
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
		Size     int64  `json:"size"`
		Offset   int64  `json:"offset"`
		Length   int    `json:"length"`
		EOF      bool   `json:"eof"`
		MimeType string `json:"mimeType"`
		ETag     string `json:"etag"`
	}
	for _, tc := range []struct {
		reply   readReply
		content string
	}{
		{readReply{data: []byte("héllo <\"x\">\n"), encoding: "utf-8", size: 99, offset: 3, eof: false,
			mimeType: "text/plain; charset=utf-8", etag: `"abc-1"`}, "héllo <\"x\">\n"},
		{readReply{data: []byte{0, 1, 2, 0xff, 0xfe}, encoding: "base64", size: 5, eof: true,
			mimeType: "application/octet-stream", etag: "e"}, "AAEC//4="},
		{readReply{encoding: "utf-8", eof: true}, ""},
	} {
		want, err := json.Marshal(plain{Content: tc.content, Encoding: tc.reply.encoding, Size: tc.reply.size,
			Offset: tc.reply.offset, Length: len(tc.reply.data), EOF: tc.reply.eof, MimeType: tc.reply.mimeType,
			ETag: tc.reply.etag})
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(&tc.reply)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("readReply encodes as\n%s\nwant\n%s", got, want)
		}
	}
}
