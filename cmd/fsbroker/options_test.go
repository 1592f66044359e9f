// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// version and help print to stdout and exit 0.
func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"version"}, []string{"fsbroker "}},
		{[]string{"--version"}, []string{"fsbroker "}},
		{[]string{"help"}, []string{"\n  stdio     serve one MCP server", "\n  connect   start an MCP server"}},
		{[]string{"help", "stdio"}, []string{"fsbroker stdio", "--root DIR", "--config FILE", "--log-level", "--log-format"}},
		{[]string{"help", "connect"}, []string{"fsbroker connect", "-shutdown-timeout"}},
	}
	for _, tc := range cases {
		stdout, stderr, code := runFsbroker(t, nil, tc.args...)
		if code != 0 {
			t.Errorf("fsbroker %v: exit status %d, want 0; stderr:\n%s", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("fsbroker %v: stdout has no %q:\n%s", tc.args, w, stdout)
			}
		}
	}
	// -h, -help and --help on a session command show its help and flags
	// on stdout and are not an error.
	for _, h := range []string{"-h", "-help", "--help"} {
		stdout, stderr, code := runFsbroker(t, nil, "stdio", h)
		if code != 0 || !strings.Contains(stdout, "--root DIR") || stderr != "" {
			t.Errorf("fsbroker stdio %s: exit status %d, stdout:\n%s\nstderr:\n%s", h, code, stdout, stderr)
		}
	}
	if _, stderr, code := runFsbroker(t, nil, "help", "frobnicate"); code != 2 || !strings.Contains(stderr, "frobnicate") {
		t.Errorf("fsbroker help frobnicate: exit status %d (want 2), stderr:\n%s", code, stderr)
	}
}

// pingOfSize returns a ping request of exactly n bytes.
func pingOfSize(t *testing.T, id string, n int) []byte {
	t.Helper()
	head := `{"jsonrpc":"2.0","id":"` + id + `","method":"ping","params":{"_meta":{"pad":"`
	tail := `"}}}`
	if n < len(head)+len(tail) {
		t.Fatalf("ping of %d bytes is too small", n)
	}
	return []byte(head + strings.Repeat("p", n-len(head)-len(tail)) + tail)
}

// The message limit is a setting (flag or config file, the flag wins); a
// message of exactly the limit is accepted and one byte more is refused with
// -32600, after which the session goes on.
func TestMessageLimitSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, cfg, "limits:\n  maxMessageBytes: 4096\n")
	cases := []struct {
		name  string
		args  []string
		limit int
	}{
		{"flag", []string{"--max-message-bytes", "2048"}, 2048},
		{"config", []string{"--config", cfg}, 4096},
		{"flag over config", []string{"--config", cfg, "--max-message-bytes", "3000"}, 3000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startBroker(t, "", append([]string{"stdio", "--root", t.TempDir()}, tc.args...)...)
			p.handshake("2025-11-25")
			p.SendRaw(string(pingOfSize(t, "at-limit", tc.limit)))
			r := p.Await("reply at the limit", func(m *message) bool { return m.IsReplyTo(`"at-limit"`) })
			if r.Error != nil {
				t.Errorf("a message of exactly %d bytes was refused: %s", tc.limit, r.Raw)
			}
			p.SendRaw(string(pingOfSize(t, "over-limit", tc.limit+1)))
			r = p.Await("refusal over the limit", func(m *message) bool { return m.IsReplyTo("null") })
			if r.Error == nil || r.Error.Code != -32600 {
				t.Errorf("a message of %d bytes answered %s, want -32600", tc.limit+1, r.Raw)
			}
			p.ping("after")
			if p.Has(func(m *message) bool { return m.IsReplyTo(`"over-limit"`) }) {
				t.Error("the oversized ping was answered")
			}
		})
	}
}

// A server that never answers initialize: the session fails after
// --init-timeout with a log line that says so.
func TestInitTimeout(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--root", t.TempDir(), "--init-timeout", "200ms")
	p.AwaitRequest("initialize")
	if code := p.waitExit(); code != 1 {
		t.Errorf("exit status = %d, want 1", code)
	}
	if !strings.Contains(p.log(), "did not answer initialize within 200ms") {
		t.Error("log does not say the server did not answer initialize in time")
	}
}

// --ping-interval makes the broker ping the server once initialized; a server
// that does not answer is logged.
func TestPingInterval(t *testing.T) {
	t.Parallel()
	p := startBroker(t, "", "stdio", "--root", t.TempDir(), "--ping-interval", "100ms")
	init := p.AwaitRequest("initialize")
	p.replyInitialize(init, "2025-11-25")
	isPing := func(m *message) bool { return m.IsRequest("ping") }
	ping := p.Await("ping from the broker", isPing)
	if ping.Seq < init.Seq {
		t.Errorf("the broker pinged before initialization")
	}
	if len(ping.Params) != 0 && string(ping.Params) != "{}" {
		t.Errorf("ping params = %s, want none", ping.Params)
	}
	p.Send(map[string]any{"jsonrpc": "2.0", "id": ping.ID, "result": map[string]any{}})
	p.Await("second ping from the broker", isPing) // left unanswered
	p.waitLog(regexp.MustCompile(`server did not answer ping`))
}

// A config file reached through symbolic links, swapped the way Kubernetes
// updates a mounted ConfigMap (a "..data" link renamed over), is reloaded.
func TestConfigSymlinkSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "roots", "a"))
	b := realDir(t, filepath.Join(dir, "roots", "b"))
	cdir := realDir(t, filepath.Join(dir, "config"))
	realDir(t, filepath.Join(cdir, "..v1"))
	writeFile(t, filepath.Join(cdir, "..v1", "fsbroker.yaml"), configOf(a))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..v1", filepath.Join(cdir, "..data")))
	must(os.Symlink(filepath.Join("..data", "fsbroker.yaml"), filepath.Join(cdir, "fsbroker.yaml")))

	p := startBroker(t, "", "stdio", "--config", filepath.Join(cdir, "fsbroker.yaml"))
	p.handshake("2025-11-25")
	if got := rootPaths(t, p.listRoots(1)); !equalStrings(got, []string{a}) {
		t.Fatalf("roots = %q, want %q", got, a)
	}

	realDir(t, filepath.Join(cdir, "..v2"))
	writeFile(t, filepath.Join(cdir, "..v2", "fsbroker.yaml"), configOf(a, b))
	must(os.Symlink("..v2", filepath.Join(cdir, "..data_tmp")))
	must(os.Rename(filepath.Join(cdir, "..data_tmp"), filepath.Join(cdir, "..data")))
	if p.TryAwait(waitLimit, isListChanged) == nil {
		t.Fatal("no notifications/roots/list_changed after the swap")
	}
	if got := rootPaths(t, p.listRoots(2)); !equalStrings(got, []string{a, b}) {
		t.Errorf("roots after the swap = %q, want %q", got, []string{a, b})
	}
}

// TestHelpForEveryCommand: `fsbroker help CMD` prints CMD's flags and exits 0 for every
// command the usage lists.
func TestHelpForEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"stdio"}, {"connect"}, {"wrap"}, {"policy"}, {"policy", "check"}, {"eval"},
		{"audit"}, {"audit", "verify"}, {"grants"}, {"conformance"}, {"demo"}} {
		stdout, stderr, code := runFsbroker(t, nil, append([]string{"help"}, cmd...)...)
		if code != 0 || !strings.Contains(stdout, "fsbroker "+cmd[0]) {
			t.Errorf("help %v: exit %d\n%s%s", cmd, code, stdout, stderr)
		}
	}
}
