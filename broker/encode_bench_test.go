// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"strings"
	"testing"
)

// BenchmarkReadReplyAppendJSON is the cost of encoding a files/read result of 4 KiB and of
// 1 MiB of text, and of 1 MiB as base64.
func BenchmarkReadReplyAppendJSON(b *testing.B) {
	text := []byte(strings.Repeat("The quick brown fox <jumps> over the \"lazy\" dog.\n", 1<<20/49+1)[:1<<20])
	for _, tc := range []struct {
		name  string
		reply readReply
	}{
		{"utf-8/4KiB", readReply{data: text[:4096], encoding: "utf-8", size: 4096, eof: true, mimeType: "text/plain; charset=utf-8", etag: "e1"}},
		{"utf-8/1MiB", readReply{data: text, encoding: "utf-8", size: 1 << 20, eof: true, mimeType: "text/plain; charset=utf-8", etag: "e1"}},
		{"base64/1MiB", readReply{data: text, encoding: "base64", size: 1 << 20, eof: true, mimeType: "application/octet-stream", etag: "e1"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := tc.reply.AppendJSON(nil)
			b.SetBytes(int64(len(tc.reply.data)))
			b.ReportAllocs()
			for b.Loop() {
				buf = tc.reply.AppendJSON(buf[:0])
			}
		})
	}
}
