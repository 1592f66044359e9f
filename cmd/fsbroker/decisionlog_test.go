// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/decisionlog/decisionlogtest"
)

// decisionLogWorld is a root and a config file whose opa member uploads decisions to url, with
// the given decision_logs.reporting (YAML; "" for OPA's defaults).
func decisionLogWorld(t *testing.T, url, reporting string) (dir, config string) {
	t.Helper()
	dir = t.TempDir()
	root := filepath.Join(dir, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "a.txt"), "hi")
	config = filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, config, fmt.Sprintf(`version: 1
roots:
  - path: %s
    consent: preapproved
opa:
  services:
    siem:
      url: %s
  labels: {fleet: test}
  decision_logs:
    service: siem
    reporting: {%s}
`, root, url, reporting))
	return dir, config
}

// immediately is the reporting of the tests that wait for events while the broker runs.
const immediately = "trigger: immediate, min_delay_seconds: 1, max_delay_seconds: 1"

// refusalID sends a request that must be refused and returns its decision id.
func refusalID(t *testing.T, p *proc, id int, method string, params map[string]any) string {
	t.Helper()
	r := p.Call(id, method, params)
	if d := dataOf(t, r); d.DecisionID != "" {
		return d.DecisionID
	}
	t.Fatalf("%s %v: %s, want a refusal with a decision id", method, params, r.Raw)
	return ""
}

// TestDecisionLogEveryDecision: the decision-log service receives every decision the trail
// records, not only those the policy made: a path that climbs out of its root, a bad offset,
// an unknown mount (refused before the policy), a listing, a denied write, and the consent
// round, each under the decision id the server was given.
func TestDecisionLogEveryDecision(t *testing.T) {
	t.Parallel()
	srv := decisionlogtest.New(t)
	dir, config := decisionLogWorld(t, srv.URL, immediately)
	p := startBroker(t, "", "stdio", "--config", config, "--state-dir", filepath.Join(dir, "state"))
	p.handshake("2025-11-25")
	escape := refusalID(t, p, 1, "files/read", map[string]any{"path": "proj/../../etc/passwd"})
	offset := refusalID(t, p, 2, "files/read", map[string]any{"path": "proj/a.txt", "offset": -1})
	mount := refusalID(t, p, 3, "files/read", map[string]any{"path": "nope/a.txt"})
	write := refusalID(t, p, 4, "files/write", map[string]any{"path": "proj/a.txt", "content": "no"})
	if r := p.Call(5, "files/list", map[string]any{"path": "proj"}); r.Error != nil {
		t.Fatalf("list: %s", r.Raw)
	}
	if r := p.Call(6, "files/consent", map[string]any{"message": "please", "requestedPaths": []string{"proj/a.txt"}, "access": "read"}); r.Error != nil {
		t.Fatalf("consent: %s", r.Raw)
	}
	got := srv.Await(t, escape, offset, mount, write)
	for _, id := range []string{escape, offset, mount, write} {
		if got[id].Member("result", "allow") != false || got[id].Member("", "path") != "fsbroker/authz/decision" {
			t.Errorf("event of %s: %s", id, got[id].Raw)
		}
	}
	if reasons, _ := got[escape].Member("result", "reasons").([]any); len(reasons) != 1 ||
		!strings.Contains(fmt.Sprint(reasons[0]), "proj/../../etc/passwd") {
		t.Errorf("the escape's event does not say which path: %s", got[escape].Raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}
	var list, consent bool
	for _, ev := range decisionlogtest.ByID(t, srv.Events(t)) {
		list = list || ev.Member("input", "method") == "files/list"
		consent = consent || ev.Member("", "path") == "fsbroker/authz/consentable" && ev.Member("input", "method") == "files/consent"
	}
	if !list || !consent {
		t.Errorf("listing uploaded: %v, consent round uploaded: %v", list, consent)
	}
}

// TestDecisionLogAfterRestart: a broker stopped while the decision-log service is down says
// how many events it leaves, and the next broker on the state directory delivers them.
func TestDecisionLogAfterRestart(t *testing.T) {
	t.Parallel()
	srv := decisionlogtest.New(t)
	srv.SetDown(true)
	dir, config := decisionLogWorld(t, srv.URL, immediately)
	state := filepath.Join(dir, "state")
	p := startBroker(t, "", "stdio", "--config", config, "--state-dir", state, "--shutdown-timeout", "1s")
	p.handshake("2025-11-25")
	var ids []string
	for i := range 10 {
		ids = append(ids, refusalID(t, p, i+1, "files/write", map[string]any{"path": "proj/a.txt", "content": "no"}))
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.log())
	}
	if !strings.Contains(p.log(), "10 events not delivered") {
		t.Errorf("the stop does not say 10 events are left:\n%s", p.log())
	}
	if n := len(srv.Events(t)); n != 0 {
		t.Fatalf("%d events arrived while the service was down", n)
	}

	srv.SetDown(false)
	p2 := startBroker(t, "", "stdio", "--config", config, "--state-dir", state)
	p2.handshake("2025-11-25")
	srv.Await(t, ids...)
	p2.closeStdin()
	if code := p2.waitExit(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p2.log())
	}
	decisionlogtest.ByID(t, srv.Events(t)) // fails on an event that arrived twice
}
