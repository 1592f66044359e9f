// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// postCancelled sends a tools/call of protocol 2026-07-28 to ep and closes
// its stream after wait (the revision's cancellation), whether or not the
// reply came.
func (ep *httpEndpoint) postCancelled(t *testing.T, h *modernHost, tool string, args map[string]any, wait time.Duration) {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_meta": h.meta()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
		"Authorization": "Bearer " + ep.token, "MCP-Protocol-Version": modern.Version, "Mcp-Method": "tools/call", "Mcp-Name": tool} {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// TestModernHTTPCancelledWritesAreWholeAndRecorded: a client of protocol
// 2026-07-28 over HTTP that closes its write's stream at any moment (before
// the decision, during the write, after it) leaves the file as one of the
// versions written whole, never torn, and a trail that tells what
// happened: every allowed write has its outcome, and the version the file
// holds was written by a write whose outcome is ok.
func TestModernHTTPCancelledWritesAreWholeAndRecorded(t *testing.T) {
	ps := openTestRuntime(t, consent.Auto{})
	t.Cleanup(func() { _ = ps.rt.Close() })
	ep := startHTTPEndpoint(t, ps, "http-cancel-writes", nil)
	h := ep.host(t, ep.token, "cancel-host", map[string]any{})
	target := filepath.Join(ps.proj, "dir", "versions.txt")
	version := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 256<<10+i) }
	if r := h.tool(ToolWriteFile, map[string]any{"path": target, "content": version(0)}, nil); r.Error != nil {
		t.Fatalf("the first write: %s", r.Raw)
	}
	// How long a whole write takes here: the cancellations fall within
	// twice that, so that some come before the decision, some during the
	// write and some after it.
	start := time.Now()
	ep.postCancelled(t, h, ToolWriteFile, map[string]any{"path": target, "content": version(1)}, time.Minute)
	whole := time.Since(start)
	const writes = 24
	for i := 2; i <= writes; i++ {
		ep.postCancelled(t, h, ToolWriteFile, map[string]any{"path": target, "content": version(i)},
			time.Duration(rand.Int64N(int64(2*whole))))
		got, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got) - 256<<10; n < 0 || n > i || string(got) != version(n) {
			t.Fatalf("after cancelled write %d the file holds %d bytes that are no version written whole", i, len(got))
		}
	}
	// Every allowed write gets its outcome, once its handler has stopped,
	// and the version on disk is one an outcome ok wrote. A cancelled
	// write may still be running when the loop above ends: the trail is
	// read again until both hold, or the time is up.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		decisions := toolRecords(t, ps.state, ToolWriteFile, audit.Filter{Kind: audit.KindDecision})
		outcomes := map[string]audit.Record{}
		for _, rec := range toolRecords(t, ps.state, ToolWriteFile, audit.Filter{Kind: audit.KindOutcome}) {
			outcomes[rec.DecisionID] = rec
		}
		missing := 0
		for _, d := range decisions {
			if _, ok := outcomes[d.DecisionID]; d.Allow != nil && *d.Allow && !ok {
				missing++
			}
		}
		found := false
		kinds := map[string]int{}
		for _, o := range outcomes {
			kinds[o.Outcome]++
			found = found || o.Outcome == "ok" && o.Bytes == int64(len(got))
		}
		if missing == 0 && found {
			t.Logf("%d decisions on the writes; outcomes: %v", len(decisions), kinds)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d allowed writes of %d have no outcome in the trail; the file's version (%d bytes) has an outcome ok: %v",
				missing, len(decisions), len(got), found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestModernHTTPNoClientCancelsAnother: the ids the server gives the
// requests of protocol 2026-07-28 (http-N) cannot be named by a client: a
// notifications/cancelled naming each of them, sent as the revision's HTTP
// transport carries a message, and the same as a request, reach no request
// of another client's. A write waiting for the person (a real consent
// command) meanwhile is approved afterwards and runs whole.
func TestModernHTTPNoClientCancelsAnother(t *testing.T) {
	provider, started, release := heldConsentCommand(t, "proj/dir/victim.txt")
	ps := openTestRuntime(t, provider)
	t.Cleanup(func() { _ = ps.rt.Close() })
	ep := startHTTPEndpoint(t, ps, "http-no-cross-cancel", nil)
	victim := ep.host(t, ep.token, "victim-host", map[string]any{})
	target := filepath.Join(ps.proj, "dir", "victim.txt")
	done := make(chan *httpReply, 1)
	go func() {
		r := ep.post(t, ep.token, 1, "tools/call", map[string]any{"name": ToolWriteFile,
			"arguments": map[string]any{"path": target, "content": "whole"}, "_meta": victim.meta()})
		done <- &r
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the consent command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	attacker := ep.host(t, ep.token, "attacker-host", map[string]any{})
	for n := 1; n <= 20; n++ {
		params := map[string]any{"requestId": "http-" + strconv.Itoa(n), "_meta": attacker.meta()}
		if r := ep.postMessage(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params},
			"notifications/cancelled"); r != http.StatusAccepted {
			t.Fatalf("notifications/cancelled for %v: %d, want 202", params["requestId"], r)
		}
		if r := ep.post(t, ep.token, 100+n, "notifications/cancelled", params); r.msg.Error == nil || r.msg.Error.Code != -32601 {
			t.Fatalf("notifications/cancelled as a request for %v: %d %s, want -32601", params["requestId"], r.status, r.msg.Raw)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.msg.Error != nil || bytes.Contains(r.msg.Result, []byte(`"isError":true`)) {
		t.Fatalf("the victim's write: %d %s", r.status, r.msg.Raw)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "whole" {
		t.Fatalf("the victim's file holds %q (%v)", got, err)
	}
}

// postMessage POSTs msg, a message of protocol 2026-07-28 with Mcp-Method
// method, and returns the status.
func (ep *httpEndpoint) postMessage(t *testing.T, msg map[string]any, method string) int {
	t.Helper()
	payload, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, ep.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
		"Authorization": "Bearer " + ep.token, "MCP-Protocol-Version": modern.Version, "Mcp-Method": method} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
