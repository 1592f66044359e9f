//go:build unix

package main

import (
	"os"
	"path/filepath"
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
}
