// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// party is who sent a message through the router.
type party uint8

const (
	host    party = iota // the MCP host, on this process's stdio
	server               // the wrapped MCP server
	session              // the broker's own session (roots/list, files/*)
	router               // the router itself (roots/list to the host)
)

func (p party) String() string {
	switch p {
	case host:
		return "host"
	case server:
		return "server"
	case session:
		return "session"
	default:
		return "router"
	}
}

// inFlight is one request on its way to a peer, awaiting that peer's reply.
type inFlight struct {
	from   party
	id     jsonrpc.ID // the id its sender gave it (zero for the router's own)
	method string
	gen    uint64                  // the router's roots/list: which request of the host's roots this is
	fwd    forwarded               // a host's request: its forward record (id "" when not recorded)
	reply  chan<- *jsonrpc.Message // the router's own request that awaits its reply there
	// params of a host's tools/call, resources/read or prompts/get, which
	// the Router may retry (protocol 2026-07-28), and how often it did.
	params map[string]json.RawMessage
	rounds int
}

type originKey struct {
	from party
	id   jsonrpc.ID
}

// idTable is the requests in flight toward one peer, by the id that peer
// sees. Requests keep their sender's id unless that id is already in flight
// toward the same peer (from any sender, the same one included) or starts
// with the Router's prefix; then the request gets a fresh id, and the reply
// gets its sender's id back. The Router's own requests always get a fresh
// id. Fresh ids are random (128 bits after the prefix) and never reused, so
// a peer cannot know or claim an id of the Router's: no entry is ever
// overwritten, and a reply settles only the request that went out under its
// id. A peer never sees two requests in flight with one id, whatever ids the
// host, the server and the broker choose.
type idTable struct {
	prefix  string
	byWire  map[jsonrpc.ID]inFlight
	renamed map[originKey]jsonrpc.ID // sender's id -> wire id, for renamed requests only
}

func newIDTable(prefix string) *idTable {
	return &idTable{prefix: prefix, byWire: make(map[jsonrpc.ID]inFlight), renamed: make(map[originKey]jsonrpc.ID)}
}

// assign records a request from sender with its id and returns the id to send
// it with. A zero id (the router's own request) always gets a fresh one, and
// so does an id already in flight toward this peer or one in the Router's
// namespace (the prefix): an entry of the table is never overwritten.
func (t *idTable) assign(r inFlight) jsonrpc.ID {
	if !r.id.IsZero() && !t.inNamespace(r.id) {
		if _, busy := t.byWire[r.id]; !busy {
			t.byWire[r.id] = r
			return r.id
		}
	}
	wire := t.fresh()
	t.byWire[wire] = r
	if !r.id.IsZero() {
		t.renamed[originKey{r.from, r.id}] = wire
	}
	return wire
}

// assignFresh records a request and returns a fresh id to send it with,
// whatever its own id: a retry must not reuse its original's id.
func (t *idTable) assignFresh(r inFlight) jsonrpc.ID {
	wire := t.fresh()
	t.byWire[wire] = r
	if !r.id.IsZero() {
		t.renamed[originKey{r.from, r.id}] = wire
	}
	return wire
}

// fresh returns a random id of the router's namespace that no request in
// flight toward this peer has. Since no request from a peer keeps an id of
// that namespace (assign renames them), and 128 random bits do not repeat,
// an id fresh returns is never used twice toward the peer.
func (t *idTable) fresh() jsonrpc.ID {
	for {
		var b [16]byte
		rand.Read(b[:]) // never fails (crypto/rand)
		id := jsonrpc.StringID(t.prefix + hex.EncodeToString(b[:]))
		if _, busy := t.byWire[id]; !busy {
			return id
		}
	}
}

// inNamespace reports whether id is a string in the Router's namespace (its
// value, escapes decoded, starts with the prefix).
func (t *idTable) inNamespace(id jsonrpc.ID) bool {
	s, ok := jsonx.Unquote([]byte(id))
	return ok && strings.HasPrefix(s, t.prefix)
}

// settle takes the reply with wire id: the request it answers, now done.
func (t *idTable) settle(wire jsonrpc.ID) (inFlight, bool) {
	r, ok := t.byWire[wire]
	if !ok {
		return inFlight{}, false
	}
	delete(t.byWire, wire)
	if key := (originKey{r.from, r.id}); wire != r.id && t.renamed[key] == wire {
		delete(t.renamed, key)
	}
	return r, true
}

// settleAll takes every request of sender still in flight, in no order:
// none will be answered.
func (t *idTable) settleAll(from party) []inFlight {
	var out []inFlight
	for wire, r := range t.byWire {
		if r.from == from {
			out = append(out, r)
			t.settle(wire)
		}
	}
	return out
}

// wireOf returns the id under which the peer knows sender's request id.
func (t *idTable) wireOf(from party, id jsonrpc.ID) (jsonrpc.ID, bool) {
	if wire, ok := t.renamed[originKey{from, id}]; ok {
		return wire, true
	}
	if r, ok := t.byWire[id]; ok && r.from == from {
		return id, true
	}
	return "", false
}

// withID returns msg with its "id" replaced, or msg unchanged when id is
// already its id.
func withID(msg []byte, old, id jsonrpc.ID) []byte {
	if old == id {
		return msg
	}
	return withMember(msg, "id", json.RawMessage(id))
}

// withMember returns msg (a JSON object) with one member replaced.
func withMember(msg []byte, name string, value json.RawMessage) []byte {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return msg
	}
	fields[name] = value
	out, err := json.Marshal(fields)
	if err != nil {
		return msg
	}
	return out
}
