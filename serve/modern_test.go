// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// modernHost plays a host of protocol 2026-07-28: it sends no initialize,
// and every request carries the per-request _meta (the revision, its
// clientInfo unless its name is "", its clientCapabilities).
type modernHost struct {
	t    *testing.T
	send func(method string, params any) *mcppeer.Message
	name string
	caps map[string]any
}

// pipeHost is a modern host named name, declaring caps, over the pipe
// session ps.
func pipeHost(t *testing.T, ps *pipeSession, name string, caps map[string]any) *modernHost {
	return &modernHost{t: t, name: name, caps: caps, send: func(method string, params any) *mcppeer.Message {
		ps.ids++
		return ps.host.Call(ps.ids, method, params)
	}}
}

// as returns the host with another name and capabilities, on the same
// connection.
func (h *modernHost) as(name string, caps map[string]any) *modernHost {
	other := *h
	other.name, other.caps = name, caps
	return &other
}

// meta is the _meta of the host's requests.
func (h *modernHost) meta() map[string]any {
	meta := map[string]any{modern.MetaProtocolVersion: modern.Version, modern.MetaClientCapabilities: h.caps}
	if h.name != "" {
		meta[modern.MetaClientInfo] = map[string]any{"name": h.name, "version": "1"}
	}
	return meta
}

// rpc sends method with params and the host's _meta.
func (h *modernHost) rpc(method string, params map[string]any) *mcppeer.Message {
	h.t.Helper()
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	p["_meta"] = h.meta()
	return h.send(method, p)
}

// retry is what a retry adds to a request: its requestState and
// inputResponses (each left out when nil).
type retry struct {
	state     any
	responses any
}

// with adds r's members to params.
func (r *retry) with(params map[string]any) map[string]any {
	if r == nil {
		return params
	}
	if r.state != nil {
		params[modern.ParamRequestState] = r.state
	}
	if r.responses != nil {
		params[modern.ParamInputResponses] = r.responses
	}
	return params
}

// tool sends tools/call of tool with args, and r's retry members.
func (h *modernHost) tool(tool string, args map[string]any, r *retry) *mcppeer.Message {
	h.t.Helper()
	return h.rpc("tools/call", r.with(map[string]any{"name": tool, "arguments": args}))
}

// inputRequired is an InputRequiredResult as the test reads it.
type inputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// requireInputRequired requires reply to be an InputRequiredResult asking
// exactly keys, with a requestState.
func requireInputRequired(t *testing.T, what string, reply *mcppeer.Message, keys ...string) inputRequired {
	t.Helper()
	var ir inputRequired
	if reply.Error != nil || json.Unmarshal(reply.Result, &ir) != nil || ir.ResultType != modern.ResultTypeInputRequired {
		t.Fatalf("%s: want an InputRequiredResult, got %s", what, reply.Raw)
	}
	if got := slices.Sorted(maps.Keys(ir.InputRequests)); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
		t.Fatalf("%s: inputRequests %q, want %q", what, got, keys)
	}
	if ir.RequestState == "" {
		t.Fatalf("%s: no requestState: %s", what, reply.Raw)
	}
	wantMethods := map[string]string{inputKeyRoots: "roots/list", inputKeyConsent: "elicitation/create"}
	for k, req := range ir.InputRequests {
		if req.Method != wantMethods[k] {
			t.Fatalf("%s: inputRequests[%q] is %q", what, k, req.Method)
		}
	}
	return ir
}

// form is the consent form of an InputRequiredResult: its params.
type form struct {
	Mode            string `json:"mode"`
	Message         string `json:"message"`
	RequestedSchema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	} `json:"requestedSchema"`
}

// consentForm returns the consent question of ir.
func (ir inputRequired) consentForm(t *testing.T) form {
	t.Helper()
	var f form
	if err := json.Unmarshal(ir.InputRequests[inputKeyConsent].Params, &f); err != nil {
		t.Fatalf("consent form: %v", err)
	}
	return f
}

// answer is the person's answer to ir's consent form: action, and with
// accept every field set to approve.
func (ir inputRequired) answer(t *testing.T, action string, approve bool) map[string]any {
	t.Helper()
	if action != "accept" {
		return map[string]any{"action": action}
	}
	content := map[string]any{}
	for field := range ir.consentForm(t).RequestedSchema.Properties {
		content[field] = approve
	}
	return map[string]any{"action": action, "content": content}
}

// requireComplete requires reply to be a result of resultType "complete"
// naming fsbroker in its _meta, and returns it.
func requireComplete(t *testing.T, what string, reply *mcppeer.Message) map[string]any {
	t.Helper()
	var res map[string]any
	if reply.Error != nil || json.Unmarshal(reply.Result, &res) != nil || res["resultType"] != modern.ResultTypeComplete {
		t.Fatalf("%s: want a complete result, got %s", what, reply.Raw)
	}
	meta, _ := res["_meta"].(map[string]any)
	info, _ := meta[modern.MetaServerInfo].(map[string]any)
	if info["name"] != "fsbroker" {
		t.Fatalf("%s: no serverInfo in _meta: %s", what, reply.Raw)
	}
	return res
}

