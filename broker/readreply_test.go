// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"bytes"
	"encoding/json"
	"testing"
)

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
