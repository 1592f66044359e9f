// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// openListenStream POSTs subscriptions/listen for uris with id, accepting
// accept, and returns the response and its events' data, one JSON message
// each, as they come (the channel closes with the stream).
func (ep *httpEndpoint) openListenStream(t *testing.T, ctx context.Context, h *modernHost, id int, accept string, uris ...string) (*http.Response, <-chan json.RawMessage) {
	t.Helper()
	req := listenRequest(t, ctx, ep, h, id, accept, uris...)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", MethodSubscriptionsListen, err)
	}
	events := make(chan json.RawMessage, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- json.RawMessage(data)
			}
		}
	}()
	return resp, events
}

// nextEvent takes the stream's next message, or fails after 10 s.
func nextEvent(t *testing.T, events <-chan json.RawMessage, what string) json.RawMessage {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing on the stream within 10 s", what)
	}
	return nil
}

// TestModernHTTPListen: over Streamable HTTP (protocol 2026-07-28), a
// listen's POST answers with an event stream whose acknowledgment and
// updates name the listen by the client's own id (never the server's id of
// the request); two clients using the same id each get their own
// resource's updates alone; closing one's stream ends its watch and the
// other goes on, until a revocation of the grant it stands on ends it with
// a complete result to the client's id, naming it, and the stream ends. A
// listen whose client accepts no event stream is 406.
func TestModernHTTPListen(t *testing.T) {
	ps := openTestRuntime(t, consent.Deny{})
	t.Cleanup(func() { _ = ps.rt.Close() })
	const identity = "http-listen-identity"
	var cw corridorWatches
	ep := startHTTPEndpoint(t, ps, identity, cw.add)
	store, err := grants.Open(filepath.Join(ps.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	root, _ := ps.rt.Roots().ByMount("proj")
	if _, err := store.Grant(corridor.StateKeyOf(identity, true), grants.Grant{Access: grants.Read, Path: "proj/dir",
		Root: grants.RootOf(root), Granted: time.Now().UTC(), By: "test"}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(ps.proj, "dir"), map[string]string{"b.txt": "b\n"})
	a, b := FileURL(filepath.Join(ps.proj, "dir", "a.txt")), FileURL(filepath.Join(ps.proj, "dir", "b.txt"))
	h := ep.host(t, ep.token, "http-listener", noCaps)

	resp, err := http.DefaultClient.Do(listenRequest(t, context.Background(), ep, h, 1, "application/json", a))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("a listen accepting JSON only: %d, want 406", resp.StatusCode)
	}

	const id = 7
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	respA, eventsA := ep.openListenStream(t, ctxA, h, id, "application/json, text/event-stream", a)
	defer respA.Body.Close()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	respB, eventsB := ep.openListenStream(t, ctxB, h, id, "text/event-stream", b)
	defer respB.Body.Close()
	if ct := respA.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("a listen's response is %q", ct)
	}
	for what, events := range map[string]<-chan json.RawMessage{"a": eventsA, "b": eventsB} {
		ack := nextEvent(t, events, "the acknowledgment of "+what)
		if !strings.Contains(string(ack), NotificationSubscriptionsAcknowledged) || subscriptionOf(paramsOf(ack)) != "7" {
			t.Fatalf("acknowledgment of %s: %s, want one naming the client's id 7", what, ack)
		}
	}
	testfs.WriteFile(t, filepath.Join(ps.proj, "dir", "a.txt"), "changed\n")
	update := nextEvent(t, eventsA, "a's update")
	if !strings.Contains(string(update), NotificationResourceUpdated) || !strings.Contains(string(update), a) || subscriptionOf(paramsOf(update)) != "7" {
		t.Fatalf("update %s, want a's, naming the client's id 7", update)
	}
	testfs.WriteFile(t, filepath.Join(ps.proj, "dir", "b.txt"), "changed\n")
	if update := nextEvent(t, eventsB, "b's update"); !strings.Contains(string(update), b) {
		t.Fatalf("b's stream got %s", update)
	}
	select {
	case ev := <-eventsA:
		t.Fatalf("a's stream got another client's update: %s", ev)
	case <-time.After(300 * time.Millisecond):
	}

	cancelA()
	cw.await(t, 1) // b's alone
	testfs.WriteFile(t, filepath.Join(ps.proj, "dir", "b.txt"), "changed again\n")
	if update := nextEvent(t, eventsB, "b's second update"); !strings.Contains(string(update), b) {
		t.Fatalf("b's stream got %s", update)
	}

	// A revocation ends the listen: its stream gets the complete result,
	// under the client's id, and ends.
	if _, err := store.Revoke(grants.RevokeFilter{Server: corridor.StateKeyOf(identity, true), Path: "proj/dir"}); err != nil {
		t.Fatal(err)
	}
	end := nextEvent(t, eventsB, "the end of b's listen")
	var reply struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			ResultType string `json:"resultType"`
		} `json:"result"`
	}
	if json.Unmarshal(end, &reply) != nil || string(reply.ID) != "7" || reply.Result.ResultType != modern.ResultTypeComplete ||
		subscriptionOf(json.RawMessage(mustField(end, "result"))) != "7" {
		t.Fatalf("the end of a revoked listen: %s, want a complete result to id 7 naming it", end)
	}
	if ev, open := <-eventsB; open {
		t.Fatalf("b's stream goes on after its end: %s", ev)
	}
	if n := cw.count(); n != 0 {
		t.Errorf("%d watches after the revocation", n)
	}
}

