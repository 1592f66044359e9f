// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// wait is the upper bound for anything a test waits on: a failure, not a
// timing assertion.
const wait = 10 * time.Second

// testServer is how the tests' MCP server names itself in initialize.
var testServer = mcppeer.Implementation{Name: "test-server", Version: "0.1"}

// peer is a Session over real pipes with the test playing the MCP server on
// the other end (mcppeer, holding the session to JSON-RPC 2.0).
type peer struct {
	*mcppeer.Peer
	t      testing.TB
	toB    *os.File // the pipe the peer writes to, for raw blocks and the end of the broker's input
	sess   *Session
	ran    chan error
	cancel context.CancelFunc
}

// startPeer starts a Session over pipes, with the tests' decider and without
// an audit trail (testPipeline) unless opts say otherwise. It does not answer
// initialize.
func startPeer(t testing.TB, set *roots.Set, opts ...Option) *peer {
	t.Helper()
	return startBarePeer(t, set, append(testPipeline(), opts...)...)
}

// startBarePeer starts a Session over pipes with opts and nothing more (no
// decider, no audit trail unless opts give them). It does not answer
// initialize.
func startBarePeer(t testing.TB, set *roots.Set, opts ...Option) *peer {
	t.Helper()
	stream, serverSide, toB := mcppeer.PipesWithOutput(t)
	server := mcppeer.New(t, "broker", serverSide, mcppeer.RequireValid(), mcppeer.WithWait(wait))
	opts = append([]Option{WithRoots(func() *roots.Set { return set }), WithLogger(hclog.NewNullLogger())}, opts...)
	sess, err := NewSession(stream, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &peer{Peer: server, t: t, toB: toB, sess: sess, ran: make(chan error, 1), cancel: cancel}
	go func() { p.ran <- sess.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = toB.Close()
		select {
		case <-p.ran:
		case <-time.After(wait):
			t.Error("session did not end")
		}
	})
	return p
}

// writeBlock writes lines to the broker in one write, each ended by a
// newline, so that the broker reads them at once.
func (p *peer) writeBlock(lines []string) error {
	var b strings.Builder
	for _, line := range lines {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	p.Note(fmt.Sprintf("> (%d lines in one write)", len(lines)))
	if _, err := p.toB.WriteString(b.String()); err != nil {
		return fmt.Errorf("write to broker: %w", err)
	}
	return nil
}

// endInput closes the broker's input, as a server that exits does, while
// the peer still reads what the broker writes.
func (p *peer) endInput() {
	p.Note("> (end of input)")
	_ = p.toB.Close()
}

// reply takes the broker's messages in order up to the reply to id: the
// broker's requests and notifications before it are passed over, another
// reply fails the test.
func (p *peer) reply(id string) *mcppeer.Message {
	p.t.Helper()
	for {
		m := p.Next()
		if m.IsReplyTo(id) {
			return m
		}
		if m.Method == "" {
			p.t.Fatalf("unexpected reply %s while waiting for id %s", m.Raw, id)
		}
	}
}

// initialize answers the broker's initialize with version and waits for
// notifications/initialized: the first two messages of the session.
func (p *peer) initialize(version string) {
	p.t.Helper()
	init := p.AcceptInitialize(version, testServer)
	if all := p.All(); init.Seq != 0 || !all[1].IsNotification("notifications/initialized") {
		p.t.Fatalf("the session began with %s and %s, want initialize and notifications/initialized", all[0].Raw, all[1].Raw)
	}
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// errorOf decodes a reply's error object.
func errorOf(t testing.TB, m *mcppeer.Message) (code int, dataCode string, data map[string]any) {
	t.Helper()
	if m.Error == nil {
		t.Fatalf("reply %s has no error", m.Raw)
	}
	if len(m.Error.Data) > 0 {
		if err := json.Unmarshal(m.Error.Data, &data); err != nil {
			t.Fatal(err)
		}
	}
	dc, _ := data["code"].(string)
	return m.Error.Code, dc, data
}

func testRoots(t *testing.T) *roots.Set {
	t.Helper()
	set, err := roots.New([]roots.Spec{{Path: t.TempDir(), Mount: "project", Name: "My Project"}})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestInitializeOffersNewestVersionAndCapabilities(t *testing.T) {
	p := startPeer(t, testRoots(t), WithVersion("1.2.3"))
	init := p.Next()
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Roots map[string]bool `json:"roots"`
		} `json:"capabilities"`
		ClientInfo map[string]string `json:"clientInfo"`
	}
	if err := json.Unmarshal(init.Params, &params); err != nil {
		t.Fatal(err)
	}
	if params.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocolVersion = %q, want 2025-11-25", params.ProtocolVersion)
	}
	if !params.Capabilities.Roots["listChanged"] || !params.Capabilities.Roots["filesystemBrokering"] {
		t.Errorf("roots capabilities = %v, want listChanged and filesystemBrokering", params.Capabilities.Roots)
	}
	if params.ClientInfo["name"] != "fsbroker" || params.ClientInfo["version"] != "1.2.3" {
		t.Errorf("clientInfo = %v", params.ClientInfo)
	}
	if !strings.HasPrefix(str(init.ID), "fsbroker-") {
		t.Errorf("initialize id %s is not a broker-prefixed string", init.ID)
	}
}

