// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// forwardRecords returns the forward and outcome records of the trail in
// dir, the outcomes by the id they repeat.
func forwardRecords(t *testing.T, dir string) (forwards []audit.Record, outcomes map[string]audit.Record) {
	t.Helper()
	outcomes = map[string]audit.Record{}
	for rec, err := range audit.Records(context.Background(), dir, audit.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case audit.KindForward:
			forwards = append(forwards, rec)
		case audit.KindOutcome:
			outcomes[rec.DecisionID] = rec
		}
	}
	return forwards, outcomes
}

// Every request the host sends through to the server is in the trail, with
// a keyed digest of its arguments and never their content, and its outcome:
// the trail verifies, and a marker in the arguments is nowhere in it.
func TestWrapForwardAuditRecordsWithoutContent(t *testing.T) {
	w, keys := audittest.Open(t)
	trail := audit.Guard(w, 0, nil)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "")})
	f.handshake(t, nil)

	const marker = "MARKER-7c1f0e-never-in-the-trail"
	args := map[string]any{"path": "/home/ann/" + marker, "content": marker + " secret text"}
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "write_file", "arguments": args}})
	call := f.server.AwaitRequest("tools/call")
	f.server.Reply(call, map[string]any{"content": []any{map[string]any{"type": "text", "text": "wrote " + marker}}})
	f.host.AwaitReply("2")

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": map[string]any{"name": "read_file", "arguments": map[string]any{"path": marker}}})
	call = f.server.AwaitRequest("tools/call")
	f.server.Reply(call, map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": marker}}})
	f.host.AwaitReply("3")

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": map[string]any{"uri": "file:///" + marker}})
	read := f.server.AwaitRequest("resources/read")
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"error":{"code":-32602,"message":"no ` + marker + `"}}`)
	f.host.AwaitReply("4")

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call",
		"params": map[string]any{"name": "wait", "arguments": map[string]any{"label": marker}}})
	f.server.AwaitRequest("tools/call")
	f.host.Notify("notifications/cancelled", map[string]any{"requestId": 5, "reason": "enough"})
	f.server.AwaitNotification("notifications/cancelled")

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 6, "method": "tools/list"})
	f.server.AwaitRequest("tools/list") // never answered: the session ends first
	f.stop(t)
	audittest.Settled(t, trail)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := audit.Verify(w.Dir(), keys)
	if err != nil || !rep.OK {
		t.Fatalf("the trail does not verify: %+v, %v", rep, err)
	}
	segs, err := filepath.Glob(filepath.Join(w.Dir(), "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("MARKER-7c1f0e")) {
			t.Errorf("%s holds the marker of the arguments:\n%s", filepath.Base(seg), data)
		}
	}

	forwards, outcomes := forwardRecords(t, w.Dir())
	type want struct{ method, tool, outcome, code string }
	wants := []want{
		{"initialize", "", "ok", ""},
		{"tools/call", "write_file", "ok", ""},
		{"tools/call", "read_file", "tool_error", ""},
		{"resources/read", "", "error", "-32602"},
		{"tools/call", "wait", "cancelled", ""},
		{"tools/list", "", "unanswered", ""},
	}
	if len(forwards) != len(wants) {
		t.Fatalf("%d forward records, want %d: %+v", len(forwards), len(wants), forwards)
	}
	key := keys.MAC[0]
	for i, fw := range forwards {
		wt := wants[i]
		out, ok := outcomes[fw.DecisionID]
		switch {
		case fw.Method != wt.method || fw.Tool != wt.tool || fw.Transport != "wrap" || fw.SessionID == "":
			t.Errorf("forward %d: %+v, want method %s, tool %q", i, fw, wt.method, wt.tool)
		case !ok:
			t.Errorf("forward %d (%s) has no outcome", i, fw.DecisionID)
		case out.Outcome != wt.outcome || out.Code != wt.code || out.Method != wt.method:
			t.Errorf("forward %d: outcome %+v, want %s %s", i, out, wt.outcome, wt.code)
		}
		if i > 0 && fw.Server != "srv" {
			t.Errorf("forward %d names the server %q, want the name it declared, srv", i, fw.Server)
		}
	}
	// The digest is the keyed digest of the arguments as the host wrote them.
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := audit.ArgumentsDigest(key, raw); err != nil || forwards[1].ArgsDigest != d {
		t.Errorf("write_file's digest %s, want %s (%v)", forwards[1].ArgsDigest, d, err)
	}
	if forwards[5].ArgsDigest != "" {
		t.Errorf("tools/list without params has the digest %s", forwards[5].ArgsDigest)
	}
	// audit query's filters find them.
	n := 0
	for rec, err := range audit.Records(context.Background(), w.Dir(), audit.Filter{Kind: audit.KindForward, Tool: "read_file"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if rec.DecisionID != forwards[2].DecisionID {
			t.Errorf("the tool filter found %+v", rec)
		}
	}
	if n != 1 {
		t.Errorf("the tool filter found %d records, want 1", n)
	}
}

// A request whose forward record cannot be written never reaches the
// server: the host gets an error saying the audit is unavailable once the
// guard's deadline has passed, and every request after it at once while the
// stuck append has not returned; the rest of the traffic flows meanwhile.
func TestWrapForwardAuditFailsClosed(t *testing.T) {
	w, _ := audittest.Open(t)
	stall, trail, _ := audittest.Stalled(t, w, 200*time.Millisecond)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "pinned")})
	f.handshake(t, nil)
	stall.Hold(audittest.Kind(audit.KindForward))

	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "delete_everything", "arguments": map[string]any{}}})
	r := f.host.AwaitReply("2")
	if r.Error == nil || !strings.Contains(string(r.Error.Data), `"code":"IO_ERROR"`) || !strings.Contains(r.Error.Message, "audit unavailable") {
		t.Errorf("the host got %s, want an audit-unavailable error", r.Raw)
	}
	f.host.Notify("x/marker", nil)
	f.server.AwaitNotification("x/marker")

	// The stuck append has not returned: the next request is refused too
	// (the guard refuses at once), and the rest of the traffic flows both
	// ways: a request of the server's, and the host's reply to it.
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": map[string]any{"name": "delete_everything", "arguments": map[string]any{}}})
	if r := f.host.AwaitReply("3"); r.Error == nil || !strings.Contains(r.Error.Message, "audit unavailable") {
		t.Errorf("the second request was answered %s, want an audit-unavailable error", r.Raw)
	}
	f.server.SendRaw(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`)
	f.host.Reply(f.host.AwaitRequest("ping"), map[string]any{})
	f.server.AwaitReply(`"s1"`)
	if f.server.Has(func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") }) {
		t.Error("the server received a request whose forward record was not written")
	}
	if stall.Held() != 1 {
		t.Errorf("the trail holds %d appends, want the first one only (the guard refuses the next at once)", stall.Held())
	}
}

