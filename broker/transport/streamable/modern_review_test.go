// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// TestStatelessBytesBounded: the bytes of requests without sessions that
// await their replies are bounded over the whole server: a request that
// would pass the bound gets 429 under its own id (the session's reading is
// never what holds it back), and the bytes of each answered request are
// counted out again. Config.NewSession is told which stream is the
// stateless session (Stateless), and an HTTP session's is not.
func TestStatelessBytesBounded(t *testing.T) {
	var (
		mu        sync.Mutex
		stateless []bool
	)
	ep := startEndpoint(t, func(c *Config) {
		c.ModernVersions = []string{"2026-07-28"}
		newSession := c.NewSession
		c.NewSession = func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			mu.Lock()
			stateless = append(stateless, Stateless(stream))
			mu.Unlock()
			return newSession(stream)
		}
	})
	if status, body, _ := modernPost(t, ep, `1`, "tools/call", "announce", `"name":"announce",`); status != http.StatusOK {
		t.Fatalf("within the bound: %d %s", status, body)
	}
	awaitNoStatelessBytes(t, ep)
	ep.srv.maxStatelessBytes = 64 // less than one request
	status, body, _ := modernPost(t, ep, `"over"`, "tools/call", "announce", `"name":"announce",`)
	var reply struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
	}
	if status != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &reply) != nil || string(reply.ID) != `"over"` ||
		reply.Error == nil || !strings.Contains(reply.Error.Message, "bytes") {
		t.Fatalf("past the bound: %d %s, want 429 under id \"over\"", status, body)
	}
	ep.srv.maxStatelessBytes = MaxStatelessBytes
	if status, body, _ := modernPost(t, ep, `2`, "tools/call", "announce", `"name":"announce",`); status != http.StatusOK {
		t.Fatalf("within the bound again: %d %s", status, body)
	}
	awaitNoStatelessBytes(t, ep)
	newRawClient(t, ep).initialize()
	mu.Lock()
	defer mu.Unlock()
	if len(stateless) != 2 || !stateless[0] || stateless[1] {
		t.Fatalf("Stateless of the sessions opened (the stateless one, then an HTTP session's): %v", stateless)
	}
}

// TestStatelessRepliesInTransitCount: a reply to a request without sessions
// is held until its client has read it (writeTimeout at most), so its bytes
// count against the server's bound until then: clients that send large
// reads and never read the replies cannot hold more than the bound (beyond,
// 429), and once such a client goes, requests are served again.
func TestStatelessRepliesInTransitCount(t *testing.T) {
	big := strings.Repeat("z", 24<<20)
	ep := startEndpoint(t, func(c *Config) {
		c.ModernVersions = []string{"2026-07-28"}
		c.NewSession = func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			conn := jsonrpc.NewConn(stream, func(_ context.Context, req *jsonrpc.Message) (any, error) {
				text := "small"
				if strings.Contains(string(req.Params), `"big"`) {
					text = big
				}
				return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}, nil
			}, nil)
			return conn.Serve, nil
		}
	})
	ep.srv.maxStatelessBytes = 16 << 20 // less than the reply
	addr := strings.TrimSuffix(strings.TrimPrefix(ep.url, "http://"), EndpointPath)
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big",` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if _, err := fmt.Fprintf(slow, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json\r\n"+
		"Authorization: Bearer %s\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: big\r\n"+
		"Content-Length: %d\r\n\r\n%s", EndpointPath, addr, ep.token, len(body), body); err != nil {
		t.Fatal(err)
	}
	// The slow client reads nothing: its reply stays in transit.
	awaitStatus(t, ep, http.StatusTooManyRequests, "while a 24 MiB reply waits for a client that does not read it")
	slow.Close()
	awaitStatus(t, ep, http.StatusOK, "once the slow client is gone")
}

// awaitStatus sends a small request without sessions until it gets status,
// for at most waitLimit.
func awaitStatus(t *testing.T, ep *testEndpoint, want int, when string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		status, body, _ := modernPost(t, ep, `2`, "tools/call", "small", `"name":"small",`)
		if status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %.200s, want %d", when, status, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitNoStatelessBytes waits until no bytes of stateless requests or
// replies are counted (each POST counts its own out as it ends, just after
// its client has the reply), for at most waitLimit.
func awaitNoStatelessBytes(t *testing.T, ep *testEndpoint) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for ep.srv.statelessBytes.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still counted after the replies", ep.srv.statelessBytes.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
