// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// The attacks of review 19 (issue 19) on a session's lifecycle and its
// host's roots, on a real Session in the test's process over real pipes
// (pipeSession); the same through the real fsbroker serve are in
// serve_review_test.go.

// awaitAllowedIn waits until the session's list_allowed_directories lists
// dirs.
func (ps *pipeSession) awaitAllowedIn(t *testing.T, dirs ...string) {
	t.Helper()
	awaitAllowed(t, func() []string { return allowedLines(ps.call(t, "list_allowed_directories", map[string]any{})) }, dirs...)
}

// awaitWatches waits (bounded) until the session's corridor holds n
// watches.
func (ps *pipeSession) awaitWatches(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ps.sess.cfg.Corridor.Stats().Watches != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches, want %d", ps.sess.cfg.Corridor.Stats().Watches, n)
		}
	}
}

// rpc sends a request with the next id and returns its reply.
func (ps *pipeSession) rpc(method string, params any) *mcppeer.Message {
	ps.ids++
	return ps.host.Call(ps.ids, method, params)
}

// TestSessionHostRootsNarrowingEndsSubscriptions (review 19 finding 4): a
// subscription whose file the host's new roots leave out ends when the
// answer applies (its watch is gone, the log says why), and so do all of
// them when the host narrows its roots to nothing; the host may still
// unsubscribe an ended one.
func TestSessionHostRootsNarrowingEndsSubscriptions(t *testing.T) {
	r := &scriptedRoots{}
	ps := startPipeSession(t, consent.Auto{}, rootsHostInit, nil, mcppeer.WithHandler("roots/list", r.handler))
	dir, other := filepath.Join(ps.proj, "dir"), filepath.Join(ps.proj, "other")
	testfs.RealDir(t, other)
	testfs.WriteFile(t, filepath.Join(other, "b.txt"), "b\n")
	r.answer(rootsResult(dir, other), nil)
	ps.host.Notify("notifications/roots/list_changed", nil)
	ps.awaitAllowedIn(t, dir, other)
	a, b := FileURL(filepath.Join(dir, "a.txt")), FileURL(filepath.Join(other, "b.txt"))
	for _, uri := range []string{a, b} {
		if reply := ps.rpc(MethodResourcesSubscribe, map[string]any{"uri": uri}); reply.Error != nil {
			t.Fatalf("subscribe %s: %s", uri, reply.Raw)
		}
	}
	ps.awaitWatches(t, 2)

	r.answer(rootsResult(other), nil)
	ps.host.Notify("notifications/roots/list_changed", nil)
	ps.awaitAllowedIn(t, other)
	ps.awaitWatches(t, 1)
	r.answer(rootsResult(), nil)
	ps.host.Notify("notifications/roots/list_changed", nil)
	ps.awaitAllowedIn(t)
	ps.awaitWatches(t, 0)
	if n := ps.log.Count(rootsLeftOut); n != 2 {
		t.Errorf("%d log lines for ended subscriptions, want 2:\n%s", n, ps.log.String())
	}
	if reply := ps.rpc(MethodResourcesUnsubscribe, map[string]any{"uri": a}); reply.Error != nil || string(reply.Result) != "{}" {
		t.Errorf("unsubscribe an ended subscription: %s", reply.Raw)
	}
}

