// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// pipeSession is a real Session in the test's process, over real pipes to
// the test's host, on a real runtime (the built-in policies, an audit trail
// and grants in a state directory) with one root, proj.
type pipeSession struct {
	host  *mcppeer.Peer
	sess  *Session
	rt    *runtime.Runtime
	proj  string
	state string
	log   *testlog.Lines
	ids   int
}

// startPipeSession starts the session with cfg's fields set by tweak, its
// host sending init (none when "") and answering with opts' handlers (a
// request without one is left unanswered).
func startPipeSession(t *testing.T, provider consent.Provider, init string, tweak func(*Config), opts ...mcppeer.Option) *pipeSession {
	t.Helper()
	ps := openTestRuntime(t, provider)
	rt := ps.rt
	brokerEnd, hostEnd := mcppeer.Pipes(t)
	var err error
	if ps.sess, err = NewSession(brokerEnd, ps.config(tweak)); err != nil {
		t.Fatal(err)
	}
	runPipeSession(t, ps.sess, hostEnd, rt)
	ps.host = mcppeer.New(t, "the serve session", hostEnd, append([]mcppeer.Option{mcppeer.RequireValid()}, opts...)...)
	if init != "" { // a host of protocol 2026-07-28 sends no initialize
		ps.host.Call(0, "initialize", json.RawMessage(init))
		ps.host.Notify("notifications/initialized", nil)
	}
	return ps
}

// runPipeSession runs sess until the test ends; then it closes the host's
// end of the pipes, requires the session to end without an error, and
// closes the runtime.
func runPipeSession(tb testing.TB, sess *Session, hostEnd io.Closer, rt *runtime.Runtime) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- sess.Run(context.Background()) }()
	tb.Cleanup(func() {
		_ = hostEnd.Close()
		if err := <-done; err != nil {
			tb.Errorf("the session ended with %v", err)
		}
		if err := rt.Close(); err != nil {
			tb.Errorf("close the runtime: %v", err)
		}
	})
}

// openTestRuntime makes a test session's tree (proj/dir/a.txt, writable)
// and opens its runtime with provider; the caller closes the runtime.
func openTestRuntime(t *testing.T, provider consent.Provider) *pipeSession {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ps := &pipeSession{proj: filepath.Join(base, "proj"), state: filepath.Join(base, "state"), log: &testlog.Lines{}}
	if err := os.MkdirAll(filepath.Join(ps.proj, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ps.proj, "dir", "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ps.rt, err = runtime.Open(context.Background(), runtime.Config{StateDir: ps.state, Consent: provider, Version: "test",
		Roots: []roots.Spec{{Path: ps.proj, Mount: "proj", Writable: true}}}, ps.log.Logger()); err != nil {
		t.Fatal(err)
	}
	return ps
}

// config is the Config of a session on ps's runtime, with a corridor of
// its own, its fields set by tweak.
func (ps *pipeSession) config(tweak func(*Config)) Config {
	cfg := Config{Corridor: ps.rt.NewCorridor(), Roots: ps.rt.Roots, Log: ps.log.Logger(), Version: "test", WatchGrants: ps.rt.WatchGrants}
	if tweak != nil {
		tweak(&cfg)
	}
	return cfg
}

// call sends tools/call and returns its result; a JSON-RPC error fails the
// test.
func (ps *pipeSession) call(t *testing.T, tool string, args map[string]any) map[string]any {
	t.Helper()
	ps.ids++
	reply := ps.host.Call(ps.ids, "tools/call", map[string]any{"name": tool, "arguments": args})
	if reply.Error != nil {
		t.Fatalf("%s: JSON-RPC error %+v", tool, reply.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(reply.Result, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSessionHostRootsNeverAnsweredRefuse: a host that declares roots and
// never answers roots/list gets its calls refused once the bounded wait
// ends: nothing is served under the operator's roots meanwhile.
func TestSessionHostRootsNeverAnsweredRefuse(t *testing.T) {
	ps := startPipeSession(t, consent.Auto{}, rootsHostInit,
		func(c *Config) { c.HostRootsTimeout = 300 * time.Millisecond }) // roots/list is left unanswered
	ps.host.AwaitRequest("roots/list")
	res := ps.call(t, "read_text_file", map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")})
	requireRefused(t, res, "PERMISSION_DENIED")
	if text := resultText(ps.call(t, "list_allowed_directories", map[string]any{})); text != "Allowed directories:\n" {
		t.Errorf("list_allowed_directories: %q, want none", text)
	}
}

// TestSessionRevocationEndsWatches: a revocation of the host's grant by
// another process on the state directory (the grants store fsbroker grants
// revoke uses) ends the session's watch under it, and the next call there
// is refused.
func TestSessionRevocationEndsWatches(t *testing.T) {
	ps := startPipeSession(t, consent.Deny{}, testClientInit, nil)
	other, err := grants.Open(filepath.Join(ps.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	root, _ := ps.rt.Roots().ByMount("proj")
	key := corridor.StateKeyOf("fsbroker-serve-test", false)
	if _, err := other.Grant(key, grants.Grant{Access: grants.Read, Path: "proj/dir", Root: grants.RootOf(root),
		Granted: time.Now().UTC(), By: "test"}); err != nil {
		t.Fatal(err)
	}
	if res := ps.call(t, "read_text_file", map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")}); resultText(res) != "a\n" {
		t.Fatalf("a read under the grant: %v", res)
	}
	caller := ps.sess.caller("resources/subscribe")
	if _, err := ps.sess.cfg.Corridor.Watch(context.Background(), caller, corridor.WatchRequest{Path: "proj/dir", Recursive: true},
		func(corridor.Change) {}); err != nil {
		t.Fatalf("watch under the grant: %v", err)
	}

	if _, err := other.Revoke(grants.RevokeFilter{Server: key, Path: "proj/dir"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for ps.sess.cfg.Corridor.Stats().Watches != 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the watch under the revoked grant still runs 5 s after the revocation")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the watch ended %v after the revocation (PROTOCOL.md: within 1 s)", time.Since(start))
	if ps.log.Count("consent revoked: watches ended") != 1 {
		t.Errorf("no log line for the ended watch:\n%s", ps.log.String())
	}
	res := ps.call(t, "read_text_file", map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")})
	requireRefused(t, res, "PERMISSION_DENIED: "+corridor.ReasonNoConsent)
	if !strings.Contains(resultText(res), "read access") {
		t.Errorf("refusal %q", resultText(res))
	}
}