func TestEverySupportedVersionNegotiates(t *testing.T) {
	for _, v := range SupportedVersions() {
		t.Run(v, func(t *testing.T) {
			p := startPeer(t, testRoots(t))
			p.initialize(v)
			p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
			if r := p.reply("1"); r.Result == nil {
				t.Fatalf("roots/list on %s: %v", v, r.Raw)
			}
			if got := p.sess.Server(); got.ProtocolVersion != v || got.Name != "test-server" {
				t.Errorf("Server() = %+v", got)
			}
		})
	}
}

func TestUnsupportedVersionEndsTheSession(t *testing.T) {
	for _, v := range []string{"2026-07-28", "1999-01-01", ""} {
		t.Run(v, func(t *testing.T) {
			p := startPeer(t, testRoots(t))
			init := p.Next()
			p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{}}}`, init.ID, v))
			select {
			case err := <-p.ran:
				var verr *VersionError
				if !errors.As(err, &verr) || verr.Got != v {
					t.Fatalf("Run = %v, want a VersionError for %q", err, v)
				}
				p.ran <- err // for the cleanup
			case <-time.After(wait):
				t.Fatal("session did not end")
			}
		})
	}
}

func TestInitializeErrorReplyEndsTheSession(t *testing.T) {
	p := startPeer(t, testRoots(t))
	init := p.Next()
	p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no thanks"}}`, init.ID))
	select {
	case err := <-p.ran:
		if err == nil || !strings.Contains(err.Error(), "no thanks") {
			t.Fatalf("Run = %v, want the server's refusal", err)
		}
		p.ran <- err
	case <-time.After(wait):
		t.Fatal("session did not end")
	}
}

func TestInitializeTimeout(t *testing.T) {
	p := startPeer(t, testRoots(t), WithInitTimeout(50*time.Millisecond))
	p.Next() // initialize, never answered
	select {
	case err := <-p.ran:
		if err == nil || !strings.Contains(err.Error(), "did not answer initialize") {
			t.Fatalf("Run = %v, want an initialize timeout", err)
		}
		p.ran <- err
	case <-time.After(wait):
		t.Fatal("session did not end")
	}
}

func TestBeforeInitializedOnlyPingIsAnswered(t *testing.T) {
	p := startPeer(t, testRoots(t))
	init := p.Next()
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r := p.reply("1"); string(r.Result) != "{}" {
		t.Fatalf("ping before init = %v, want {}", r.Raw)
	}
	for i, method := range []string{"roots/list", "files/read", "fs.read", "no/such/method"} {
		id := fmt.Sprint(10 + i)
		p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{"path":"project/a"}}`, id, method))
		code, dataCode, _ := errorOf(t, p.reply(id))
		if code != -32600 || dataCode != "NOT_INITIALIZED" {
			t.Errorf("%s before init: code %d data.code %q, want -32600 NOT_INITIALIZED", method, code, dataCode)
		}
	}
	// The session goes on and initializes normally.
	p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}`, init.ID))
	if n := p.Next(); n.Method != "notifications/initialized" {
		t.Fatalf("got %v, want notifications/initialized", n.Raw)
	}
	p.SendRaw(`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`)
	if r := p.reply("2"); r.Result == nil {
		t.Fatalf("roots/list after init: %v", r.Raw)
	}
}

