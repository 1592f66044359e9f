// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package streamable

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

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
	if held := ep.srv.statelessBytes.Load(); held != 0 {
		t.Fatalf("%d bytes still counted after the reply", held)
	}
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
	if held := ep.srv.statelessBytes.Load(); held != 0 {
		t.Fatalf("%d bytes still counted after the replies", held)
	}
	newRawClient(t, ep).initialize()
	mu.Lock()
	defer mu.Unlock()
	if len(stateless) != 2 || !stateless[0] || stateless[1] {
		t.Fatalf("Stateless of the sessions opened (the stateless one, then an HTTP session's): %v", stateless)
	}
}