// requireError requires reply to be a JSON-RPC error with code whose
// data.reason (or message) holds text, and returns its data.
func requireError(t *testing.T, what string, reply *mcppeer.Message, code int, text string) map[string]any {
	t.Helper()
	var data map[string]any
	if reply.Error == nil || reply.Error.Code != code {
		t.Fatalf("%s: want JSON-RPC error %d, got %s", what, code, reply.Raw)
	}
	_ = json.Unmarshal(reply.Error.Data, &data)
	reason, _ := data["reason"].(string)
	if !strings.Contains(reason+" "+reply.Error.Message, text) {
		t.Fatalf("%s: error %s does not say %q", what, reply.Raw, text)
	}
	return data
}

// writeFiles writes each file (relative to dir) with its content.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		testfs.RealDir(t, filepath.Dir(p))
		testfs.WriteFile(t, p, content)
	}
}

// grantPaths lists the paths the grants store holds for the declared
// identity name.
func grantPaths(t *testing.T, ps *pipeSession, name string) []string {
	t.Helper()
	return grantPathsOf(t, ps, corridor.StateKeyOf(name, false))
}

// grantPathsOf lists the paths the grants store holds for the state key.
func grantPathsOf(t *testing.T, ps *pipeSession, stateKey string) []string {
	t.Helper()
	store, err := grants.Open(filepath.Join(ps.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	gs, err := store.List(stateKey)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range gs {
		out = append(out, g.Path)
	}
	slices.Sort(out)
	return out
}

// toolRecords returns the trail's records of tool that f selects.
func toolRecords(t *testing.T, state, tool string, f audit.Filter) []audit.Record {
	t.Helper()
	var out []audit.Record
	for _, rec := range records(t, state, f) {
		if rec.Tool == tool {
			out = append(out, rec)
		}
	}
	return out
}

var (
	formCaps  = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	rootsCaps = map[string]any{"roots": map[string]any{}}
	noCaps    = map[string]any{}
)

// TestModernNegotiation: a request of protocol 2026-07-28 is served without
// initialize, each on its own: server/discover lists the versions served
// (2026-07-28 first, the initialize-based ones after); tools/list is the
// reference's, a CacheableResult; every result names its resultType and
// fsbroker. A version not served is -32022 with the list; the required
// _meta members missing or malformed, a clientInfo without a name (no
// identity pinned), or server/discover without _meta is -32602; ping and
// resources/subscribe, gone from the revision, are -32601. A request
// without _meta before initialize is still NOT_INITIALIZED, and an
// initialize-based session on the same stream works as before.
func TestModernNegotiation(t *testing.T) {
	ps := startPipeSession(t, consent.Deny{}, "", nil)
	h := pipeHost(t, ps, "modern-host", noCaps)

	disc := requireComplete(t, "server/discover", h.rpc("server/discover", nil))
	if got := disc["supportedVersions"]; !slices.Equal(toStrings(got), []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
		t.Errorf("supportedVersions %v", got)
	}
	if caps, _ := disc["capabilities"].(map[string]any); caps["tools"] == nil || caps["resources"] == nil {
		t.Errorf("capabilities %v", disc["capabilities"])
	}
	list := requireComplete(t, "tools/list", h.rpc("tools/list", nil))
	if tools, _ := list["tools"].([]any); len(tools) != 14 || list["cacheScope"] != "public" || list["ttlMs"] == nil {
		t.Errorf("tools/list: %d tools, cacheScope %v, ttlMs %v", len(tools), list["cacheScope"], list["ttlMs"])
	}

	raw := func(method string, meta map[string]any) *mcppeer.Message {
		ps.ids++
		params := map[string]any{}
		if meta != nil {
			params["_meta"] = meta
		}
		return ps.host.Call(ps.ids, method, params)
	}
	info := map[string]any{"name": "modern-host", "version": "1"}
	data := requireError(t, "a version not served", raw("tools/list", map[string]any{modern.MetaProtocolVersion: "1900-01-01",
		modern.MetaClientCapabilities: noCaps, modern.MetaClientInfo: info}), modern.CodeUnsupportedProtocolVersion, "Unsupported protocol version")
	if data["requested"] != "1900-01-01" || !slices.Contains(toStrings(data["supported"]), "2026-07-28") {
		t.Errorf("UnsupportedProtocolVersionError data %v", data)
	}
	for what, meta := range map[string]map[string]any{
		"a version that is not a string": {modern.MetaProtocolVersion: 20260728, modern.MetaClientCapabilities: noCaps, modern.MetaClientInfo: info},
		"no clientCapabilities":          {modern.MetaProtocolVersion: modern.Version, modern.MetaClientInfo: info},
		"clientCapabilities not an object": {modern.MetaProtocolVersion: modern.Version, modern.MetaClientCapabilities: "all",
			modern.MetaClientInfo: info},
		"capabilities without a version": {modern.MetaClientCapabilities: noCaps, modern.MetaClientInfo: info},
		"no clientInfo":                  {modern.MetaProtocolVersion: modern.Version, modern.MetaClientCapabilities: noCaps},
		"a clientInfo without a name": {modern.MetaProtocolVersion: modern.Version, modern.MetaClientCapabilities: noCaps,
			modern.MetaClientInfo: map[string]any{"version": "1"}},
	} {
		requireError(t, what, raw("tools/list", meta), -32602, "")
	}
	requireError(t, "server/discover without _meta", raw("server/discover", nil), -32602, modern.MetaProtocolVersion)
	requireError(t, "ping", h.rpc("ping", nil), -32601, "Method not found")
	requireError(t, "resources/subscribe", h.rpc(MethodResourcesSubscribe, map[string]any{"uri": "file:///x"}), -32601, "Method not found")

	// Earlier revisions, on the same stream.
	requireError(t, "tools/list before initialize", raw("tools/list", nil), -32600, "initialize first")
	requireError(t, "an initialize-based version in _meta before initialize", raw("tools/list",
		map[string]any{modern.MetaProtocolVersion: "2025-11-25", modern.MetaClientCapabilities: noCaps}), -32600, "initialize first")
	if init := ps.host.Call("init", "initialize", json.RawMessage(testClientInit)); init.Error != nil {
		t.Fatalf("initialize after requests of 2026-07-28: %s", init.Raw)
	}
	ps.host.Notify("notifications/initialized", nil)
	if text := resultText(ps.call(t, "read_text_file", map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")})); !strings.HasPrefix(text, "PERMISSION_DENIED") {
		t.Errorf("a call of the initialized session (consent deny): %q", text)
	}
	requireComplete(t, "a request of 2026-07-28 after initialize", h.rpc("tools/list", nil))
}

// toStrings is a decoded JSON array of strings.
func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}

// TestModernIdentityPerRequest: each request's clientInfo.name is its
// host's identity for grants and the trail (declared), or the identity the
// operator pinned, whatever the request declares.
func TestModernIdentityPerRequest(t *testing.T) {
	ps := startPipeSession(t, consent.Auto{}, "", nil)
	a := filepath.Join(ps.proj, "dir", "a.txt")
	for _, name := range []string{"host-a", "host-b"} {
		res := requireComplete(t, name, pipeHost(t, ps, name, noCaps).tool(ToolReadTextFile, map[string]any{"path": a}, nil))
		if resultText(res) != "a\n" {
			t.Fatalf("%s: %v", name, res)
		}
		if got := grantPaths(t, ps, name); !slices.Equal(got, []string{"proj/dir/a.txt"}) {
			t.Errorf("grants of %s: %q", name, got)
		}
		if recs := toolRecords(t, ps.state, ToolReadTextFile, audit.Filter{Server: name, Decision: "allow"}); len(recs) == 0 {
			t.Errorf("no allowing decision of %s in the trail", name)
		}
	}
	starts := records(t, ps.state, audit.Filter{Kind: audit.KindSessionStart})
	if len(starts) != 1 || starts[0].Server != "host-a" || starts[0].ProtocolVersion != modern.Version {
		t.Errorf("session_start records %+v, want one of host-a on %s", starts, modern.Version)
	}

	pinned := startPipeSession(t, consent.Auto{}, "", func(c *Config) { c.PinnedID = "pinned-host" })
	requireComplete(t, "pinned", pipeHost(t, pinned, "claims-another-name", noCaps).tool(ToolReadTextFile,
		map[string]any{"path": filepath.Join(pinned.proj, "dir", "a.txt")}, nil))
	if recs := toolRecords(t, pinned.state, ToolReadTextFile, audit.Filter{Server: "pinned-host", Decision: "allow"}); len(recs) == 0 {
		t.Error("no allowing decision of the pinned identity")
	}
	requireComplete(t, "pinned, no clientInfo", pipeHost(t, pinned, "", noCaps).rpc("tools/list", nil))
}

// TestModernConsentRoundTrip: a call on a path no grant covers, from a host
// that declares form elicitation, is answered with an InputRequiredResult
// holding the consent form (mode form, the host named UNVERIFIED, one
// boolean per path) and a requestState; nothing is read meanwhile. The
// retry with the person's accepted yes reads the file, and the grant is
// the host's; the next call needs no question. A decline, a cancel or a
// no leaves the call refused and nothing written; a host that declares no
// elicitation is not asked (the fallback provider refuses).
func TestModernConsentRoundTrip(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", nil)
	h := pipeHost(t, ps, "elicit-host", formCaps)
	a := map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")}

	ir := requireInputRequired(t, "first call", h.tool(ToolReadTextFile, a, nil), inputKeyConsent)
	f := ir.consentForm(t)
	if f.Mode != "form" || !strings.Contains(f.Message, "elicit-host") || !strings.Contains(f.Message, "UNVERIFIED") ||
		f.RequestedSchema.Type != "object" || len(f.RequestedSchema.Properties) != 1 {
		t.Fatalf("consent form %+v", f)
	}
	if recs := toolRecords(t, ps.state, ToolReadTextFile, audit.Filter{Decision: "allow"}); len(recs) != 0 {
		t.Fatalf("a decision allowed the read before the answer: %+v", recs)
	}
	res := requireComplete(t, "retry", h.tool(ToolReadTextFile, a, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}}))
	if resultText(res) != "a\n" {
		t.Fatalf("retry: %v", res)
	}
	if got := grantPaths(t, ps, "elicit-host"); !slices.Equal(got, []string{"proj/dir/a.txt"}) {
		t.Errorf("grants %q", got)
	}
	consents := records(t, ps.state, audit.Filter{Kind: audit.KindConsent})
	if len(consents) != 2 || *consents[0].Allow || !*consents[1].Allow {
		t.Errorf("consent records %+v: want the question (nothing approved yet), then the approval", consents)
	}
	if resultText(requireComplete(t, "again", h.tool(ToolReadTextFile, a, nil))) != "a\n" {
		t.Error("a call under the grant asked again")
	}

	for _, answer := range []struct {
		action  string
		approve bool
	}{{"decline", false}, {"cancel", false}, {"accept", false}} {
		target := filepath.Join(ps.proj, "dir", "new-"+answer.action+".txt")
		args := map[string]any{"path": target, "content": "x"}
		ir := requireInputRequired(t, answer.action, h.tool(ToolWriteFile, args, nil), inputKeyConsent)
		res := requireComplete(t, answer.action, h.tool(ToolWriteFile, args, &retry{state: ir.RequestState,
			responses: map[string]any{inputKeyConsent: ir.answer(t, answer.action, answer.approve)}}))
		requireRefused(t, res, "PERMISSION_DENIED: "+corridor.ReasonNoConsent)
		if _, err := os.Lstat(target); !os.IsNotExist(err) {
			t.Errorf("%s: the file was written (%v)", answer.action, err)
		}
	}
	res = requireComplete(t, "a host without elicitation", h.as("plain-host", noCaps).tool(ToolReadTextFile, a, nil))
	requireRefused(t, res, "PERMISSION_DENIED: "+corridor.ReasonNoConsent)
}

