// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/broker/transport/streamable"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// atomicClock is a session clock the test moves while the server's
// goroutines read it.
type atomicClock struct{ unixNano atomic.Int64 }

func (c *atomicClock) now() time.Time          { return time.Unix(0, c.unixNano.Load()) }
func (c *atomicClock) advance(d time.Duration) { c.unixNano.Add(int64(d)) }
func newAtomicClock(start time.Time) *atomicClock {
	c := &atomicClock{}
	c.unixNano.Store(start.UnixNano())
	return c
}

// httpEndpoint is a streamable.Server on 127.0.0.1:0 whose sessions are
// this package's Sessions on ps's runtime, as fsbroker serve --http runs
// them: the identity pinned to the token's, transport "http".
type httpEndpoint struct {
	url, token string
	srv        *streamable.Server
}

// startHTTPEndpoint serves ps's runtime over Streamable HTTP with a token
// of its own; tweak sets the sessions' Config fields.
func startHTTPEndpoint(t *testing.T, ps *pipeSession, identity string, tweak func(*Config)) *httpEndpoint {
	t.Helper()
	ep := &httpEndpoint{token: streamable.NewToken()}
	srv, err := streamable.NewServer(streamable.Config{
		Token: ep.token,
		NewSession: func(stream jsonrpc.RoutedStream) (func(context.Context) error, error) {
			cfg := ps.config(tweak)
			cfg.PinnedID, cfg.Transport = identity, "http"
			sess, err := NewSession(stream, cfg)
			if err != nil {
				cfg.Corridor.Close()
				return nil, err
			}
			return sess.Run, nil
		},
		Versions: SupportedVersions, ModernVersions: ModernVersions, LoopbackOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close the endpoint: %v", err)
		}
		_ = hs.Close()
	})
	ep.url = "http://" + ln.Addr().String() + streamable.EndpointPath
	ep.srv = srv
	return ep
}

// httpReply is what one POST got.
type httpReply struct {
	status int
	msg    *mcppeer.Message
}

// post sends one request of protocol 2026-07-28 as the revision's HTTP
// transport has a client send it (MCP-Protocol-Version, Mcp-Method, Mcp-Name
// from the body), with token ("" for none), and reads the JSON reply.
func (ep *httpEndpoint) post(t *testing.T, token string, id int, method string, params map[string]any) httpReply {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", modern.Version)
	req.Header.Set("Mcp-Method", method)
	for _, member := range []string{"name", "uri"} {
		if v, ok := params[member].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	msg := &mcppeer.Message{Raw: string(raw)}
	var fields struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *mcppeer.Error  `json:"error"`
	}
	if resp.StatusCode != http.StatusUnauthorized {
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatalf("POST %s: %d %q is no JSON-RPC reply", method, resp.StatusCode, raw)
		}
	}
	msg.ID, msg.Result, msg.Error = fields.ID, fields.Result, fields.Error
	return httpReply{status: resp.StatusCode, msg: msg}
}

// host is a host of protocol 2026-07-28 reaching ep over HTTP with token.
func (ep *httpEndpoint) host(t *testing.T, token, name string, caps map[string]any) *modernHost {
	var mu sync.Mutex
	ids := 0
	return &modernHost{t: t, name: name, caps: caps, send: func(method string, params any) *mcppeer.Message {
		mu.Lock()
		ids++
		id := ids
		mu.Unlock()
		return ep.post(t, token, id, method, params.(map[string]any)).msg
	}}
}

