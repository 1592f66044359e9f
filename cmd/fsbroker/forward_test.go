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

	"github.com/fsbroker/fsbroker/audit"
)

// Under fsbroker wrap the host's requests to the server are in the trail
// (forward records, with their outcomes), without a byte of their arguments:
// the trail verifies with fsbroker audit verify, a marker in the arguments
// is in no file of the audit directory, and audit query finds the records by
// kind and tool.
func TestWrapForwardRecordsVerify(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root := realDir(t, t.TempDir())
	p := startWrap(t, nil, "--state-dir", state, "--root", root, "--", serverBin)
	hostInitialize(p, false)
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	const marker = "FWD-MARKER-3e9b1d"
	r := p.Call(2, "tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{"text": marker + " and more"}})
	if r.Error == nil && !strings.Contains(string(r.Result), `"isError":true`) {
		t.Errorf("an unknown tool answered %s", r.Raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status = %d, want 0", code)
	}

	stateFlag := "--state-dir=" + state
	if out, errOut, code := runCmd(t, "audit", "verify", stateFlag); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(state, "audit")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), marker) {
			t.Errorf("%s holds the marker of the tool's arguments", e.Name())
		}
	}
	out, errOut, code := runCmd(t, "audit", "query", stateFlag, "--kind", "forward", "--tool", "no_such_tool", "--format", "json")
	if code != 0 {
		t.Fatalf("audit query: exit %d\n%s", code, errOut)
	}
	recs := jsonRecords(t, out)
	if len(recs) != 1 || recs[0].Method != "tools/call" || !audit.IsPathDigest(recs[0].ArgsDigest) || recs[0].Server != "fsbroker-example-server" {
		t.Fatalf("audit query --kind forward --tool no_such_tool found %+v, want the one tools/call", recs)
	}
	out, _, _ = runCmd(t, "audit", "query", stateFlag, "--decision-id", recs[0].DecisionID, "--kind", "outcome", "--format", "json")
	if outs := jsonRecords(t, out); len(outs) != 1 || outs[0].Outcome == "" {
		t.Errorf("the outcome of the forwarded call: %+v", outs)
	}
	// The forward records are the wrapped session's: audit query --session
	// with the id of its session_start finds them with it.
	out, _, _ = runCmd(t, "audit", "query", stateFlag, "--kind", "session_start", "--format", "json")
	starts := jsonRecords(t, out)
	if len(starts) != 1 || starts[0].SessionID == "" {
		t.Fatalf("session_start records: %+v, want one", starts)
	}
	out, _, _ = runCmd(t, "audit", "query", stateFlag, "--session", starts[0].SessionID, "--format", "json")
	kinds := map[audit.Kind]int{}
	for _, rec := range jsonRecords(t, out) {
		kinds[rec.Kind]++
	}
	if kinds[audit.KindSessionStart] != 1 || kinds[audit.KindForward] != 2 || kinds[audit.KindOutcome] < 2 {
		t.Errorf("audit query --session %s found %v, want the session_start and both forwards (initialize, tools/call) with their outcomes",
			starts[0].SessionID, kinds)
	}
}

// A server on protocol 2026-07-28 under the real binary: it answers the
// host's initialize with that revision (the session goes on), and a tool call
// with an InputRequiredResult asking for roots alone; fsbroker retries the
// call itself with its roots, the host gets the final result, and the trail
// (which verifies) holds both forwards, the first one's outcome
// input_required, and the session's roots/list decision.
func TestWrapForwardServerOn20260728(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	root := realDir(t, t.TempDir())
	const script = `read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2026-07-28","capabilities":{"tools":{}},"serverInfo":{"name":"modern","version":"1"}}}'
read -r line
read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{"where":{"method":"roots/list"}}}}'
read -r line
printf 'retry: %s\n' "$line" >&2
id=$(printf '%s' "$line" | sed -n 's/.*"id":\("fsbroker-wrap-[0-9a-f]*"\).*/\1/p')
printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"resultType":"complete","content":[{"type":"text","text":"done"}]}}'
while read -r line; do :; done`
	p := startWrap(t, nil, "--state-dir", state, "--root", root, "--", "sh", "-c", script)
	hostInitialize(p, false)
	p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	r := p.Call(2, "tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{"q": "x"}})
	if r.Error != nil || !strings.Contains(string(r.Result), `"done"`) {
		t.Fatalf("the host got %s, want the retry's result", r.Raw)
	}
	p.waitLog(regexp.MustCompile(`retry: [^\n]*"inputResponses":\{"where":\{"roots":\[\{"uri":"file://` + regexp.QuoteMeta(root) + `"`))
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status = %d, want 0\n%s", code, p.log())
	}
	for _, m := range p.All() {
		if strings.Contains(m.Raw, "roots/list") || strings.Contains(m.Raw, "input_required") {
			t.Errorf("the host received %s", m.Raw)
		}
	}
	stateFlag := "--state-dir=" + state
	if out, errOut, code := runCmd(t, "audit", "verify", stateFlag); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ := runCmd(t, "audit", "query", stateFlag, "--method", "tools/call", "--format", "json")
	var outcomes []string
	forwards := 0
	for _, rec := range jsonRecords(t, out) {
		switch rec.Kind {
		case audit.KindForward:
			forwards++
		case audit.KindOutcome:
			outcomes = append(outcomes, rec.Outcome)
		}
	}
	if forwards != 2 || strings.Join(outcomes, ",") != "input_required,ok" {
		t.Errorf("tools/call records: %d forwards, outcomes %v; want 2 and input_required,ok\n%s", forwards, outcomes, out)
	}
	out, _, _ = runCmd(t, "audit", "query", stateFlag, "--method", "roots/list", "--kind", "decision", "--format", "json")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0].Allow == nil || !*recs[0].Allow {
		t.Errorf("the session's roots/list decisions: %s", out)
	}
	out, _, _ = runCmd(t, "audit", "query", stateFlag, "--kind", "session_start", "--format", "json")
	if recs := jsonRecords(t, out); len(recs) != 1 || recs[0].ProtocolVersion != "2026-07-28" || recs[0].Server != "modern" {
		t.Errorf("session_start: %s", out)
	}
}
