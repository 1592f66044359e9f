// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
)

// routedLines is a RoutedStream over a test peer's LineStream that records
// the route Conn gives each message it writes.
type routedLines struct {
	*LineStream
	mu     sync.Mutex
	routes map[string]route // method, or "reply:" and the id, of each message written
}

type route struct {
	id    ID
	reply bool
}

func (s *routedLines) WriteRouted(msg []byte, id ID, reply bool) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return err
	}
	key := m.Method
	if key == "" {
		key = "reply:" + string(m.ID)
	}
	s.mu.Lock()
	s.routes[key] = route{id, reply}
	s.mu.Unlock()
	return s.LineStream.Write(msg)
}

func (s *routedLines) routeOf(key string) (route, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.routes[key]
	return r, ok
}

// TestConnRoutesMessagesByRequest: over a RoutedStream, each reply names the
// request it answers, a request or notification sent with a handler's
// context names the handler's request, and one sent outside any handler
// names none; over a plain Stream a handler's context carries no request.
func TestConnRoutesMessagesByRequest(t *testing.T) {
	p := newTestPeer(t, 0)
	stream := &routedLines{LineStream: p.stream, routes: map[string]route{}}
	var c *Conn
	c = NewConn(stream, func(ctx context.Context, req *Message) (any, error) {
		if req.Method == "work" {
			if err := c.Call(ctx, "ask", nil, nil); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}, nil, nullLogger())
	serve(t, context.Background(), c, p)

	p.request(t, `7`, "work", nil)
	ask := readCall(t, p, "fsbroker-", "ask")
	p.send(t, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{}}`)
	p.expectResult(t, `7`, `"done"`)
	p.send(t, `{"jsonrpc":"2.0","id":8,"method":`) // malformed: answered with id null
	p.expectError(t, `null`, CodeParseError)
	if err := c.Notify("notifications/outside", nil); err != nil {
		t.Fatal(err)
	}
	p.read(t)

	want := map[string]route{
		"ask":                   {ID("7"), false},
		"reply:7":               {ID("7"), true},
		"reply:null":            {NullID, true},
		"notifications/outside": {"", false},
	}
	for key, w := range want {
		if got, ok := stream.routeOf(key); !ok || got != w {
			t.Errorf("%s routed %+v (written: %v), want %+v", key, got, ok, w)
		}
	}

	plain := newTestPeer(t, 0)
	seen := make(chan ID, 1)
	pc := NewConn(plain.stream, func(ctx context.Context, _ *Message) (any, error) {
		seen <- handledRequest(ctx)
		return nil, nil
	}, nil, nullLogger())
	serve(t, context.Background(), pc, plain)
	plain.request(t, `1`, "x", nil)
	if id := recv(t, seen, "the handler"); id != "" {
		t.Errorf("over a plain stream the handler's context names request %q, want none", id)
	}
}