func TestRootsList(t *testing.T) {
	dir := t.TempDir()
	set, err := roots.New([]roots.Spec{
		{Path: dir, Mount: "a", Name: "Alpha"},
		{Path: t.TempDir(), Mount: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := startPeer(t, set)
	p.initialize("2025-11-25")
	p.SendRaw(`{"jsonrpc":"2.0","id":"r1","method":"roots/list","params":{"_meta":{"progressToken":1}}}`)
	var result struct {
		Roots []map[string]string `json:"roots"`
	}
	if err := json.Unmarshal(p.reply(`"r1"`).Result, &result); err != nil {
		t.Fatal(err)
	}
	if len(result.Roots) != 2 {
		t.Fatalf("roots = %v, want 2", result.Roots)
	}
	want := set.All()
	for i, r := range result.Roots {
		if r["uri"] != want[i].URI || r["name"] != want[i].Name {
			t.Errorf("root %d = %v, want uri %s name %s", i, r, want[i].URI, want[i].Name)
		}
		if len(r) != 2 {
			t.Errorf("root %d has fields %v; roots/list returns only uri and name", i, r)
		}
	}
	if result.Roots[1]["name"] != "b" {
		t.Errorf("a root without a name is named after its mount, got %q", result.Roots[1]["name"])
	}
}

func TestRootsListSeesTheCurrentSet(t *testing.T) {
	first, second := testRoots(t), testRoots(t)
	var mu sync.Mutex
	current := first
	p := startPeer(t, nil, WithRoots(func() *roots.Set { mu.Lock(); defer mu.Unlock(); return current }))
	p.initialize("2025-11-25")
	mu.Lock()
	current = second
	mu.Unlock()
	if err := p.sess.RootsChanged(); err != nil {
		t.Fatal(err)
	}
	if n := p.Next(); n.Method != "notifications/roots/list_changed" || n.ID != nil {
		t.Fatalf("got %v, want notifications/roots/list_changed", n.Raw)
	}
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	if !strings.Contains(string(p.reply("1").Result), second.All()[0].URI) {
		t.Error("roots/list does not return the new set")
	}
}

func TestRootsChangedBeforeInitializeSendsNothing(t *testing.T) {
	p := startPeer(t, testRoots(t))
	init := p.Next()
	if err := p.sess.RootsChanged(); err != nil {
		t.Fatal(err)
	}
	p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`, init.ID))
	if n := p.Next(); n.Method != "notifications/initialized" {
		t.Fatalf("got %v before notifications/initialized", n.Raw)
	}
}

func TestProtocolErrorsKeepTheSessionGoing(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	cases := []struct {
		name, line, id string
		code           int
		dataCode       string
	}{
		{"parse error", `{"jsonrpc":"2.0","id":5,"method":`, "null", -32700, ""},
		{"batch", `[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, "null", -32600, ""},
		{"not an object", `42`, "null", -32600, ""},
		{"wrong version", `{"jsonrpc":"1.0","id":6,"method":"ping"}`, "6", -32600, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"}`, "7", -32601, ""},
		{"unknown params", `{"jsonrpc":"2.0","id":8,"method":"roots/list","params":{"bogus":1}}`, "8", -32602, "INVALID_PARAMS"},
		{"params not an object", `{"jsonrpc":"2.0","id":9,"method":"ping","params":[1]}`, "9", -32602, "INVALID_PARAMS"},
	}
	for i, c := range cases {
		p.SendRaw(c.line)
		code, dataCode, _ := errorOf(t, p.reply(c.id))
		if code != c.code || dataCode != c.dataCode {
			t.Errorf("%s: code %d data.code %q, want %d %q", c.name, code, dataCode, c.code, c.dataCode)
		}
		ping := fmt.Sprint(100 + i)
		p.SendRaw(`{"jsonrpc":"2.0","id":` + ping + `,"method":"ping"}`)
		if r := p.reply(ping); string(r.Result) != "{}" {
			t.Fatalf("after %s the session no longer answers ping: %v", c.name, r.Raw)
		}
	}
}

func TestInvalidParamsListsEveryError(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"roots/list","params":{"b":1,"a":2}}`)
	code, dataCode, data := errorOf(t, p.reply("1"))
	if code != -32602 || dataCode != "INVALID_PARAMS" {
		t.Fatalf("code %d %q", code, dataCode)
	}
	errs, _ := data["errors"].([]any)
	var pointers []string
	for _, e := range errs {
		m, _ := e.(map[string]any)
		if m["message"] == "" {
			t.Errorf("error %v has no message", m)
		}
		pointers = append(pointers, fmt.Sprint(m["pointer"]))
	}
	if strings.Join(pointers, ",") != "/a,/b" {
		t.Errorf("pointers = %v, want /a,/b", pointers)
	}
	if reason, _ := data["reason"].(string); reason == "" {
		t.Error("data.reason is empty")
	}
}

func TestAliasesAreResolvedToCanonicalNames(t *testing.T) {
	for alias, canonical := range aliases {
		if !strings.HasPrefix(canonical, "files/") || CanonicalMethod(alias) != canonical {
			t.Errorf("alias %s -> %s", alias, canonical)
		}
	}
	if CanonicalMethod("files/read") != "files/read" || CanonicalMethod("ping") != "ping" {
		t.Error("canonical names must map to themselves")
	}
}

func TestPipelinedPingsAreAllAnswered(t *testing.T) {
	p := startPeer(t, testRoots(t), WithConnOptions(jsonrpc.WithMaxInFlight(8)))
	p.initialize("2025-11-25")
	const n = 1000
	go func() {
		pings := make([]string, n)
		for i := range pings {
			pings[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		}
		if err := p.writeBlock(pings); err != nil {
			t.Error(err)
		}
	}()
	seen := make(map[string]bool, n)
	for len(seen) < n {
		m := p.Next()
		id := string(m.ID)
		if string(m.Result) != "{}" {
			t.Fatalf("reply %v is not a ping result", m.Raw)
		}
		if seen[id] {
			t.Fatalf("id %s answered twice", id)
		}
		seen[id] = true
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprint(i)] {
			t.Fatalf("ping %d not answered", i)
		}
	}
}

func TestOversizedLineIsRefusedAndSessionGoesOn(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	// 40 MiB, over the 32 MiB default.
	go func() {
		big := `{"jsonrpc":"2.0","id":1,"method":"roots/list","params":{"x":"` + strings.Repeat("a", 40<<20) + `"}}`
		if err := p.Write([]byte(big)); err != nil {
			t.Error(err)
		}
		if err := p.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); err != nil {
			t.Error(err)
		}
	}()
	code, _, _ := errorOf(t, p.reply("null"))
	if code != -32600 {
		t.Fatalf("oversized line: code %d, want -32600", code)
	}
	if r := p.reply("2"); string(r.Result) != "{}" {
		t.Fatalf("ping after the oversized line: %v", r.Raw)
	}
}

func TestBrokerPingsTheServer(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	done := make(chan error, 1)
	go func() { done <- p.sess.Ping(context.Background()) }()
	ping := p.Next()
	if ping.Method != "ping" || ping.ID == nil {
		t.Fatalf("got %v, want a ping request", ping.Raw)
	}
	p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, ping.ID))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Ping did not return")
	}
}

func TestKeepAlivePings(t *testing.T) {
	p := startPeer(t, testRoots(t), WithPingInterval(10*time.Millisecond))
	p.initialize("2025-11-25")
	for i := 0; i < 2; i++ {
		ping := p.Next()
		if ping.Method != "ping" {
			t.Fatalf("got %v, want a keep-alive ping", ping.Raw)
		}
		p.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, ping.ID))
	}
}

func TestEndOfInputEndsRunCleanly(t *testing.T) {
	p := startPeer(t, testRoots(t))
	p.initialize("2025-11-25")
	p.endInput()
	select {
	case err := <-p.ran:
		if err != nil {
			t.Fatalf("Run after EOF = %v, want nil", err)
		}
		p.ran <- err
	case <-time.After(wait):
		t.Fatal("session did not end at EOF")
	}
	select {
	case <-p.sess.Done():
	default:
		t.Error("Done is not closed after Run returned")
	}
}

func TestServerLogNotificationsAreLoggedNotAnswered(t *testing.T) {
	var mu sync.Mutex
	var buf strings.Builder
	logger := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(b)
	}), Level: hclog.Trace})
	p := startPeer(t, testRoots(t), WithLogger(logger))
	p.initialize("2025-11-25")
	p.SendRaw(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","logger":"db","data":"disk almost full"}}`)
	p.SendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`)
	p.SendRaw(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r := p.reply("1"); string(r.Result) != "{}" { // nothing was sent for the notifications
		t.Fatalf("got %v", r.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "disk almost full") || !strings.Contains(buf.String(), "[WARN]") {
		t.Errorf("server log notification not logged at warn:\n%s", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