// A host request the Router cannot decode strictly (a batch; "jsonrpc"
// spelled with an escape) must not reach the server without a forward
// record: the Router answers it with a JSON-RPC error, and the server never
// sees it.
func TestWrapHostRequestNeverReachesTheServerUnrecorded(t *testing.T) {
	w, _ := audittest.Open(t)
	trail := audit.Guard(w, 0, nil)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "")})
	f.handshake(t, nil)
	fw, _ := forwardRecords(t, w.Dir())
	base := len(fw)

	f.host.SendRaw(`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_everything","arguments":{"x":1}}}]`)
	if r := f.host.AwaitReply("null"); r.Error == nil {
		t.Errorf("the batch was answered %s, want an error", r.Raw)
	}
	f.host.SendRaw(`{"jsonrpc":"2\u002e0","id":8,"method":"tools/call","params":{"name":"exfiltrate","arguments":{"x":1}}}`)
	if r := f.host.Await("the refusal", func(m *mcppeer.Message) bool { return m.Error != nil && !m.IsReplyTo("null") }); r == nil {
		t.Error("the escaped request was not refused")
	}
	// A normal request after them: it reaches the server, after its record.
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": "ok", "arguments": map[string]any{}}})
	f.server.AwaitRequest("tools/call")
	if f.server.Has(func(m *mcppeer.Message) bool {
		return strings.Contains(m.Raw, "delete_everything") || strings.Contains(m.Raw, "exfiltrate")
	}) {
		t.Error("a request the Router could not read reached the server")
	}
	fw, _ = forwardRecords(t, w.Dir())
	if len(fw)-base != 1 || fw[base].Tool != "ok" {
		t.Errorf("%d forward records after the handshake, want the one of tools/call ok", len(fw)-base)
	}
}

