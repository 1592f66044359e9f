// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/policies"
)

// waitLimit bounds each wait for something that should happen promptly.
const waitLimit = 10 * time.Second

// blockingConsent never answers: it waits for its request's end and reports
// it.
type blockingConsent struct {
	asked, ended chan string
}

func (b *blockingConsent) Ask(ctx context.Context, req consent.Request) (consent.Decision, error) {
	b.asked <- strings.Join(req.Paths, ",")
	<-ctx.Done()
	b.ended <- ctx.Err().Error()
	return consent.Decision{Provider: "test"}, ctx.Err()
}

// routerFixture is a Router with a real broker session between two test
// peers over real pipes.
type routerFixture struct {
	host, server *mcppeer.Peer
	router       *Router
	base         string
	consent      *blockingConsent
	runErr       chan error
	cancel       context.CancelFunc
}

func startRouter(t *testing.T, sessionOpts ...broker.Option) *routerFixture {
	t.Helper()
	return startRouterOpts(t, nil, sessionOpts...)
}

// startRouterOpts is startRouter with the Router's options.
func startRouterOpts(t *testing.T, routerOpts []Option, sessionOpts ...broker.Option) *routerFixture {
	t.Helper()
	serverR, serverP := mcppeer.Pipes(t)
	f := newRouterFixture(t, serverR, nil, routerOpts, sessionOpts)
	f.server = mcppeer.New(t, "server", serverP)
	return f
}

// newRouterFixture starts a Router with routerOpts toward the server on
// stream server, with a test peer as the host and a broker session with the
// built-in policies, the consent provider (nil: one that never answers) and
// sessionOpts.
func newRouterFixture(t *testing.T, server jsonrpc.Stream, provider consent.Provider, routerOpts []Option,
	sessionOpts []broker.Option) *routerFixture {
	t.Helper()
	base := mkdirs(t, "ws/a", "ws/b")
	if err := os.WriteFile(filepath.Join(base, "ws/a/hello.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: filepath.Join(base, "ws/a"), Preapproved: true},
		{Path: filepath.Join(base, "ws/b"), Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	store, err := grants.Open(filepath.Join(t.TempDir(), grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hub, err := watch.NewHub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hub.Close() })
	bc := &blockingConsent{asked: make(chan string, 4), ended: make(chan string, 4)}
	if provider == nil {
		provider = bc
	}
	policy, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	// The built-in policies decide, and no trail is kept, both explicitly: a
	// session given neither refuses every request.
	opts := append([]broker.Option{broker.WithExecutor(x), broker.WithConsent(provider, store), broker.WithWatchHub(hub, 0),
		broker.WithDecider(engine.Decider{Engine: policy}), broker.WithoutAuditTrail(),
		broker.WithConnOptions(jsonrpc.WithShutdownTimeout(time.Second))}, sessionOpts...)

	hostR, hostP := mcppeer.Pipes(t)
	r := New(hostR, server, BrokerSession(func() *roots.Set { return set }, opts...), routerOpts...)
	ctx, cancel := context.WithCancel(context.Background())
	f := &routerFixture{host: mcppeer.New(t, "host", hostP), router: r,
		base: base, consent: bc, runErr: make(chan error, 1), cancel: cancel}
	go func() { f.runErr <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.runErr:
		case <-time.After(waitLimit):
			t.Error("the router did not stop")
		}
	})
	return f
}

// stop ends the Router's run and waits for it: every record it writes is
// written once it returns.
func (f *routerFixture) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.runErr:
		if err != nil {
			t.Fatal(err)
		}
		f.runErr <- nil // for the fixture's cleanup
	case <-time.After(waitLimit):
		t.Fatal("the router did not stop")
	}
}

// handshake initializes host and server through the router: the host
// declares roots when hostRoots, and answers the router's first roots/list
// with them.
func (f *routerFixture) handshake(t *testing.T, hostRoots []string) {
	t.Helper()
	caps := map[string]any{}
	if hostRoots != nil {
		caps["roots"] = map[string]any{"listChanged": true}
	}
	f.handshakeWith(t, "2025-11-25", caps)
	if hostRoots != nil {
		f.answerRoots(t, hostRoots...)
	}
}