// TestModernHTTPRequestState: over Streamable HTTP (protocol 2026-07-28, no
// HTTP session), fsbroker serve asks for consent in an InputRequiredResult,
// and a retry whose requestState is not the one it issued for this request
// is refused (-32602), nothing written: changed, replayed on another path
// or tool, issued by another server (another token's), presented after its
// expiry, or sent without the token (401). The retry as issued, on a new
// connection and with another id, writes, and the grant is the token
// identity's.
func TestModernHTTPRequestState(t *testing.T) {
	clock := newAtomicClock(time.Unix(1_800_000_000, 0))
	tweak := func(c *Config) { c.Now, c.StateTTL = clock.now, time.Minute }
	ps := openTestRuntime(t, consent.NewElicitOr(consent.Deny{}))
	t.Cleanup(func() { _ = ps.rt.Close() })
	const identity = "http-token-identity"
	ep := startHTTPEndpoint(t, ps, identity, tweak)
	h := ep.host(t, ep.token, "attack-host", formCaps)
	a := newAttackTarget(t, ps, h, "target.txt")
	answers := map[string]any{inputKeyConsent: a.reply}
	const invalid = "requestState failed verification"

	changed := a.state[:len(a.state)-3] + "AAA"
	if changed == a.state {
		changed = a.state[:len(a.state)-3] + "BBB"
	}
	a.refused(t, "changed", h.tool(ToolWriteFile, a.args, &retry{state: changed, responses: answers}), invalid)
	elsewhere := filepath.Join(ps.proj, "dir", "elsewhere.txt")
	reply := h.tool(ToolWriteFile, map[string]any{"path": elsewhere, "content": "planted"}, &retry{state: a.state, responses: answers})
	requireError(t, "another path", reply, -32602, invalid)
	if _, err := os.Lstat(elsewhere); !os.IsNotExist(err) {
		t.Fatalf("another path: written (%v)", err)
	}
	a.refused(t, "another tool", h.tool(ToolEditFile, map[string]any{"path": a.path,
		"edits": []any{map[string]any{"oldText": "x", "newText": "y"}}}, &retry{state: a.state, responses: answers}), invalid)

	// Another server, with another token: its own key.
	other := startHTTPEndpoint(t, ps, identity, tweak)
	reply = other.host(t, other.token, "attack-host", formCaps).tool(ToolWriteFile, a.args, &retry{state: a.state, responses: answers})
	requireError(t, "another token's server", reply, -32602, invalid)
	for what, token := range map[string]string{"no token": "", "the other server's token": other.token} {
		r := ep.post(t, token, 99, "tools/call", (&retry{state: a.state, responses: answers}).with(map[string]any{
			"name": ToolWriteFile, "arguments": a.args, "_meta": h.meta()}))
		if r.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d %s, want 401", what, r.status, r.msg.Raw)
		}
	}
	if _, err := os.Lstat(a.path); !os.IsNotExist(err) {
		t.Fatalf("written by a refused retry (%v)", err)
	}

	// The state as issued works, from a new connection, with another id.
	http.DefaultClient.CloseIdleConnections()
	reply = h.tool(ToolWriteFile, a.args, &retry{state: a.state, responses: answers})
	if reply.Error != nil || bytes.Contains(reply.Result, []byte(`"isError":true`)) {
		t.Fatalf("the retry as issued: %s", reply.Raw)
	}
	if got, err := os.ReadFile(a.path); err != nil || string(got) != "planted" {
		t.Fatalf("the retry as issued wrote %q, %v", got, err)
	}
	if paths := grantPathsOf(t, ps, corridor.StateKeyOf(identity, true)); len(paths) != 1 {
		t.Fatalf("grants of the token's identity: %q", paths)
	}
	if paths := grantPaths(t, ps, "attack-host"); len(paths) != 0 {
		t.Fatalf("grants of the declared name: %q, want none (the identity is the token's)", paths)
	}

	// Expired: a new question, its answer sent after the state's minute.
	late := newAttackTarget(t, ps, h, "late.txt")
	clock.advance(time.Minute)
	late.refused(t, "expired", h.tool(ToolWriteFile, late.args, &retry{state: late.state,
		responses: map[string]any{inputKeyConsent: late.reply}}), "requestState expired")
}

