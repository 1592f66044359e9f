// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// modernMeta is the _meta of a host's request on protocol 2026-07-28.
func modernMeta(caps map[string]any) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "host", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
}

// callParams is a tools/call's params with extra members.
func callParams(meta map[string]any, extra map[string]any) map[string]any {
	p := map[string]any{"name": "lookup", "arguments": map[string]any{"q": "x"}, "_meta": meta}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// retryParams is what the server received in a retry: its inputs.
type retryParams struct {
	RequestState   *string                    `json:"requestState"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}

func parseRetry(t *testing.T, m *mcppeer.Message) retryParams {
	t.Helper()
	return paramsOf[retryParams](t, m)
}

// rootURIs is the URIs of a roots/list result.
func rootURIs(t *testing.T, result json.RawMessage) []string {
	t.Helper()
	var r struct {
		Roots []struct{ URI string } `json:"roots"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("roots result %s: %v", result, err)
	}
	var out []string
	for _, x := range r.Roots {
		out = append(out, x.URI)
	}
	return out
}

// hostSawNoRootsList fails the test when any message the host received
// names roots/list.
func hostSawNoRootsList(t *testing.T, f *routerFixture) {
	t.Helper()
	for _, m := range f.host.All() {
		if strings.Contains(m.Raw, "roots/list") {
			t.Errorf("the host received %s", m.Raw)
		}
	}
}

// Host and server on 2026-07-28, no initialize: the server's
// InputRequiredResult asks for roots and an elicitation. The host gets the
// elicitation only, under a requestState of the broker's; its retry reaches
// the server with the server's own requestState, the host's elicitation
// answer and the broker's roots, whatever roots the host slipped in. A
// second use of the same state carries no inputs.
func TestWrapStatelessInputRequiredRoots(t *testing.T) {
	f := startRouter(t)
	wantRoots := []string{roots.FileURI(filepath.Join(f.base, "ws/a")), roots.FileURI(filepath.Join(f.base, "ws/b"))}
	meta := modernMeta(map[string]any{"elicitation": map[string]any{}})

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": callParams(meta, nil)})
	call := f.server.AwaitRequest("tools/call")
	if p := parseRetry(t, call); !strings.Contains(string(p.Meta["io.modelcontextprotocol/clientCapabilities"]), `"roots":{}`) ||
		!strings.Contains(string(p.Meta["io.modelcontextprotocol/clientCapabilities"]), `"elicitation":{}`) {
		t.Errorf("the server got _meta %s: want the host's capabilities and roots", call.Params)
	}
	elicit := map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": "name?",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "string"}}}}}
	f.server.Reply(call, map[string]any{"resultType": "input_required", "requestState": "S1",
		"inputRequests": map[string]any{"where": map[string]any{"method": "roots/list"}, "who": elicit},
		"_meta":         map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "srv26", "version": "1"}}})

	irr := f.host.AwaitReply("2")
	var got struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(irr.Result, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResultType != "input_required" || len(got.InputRequests) != 1 || got.InputRequests["who"] == nil ||
		got.RequestState == "" || got.RequestState == "S1" {
		t.Fatalf("the host got %s: want the elicitation alone under a state of the broker's", irr.Raw)
	}

	forged := map[string]any{"roots": []any{map[string]any{"uri": "file:///etc", "name": "etc"}}}
	answers := map[string]any{"who": map[string]any{"action": "accept", "content": map[string]any{"n": "ann"}}, "where": forged, "extra": forged}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": callParams(meta, map[string]any{"requestState": got.RequestState, "inputResponses": answers})})
	retry := f.server.Await("the retry", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) == "3" })
	p := parseRetry(t, retry)
	if p.RequestState == nil || *p.RequestState != "S1" {
		t.Errorf("the retry's requestState %v, want the server's S1", p.RequestState)
	}
	if len(p.InputResponses) != 2 || !strings.Contains(string(p.InputResponses["who"]), `"ann"`) {
		t.Errorf("the retry's inputResponses %s: want who (the host's) and where (the broker's)", retry.Params)
	}
	if uris := rootURIs(t, p.InputResponses["where"]); !slices.Equal(uris, wantRoots) {
		t.Errorf("the server was told the roots %v, want the broker's %v", uris, wantRoots)
	}
	f.server.Reply(retry, map[string]any{"resultType": "complete", "content": []any{}})
	if r := f.host.AwaitReply("3"); !strings.Contains(string(r.Result), `"complete"`) {
		t.Errorf("the host got %s", r.Raw)
	}

	// The state again: used once, so the server gets the request without inputs.
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call",
		"params": callParams(meta, map[string]any{"requestState": got.RequestState, "inputResponses": answers})})
	again := f.server.Await("the replay", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) == "4" })
	if p := parseRetry(t, again); p.RequestState != nil || p.InputResponses != nil {
		t.Errorf("a replayed state reached the server with %s", again.Params)
	}
	hostSawNoRootsList(t, f)
}

