// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"context"
	"strings"
	"testing"
)

// readRequest is a typical files/read request as an MCP server sends it.
const readRequest = `{"jsonrpc":"2.0","id":42,"method":"files/read","params":{"path":"project/src/main.py","encoding":"utf-8","offset":0,"length":1048576}}`

// BenchmarkDecodeRequest is the cost of decoding one typical request.
func BenchmarkDecodeRequest(b *testing.B) {
	data := []byte(readRequest)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Decode(data)
		if err != nil || m.Method != "files/read" {
			b.Fatalf("Decode = %v, %v", m, err)
		}
	}
}

// BenchmarkConnRoundTrip is one sequential request/reply through a Conn over
// real OS pipes: the peer writes a files/read request and waits for a reply
// carrying 1 KiB of content.
func BenchmarkConnRoundTrip(b *testing.B) {
	type readResult struct {
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
		Size     int    `json:"size"`
		Offset   int    `json:"offset"`
		Length   int    `json:"length"`
		EOF      bool   `json:"eof"`
		MimeType string `json:"mimeType"`
		ETag     string `json:"etag"`
	}
	content := strings.Repeat("x", 1024)
	p := newTestPeer(b, 0)
	c := NewConn(p.stream, func(ctx context.Context, req *Message) (any, error) {
		return readResult{Content: content, Encoding: "utf-8", Size: 1024, Length: 1024, EOF: true, MimeType: "text/x-python", ETag: "e1"}, nil
	}, nil, nullLogger())
	serve(b, context.Background(), c, p)

	line := []byte(readRequest + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.in.Write(line); err != nil {
			b.Fatal(err)
		}
		reply, err := p.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if len(reply) < len(content) {
			b.Fatalf("short reply %q", reply)
		}
	}
}