// TestModernHTTPClientsShareNoIDs: requests of protocol 2026-07-28 from
// different connections that use the same JSON-RPC id, at once, each get
// their own reply under that id: the server renames them on their way to
// its one session for such requests.
func TestModernHTTPClientsShareNoIDs(t *testing.T) {
	ps := openTestRuntime(t, consent.Auto{})
	t.Cleanup(func() { _ = ps.rt.Close() })
	ep := startHTTPEndpoint(t, ps, "http-shared", nil)
	const n = 8
	for i := range n {
		writeFiles(t, ps.proj, map[string]string{fmt.Sprintf("dir/f%d.txt", i): fmt.Sprintf("content %d\n", i)})
	}
	h := ep.host(t, ep.token, "id-host", map[string]any{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := map[string]any{"name": ToolReadTextFile, "arguments": map[string]any{"path": filepath.Join(ps.proj, "dir", fmt.Sprintf("f%d.txt", i))},
				"_meta": h.meta()}
			r := ep.post(t, ep.token, 1, "tools/call", params)
			var res struct {
				Content []struct{ Text string } `json:"content"`
			}
			if r.status != http.StatusOK || string(r.msg.ID) != "1" || json.Unmarshal(r.msg.Result, &res) != nil || len(res.Content) != 1 {
				t.Errorf("read %d: %d %s", i, r.status, r.msg.Raw)
				return
			}
			if want := fmt.Sprintf("%d\n", i); res.Content[0].Text != "content "+want {
				t.Errorf("read %d got %q", i, res.Content[0].Text)
			}
		}()
	}
	wg.Wait()
}

// heldConsentCommand is a real consent command that writes its process id
// to started when asked, waits (at most a minute) until release exists, and
// then approves the paths given.
func heldConsentCommand(t *testing.T, approved ...string) (provider consent.Provider, started, release string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "ask.sh")
	started, release = filepath.Join(dir, "started"), filepath.Join(dir, "go")
	answer, err := json.Marshal(map[string][]string{"approvedPaths": approved})
	if err != nil {
		t.Fatal(err)
	}
	body := "#!/bin/sh\necho $$ > " + started + ".tmp && mv " + started + ".tmp " + started + "\n" +
		"n=0\nwhile [ ! -e " + release + " ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\n" +
		"cat > /dev/null\necho '" + string(answer) + "'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	provider, err = consent.NewCommand(script, nil)
	if err != nil {
		t.Fatal(err)
	}
	return provider, started, release
}

// TestModernHTTPClosedStreamCancels: over Streamable HTTP on protocol
// 2026-07-28, a client that closes its request's stream cancels the
// request (the revision's basic/patterns/cancellation): a tools/call
// waiting for the consent provider (a real command that waits for a file)
// is stopped, its command ended, and nothing is written though the
// command would have approved it; the server goes on serving.
func TestModernHTTPClosedStreamCancels(t *testing.T) {
	provider, started, release := heldConsentCommand(t, "proj/dir/a.txt", "proj/dir/cancelled.txt")
	ps := openTestRuntime(t, provider)
	t.Cleanup(func() { _ = ps.rt.Close() })
	ep := startHTTPEndpoint(t, ps, "http-cancel", nil)
	h := ep.host(t, ep.token, "cancel-host", map[string]any{})
	target := filepath.Join(ps.proj, "dir", "cancelled.txt")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	payload, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": ToolWriteFile, "arguments": map[string]any{"path": target, "content": "late"}, "_meta": h.meta()}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer " + ep.token, "MCP-Protocol-Version": modern.Version, "Mcp-Method": "tools/call", "Mcp-Name": ToolWriteFile} {
		req.Header.Set(k, v)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	pid := 0
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		if b, err := os.ReadFile(started); err == nil {
			_, _ = fmt.Sscan(string(b), &pid)
		} else if time.Now().After(deadline) {
			t.Fatal("the consent command never started")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel() // the client closes the request's stream
	if err := <-done; err == nil {
		t.Fatal("the request got a reply")
	}
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the consent command still runs: closing the stream did not cancel the request")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The server goes on: a read is asked about (the command approves now)
	// and served; the cancelled write never ran.
	reply := h.tool(ToolReadTextFile, map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")}, nil)
	if reply.Error != nil || !bytes.Contains(reply.Result, []byte(`"text":"a\n"`)) {
		t.Fatalf("a read after the cancelled call: %s", reply.Raw)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the cancelled write ran (%v)", err)
	}
}
