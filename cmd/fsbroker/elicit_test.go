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

// --consent elicit under wrap, with the real binary: the scripted server's
// files/consent reaches the host as elicitation/create (form mode), the
// host's accepted form grants the path, and the grant is in the state
// directory; a host that did not declare elicitation is not asked, nothing
// is granted and the log says why. Elsewhere than wrap, elicit is a usage
// error.
func TestWrapElicitConsentThroughTheHost(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	a := realDir(t, filepath.Join(dir, "a"))
	writeFile(t, filepath.Join(a, "hello.txt"), "hello from a")

	for _, declares := range []bool{true, false} {
		state := t.TempDir()
		p := startWrap(t, []string{scriptedServerEnv + "=0"}, "--consent", "elicit", "--state-dir", state,
			"--root", a, "--log-level", "debug", "--", os.Args[0])
		caps := map[string]any{}
		if declares {
			caps["elicitation"] = map[string]any{}
		}
		r := p.Call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps,
			"clientInfo": map[string]any{"name": "test-host", "version": "1"}})
		if r.Error != nil {
			t.Fatalf("initialize: %s", r.Raw)
		}
		p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/test/step", "params": map[string]any{"step": "consent-ask"}})
		if declares {
			el := p.Await("the broker's elicitation", func(m *message) bool {
				return m.IsRequest("elicitation/create") && strings.Contains(string(m.ID), "fsbroker-wrap-")
			})
			if !strings.Contains(string(el.Params), `"mode":"form"`) || !strings.Contains(string(el.Params), "a/hello.txt") {
				t.Errorf("elicitation/create params %s", el.Params)
			}
			// The form's field for the first path: "path1-" and the question's token.
			field := regexp.MustCompile(`"(path1-[0-9a-f]+)"`).FindStringSubmatch(string(el.Params))
			if field == nil {
				t.Fatalf("elicitation/create params %s: no field path1-TOKEN", el.Params)
			}
			p.Send(map[string]any{"jsonrpc": "2.0", "id": el.ID, "result": map[string]any{"action": "accept", "content": map[string]any{field[1]: true}}})
			p.waitLog(regexp.MustCompile(`scripted: reply "c2" \{"granted":true,"approvedPaths":\["a/hello.txt"\]\}`))
			out, errOut, code := runCmd(t, "grants", "list", "--state-dir", state)
			if code != 0 || !strings.Contains(out, "a/hello.txt") || !strings.Contains(out, "elicit") {
				t.Errorf("grants list: exit %d\n%s%s", code, out, errOut)
			}
		} else {
			p.waitLog(regexp.MustCompile(`scripted: reply "c2" \{"granted":false,"approvedPaths":\[\]\}`))
			if !strings.Contains(p.log(), "the host did not declare the elicitation capability") {
				t.Error("the log does not say why nothing was granted")
			}
			if p.Has(func(m *message) bool {
				return m.IsRequest("elicitation/create") && strings.Contains(string(m.ID), "fsbroker-wrap-")
			}) {
				t.Error("a host without the elicitation capability was asked")
			}
		}
		p.closeStdin()
		if code := p.waitExit(); code != 0 {
			t.Errorf("exit status = %d, want 0", code)
		}
	}

	_, errOut, code := runCmd(t, "stdio", "--consent", "elicit", "--root", a, "--state-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "wrap") {
		t.Errorf("stdio --consent elicit: exit %d, %s; want a usage error", code, errOut)
	}
}