// TestModernRootsRoundTrip: a host that declares roots is asked for them
// (roots/list in an InputRequiredResult) before anything is served, and
// its answer narrows that request alone, as host roots narrow on earlier
// revisions: a path in its root is served, one outside is refused, and
// list_allowed_directories lists the subtree; an empty or unusable answer
// leaves nothing accessible. A request of the same session that declares no
// roots is served under the operator's roots. With consent to ask too, the
// roots come first, then both are asked together, and a retry missing the
// roots answer is asked again.
func TestModernRootsRoundTrip(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Auto{}), "", nil)
	writeFiles(t, ps.proj, map[string]string{"other/b.txt": "b\n"})
	dir, other := filepath.Join(ps.proj, "dir"), filepath.Join(ps.proj, "other")
	h := pipeHost(t, ps, "roots-host", rootsCaps)
	withRoots := func(what, tool string, args map[string]any, answer any) map[string]any {
		t.Helper()
		ir := requireInputRequired(t, what, h.tool(tool, args, nil), inputKeyRoots)
		return requireComplete(t, what, h.tool(tool, args, &retry{state: ir.RequestState,
			responses: map[string]any{inputKeyRoots: answer}}))
	}

	if res := withRoots("read inside", ToolReadTextFile, map[string]any{"path": filepath.Join(dir, "a.txt")}, rootsResult(dir)); resultText(res) != "a\n" {
		t.Fatalf("read inside the host's root: %v", res)
	}
	res := withRoots("read outside", ToolReadTextFile, map[string]any{"path": filepath.Join(other, "b.txt")}, rootsResult(dir))
	requireRefused(t, res, "PERMISSION_DENIED")
	if text := resultText(withRoots("allowed", ToolListAllowedDirectories, map[string]any{}, rootsResult(dir))); text != "Allowed directories:\n"+dir {
		t.Errorf("list_allowed_directories: %q", text)
	}
	for what, answer := range map[string]any{"empty": rootsResult(), "disjoint": rootsResult(t.TempDir()),
		"unusable": "roots", "no roots member": map[string]any{"dirs": []string{dir}}} {
		res := withRoots(what, ToolReadTextFile, map[string]any{"path": filepath.Join(dir, "a.txt")}, answer)
		requireRefused(t, res, "PERMISSION_DENIED")
		if text := resultText(withRoots(what, ToolListAllowedDirectories, map[string]any{}, answer)); text != "Allowed directories:\n" {
			t.Errorf("%s answer: list_allowed_directories %q, want none", what, text)
		}
	}
	if res := requireComplete(t, "no roots declared", h.as("plain-host", noCaps).tool(ToolReadTextFile,
		map[string]any{"path": filepath.Join(other, "b.txt")}, nil)); resultText(res) != "b\n" {
		t.Errorf("a request without roots: %v", res)
	}

	both := h.as("both-host", map[string]any{"roots": map[string]any{}, "elicitation": map[string]any{}})
	args := map[string]any{"path": filepath.Join(dir, "a.txt")}
	ir := requireInputRequired(t, "round 1", both.tool(ToolReadTextFile, args, nil), inputKeyRoots)
	ir = requireInputRequired(t, "round 2", both.tool(ToolReadTextFile, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyRoots: rootsResult(dir)}}), inputKeyRoots, inputKeyConsent)
	missing := requireInputRequired(t, "round 3 without the roots", both.tool(ToolReadTextFile, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}}), inputKeyRoots)
	if missing.RequestState == ir.RequestState {
		t.Error("the same requestState for another question")
	}
	res = requireComplete(t, "round 3", both.tool(ToolReadTextFile, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyRoots: rootsResult(dir), inputKeyConsent: ir.answer(t, "accept", true)}}))
	if resultText(res) != "a\n" {
		t.Fatalf("round 3: %v", res)
	}
}