// TestSessionSecondInitializeRefused (review 19 finding 6): an initialize
// in a session that has had one, under another name and an older version,
// is refused (-32602, recorded in the trail under the first identity); the
// session goes on under its first identity and version: every record of
// the session names the first host and version.
func TestSessionSecondInitializeRefused(t *testing.T) {
	ps := startPipeSession(t, consent.Auto{}, testClientInit, nil)
	file := filepath.Join(ps.proj, "dir", "a.txt")
	if res := ps.call(t, "read_text_file", map[string]any{"path": file}); resultText(res) != "a\n" {
		t.Fatalf("read: %v", res)
	}
	reply := ps.rpc("initialize", json.RawMessage(`{"protocolVersion":"2024-11-05","capabilities":{"roots":{}},"clientInfo":{"name":"mallory-host","version":"9"}}`))
	if reply.Error == nil || reply.Error.Code != -32602 || !strings.Contains(string(reply.Error.Data), ReasonAlreadyInitialized) {
		t.Fatalf("a second initialize: %s, want -32602 %q", reply.Raw, ReasonAlreadyInitialized)
	}
	if res := ps.call(t, "read_text_file", map[string]any{"path": file}); resultText(res) != "a\n" {
		t.Fatalf("read after the refused initialize (its roots capability must not narrow): %v", res)
	}

	all := records(t, ps.state, audit.Filter{})
	start := slices.IndexFunc(all, func(r audit.Record) bool { return r.Kind == audit.KindSessionStart })
	if start < 0 {
		t.Fatal("no session_start record")
	}
	first := all[start]
	if first.ProtocolVersion != "2025-11-25" || first.Server == "" {
		t.Fatalf("session_start %+v", first)
	}
	refused := 0
	for _, rec := range all[start:] {
		if rec.SessionID != first.SessionID {
			continue
		}
		if rec.Server != first.Server || rec.ProtocolVersion != "" && rec.ProtocolVersion != "2025-11-25" {
			t.Errorf("a %s record (%s) under %q %q, want the first host %q on 2025-11-25", rec.Kind, rec.Method, rec.Server, rec.ProtocolVersion, first.Server)
		}
		if rec.Kind == audit.KindDecision && rec.Method == "initialize" && rec.Allow != nil && !*rec.Allow {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d refusal records of the second initialize, want 1", refused)
	}
	if slices.ContainsFunc(all, func(r audit.Record) bool { return strings.Contains(r.Server, "mallory") }) {
		t.Error("a record names the second initialize's host")
	}
}

// TestSessionRootsListChangedFloodAsksOnce (review 19 finding 8): a flood
// of notifications/roots/list_changed while the host holds its answer to
// roots/list gets at most one roots/list outstanding, and one more once
// that answer came (the changes after it was asked); that last answer is
// the one applied.
func TestSessionRootsListChangedFloodAsksOnce(t *testing.T) {
	ps := startPipeSession(t, consent.Auto{}, rootsHostInit, nil) // roots/list is answered by the test
	dir, other, final := filepath.Join(ps.proj, "dir"), filepath.Join(ps.proj, "other"), filepath.Join(ps.proj, "final")
	testfs.RealDir(t, other)
	testfs.RealDir(t, final)
	ps.host.Reply(ps.host.AwaitRequest("roots/list"), rootsResult(dir))
	ps.awaitAllowedIn(t, dir)

	const flood = 2000
	for range flood {
		ps.host.Notify("notifications/roots/list_changed", nil)
	}
	// The notifications are handled in order on the session's read loop,
	// so the ping's reply comes after every one of them was.
	if reply := ps.rpc("ping", nil); reply.Error != nil {
		t.Fatalf("ping: %s", reply.Raw)
	}
	asked := func() int {
		return len(slices.DeleteFunc(ps.host.All(), func(m *mcppeer.Message) bool { return !m.IsRequest("roots/list") }))
	}
	held := ps.host.AwaitRequest("roots/list")
	if n := asked(); n != 2 {
		t.Fatalf("%d roots/list requests after %d list_changed (the first at initialized), want 2: one outstanding", n, flood)
	}
	ps.host.Reply(held, rootsResult(other)) // answered before the last changes: asked again
	ps.host.Reply(ps.host.AwaitRequest("roots/list"), rootsResult(final))
	ps.awaitAllowedIn(t, final)
	if reply := ps.rpc("ping", nil); reply.Error != nil {
		t.Fatalf("ping: %s", reply.Raw)
	}
	if n := asked(); n != 3 {
		t.Errorf("%d roots/list requests in all, want 3 (initialized, the flood's, once more after its answer)", n)
	}
}

// TestSessionUnansweredRequestsCancelled: a consent question
// (elicitation/create) the host leaves unanswered past the provider's time
// limit, and a roots/list past its own, are cancelled with
// notifications/cancelled naming their ids; the question's late accept
// approves nothing.
func TestSessionUnansweredRequestsCancelled(t *testing.T) {
	t.Run("elicitation/create", func(t *testing.T) {
		ps := startPipeSession(t, consent.NewElicit(consent.WithTimeout(300*time.Millisecond)), elicitHostInit("2025-11-25"), nil)
		res := ps.call(t, "read_text_file", map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")})
		requireRefused(t, res, "PERMISSION_DENIED")
		question := ps.host.AwaitRequest("elicitation/create")
		requireCancelled(t, ps.host.AwaitNotification("notifications/cancelled"), question)

		var params struct {
			RequestedSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"requestedSchema"`
		}
		if err := json.Unmarshal(question.Params, &params); err != nil || len(params.RequestedSchema.Properties) == 0 {
			t.Fatalf("the question's form: %s (%v)", question.Params, err)
		}
		content := map[string]any{}
		for field := range params.RequestedSchema.Properties {
			content[field] = true
		}
		ps.host.Reply(question, map[string]any{"action": "accept", "content": content})
		if reply := ps.rpc("ping", nil); reply.Error != nil {
			t.Fatalf("ping: %s", reply.Raw)
		}
		if got := grantPaths(t, ps, "elicit-host"); len(got) != 0 {
			t.Errorf("the late accept granted %q", got)
		}
	})
	t.Run("roots/list", func(t *testing.T) {
		ps := startPipeSession(t, consent.Auto{}, rootsHostInit, func(c *Config) { c.HostRootsTimeout = 300 * time.Millisecond })
		requireCancelled(t, ps.host.AwaitNotification("notifications/cancelled"), ps.host.AwaitRequest("roots/list"))
	})
}

// requireCancelled requires that cancelled is the notifications/cancelled
// of the session's request req.
func requireCancelled(t *testing.T, cancelled, req *mcppeer.Message) {
	t.Helper()
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if err := json.Unmarshal(cancelled.Params, &params); err != nil || string(params.RequestID) != string(req.ID) || params.Reason == "" {
		t.Fatalf("notifications/cancelled %s, want one for %s's id %s", cancelled.Params, req.Method, req.ID)
	}
}
