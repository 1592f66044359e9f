// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// TestServeModernEndToEnd runs the real fsbroker serve (--consent elicit)
// for a host of protocol 2026-07-28 over its pipes, which sends no
// initialize and declares roots and form elicitation in each request: a
// write is asked for the host's roots, then for them and the person's
// consent, together; a retry with a changed requestState is refused and
// writes nothing; the retry as issued writes, and the grant is the host's,
// as fsbroker grants list shows it; a write outside the host's roots is
// refused once they are given. The trail holds the session's start under
// the revision, the refusals and the eventual decision and outcome.
func TestServeModernEndToEnd(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	writeFiles(t, ws, map[string]string{"notes.txt": "notes\n", "sub/in.txt": "in\n"})
	p := startServeWith(t, state, serveHost{}, "--root", ws+":rw", "--consent", "elicit")
	h := &modernHost{t: t, name: "e2e-host", caps: map[string]any{"roots": map[string]any{}, "elicitation": map[string]any{"form": map[string]any{}}},
		send: func(method string, params any) *mcppeer.Message {
			raw, err := json.Marshal(params)
			if err != nil {
				t.Fatal(err)
			}
			return p.request(method, raw)
		}}
	sub := filepath.Join(ws, "sub")
	if disc := requireComplete(t, "server/discover", h.rpc("server/discover", nil)); !slices.Contains(toStrings(disc["supportedVersions"]), modern.Version) {
		t.Fatalf("server/discover: %v", disc)
	}

	target := filepath.Join(sub, "new.txt")
	args := map[string]any{"path": target, "content": "written"}
	ir := requireInputRequired(t, "round 1", h.tool(ToolWriteFile, args, nil), inputKeyRoots)
	ir = requireInputRequired(t, "round 2", h.tool(ToolWriteFile, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyRoots: rootsResult(sub)}}), inputKeyRoots, inputKeyConsent)
	answers := map[string]any{inputKeyRoots: rootsResult(sub), inputKeyConsent: ir.answer(t, "accept", true)}
	changed := ir.RequestState[:len(ir.RequestState)-2] + "AA"
	if changed == ir.RequestState {
		changed = ir.RequestState[:len(ir.RequestState)-2] + "BB"
	}
	requireError(t, "a changed state", h.tool(ToolWriteFile, args, &retry{state: changed, responses: answers}), -32602,
		"requestState failed verification")
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("the refused retry wrote (%v)", err)
	}
	if res := requireComplete(t, "round 3", h.tool(ToolWriteFile, args, &retry{state: ir.RequestState, responses: answers})); res["isError"] == true {
		t.Fatalf("round 3: %v", res)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "written" {
		t.Fatalf("round 3 wrote %q, %v", got, err)
	}
	var granted []string
	for _, g := range listGrants(t, state) {
		granted = append(granted, g.Server+" "+g.Access+" "+g.Path+" "+g.By)
	}
	if !slices.Equal(granted, []string{"e2e-host write ws/sub/new.txt elicit"}) {
		t.Errorf("grants %q", granted)
	}

	outside := map[string]any{"path": filepath.Join(ws, "planted.txt"), "content": "x"}
	ir = requireInputRequired(t, "outside, round 1", h.tool(ToolWriteFile, outside, nil), inputKeyRoots)
	res := requireComplete(t, "outside, round 2", h.tool(ToolWriteFile, outside, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyRoots: rootsResult(sub)}}))
	requireRefused(t, res, "PERMISSION_DENIED: "+corridor.ReasonOutsideHostRoots)
	if _, err := os.Lstat(filepath.Join(ws, "planted.txt")); !os.IsNotExist(err) {
		t.Fatalf("a write outside the host's roots ran (%v)", err)
	}

	starts := records(t, state, audit.Filter{Kind: audit.KindSessionStart})
	if len(starts) != 1 || starts[0].Server != "e2e-host" || starts[0].ProtocolVersion != modern.Version {
		t.Errorf("session_start %+v", starts)
	}
	if n := len(toolRecords(t, state, ToolWriteFile, audit.Filter{Decision: "deny", Code: "INVALID_PARAMS"})); n != 1 {
		t.Errorf("%d refusals of the changed state in the trail, want 1", n)
	}
	if n := len(toolRecords(t, state, ToolWriteFile, audit.Filter{Decision: "allow"})); n != 1 {
		t.Errorf("%d allowing decisions of write_file, want 1 (the retry as issued)", n)
	}
	if n := len(toolRecords(t, state, ToolWriteFile, audit.Filter{Kind: audit.KindOutcome, Code: "ok"})); n != 1 {
		t.Errorf("%d outcomes of write_file, want 1", n)
	}
	consents := records(t, state, audit.Filter{Kind: audit.KindConsent})
	if len(consents) != 2 || *consents[0].Allow || !*consents[1].Allow {
		t.Errorf("consent records %+v: want the question put to the host (nothing approved), then the approval", consents)
	}
}