// attackTarget is the call the requestState attacks replay: a write the
// person was asked about.
type attackTarget struct {
	ps    *pipeSession
	host  *modernHost
	path  string
	args  map[string]any
	state string
	reply map[string]any // the person's accepted yes
}

// newAttackTarget asks the person about a write of path (round 1) and
// keeps the state and the answer.
func newAttackTarget(t *testing.T, ps *pipeSession, h *modernHost, name string) attackTarget {
	t.Helper()
	path := filepath.Join(ps.proj, "dir", name)
	args := map[string]any{"path": path, "content": "planted"}
	ir := requireInputRequired(t, "round 1 of "+name, h.tool(ToolWriteFile, args, nil), inputKeyConsent)
	return attackTarget{ps: ps, host: h, path: path, args: args, state: ir.RequestState, reply: ir.answer(t, "accept", true)}
}

// refused requires the retry reply to be refused for its requestState with
// reason, and nothing written.
func (a attackTarget) refused(t *testing.T, what string, reply *mcppeer.Message, reason string) {
	t.Helper()
	data := requireError(t, what, reply, -32602, reason)
	if data["code"] != "INVALID_PARAMS" || data["decisionId"] == nil {
		t.Fatalf("%s: data %v, want INVALID_PARAMS with the record's decisionId", what, data)
	}
	if _, err := os.Lstat(a.path); !os.IsNotExist(err) {
		t.Fatalf("%s: the write ran (%v)", what, err)
	}
}