// handshakeWith initializes host and server through the router on protocol
// version, the host declaring caps (without roots: no roots/list to answer).
func (f *routerFixture) handshakeWith(t *testing.T, version string, caps map[string]any) {
	t.Helper()
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": caps, "clientInfo": map[string]any{"name": "host", "version": "1"}}})
	init := f.server.Await("initialize", func(m *mcppeer.Message) bool { return m.IsRequest("initialize") })
	if !strings.Contains(string(init.Params), `"roots":{"filesystemBrokering":true,"listChanged":true}`) {
		t.Errorf("the server's initialize has params %s: want the roots capability", init.Params)
	}
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"result":{"protocolVersion":"` + version + `","capabilities":{},"serverInfo":{"name":"srv","version":"1"}}}`)
	f.host.Await("initialize result", func(m *mcppeer.Message) bool { return m.IsReplyTo("1") })
	f.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	f.server.Await("initialized", func(m *mcppeer.Message) bool { return m.IsNotification("notifications/initialized") })
}

// answerRoots answers the router's next roots/list to the host with dirs
// (relative to the fixture's base).
func (f *routerFixture) answerRoots(t *testing.T, dirs ...string) {
	t.Helper()
	rl := f.host.Await("roots/list", func(m *mcppeer.Message) bool { return m.IsRequest("roots/list") })
	list := []map[string]string{}
	for _, d := range dirs {
		list = append(list, map[string]string{"uri": roots.FileURI(filepath.Join(f.base, d))})
	}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": rl.ID, "result": map[string]any{"roots": list}})
}

// listRoots asks for the roots as the server and returns their names.
func (f *routerFixture) listRoots(t *testing.T, id string) string {
	t.Helper()
	f.server.SendRaw(`{"jsonrpc":"2.0","id":"` + id + `","method":"roots/list"}`)
	r := f.server.Await("roots/list reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(`"` + id + `"`) })
	var res struct {
		Roots []struct{ Name string } `json:"roots"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("roots/list reply %s", r.Raw)
	}
	var names []string
	for _, x := range res.Roots {
		names = append(names, x.Name)
	}
	return strings.Join(names, ",")
}

