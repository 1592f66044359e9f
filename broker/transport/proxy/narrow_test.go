// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// mkdirs creates dirs under base and returns base, symlink-resolved.
func mkdirs(t *testing.T, dirs ...string) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// Requests keep their ids; only an id in flight from the other sender toward
// the same peer is renamed, and the reply and cancellation find their way
// back.
func TestWrapIDTable(t *testing.T) {
	tb := newIDTable(idPrefix)
	id := func(s string) jsonrpc.ID { return jsonrpc.StringID(s) }
	if w := tb.assign(inFlight{from: host, id: id("fsbroker-1")}); w != id("fsbroker-1") {
		t.Fatalf("first request renamed to %s", w)
	}
	// The session's request with the host's id in flight: renamed, and the
	// fresh id skips ids in flight (the host uses fsbroker-wrap-1 too).
	tb.assign(inFlight{from: host, id: id(idPrefix + "1")})
	w := tb.assign(inFlight{from: session, id: id("fsbroker-1")})
	if w == id("fsbroker-1") || w == id(idPrefix+"1") {
		t.Fatalf("colliding request sent as %s", w)
	}
	if got, ok := tb.wireOf(session, id("fsbroker-1")); !ok || got != w {
		t.Errorf("wireOf(session) = %s, %v; want %s", got, ok, w)
	}
	if got, ok := tb.wireOf(host, id("fsbroker-1")); !ok || got != id("fsbroker-1") {
		t.Errorf("wireOf(host) = %s, %v", got, ok)
	}
	if _, ok := tb.wireOf(router, id("fsbroker-1")); ok {
		t.Error("wireOf found a request the router never sent")
	}
	r, ok := tb.settle(w)
	if !ok || r.from != session || r.id != id("fsbroker-1") {
		t.Errorf("settle(%s) = %+v, %v", w, r, ok)
	}
	if _, ok := tb.wireOf(session, id("fsbroker-1")); ok {
		t.Error("a settled request is still known")
	}
	// The router's own request always gets a fresh id.
	if w := tb.assign(inFlight{from: router}); !strings.HasPrefix(string(w), `"`+idPrefix) {
		t.Errorf("router's request id %s", w)
	}
	// A sender reusing its own id in flight is renamed: the entry of the
	// first is never overwritten, and each reply finds its own request.
	tb.settle(id("fsbroker-1")) // the host's first request above is answered
	first := tb.assign(inFlight{from: host, id: id("fsbroker-1"), method: "first"})
	again := tb.assign(inFlight{from: host, id: id("fsbroker-1"), method: "again"})
	if first != id("fsbroker-1") || again == first || !strings.HasPrefix(string(again), `"`+idPrefix) {
		t.Errorf("the host's id reused in flight went out as %s then %s", first, again)
	}
	if r, ok := tb.settle(first); !ok || r.method != "first" {
		t.Errorf("settle(%s) = %+v, %v; want the first request", first, r, ok)
	}
	if r, ok := tb.settle(again); !ok || r.method != "again" || r.id != id("fsbroker-1") {
		t.Errorf("settle(%s) = %+v, %v; want the second request, with its own id", again, r, ok)
	}
	// A request whose id is in the Router's namespace is renamed, escapes
	// and all, and the Router's fresh ids never repeat.
	for _, claimed := range []jsonrpc.ID{id(idPrefix + "x"), jsonrpc.ID(`"fsbroker\u002dwrap-x"`)} {
		if w := tb.assign(inFlight{from: server, id: claimed}); w == claimed {
			t.Errorf("a request with id %s kept it", claimed)
		}
	}
	seen := map[jsonrpc.ID]bool{}
	for range 1000 {
		w := tb.assign(inFlight{from: router})
		tb.settle(w)
		if seen[w] {
			t.Fatalf("the fresh id %s came twice", w)
		}
		seen[w] = true
	}
}

func TestWrapAddRootsCapability(t *testing.T) {
	for _, tc := range []struct {
		params, want string
		declared, ok bool
	}{
		{`{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"roots":{"listChanged":false,"x":1}},"clientInfo":{"name":"h"}}`,
			`{"capabilities":{"roots":{"filesystemBrokering":true,"listChanged":true,"x":1},"sampling":{}},"clientInfo":{"name":"h"},"protocolVersion":"2025-06-18"}`,
			true, true},
		{`{"capabilities":{}}`, `{"capabilities":{"roots":{"filesystemBrokering":true,"listChanged":true}}}`, false, true},
		{`{}`, `{"capabilities":{"roots":{"filesystemBrokering":true,"listChanged":true}}}`, false, true},
		{``, `{"capabilities":{"roots":{"filesystemBrokering":true,"listChanged":true}}}`, false, true},
		{`{"capabilities":{"roots":null}}`, `{"capabilities":{"roots":{"filesystemBrokering":true,"listChanged":true}}}`, false, true},
		{`[1]`, ``, false, false},
		{`{"capabilities":7}`, ``, false, false},
	} {
		got, declared, ok := addRootsCapability(json.RawMessage(tc.params))
		if string(got) != tc.want || declared != tc.declared || ok != tc.ok {
			t.Errorf("addRootsCapability(%s) = %s, %v, %v; want %s, %v, %v", tc.params, got, declared, ok, tc.want, tc.declared, tc.ok)
		}
	}
}