// TestModernRequestStateRefused: a retry whose requestState is not the one
// fsbroker issued for this host, session and request is refused (-32602
// INVALID_PARAMS, recorded in the trail), and nothing runs, whatever
// answers it carries: a state changed at any place to any other character
// class, cut, extended, empty or not a string; presented by another host of
// the session, or in another session; replayed on another tool, or on the
// same tool with other arguments; or presented after its expiry (the
// session's clock, moved by the test). The state itself was good: the
// retry as issued writes.
func TestModernRequestStateRefused(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	tweak := func(c *Config) { c.Now, c.StateTTL = clock.now, time.Minute }
	ps := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", tweak)
	h := pipeHost(t, ps, "attack-host", formCaps)
	a := newAttackTarget(t, ps, h, "target.txt")
	answers := map[string]any{inputKeyConsent: a.reply}
	const invalid = "requestState failed verification"

	tampered := 0
	body := len(a.state) - len(statePrefix)
	for _, at := range []int{0, 2, 4, len(statePrefix), len(statePrefix) + 5, len(statePrefix) + 10, // prefix, expiry
		len(statePrefix) + body/2, len(a.state) - 44, len(a.state) - 20, len(a.state) - 1} { // payload, MAC, its last character
		for _, c := range []string{"A", "z", "7", "-", "_", ".", "+", "/", "=", " ", "é", "\x00"} {
			if a.state[at:at+1] == c {
				continue
			}
			changed := a.state[:at] + c + a.state[at+1:]
			a.refused(t, fmt.Sprintf("changed at %d to %q", at, c), h.tool(ToolWriteFile, a.args, &retry{state: changed, responses: answers}), invalid)
			tampered++
		}
	}
	for what, state := range map[string]any{"cut": a.state[:len(a.state)-1], "half": a.state[:len(a.state)/2],
		"extended": a.state + "A", "empty": "", "made up": statePrefix + strings.Repeat("A", 80)} {
		a.refused(t, what, h.tool(ToolWriteFile, a.args, &retry{state: state, responses: answers}), invalid)
	}
	for what, state := range map[string]any{"a number": 42, "an object": map[string]any{"s": a.state}} {
		a.refused(t, what, h.tool(ToolWriteFile, a.args, &retry{state: state, responses: answers}), "requestState must be a string")
	}
	a.refused(t, "another host", h.as("other-host", formCaps).tool(ToolWriteFile, a.args, &retry{state: a.state, responses: answers}), invalid)
	other := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", tweak)
	reply := pipeHost(t, other, "attack-host", formCaps).tool(ToolWriteFile, a.args, &retry{state: a.state, responses: answers})
	requireError(t, "another session", reply, -32602, invalid)
	a.refused(t, "another tool", h.tool(ToolEditFile, map[string]any{"path": a.path,
		"edits": []any{map[string]any{"oldText": "x", "newText": "y"}}}, &retry{state: a.state, responses: answers}), invalid)
	a.refused(t, "other content", h.tool(ToolWriteFile, map[string]any{"path": a.path, "content": "other"}, &retry{state: a.state, responses: answers}), invalid)
	elsewhere := filepath.Join(ps.proj, "dir", "elsewhere.txt")
	reply = h.tool(ToolWriteFile, map[string]any{"path": elsewhere, "content": "planted"}, &retry{state: a.state, responses: answers})
	requireError(t, "another path", reply, -32602, invalid)
	if _, err := os.Lstat(elsewhere); !os.IsNotExist(err) {
		t.Fatalf("a state replayed on another path wrote it (%v)", err)
	}

	refusals := toolRecords(t, ps.state, ToolWriteFile, audit.Filter{Decision: "deny", Code: "INVALID_PARAMS"})
	if want := tampered + 5 + 2 + 3; len(refusals) != want { // and the other tool's, and the other session's
		t.Errorf("%d refusals of write_file in the trail, want %d", len(refusals), want)
	}
	if res := requireComplete(t, "the retry as issued", h.tool(ToolWriteFile, a.args, &retry{state: a.state, responses: answers})); resultText(res) == "" || res["isError"] == true {
		t.Fatalf("the retry as issued: %v", res)
	}
	if got, err := os.ReadFile(a.path); err != nil || string(got) != "planted" {
		t.Fatalf("the retry as issued wrote %q, %v", got, err)
	}

	late := newAttackTarget(t, ps, h, "late.txt")
	clock.t = clock.t.Add(time.Minute)
	late.refused(t, "expired", h.tool(ToolWriteFile, late.args, &retry{state: late.state,
		responses: map[string]any{inputKeyConsent: late.reply}}), "requestState expired")
}

