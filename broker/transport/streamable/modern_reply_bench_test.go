// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// BenchmarkModernLargeReply: one request of protocol 2026-07-28 over a
// real loopback connection whose reply is an 8 MiB result (a large
// resources/read), client and server in the process: B/op shows the
// copies the stateless session makes of a reply on its way back.
func BenchmarkModernLargeReply(b *testing.B) {
	text := strings.Repeat(`x"y`, 8<<20/3)
	token := NewToken()
	srv, err := NewServer(Config{Token: token, LoopbackOnly: true, Versions: []string{"2025-11-25"}, ModernVersions: []string{"2026-07-28"},
		NewSession: func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			conn := jsonrpc.NewConn(stream, func(context.Context, *jsonrpc.Message) (any, error) {
				return map[string]any{"contents": []any{map[string]any{"uri": "file:///big", "text": text}}}, nil
			}, nil)
			return conn.Serve, nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(ln) }()
	defer func() { _ = srv.Close(context.Background()); _ = hs.Close() }()
	url := "http://" + ln.Addr().String() + EndpointPath
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///big",` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(headerProtocolVersion, "2026-07-28")
		req.Header.Set(headerMethod, "resources/read")
		req.Header.Set(headerName, "file:///big")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < int64(len(text)) {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}