// The server's roots/list waits for the host's roots, and sees the operator's
// narrowed by them; the host's list_changed leads to a list_changed to the
// server only when what it sees changes.
func TestWrapRouterHostRootsNarrow(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, nil) // hostRoots nil: see below
	if got := f.listRoots(t, "r0"); got != "a,b" {
		t.Errorf("a host without roots: the server sees %q, want a,b", got)
	}

	g := startRouter(t)
	g.host.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"roots": map[string]any{}},
		"clientInfo": map[string]any{"name": "host", "version": "1"}}})
	init := g.server.Await("initialize", func(m *mcppeer.Message) bool { return m.IsRequest("initialize") })
	g.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"srv","version":"1"}}}`)
	g.host.Await("initialize result", func(m *mcppeer.Message) bool { return m.IsReplyTo("1") })
	g.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	g.server.Await("initialized", func(m *mcppeer.Message) bool { return m.IsNotification("notifications/initialized") })
	// The server asks before the host has answered: its request waits.
	g.server.SendRaw(`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`)
	if m := g.server.TryAwait(200*time.Millisecond, func(m *mcppeer.Message) bool { return m.IsReplyTo(`"r1"`) }); m != nil {
		t.Fatalf("roots/list answered before the host's roots were known: %s", m.Raw)
	}
	g.answerRoots(t, "ws")
	r := g.server.Await("roots/list reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(`"r1"`) })
	if !strings.Contains(r.Raw, `"name":"a"`) || !strings.Contains(r.Raw, `"name":"b"`) {
		t.Errorf("the server sees %s, want a and b", r.Result)
	}

	g.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	g.answerRoots(t, "ws/b", "elsewhere")
	g.server.Await("list_changed", func(m *mcppeer.Message) bool { return m.IsNotification("notifications/roots/list_changed") })
	if got := g.listRoots(t, "r2"); got != "b" {
		t.Errorf("after narrowing the server sees %q, want b", got)
	}
	// Reading under the root the host took away is refused.
	g.server.SendRaw(`{"jsonrpc":"2.0","id":"read-a","method":"files/read","params":{"path":"a/hello.txt"}}`)
	rd := g.server.Await("files/read reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(`"read-a"`) })
	if rd.Error == nil || !strings.Contains(string(rd.Error.Data), `"code":"PERMISSION_DENIED"`) {
		t.Errorf("files/read under a withheld root answered %s, want PERMISSION_DENIED", rd.Raw)
	}

	// The same view again: nothing reaches the server before the marker.
	g.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	g.answerRoots(t, "ws/b")
	g.host.Send(map[string]any{"jsonrpc": "2.0", "method": "x/marker"})
	g.server.Await("marker", func(m *mcppeer.Message) bool { return m.IsNotification("x/marker") })
	if m := g.server.TryAwait(0, func(m *mcppeer.Message) bool { return m.IsNotification("notifications/roots/list_changed") }); m != nil {
		t.Error("the server was told of a change that changed nothing it can see")
	}
	for _, m := range g.server.All() {
		if m.IsNotification("notifications/roots/list_changed") && m.Raw != `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}` {
			t.Errorf("list_changed sent as %s", m.Raw)
		}
	}
	for _, m := range g.host.All() {
		if m.Method != "" && m.Method != "roots/list" {
			t.Errorf("the host received %s", m.Raw)
		}
	}
}

// A cancellation from the server of a request the session is answering goes
// to the session (the consent provider's context ends), and nothing reaches
// the host, not even a reply.
func TestWrapRouterServerCancelsSessionRequest(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, []string{"ws"})
	f.server.SendRaw(`{"jsonrpc":"2.0","id":"c1","method":"fs.consent","params":{"message":"may I?","requestedPaths":["a/hello.txt"]}}`)
	select {
	case <-f.consent.asked:
	case <-time.After(waitLimit):
		t.Fatal("the consent provider was not asked")
	}
	f.server.SendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}`)
	select {
	case <-f.consent.ended:
	case <-time.After(waitLimit):
		t.Fatal("the consent request was not cancelled")
	}
	// A ping of the server's goes to the host; its reply comes back, after
	// anything the session might (wrongly) have sent for c1.
	f.server.SendRaw(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	ping := f.host.Await("the server's ping", func(m *mcppeer.Message) bool { return m.IsRequest("ping") })
	f.host.SendRaw(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"result":{}}`)
	f.server.Await("ping reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(`"p1"`) })
	for _, m := range f.server.All() {
		if m.IsReplyTo(`"c1"`) {
			t.Errorf("the server got a reply to its cancelled request: %s", m.Raw)
		}
	}
	for _, m := range f.host.All() {
		if m.Method != "roots/list" && m.Method != "ping" && !m.IsReplyTo("1") {
			t.Errorf("the host received %s", m.Raw)
		}
	}
}

// The session's ping meets a host request with the same id in flight toward
// the server: one of them travels under a fresh id, the server never sees two
// requests with one id, each reply (and the host's cancellation) finds its
// sender, and the host's id and the server's reply are otherwise unchanged.
func TestWrapRouterRenamesCollidingIDs(t *testing.T) {
	f := startRouter(t, broker.WithPingInterval(50*time.Millisecond))
	f.handshake(t, nil)
	ping := f.server.Await("the session's ping", func(m *mcppeer.Message) bool { return m.IsRequest("ping") })
	// The host sends a request with the id the ping has, and cancels it.
	f.host.SendRaw(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"method":"tools/call","params":{"name":"x"}}`)
	call := f.server.Await("tools/call", func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") })
	if string(call.ID) == string(ping.ID) {
		t.Fatalf("the server has two requests in flight with id %s", ping.ID)
	}
	f.host.SendRaw(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(ping.ID) + `,"reason":"r"}}`)
	c := f.server.Await("cancellation", func(m *mcppeer.Message) bool { return m.IsNotification("notifications/cancelled") })
	if !strings.Contains(string(c.Params), `"requestId":`+string(call.ID)) || !strings.Contains(string(c.Params), `"reason":"r"`) {
		t.Errorf("the server got the cancellation %s, want requestId %s", c.Params, call.ID)
	}
	// Another host request with the same id, answered this time.
	f.host.SendRaw(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"method":"tools/list"}`)
	list := f.server.Await("tools/list", func(m *mcppeer.Message) bool { return m.IsRequest("tools/list") })
	if string(list.ID) == string(ping.ID) {
		t.Fatalf("the server has two requests in flight with id %s", ping.ID)
	}
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(list.ID) + `,"result":{"tools":[]}}`)
	r := f.host.Await("tools/list reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(string(ping.ID)) })
	if !strings.Contains(r.Raw, `"result":{"tools":[]}`) {
		t.Errorf("the host got %s", r.Raw)
	}
	// The ping's reply goes to the session, not to the host.
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(ping.ID) + `,"result":{}}`)
	f.host.SendRaw(`{"jsonrpc":"2.0","method":"x/marker"}`)
	f.server.Await("marker", func(m *mcppeer.Message) bool { return m.IsNotification("x/marker") })
	f.server.Await("a second ping", func(m *mcppeer.Message) bool { return m.IsRequest("ping") })
	for _, m := range f.host.All() {
		if m.IsRequest("ping") || (m.Method == "" && string(m.ID) != "1" && string(m.ID) != string(ping.ID)) {
			t.Errorf("the host received %s", m.Raw)
		}
	}
	n := 0
	for _, m := range f.host.All() {
		if m.IsReplyTo(string(ping.ID)) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the host got %d replies with id %s, want 1", n, ping.ID)
	}
}

// Before the host's initialized has reached the server, the router answers
// the server's roots/list and files/* itself with NOT_INITIALIZED.
func TestWrapRouterNotInitialized(t *testing.T) {
	f := startRouter(t)
	for i, method := range []string{"roots/list", "files/read", "fs.list"} {
		f.server.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"path":"a"}}`, i, method))
		r := f.server.Await("reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(fmt.Sprint(i)) })
		if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(string(r.Error.Data), `"code":"NOT_INITIALIZED"`) {
			t.Errorf("%s before initialization answered %s", method, r.Raw)
		}
	}
	if len(f.host.All()) != 0 {
		t.Errorf("the host received %s", f.host.All()[0].Raw)
	}
}