// TestModernConsentAnswersOnlyTheAskedQuestion: the answer to a consent
// form approves only the fields of that form: a host that answers the
// question about one file with extra fields (another path's field as the
// form would name it, made-up names) gets the one file read and is asked
// about the other; declining it leaves that one refused. Only the asked
// file is granted.
func TestModernConsentAnswersOnlyTheAskedQuestion(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", nil)
	writeFiles(t, ps.proj, map[string]string{"other/b.txt": "b\n"})
	h := pipeHost(t, ps, "greedy-host", formCaps)
	args := map[string]any{"paths": []string{filepath.Join(ps.proj, "dir", "a.txt"), filepath.Join(ps.proj, "other", "b.txt")}}

	ir := requireInputRequired(t, "round 1", h.tool(ToolReadMultipleFiles, args, nil), inputKeyConsent)
	f := ir.consentForm(t)
	if len(f.RequestedSchema.Properties) != 1 || !strings.Contains(f.Message, "a.txt") || strings.Contains(f.Message, "b.txt") {
		t.Fatalf("round 1 asks %+v", f)
	}
	answer := ir.answer(t, "accept", true)
	content := answer["content"].(map[string]any)
	for field := range f.RequestedSchema.Properties {
		content[strings.Replace(field, "path1-", "path2-", 1)] = true // b's field, as a form of two paths would name it
	}
	content["path1-0000000000000000"] = true
	content["b.txt"] = true
	ir2 := requireInputRequired(t, "round 2", h.tool(ToolReadMultipleFiles, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyConsent: answer}}), inputKeyConsent)
	if f2 := ir2.consentForm(t); !strings.Contains(f2.Message, "b.txt") || strings.Contains(f2.Message, "a.txt") {
		t.Fatalf("round 2 asks %+v", f2)
	}
	if got := grantPaths(t, ps, "greedy-host"); !slices.Equal(got, []string{"proj/dir/a.txt"}) {
		t.Fatalf("grants after the greedy answer: %q", got)
	}
	res := requireComplete(t, "round 3", h.tool(ToolReadMultipleFiles, args, &retry{state: ir2.RequestState,
		responses: map[string]any{inputKeyConsent: ir2.answer(t, "decline", false)}}))
	text := resultText(res)
	if !strings.Contains(text, "a.txt:\na\n") || strings.Contains(text, "b\n") || !strings.Contains(text, corridor.ReasonNoConsent) {
		t.Fatalf("round 3: %q", text)
	}
	if got := grantPaths(t, ps, "greedy-host"); !slices.Equal(got, []string{"proj/dir/a.txt"}) {
		t.Fatalf("grants: %q", got)
	}
}