// TestModernHTTPListenEndsAtShutdown: when the server closes, an open
// listen's stream gets the complete result under the client's id and
// ends.
func TestModernHTTPListenEndsAtShutdown(t *testing.T) {
	ps := openTestRuntime(t, consent.Auto{})
	t.Cleanup(func() { _ = ps.rt.Close() })
	ep := startHTTPEndpoint(t, ps, "http-listen-identity", nil)
	h := ep.host(t, ep.token, "http-listener", noCaps)
	resp, events := ep.openListenStream(t, context.Background(), h, 3, "text/event-stream", FileURL(filepath.Join(ps.proj, "dir", "a.txt")))
	defer resp.Body.Close()
	nextEvent(t, events, "the acknowledgment")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ep.srv.Close(ctx); err != nil {
		t.Fatalf("close the server with a listen open: %v", err)
	}
	end := nextEvent(t, events, "the end of the listen")
	if string(mustField(end, "id")) != "3" || subscriptionOf(mustField(end, "result")) != "3" {
		t.Fatalf("the end of the listen at shutdown: %s", end)
	}
	if ev, open := <-events; open {
		t.Fatalf("the stream goes on after the end: %s", ev)
	}
}

// mustField is the member name of a JSON object (nil when absent).
func mustField(msg json.RawMessage, name string) json.RawMessage {
	var members map[string]json.RawMessage
	_ = json.Unmarshal(msg, &members)
	return members[name]
}

// listenRequest is a listen POST of h with id for uris, accepting accept.
func listenRequest(t *testing.T, ctx context.Context, ep *httpEndpoint, h *modernHost, id int, accept string, uris ...string) *http.Request {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": MethodSubscriptionsListen,
		"params": map[string]any{"_meta": h.meta(), "notifications": map[string]any{"resourceSubscriptions": uris}}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": accept, "Authorization": "Bearer " + ep.token,
		"MCP-Protocol-Version": modern.Version, "Mcp-Method": MethodSubscriptionsListen} {
		req.Header.Set(k, v)
	}
	return req
}

// paramsOf is a message's params.
func paramsOf(msg json.RawMessage) json.RawMessage {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.Params
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestModernHTTPListenGoSDK: the official Go SDK's client over its
// StreamableClientTransport (protocol 2026-07-28, no HTTP session, a host
// that declares no roots) subscribes with subscriptions/listen: a change of
// the file reaches its ResourceUpdatedHandler, a subscription to .env holds
// no watch and its change reaches nothing, and Unsubscribe (closing the
// listen's stream) ends the watch.
func TestModernHTTPListenGoSDK(t *testing.T) {
	ps := openTestRuntime(t, consent.Auto{})
	t.Cleanup(func() { _ = ps.rt.Close() })
	var cw corridorWatches
	ep := startHTTPEndpoint(t, ps, "http-sdk-identity", cw.add)
	writeFiles(t, ps.proj, map[string]string{".env": "API_KEY=hunter2\n"})
	updated := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-http-listener", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}})
	httpClient := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+ep.token)
		return http.DefaultTransport.RoundTrip(r)
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ep.url, HTTPClient: httpClient, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer session.Close()
	if v := session.InitializeResult().ProtocolVersion; v != modern.Version {
		t.Fatalf("protocol version %q", v)
	}
	a, env := FileURL(filepath.Join(ps.proj, "dir", "a.txt")), FileURL(filepath.Join(ps.proj, ".env"))
	for _, uri := range []string{a, env} {
		if err := session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	cw.await(t, 1)
	testfs.WriteFile(t, filepath.Join(ps.proj, ".env"), "API_KEY=changed\n")
	testfs.WriteFile(t, filepath.Join(ps.proj, "dir", "a.txt"), "changed\n")
	select {
	case got := <-updated:
		if got != a {
			t.Fatalf("an update of %s, want a.txt's", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10 s")
	}
	if err := session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: a}); err != nil {
		t.Fatal(err)
	}
	cw.await(t, 0)
}

// corridorWatches collects the corridors an HTTP endpoint makes (its
// configure hook, add) and counts their watches.
type corridorWatches struct {
	mu        sync.Mutex
	corridors []*corridor.Corridor
}

// add is startHTTPEndpoint's configure hook: it keeps c's corridor.
func (cw *corridorWatches) add(c *Config) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.corridors = append(cw.corridors, c.Corridor)
}

// count is the watches every corridor collected holds.
func (cw *corridorWatches) count() int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	n := 0
	for _, c := range cw.corridors {
		n += c.Stats().Watches
	}
	return n
}

// await waits (bounded) until the corridors hold n watches.
func (cw *corridorWatches) await(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); cw.count() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches, want %d", cw.count(), n)
		}
	}
}