// A reply's outcome is read from the members named exactly isError and
// resultType: a member that differs in case only (which encoding/json would
// take for the field) is not the real one, and of a name given twice the
// last occurrence counts, as the host's JSON parser reads it.
func TestWrapForwardOutcomeReadsExactMemberNames(t *testing.T) {
	w, _ := audittest.Open(t)
	trail := audit.Guard(w, 0, nil)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "")})
	f.handshake(t, nil)
	cases := []struct{ tool, result, want string }{
		{"variant-only", `{"content":[],"IsError":true}`, "ok"},
		{"variant-after", `{"content":[],"isError":false,"ISERROR":true}`, "ok"},
		{"exact-then-variant", `{"content":[],"isError":true,"iserror":false}`, "tool_error"},
		{"exact", `{"content":[],"isError":true}`, "tool_error"},
		{"exact-twice", `{"content":[],"isError":true,"isError":false}`, "ok"},
	}
	for i, c := range cases {
		id := fmt.Sprint(10 + i)
		f.host.SendRaw(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":{}}}`)
		call := f.server.AwaitRequest("tools/call")
		f.server.SendRaw(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":` + c.result + `}`)
		f.host.AwaitReply(id)
	}
	f.stop(t) // the outcome records are written
	forwards, outcomes := forwardRecords(t, w.Dir())
	byTool := map[string]string{}
	for _, fw := range forwards {
		if out, ok := outcomes[fw.DecisionID]; ok && fw.Tool != "" {
			byTool[fw.Tool] = out.Outcome
		}
	}
	for _, c := range cases {
		if got := byTool[c.tool]; got != c.want {
			t.Errorf("%s: result %s recorded as %q, want %q", c.tool, c.result, got, c.want)
		}
	}
}

// waitHeld waits until stall holds at least n appends.
func waitHeld(t *testing.T, stall *audittest.Stall, n int) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); stall.Held() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the trail holds %d appends, want %d", stall.Held(), n)
		}
	}
}

// A trail that stops answering while a host request waits for its forward
// record holds that request and nothing else: the host's reply to a request
// of the server's reaches the server while the record is stuck (the guard's
// deadline is far off), and the request reaches the server only once its
// record is written.
func TestWrapStalledForwardRecordHoldsNoReply(t *testing.T) {
	w, _ := audittest.Open(t)
	stall, trail, _ := audittest.Stalled(t, w, time.Hour)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "")})
	f.handshake(t, nil)
	f.server.SendRaw(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
	ask := f.host.AwaitRequest("sampling/createMessage")

	stall.Hold(audittest.Kind(audit.KindForward))
	f.host.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "slow_to_record", "arguments": map[string]any{}}})
	waitHeld(t, stall, 1)
	f.host.Reply(ask, map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hi"}, "model": "m"})
	f.server.AwaitReply(`"s1"`)
	if f.server.Has(func(m *mcppeer.Message) bool { return m.IsRequest("tools/call") }) {
		t.Fatal("the request reached the server before its forward record was written")
	}

	stall.Release()
	f.server.AwaitRequest("tools/call")
	if forwards, _ := forwardRecords(t, w.Dir()); len(forwards) == 0 || forwards[len(forwards)-1].Tool != "slow_to_record" {
		t.Errorf("the request's forward record is not in the trail: %+v", forwards)
	}
}

// A trail that stops answering while the outcome of a forwarded request is
// written holds nothing: the host gets the server's reply, and the server's
// messages after it, while the outcome record is stuck; once the trail
// answers again the outcome is in it.
func TestWrapStalledOutcomeRecordHoldsNoReply(t *testing.T) {
	w, _ := audittest.Open(t)
	stall, trail, _ := audittest.Stalled(t, w, time.Hour)
	f := startRouterOpts(t, []Option{WithForwardAudit(trail, "")})
	f.handshake(t, nil)

	stall.Hold(audittest.Kind(audit.KindOutcome))
	for i, tool := range []string{"first", "second"} {
		id := fmt.Sprint(2 + i)
		f.host.SendRaw(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`)
		call := f.server.AwaitRequest("tools/call")
		f.server.Reply(call, map[string]any{"content": []any{}})
		f.host.AwaitReply(id)
		f.server.Notify("notifications/message", map[string]any{"level": "info", "data": tool})
		f.host.AwaitNotification("notifications/message")
	}
	waitHeld(t, stall, 2) // both outcome records were stuck meanwhile

	stall.Release()
	f.stop(t)
	forwards, outcomes := forwardRecords(t, w.Dir())
	for _, fw := range forwards {
		if out, ok := outcomes[fw.DecisionID]; fw.Tool != "" && (!ok || out.Outcome != "ok") {
			t.Errorf("the outcome of %s: %+v (recorded %v), want ok", fw.Tool, out, ok)
		}
	}
}