// TestModernMissingAnswers: a retry that misses the answers asked for (no
// inputResponses, or only answers to something else) gets a new
// InputRequiredResult, not an error, and nothing runs; answers without a
// requestState answer nothing fsbroker asked and are ignored (the call
// asks, nothing is approved); inputResponses that are not an object are
// -32602.
func TestModernMissingAnswers(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", nil)
	h := pipeHost(t, ps, "forgetful-host", formCaps)
	args := map[string]any{"path": filepath.Join(ps.proj, "dir", "a.txt")}
	ir := requireInputRequired(t, "round 1", h.tool(ToolReadTextFile, args, nil), inputKeyConsent)
	requireInputRequired(t, "no inputResponses", h.tool(ToolReadTextFile, args, &retry{state: ir.RequestState}), inputKeyConsent)
	requireInputRequired(t, "another key answered", h.tool(ToolReadTextFile, args, &retry{state: ir.RequestState,
		responses: map[string]any{"something": ir.answer(t, "accept", true)}}), inputKeyConsent)
	requireInputRequired(t, "answers without requestState", h.tool(ToolReadTextFile, args, &retry{
		responses: map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}}), inputKeyConsent)
	requireError(t, "inputResponses not an object", h.tool(ToolReadTextFile, args, &retry{state: ir.RequestState,
		responses: []any{ir.answer(t, "accept", true)}}), -32602, "inputResponses must be an object")
	if got := grantPaths(t, ps, "forgetful-host"); len(got) != 0 {
		t.Fatalf("grants %q, want none", got)
	}
	if recs := toolRecords(t, ps.state, ToolReadTextFile, audit.Filter{Decision: "allow"}); len(recs) != 0 {
		t.Fatalf("a decision allowed the read: %+v", recs)
	}
}

// TestModernResources: resources/templates/list and resources/list are
// CacheableResults; a host that declares roots gets an empty listing
// (resources/list cannot ask for them); a listing's cursor is good for its
// host only; resources/read asks for consent in
// an InputRequiredResult like a tool and refuses a changed requestState;
// a missing or refused file is -32602 (the revision forbids -32002) with
// data.code FILE_NOT_FOUND or PERMISSION_DENIED.
func TestModernResources(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Auto{}), "", nil)
	writeFiles(t, ps.proj, map[string]string{".env": "API_KEY=hunter2\n"})
	h := pipeHost(t, ps, "resources-host", formCaps)
	tmpl := requireComplete(t, "templates", h.rpc(MethodResourceTemplatesList, nil))
	if tmpl["cacheScope"] != "public" {
		t.Errorf("templates: %v", tmpl)
	}
	plain := h.as("resources-host", noCaps)
	list := requireComplete(t, "list", plain.rpc(MethodResourcesList, nil))
	if res, _ := list["resources"].([]any); len(res) != 1 || list["cacheScope"] != "private" {
		t.Errorf("list: %v", list)
	}
	if res, _ := requireComplete(t, "list with roots", h.as("resources-host", rootsCaps).rpc(MethodResourcesList, nil))["resources"].([]any); len(res) != 0 {
		t.Errorf("a host that declares roots was listed %v", res)
	}
	many := map[string]string{}
	for i := range ResourcesPerPage + 1 {
		many[fmt.Sprintf("many/%03d.txt", i)] = "x"
	}
	writeFiles(t, ps.proj, many)
	page := requireComplete(t, "a page", plain.rpc(MethodResourcesList, nil))
	cursor, _ := page["nextCursor"].(string)
	if cursor == "" {
		t.Fatalf("no nextCursor: %v", page)
	}
	requireComplete(t, "the next page", plain.rpc(MethodResourcesList, map[string]any{"cursor": cursor}))
	requireError(t, "another host's cursor", plain.as("other-host", noCaps).rpc(MethodResourcesList, map[string]any{"cursor": cursor}),
		-32602, "not a cursor this session returned")

	uri := FileURL(filepath.Join(ps.proj, "dir", "a.txt"))
	fresh := h.as("asking-host", formCaps)
	ir := requireInputRequired(t, "read", fresh.rpc(MethodResourcesRead, map[string]any{"uri": uri}), inputKeyConsent)
	answers := map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}
	changed := ir.RequestState[:len(ir.RequestState)-1] + "A"
	if changed == ir.RequestState {
		changed = ir.RequestState[:len(ir.RequestState)-1] + "B"
	}
	requireError(t, "read with a changed state", fresh.rpc(MethodResourcesRead, map[string]any{"uri": uri,
		modern.ParamRequestState: changed, modern.ParamInputResponses: answers}), -32602, "requestState failed verification")
	read := requireComplete(t, "read retry", fresh.rpc(MethodResourcesRead, map[string]any{"uri": uri,
		modern.ParamRequestState: ir.RequestState, modern.ParamInputResponses: answers}))
	if contents, _ := read["contents"].([]any); len(contents) != 1 || contents[0].(map[string]any)["text"] != "a\n" {
		t.Fatalf("read: %v", read)
	}
	data := requireError(t, "missing", plain.rpc(MethodResourcesRead, map[string]any{"uri": FileURL(filepath.Join(ps.proj, "nope.txt"))}), -32602, "")
	if data["code"] != "FILE_NOT_FOUND" {
		t.Errorf("missing file: %v", data)
	}
	data = requireError(t, "secret", plain.rpc(MethodResourcesRead, map[string]any{"uri": FileURL(filepath.Join(ps.proj, ".env"))}), -32602, "")
	if data["code"] != "PERMISSION_DENIED" {
		t.Errorf("secret: %v", data)
	}
}