// A host's request with inputs the broker never asked it for (a made-up
// roots answer and requestState on a first call) reaches the server without
// them; so does a retry naming another tool than its original.
func TestWrapStatelessHostCannotAnswerRoots(t *testing.T) {
	f := startRouter(t)
	meta := modernMeta(map[string]any{})
	forged := map[string]any{"where": map[string]any{"roots": []any{map[string]any{"uri": "file:///"}}}}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": callParams(meta, map[string]any{"requestState": "made-up", "inputResponses": forged})})
	call := f.server.AwaitRequest("tools/call")
	if p := parseRetry(t, call); p.RequestState != nil || p.InputResponses != nil || strings.Contains(string(call.Params), "file:///") {
		t.Errorf("the server got %s: want no inputs", call.Params)
	}
	f.server.Reply(call, map[string]any{"resultType": "input_required", "requestState": "S2",
		"inputRequests": map[string]any{"who": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "?"}}}})
	var irr struct {
		RequestState string `json:"requestState"`
	}
	if err := json.Unmarshal(f.host.AwaitReply("2").Result, &irr); err != nil || irr.RequestState == "S2" {
		t.Fatalf("the host's state %q (%v)", irr.RequestState, err)
	}
	other := callParams(meta, map[string]any{"requestState": irr.RequestState, "inputResponses": forged})
	other["name"] = "delete_everything"
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": other})
	retry := f.server.Await("the retry", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) == "3" })
	if p := parseRetry(t, retry); p.RequestState != nil || p.InputResponses != nil {
		t.Errorf("a state given for one tool reached the server on another's call: %s", retry.Params)
	}
}

// An InputRequiredResult that asks for roots alone: the broker retries the
// request itself (under a new id, with its roots and without a requestState
// the server did not give), and the host gets the final result as the reply
// to its own request. A server that asks for roots again and again gets at
// most three answers; the host then gets an error.
func TestWrapStatelessRootsOnlyRetriedByTheBroker(t *testing.T) {
	f := startRouter(t)
	meta := modernMeta(map[string]any{})
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": callParams(meta, nil)})
	call := f.server.AwaitRequest("tools/call")
	f.server.Reply(call, map[string]any{"resultType": "input_required", "inputRequests": map[string]any{"r": map[string]any{"method": "roots/list"}}})
	retry := f.server.Await("the broker's retry", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) != "2" })
	p := parseRetry(t, retry)
	if p.RequestState != nil || len(rootURIs(t, p.InputResponses["r"])) != 2 {
		t.Errorf("the broker's retry %s: want the two roots and no requestState", retry.Params)
	}
	f.server.Reply(retry, map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}})
	if r := f.host.AwaitReply("2"); !strings.Contains(string(r.Result), `"done"`) {
		t.Errorf("the host got %s, want the retry's result", r.Raw)
	}

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": callParams(meta, nil)})
	asked := 0
	for {
		m := f.server.Await("tools/call", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") })
		asked++
		f.server.Reply(m, map[string]any{"resultType": "input_required", "requestState": "again",
			"inputRequests": map[string]any{"r": map[string]any{"method": "roots/list"}}})
		if r := f.host.TryAwait(200*time.Millisecond, func(m *mcppeer.Message) bool { return m.IsReplyTo("3") }); r != nil {
			if r.Error == nil {
				t.Errorf("the host got %s, want an error", r.Raw)
			}
			break
		}
		if asked > maxBrokerRounds+1 {
			t.Fatal("the broker keeps retrying")
		}
	}
	if asked != maxBrokerRounds+1 {
		t.Errorf("the server was asked %d times, want %d", asked, maxBrokerRounds+1)
	}
	hostSawNoRootsList(t, f)
}

