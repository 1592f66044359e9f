// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
)

// modernRaw sends a raw request of protocol 2026-07-28 (body) with the
// headers its transport requires (name: Mcp-Name, "" for none) under ctx,
// and returns the status, or 0 when no answer came before ctx ended.
func (b *httpBroker) modernRaw(ctx context.Context, t *testing.T, method, name, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
		"Authorization": "Bearer " + b.token, "MCP-Protocol-Version": modernVersion, "Mcp-Method": method} {
		req.Header.Set(k, v)
	}
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := b.plain.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// unansweredConsentScript writes a consent command that appends its process
// id to started each time it is asked, waits (at most a minute) until
// release exists, and then approves nothing; release is made when the test
// ends, so that no command outlives it.
func unansweredConsentScript(t *testing.T) (script, started, release string) {
	t.Helper()
	dir := t.TempDir()
	started, release = filepath.Join(dir, "started"), filepath.Join(dir, "release")
	script = csScript(t, dir, "wait.sh", "echo $$ >> '"+started+"'\n"+
		"n=0\nwhile [ ! -e '"+release+"' ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done\n"+
		"cat > /dev/null\necho '{\"approvedPaths\":[]}'\n")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	return script, started, release
}

// waitForConsentAsks waits until the command of unansweredConsentScript has
// been asked want times, or limit has passed, and returns how many times it
// was.
func waitForConsentAsks(started string, want int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		data, _ := os.ReadFile(started)
		n := strings.Count(string(data), "\n")
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeHTTPModernPendingConsentHoldsNoOneElse: every client of protocol
// 2026-07-28 is served by the one session of the process, so requests of
// one client that wait for the person (a consent command that does not
// answer) must not hold the others' requests: while as many writes as
// --max-in-flight wait for their consent, another client's tools/list is
// answered.
func TestServeHTTPModernPendingConsentHoldsNoOneElse(t *testing.T) {
	t.Parallel()
	script, started, release := unansweredConsentScript(t)
	b := newHTTPBroker(t)
	b.preapprove = false
	const inFlight = 2
	b.start(t, "--consent", "command:"+script, "--max-in-flight", "2")

	var held sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range inFlight {
		held.Add(1)
		go func() {
			defer held.Done()
			path := filepath.Join(b.rw, "held"+string(rune('a'+i))+".txt")
			b.modernRaw(ctx, t, "tools/call", "write_file", modernWriteCall(modernVersion, path, "x"))
		}()
	}
	if n := waitForConsentAsks(started, inFlight, waitLimit); n < inFlight {
		t.Fatalf("the consent command started for %d of the %d writes", n, inFlight)
	}
	listCtx, listCancel := context.WithTimeout(context.Background(), waitLimit)
	defer listCancel()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta(modernVersion, "other-host") + `}}`
	if status := b.modernRaw(listCtx, t, "tools/list", "", list); status != http.StatusOK {
		t.Fatalf("another client's tools/list, while the writes wait for consent: status %d (0: no answer in %s)", status, waitLimit)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held.Wait()
}

// TestServeHTTPModernLargePendingWritesHoldNoOneElse: the bytes of the
// 2026-07-28 requests that wait for their replies are bounded by the
// transport, which refuses beyond (429), not by the session stopping its
// reading: while three writes of 22 MiB (more than a session's 64 MiB
// queue) wait for the person's consent, each of them is asked about and
// another client's tools/list is answered.
func TestServeHTTPModernLargePendingWritesHoldNoOneElse(t *testing.T) {
	const largeWriteLimit = 4 * waitLimit
	script, started, release := unansweredConsentScript(t)
	b := newHTTPBroker(t)
	b.preapprove = false
	b.start(t, "--consent", "command:"+script, "--max-write-bytes", "30000000")

	content := strings.Repeat("x", 22<<20)
	var held sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const writes = 3
	for i := range writes {
		held.Add(1)
		go func() {
			defer held.Done()
			path := filepath.Join(b.rw, "large"+string(rune('a'+i))+".txt")
			b.modernRaw(ctx, t, "tools/call", "write_file", modernWriteCall(modernVersion, path, content))
		}()
		// A liveness bound, not a speed one: a race-built broker takes
		// seconds to take in 22 MiB alone, and over 30 s on a loaded CI
		// machine running the other packages' tests beside it.
		if waitForConsentAsks(started, i+1, largeWriteLimit) <= i {
			t.Fatalf("write %d of 22 MiB never reached its consent question (the session stopped reading)", i+1)
		}
	}
	listCtx, listCancel := context.WithTimeout(context.Background(), waitLimit)
	defer listCancel()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta(modernVersion, "other-host") + `}}`
	if status := b.modernRaw(listCtx, t, "tools/list", "", list); status != http.StatusOK {
		t.Fatalf("another client's tools/list, while %d large writes wait for consent: status %d (0: no answer in %s)",
			writes, status, waitLimit)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held.Wait()
}

// TestServeHTTPModernRefusesForeignOriginAndHost: a request of protocol
// 2026-07-28, with its headers right, from a web page of another origin
// (Origin) or through a name that only resolves to this machine (DNS
// rebinding: Host) is refused with 403 before the stateless session is
// reached: nothing written, no session started.
func TestServeHTTPModernRefusesForeignOriginAndHost(t *testing.T) {
	t.Parallel()
	b := startServeHTTP(t)
	path := filepath.Join(b.rw, "foreign.txt")
	for _, header := range [][2]string{{"Origin", "https://evil.example"}, {"Origin", "null"}, {"Host", "evil.example"},
		{"Host", "rebind.example:80"}} {
		r := b.raw(t, http.MethodPost, "", modernWriteCall(modernVersion, path, "planted"), "MCP-Protocol-Version", modernVersion,
			"Mcp-Method", "tools/call", "Mcp-Name", "write_file", header[0], header[1])
		if r.status != http.StatusForbidden {
			t.Errorf("%s: %s: %d %s, want 403", header[0], header[1], r.status, r.body)
		}
	}
	b.requireUntouched(t, path)
	if recs := trailRecordsOf(t, b.trail, audit.KindSessionStart); len(recs) > 0 {
		t.Errorf("a session started: %+v", recs)
	}
}
