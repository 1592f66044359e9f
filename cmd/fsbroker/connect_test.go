// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var startedServer = regexp.MustCompile(`started server: [^\n]*pid=(\d+)`)

// serverPID waits for the "started server ... pid=N" log line and returns N.
// The test ends with the server's process group killed, whatever happened.
func serverPID(t *testing.T, p *proc) int {
	t.Helper()
	pid, err := strconv.Atoi(p.waitLog(startedServer)[1])
	if err != nil || pid <= 1 {
		t.Fatalf("bad server pid in the log: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// Interoperability with the official Go SDK on the server side: the example
// server lists its roots once initialized and again on
// notifications/roots/list_changed, and prints them to stderr, which the
// broker relays into its log. SIGTERM then ends the session cleanly and stops
// the server.
func TestConnectInteropWithGoSDKServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "a"))
	b := realDir(t, filepath.Join(dir, "b"))
	cfg := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, cfg, configOf(a))

	p := startBroker(t, "", "connect", "--config", cfg, "--log-level", "debug", "--", serverBin)
	pid := serverPID(t, p)
	p.waitLog(regexp.MustCompile(regexp.QuoteMeta("initialized: 1 roots: file://" + a + " (a)")))

	start := time.Now()
	replaceFile(t, cfg, configOf(a, b))
	changed := p.waitLog(regexp.MustCompile(`roots changed: 2 roots: ([^\n]*)`))[1]
	t.Logf("config edit to the server's new roots/list result: %s", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{"file://" + a + " (a)", "file://" + b + " (b)"} {
		if !strings.Contains(changed, want) {
			t.Errorf("the server's roots after the edit are %q, want them to include %q", changed, want)
		}
	}
	if !alive(pid) {
		t.Fatalf("server %d is not running before SIGTERM", pid)
	}

	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
	if !strings.Contains(p.log(), "session ended") {
		t.Error(`log has no "session ended"`)
	}
	if alive(pid) {
		t.Errorf("server %d still runs after fsbroker exited", pid)
	}
	if strings.Contains(p.log(), "roots/list failed") {
		t.Error("the server's roots/list failed")
	}
}

// A server that exits at once, with a failure status or killed: fsbroker
// exits 1 and its log says that the server exited, with its status, before
// answering initialize (after what the server said), never the broken pipe
// or the closed connection that the exit left.
func TestConnectServerFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv []string
		want []string
	}{
		{[]string{"false"}, []string{"the server exited (status 1) before answering initialize"}},
		{[]string{"sh", "-c", "echo server-is-leaving >&2; exit 3"},
			[]string{"server-is-leaving", "the server exited (status 3) before answering initialize", "exit status 3"}},
		{[]string{"sh", "-c", "kill -9 $$"}, []string{"the server exited (signal: killed) before answering initialize"}},
	} {
		t.Run(tc.argv[len(tc.argv)-1], func(t *testing.T) {
			t.Parallel()
			p := startBroker(t, "", append([]string{"connect", "--root", t.TempDir(), "--"}, tc.argv...)...)
			if code := p.waitExit(); code != 1 {
				t.Errorf("exit status = %d, want 1", code)
			}
			log := p.log()
			for _, want := range tc.want {
				if !strings.Contains(log, want) {
					t.Errorf("log has no %q:\n%s", want, log)
				}
			}
			for _, unwanted := range []string{"broken pipe", "closed the connection"} {
				if strings.Contains(log, unwanted) {
					t.Errorf("log says %q:\n%s", unwanted, log)
				}
			}
			if strings.Index(log, "server-is-leaving") > strings.Index(log, "before answering initialize") {
				t.Errorf("the server's own message comes after fsbroker's:\n%s", log)
			}
		})
	}
}

// A server that leaves a background process holding its stderr: stopping
// fsbroker must still end (the stop sequence reaches the server's process
// group).
func TestConnectStopsServerWithBackgroundProcess(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "connect", "--root", t.TempDir(), "--",
		"sh", "-c", `sleep 300 & exec "$0"`, serverBin)
	serverPID(t, p)
	p.waitLog(regexp.MustCompile(`initialized: 1 roots: `))
	p.signal(syscall.SIGTERM)
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
}

// shServer is a minimal MCP server in sh: it answers initialize, reads
// notifications/initialized, and exits with the status in $1. (The broker's
// request ids are strings.)
const shServer = `read -r line
id=$(printf '%s\n' "$line" | sed 's/.*"id":\("[^"]*"\).*/\1/')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id"
read -r line
echo "sh-server got: $line" >&2
exit "$1"`

// A server that ends the session itself after initialization: fsbroker's
// exit status follows the server's (0 for a clean end, 1 for a failure).
func TestConnectServerEndsSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, want int
	}{{0, 0}, {5, 1}} {
		t.Run("server exit "+strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			p := startBroker(t, "", "connect", "--root", t.TempDir(), "--",
				"sh", "-c", shServer, "sh-server", strconv.Itoa(tc.status))
			if code := p.waitExit(); code != tc.want {
				t.Errorf("exit status = %d, want %d", code, tc.want)
			}
			log := p.log()
			for _, want := range []string{"session initialized", "sh-server got: ", "notifications/initialized",
				"exit status " + strconv.Itoa(tc.status)} {
				if !strings.Contains(log, want) {
					t.Errorf("log has no %q", want)
				}
			}
		})
	}
}