// A server that answers the host's initialize with 2026-07-28 no longer
// ends the wrap session: the broker session starts on that revision, the
// host's requests still reach the server, and its roots/list in an
// InputRequiredResult is answered by the broker.
func TestWrapServerOn20260728KeepsTheSession(t *testing.T) {
	f := startRouter(t)
	f.handshakeWith(t, "2026-07-28", map[string]any{})
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "lookup"}})
	call := f.server.AwaitRequest("tools/call")
	f.server.Reply(call, map[string]any{"resultType": "input_required", "requestState": "S",
		"inputRequests": map[string]any{"r": map[string]any{"method": "roots/list"}}})
	retry := f.server.Await("the broker's retry", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) != string(call.ID) })
	if p := parseRetry(t, retry); p.RequestState == nil || *p.RequestState != "S" || len(rootURIs(t, p.InputResponses["r"])) != 2 {
		t.Errorf("the broker's retry %s", retry.Params)
	}
	f.server.Reply(retry, map[string]any{"resultType": "complete", "content": []any{}})
	f.host.AwaitReply("2")
	select {
	case err := <-f.runErr:
		t.Fatalf("the router ended: %v", err)
	default:
	}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
	f.server.AwaitRequest("tools/list")
	hostSawNoRootsList(t, f)
}

// An InputRequiredResult with a requestState alone (load shedding): the host
// gets it as it came but for the state, and its retry reaches the server
// with the server's state.
func TestWrapStatelessStateOnly(t *testing.T) {
	f := startRouter(t)
	meta := modernMeta(map[string]any{})
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": map[string]any{"uri": "x://1", "_meta": meta}})
	call := f.server.AwaitRequest("resources/read")
	f.server.Reply(call, map[string]any{"resultType": "input_required", "requestState": "busy-1"})
	irr := f.host.AwaitReply("2")
	var got map[string]json.RawMessage
	if err := json.Unmarshal(irr.Result, &got); err != nil || got["inputRequests"] != nil || len(got) != 2 ||
		!strings.Contains(string(got["requestState"]), "fsbroker-wrap-state-") {
		t.Fatalf("the host got %s", irr.Raw)
	}
	var token string
	_ = json.Unmarshal(got["requestState"], &token)
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "resources/read",
		"params": map[string]any{"uri": "x://1", "_meta": meta, "requestState": token}})
	retry := f.server.Await("the retry", func(m *mcppeer.Message) bool { return m.IsRequest("resources/read") && string(m.ID) == "3" })
	if p := parseRetry(t, retry); p.RequestState == nil || *p.RequestState != "busy-1" || p.InputResponses != nil {
		t.Errorf("the retry reached the server with %s", retry.Params)
	}
}