// A change event under a root the host has since taken away is withheld; one
// under a root still visible is sent.
func TestWrapRouterWithholdsEventsOfWithheldRoots(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, []string{"ws"})
	for _, mount := range []string{"a", "b"} {
		f.server.SendRaw(`{"jsonrpc":"2.0","id":"w-` + mount + `","method":"files/watch","params":{"path":"` + mount + `","recursive":true}}`)
		r := f.server.Await("watch reply", func(m *mcppeer.Message) bool { return m.IsReplyTo(`"w-` + mount + `"`) })
		if r.Error != nil {
			t.Fatalf("files/watch %s: %s", mount, r.Raw)
		}
	}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	f.answerRoots(t, "ws/a")
	f.server.Await("list_changed", func(m *mcppeer.Message) bool { return m.IsNotification("notifications/roots/list_changed") })
	if err := os.WriteFile(filepath.Join(f.base, "ws/b/secret.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.base, "ws/a/new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.server.Await("event under a", func(m *mcppeer.Message) bool {
		return m.IsNotification("notifications/files/changed") && strings.Contains(string(m.Params), `"path":"a/new.txt"`)
	})
	// Events of the two watches are independent: give b's time to come.
	if m := f.server.TryAwait(500*time.Millisecond, func(m *mcppeer.Message) bool {
		return m.IsNotification("notifications/files/changed") && strings.Contains(string(m.Params), `"b/`)
	}); m != nil {
		t.Errorf("an event under the withheld root reached the server: %s", m.Raw)
	}
}

// A batch from the server passes unchanged when every element is a plain
// message that is not the broker's to answer; one that holds roots/list or
// files/* is refused, and so is a line the Router cannot read exactly as a
// host would (answered -32700/-32600, never passed on). The host's batches
// are refused too (-32600; a request must not reach the server without its
// forward record); its plain lines pass as they are.
func TestWrapRouterBatchesAndMalformedLines(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, nil)
	f.server.SendRaw(`[{"jsonrpc":"2.0","id":"b1","method":"files/read","params":{"path":"a/hello.txt"}}]`)
	r := f.server.Await("batch refusal", func(m *mcppeer.Message) bool { return m.IsReplyTo("null") })
	if r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("batch with files/read answered %s", r.Raw)
	}
	const otherBatch = `[{"jsonrpc":"2.0","id":"b2","method":"sampling/createMessage"}]`
	f.server.SendRaw(otherBatch)
	f.server.SendRaw(`{not json`)
	f.host.SendRaw(`[1,2]`)
	f.host.SendRaw(`{"jsonrpc":"2.0","method":"x/marker"}`)
	f.host.Await("the server's batch", func(m *mcppeer.Message) bool { return m.Raw == otherBatch })
	f.server.Await("the parse error for the malformed line", func(m *mcppeer.Message) bool {
		return m.IsReplyTo("null") && m.Error != nil && m.Error.Code == -32700
	})
	if r := f.host.AwaitReply("null"); r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("the host's batch was answered %s, want -32600", r.Raw)
	}
	f.server.Await("marker", func(m *mcppeer.Message) bool { return m.IsNotification("x/marker") })
	for _, m := range f.host.All() {
		if strings.Contains(m.Raw, "files/read") {
			t.Errorf("the host received %s", m.Raw)
		}
	}
	if f.server.Has(func(m *mcppeer.Message) bool { return m.Raw == `[1,2]` }) {
		t.Error("the host's batch reached the server")
	}
}