// TestModernElicitorAnswersOnlyAskedFields: the Elicitor gives the
// provider the host's values of the asked fields only, under the names of
// the question put again, and only for the same question.
func TestModernElicitorAnswersOnlyAskedFields(t *testing.T) {
	schema := func(token string, titles ...string) json.RawMessage {
		props := map[string]any{}
		for i, title := range titles {
			props["path"+string(rune('1'+i))+"-"+token] = map[string]any{"type": "boolean", "title": title}
		}
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		return b
	}
	asked, err := questionOf("m", schema("old", "1. /a", "2. /b"))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{
		"path1-old": true, "path2-old": false, "path3-old": true, "path3-new": true}})
	el := &modernElicitor{elicitsForms: true, asked: &asked, answer: answer}
	res, err := el.ElicitForm(t.Context(), "m", schema("new", "1. /a", "2. /b"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 2 || string(res.Content["path1-new"]) != "true" || string(res.Content["path2-new"]) != "false" {
		t.Fatalf("content %v", res.Content)
	}
	again := &modernElicitor{elicitsForms: true, asked: &asked, answer: answer}
	if _, err := again.ElicitForm(t.Context(), "m", schema("new", "1. /a", "2. /c")); err != errInputRequired || again.question() == nil {
		t.Fatalf("another question was answered: %v", err)
	}
}

// TestModernNothingRunsAfterAQuestion: once a call put a consent question
// to its host, nothing more of it runs: read_multiple_files whose first
// file needs consent does not read the second, already granted, until the
// retry; the retry reads both.
func TestModernNothingRunsAfterAQuestion(t *testing.T) {
	ps := startPipeSession(t, consent.NewElicitOr(consent.Deny{}), "", nil)
	writeFiles(t, ps.proj, map[string]string{"other/b.txt": "b\n"})
	h := pipeHost(t, ps, "careful-host", formCaps)
	a, b := filepath.Join(ps.proj, "dir", "a.txt"), filepath.Join(ps.proj, "other", "b.txt")
	ir := requireInputRequired(t, "grant b", h.tool(ToolReadTextFile, map[string]any{"path": b}, nil), inputKeyConsent)
	requireComplete(t, "grant b", h.tool(ToolReadTextFile, map[string]any{"path": b}, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}}))

	args := map[string]any{"paths": []string{a, b}}
	ir = requireInputRequired(t, "round 1", h.tool(ToolReadMultipleFiles, args, nil), inputKeyConsent)
	if recs := toolRecords(t, ps.state, ToolReadMultipleFiles, audit.Filter{Decision: "allow"}); len(recs) != 0 {
		t.Fatalf("round 1 read the granted file after the question: %+v", recs)
	}
	res := requireComplete(t, "round 2", h.tool(ToolReadMultipleFiles, args, &retry{state: ir.RequestState,
		responses: map[string]any{inputKeyConsent: ir.answer(t, "accept", true)}}))
	if text := resultText(res); !strings.Contains(text, "a.txt:\na\n") || !strings.Contains(text, "b.txt:\nb\n") {
		t.Fatalf("round 2: %q", text)
	}
}