// A server answers requests whose params the Router does not keep (a
// tools/list; a tools/call without object params) with an
// InputRequiredResult asking roots only. The Router must not retry them
// (it once wrote into a nil map and the panic ended the broker): the host
// gets an error reply, the server's inputRequests never reach it, and the
// Router goes on routing.
func TestWrapInputRequiredOnARequestThatCannotBeRetried(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, nil)
	for _, tc := range []struct{ id, method string }{{"2", "tools/list"}, {"3", "tools/call"}} {
		f.host.SendRaw(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"` + tc.method + `"}`)
		call := f.server.Await(tc.method, func(m *mcppeer.Message) bool { return m.IsRequest(tc.method) && string(m.ID) == tc.id })
		f.server.Reply(call, map[string]any{"resultType": "input_required",
			"inputRequests": map[string]any{"r": map[string]any{"method": "roots/list"}}})
		if r := f.host.AwaitReply(tc.id); r.Error == nil {
			t.Errorf("%s: the host got %s, want an error", tc.method, r.Raw)
		}
	}
	f.host.SendRaw(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	f.server.Reply(f.server.AwaitRequest("ping"), map[string]any{})
	if r := f.host.AwaitReply("4"); r.Error != nil {
		t.Errorf("the Router no longer routes: %s", r.Raw)
	}
	if f.server.Has(func(m *mcppeer.Message) bool { return m.IsRequest("tools/list") && string(m.ID) != "2" }) {
		t.Error("the Router retried the tools/list")
	}
	hostSawNoRootsList(t, f)
}

// A server spells the members the Router reads so that a host could read
// them otherwise: "method" twice or in another case (encoding/json matches
// names without case; a JavaScript host takes the exact name, the last of a
// repeated one), "resultType" in two spellings. Every request naming
// roots/list in any of these is the broker's: the Router answers it itself
// (a retry with its roots), and the host is never asked roots/list.
func TestWrapHostNeverSeesRootsListThroughSpelling(t *testing.T) {
	f := startRouter(t)
	meta := modernMeta(map[string]any{"elicitation": map[string]any{}})
	for i, result := range []string{
		`{"resultType":"input_required","requestState":"S1","inputRequests":{"where":{"method":"roots/list","Method":"x"}}}`,
		`{"resultType":"input_required","inputRequests":{"where":{"Method":"roots/list","method":"x"}}}`,
		`{"resultType":"input_required","inputRequests":{"where":{"method":"roots/list","method":"x"}}}`,
		`{"resultType":"input_required","RESULTTYPE":"complete","inputRequests":{"where":{"method":"roots/list"}}}`,
		`{"RESULTTYPE":"input_required","resultType":"complete","inputRequests":{"where":{"method":"roots/list"}}}`,
	} {
		id := strconv.Itoa(10 + i)
		f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": callParams(meta, nil)})
		f.server.Await("call "+id, func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") && string(m.ID) == id })
		f.server.SendRaw(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
		retry := f.server.Await("the broker's retry of "+id, func(m *mcppeer.Message) bool {
			return m.IsRequest("tools/call") && strings.HasPrefix(string(m.ID), `"`+idPrefix)
		})
		if p := parseRetry(t, retry); len(rootURIs(t, p.InputResponses["where"])) != 2 {
			t.Errorf("%s: the broker's retry %s: want its two roots", result, retry.Params)
		}
		f.server.Reply(retry, map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}})
		if r := f.host.AwaitReply(id); !strings.Contains(string(r.Result), `"done"`) {
			t.Errorf("%s: the host got %s, want the retry's result", result, r.Raw)
		}
	}
	hostSawNoRootsList(t, f)
}

// The states awaiting a host's retry are bounded in bytes as well as in
// number: a server that sends large requestStates cannot make the Router
// hold more than maxStateBytes of them; the oldest go first, the newest
// stays.
func TestWrapStatesBoundedInBytes(t *testing.T) {
	r := &Router{states: map[string]*pendingInputs{}}
	big := json.RawMessage(`"` + strings.Repeat("s", 8<<20) + `"`) // 8 MiB each
	var tokens []string
	for range 20 {
		p := &pendingInputs{method: "tools/call", serverState: &big, expires: time.Now().Add(stateTTL)}
		p.size = p.bytes()
		tok := newStateToken()
		r.states[tok] = p
		r.stateBytes += p.size
		r.stateOrder = append(r.stateOrder, tok)
		r.pruneStates()
		tokens = append(tokens, tok)
	}
	if r.stateBytes > maxStateBytes {
		t.Fatalf("the states hold %d bytes, over %d", r.stateBytes, maxStateBytes)
	}
	if len(r.states) != len(r.stateOrder) || len(r.states) >= 20 {
		t.Fatalf("%d states kept (%d in order) of 20 of 8 MiB", len(r.states), len(r.stateOrder))
	}
	if _, ok := r.states[tokens[len(tokens)-1]]; !ok {
		t.Error("the newest state was forgotten")
	}
	if _, ok := r.states[tokens[0]]; ok {
		t.Error("the oldest state was kept")
	}
	sum := 0
	for _, p := range r.states {
		sum += p.size
	}
	if sum != r.stateBytes {
		t.Errorf("stateBytes %d, the states hold %d", r.stateBytes, sum)
	}
}