// TestWrapRouterNeverPassesWhatItCannotRead: requests the broker answers,
// disguised so that a lenient reader would see them and a strict one would
// not, never reach the host (a security review's probes).
func TestWrapRouterNeverPassesWhatItCannotRead(t *testing.T) {
	f := startRouter(t)
	f.handshake(t, nil)
	for _, line := range []string{
		`{"jsonrpc":"2\u002e0","id":"p1","method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":"p2","method":"roots/list","result":null}`,
		`{"jsonrpc":"2.0","id":"p3","method":"roots/list","method":"x/y"}`,
		`{"jsonrpc":"2.0","id":"p4","method":"x/y","method":"files/read"}`,
		`[{"jsonrpc":"2.0","id":"b1","method":"roots/list"},5]`,
		`[{"jsonrpc":"2.0","id":"b2","method":"roots/list","Method":"x/y"}]`,
		`[{"jsonrpc":"2.0","id":"b3","method":"x/y","method":"roots/list"}]`,
	} {
		f.server.SendRaw(line)
	}
	f.server.SendRaw(`{"jsonrpc":"2.0","method":"x/marker"}`)
	f.host.Await("marker", func(m *mcppeer.Message) bool { return m.IsNotification("x/marker") })
	for _, m := range f.host.All() {
		if strings.Contains(m.Raw, "roots/list") || strings.Contains(m.Raw, "files/read") {
			t.Errorf("the host got %s", m.Raw)
		}
	}
}

// startRouterConsent is startRouter with the session's consent provider.
func startRouterConsent(t *testing.T, provider consent.Provider, routerOpts ...Option) *routerFixture {
	t.Helper()
	serverR, serverP := mcppeer.Pipes(t)
	f := newRouterFixture(t, serverR, provider, routerOpts, nil)
	f.server = mcppeer.New(t, "server", serverP)
	return f
}
