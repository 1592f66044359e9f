// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
)

// consentReply is a files/consent result.
type consentReply struct {
	Granted       bool     `json:"granted"`
	ApprovedPaths []string `json:"approvedPaths"`
}

// askConsent sends the server's files/consent for paths and returns the
// elicitation the host receives (nil when the server is answered without
// one) and a function that waits for the server's reply.
func (f *routerFixture) askConsent(t *testing.T, id string, access string, paths ...string) (elicit *mcppeer.Message, reply func() consentReply) {
	t.Helper()
	f.server.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "files/consent",
		"params": map[string]any{"message": "may I? \x1b]0;owned\x07", "requestedPaths": paths, "access": access}})
	got := func() consentReply {
		t.Helper()
		r := f.server.AwaitReply(`"` + id + `"`)
		var res consentReply
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			t.Fatalf("files/consent answered %s", r.Raw)
		}
		return res
	}
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); {
		if m := f.host.TryAwait(20*time.Millisecond, func(m *mcppeer.Message) bool { return m.IsRequest("elicitation/create") }); m != nil {
			return m, got
		}
		if f.server.Has(func(m *mcppeer.Message) bool { return m.IsReplyTo(`"` + id + `"`) }) {
			return nil, got
		}
	}
	t.Fatalf("files/consent %s: neither an elicitation nor a reply", id)
	return nil, nil
}

// elicitForm is the params of an elicitation/create.
type elicitForm struct {
	Mode            *string `json:"mode"`
	Message         string  `json:"message"`
	RequestedSchema struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Default bool   `json:"default"`
		} `json:"properties"`
	} `json:"requestedSchema"`
}

// paramsOf decodes a request's params.
func paramsOf[T any](t *testing.T, m *mcppeer.Message) T {
	t.Helper()
	var p T
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("%s params %s: %v", m.Method, m.Params, err)
	}
	return p
}

func parseForm(t *testing.T, m *mcppeer.Message) elicitForm {
	t.Helper()
	return paramsOf[elicitForm](t, m)
}

// formFields returns the names of the fields of the consent form m, by the
// path they ask about (1, 2, ...): "pathN-" then the question's token.
func formFields(t *testing.T, m *mcppeer.Message) map[int]string {
	t.Helper()
	out := map[int]string{}
	for name := range parseForm(t, m).RequestedSchema.Properties {
		var n int
		var token string
		if _, err := fmt.Sscanf(name, "path%d-%s", &n, &token); err != nil || len(token) < 16 {
			t.Fatalf("the form's field %q is not pathN-TOKEN", name)
		}
		out[n] = name
	}
	return out
}

// yes is an accepted form's content with the given fields set to true.
func yes(fields ...string) map[string]any {
	content := map[string]any{}
	for _, f := range fields {
		content[f] = true
	}
	return map[string]any{"action": "accept", "content": content}
}

// --consent elicit under wrap: the server's files/consent is put to the
// person through the host's elicitation/create (form mode, one boolean per
// path, no by default); only the paths set to true in an accepted form are
// granted, and a decline, a cancel or a malformed answer grants nothing.
func TestWrapElicitConsent(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit())
	f.handshakeWith(t, "2025-11-25", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})

	el, reply := f.askConsent(t, "c1", "read", "a/hello.txt", "b")
	if el == nil {
		t.Fatal("the host was not asked")
	}
	form := parseForm(t, el)
	if form.Mode == nil || *form.Mode != "form" || form.RequestedSchema.Type != "object" || len(form.RequestedSchema.Properties) != 2 {
		t.Fatalf("elicitation/create params %s: want form mode with two fields", el.Params)
	}
	if !strings.Contains(form.Message, "UNVERIFIED") || !strings.Contains(form.Message, "a/hello.txt") ||
		strings.Contains(form.Message, "\x1b") || strings.Contains(form.Message, "\x07") {
		t.Errorf("the form's message does not say what the prompt says, sanitized:\n%q", form.Message)
	}
	for name, p := range form.RequestedSchema.Properties {
		if p.Type != "boolean" || p.Default {
			t.Errorf("field %s is %+v: want a boolean, false by default", name, p)
		}
	}
	// The host accepts, with the first path yes and the second no, a field
	// the form does not have and a string "true".
	fields := formFields(t, el)
	f.host.Reply(el, map[string]any{"action": "accept", "content": map[string]any{fields[1]: true, fields[2]: "true",
		"path3" + strings.TrimPrefix(fields[1], "path1"): true, "path2": true}})
	if got := reply(); !got.Granted || len(got.ApprovedPaths) != 1 || got.ApprovedPaths[0] != "a/hello.txt" {
		t.Errorf("an accepted form with path1 only granted %+v, want a/hello.txt", got)
	}

	for _, action := range []string{"decline", "cancel", "maybe"} {
		el, reply := f.askConsent(t, "c-"+action, "read", "b")
		if el == nil {
			t.Fatalf("%s: the host was not asked", action)
		}
		// Content with every field set: a decline or cancel still grants nothing.
		f.host.Reply(el, map[string]any{"action": action, "content": map[string]any{formFields(t, el)[1]: true}})
		if got := reply(); got.Granted || len(got.ApprovedPaths) != 0 {
			t.Errorf("a %s granted %+v", action, got)
		}
	}
	// An error from the host grants nothing.
	el, reply = f.askConsent(t, "c-err", "read", "b")
	f.host.SendRaw(`{"jsonrpc":"2.0","id":` + string(el.ID) + `,"error":{"code":-32601,"message":"no"}}`)
	if got := reply(); got.Granted {
		t.Errorf("an error granted %+v", got)
	}
}

// A 2025-06-18 host gets the form without a mode member (that revision has
// none); a host that did not declare elicitation, or declared URL mode only,
// is never sent elicitation/create, and nothing is granted.
func TestWrapElicitFollowsTheHost(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit())
	f.handshakeWith(t, "2025-06-18", map[string]any{"elicitation": map[string]any{}})
	el, reply := f.askConsent(t, "c1", "read", "b")
	if el == nil {
		t.Fatal("the host was not asked")
	}
	if form := parseForm(t, el); form.Mode != nil {
		t.Errorf("a 2025-06-18 host got mode %q", *form.Mode)
	}
	f.host.Reply(el, yes(formFields(t, el)[1]))
	if got := reply(); !got.Granted {
		t.Errorf("an accepted form granted %+v", got)
	}

	for name, caps := range map[string]map[string]any{
		"no elicitation": {"sampling": map[string]any{}},
		"url mode only":  {"elicitation": map[string]any{"url": map[string]any{}}},
	} {
		g := startRouterConsent(t, consent.NewElicit())
		g.handshakeWith(t, "2025-11-25", caps)
		el, reply := g.askConsent(t, "c1", "read", "b")
		if el != nil {
			t.Errorf("%s: the host was sent %s", name, el.Raw)
			g.host.Reply(el, yes(formFields(t, el)[1]))
		}
		if got := reply(); got.Granted {
			t.Errorf("%s: granted %+v", name, got)
		}
	}
}

// A question the host does not answer in time grants nothing, and the host
// is told it is cancelled; its late answer changes nothing.
func TestWrapElicitTimeout(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit(consent.WithTimeout(300*time.Millisecond)))
	f.handshakeWith(t, "2025-11-25", map[string]any{"elicitation": map[string]any{}})
	el, reply := f.askConsent(t, "c1", "read", "b")
	if el == nil {
		t.Fatal("the host was not asked")
	}
	if got := reply(); got.Granted {
		t.Errorf("an unanswered question granted %+v", got)
	}
	c := f.host.AwaitNotification("notifications/cancelled")
	if !strings.Contains(string(c.Params), `"requestId":`+string(el.ID)) {
		t.Errorf("the cancellation %s names another request than %s", c.Params, el.ID)
	}
	f.host.Reply(el, yes(formFields(t, el)[1]))
	el2, reply2 := f.askConsent(t, "c2", "read", "b")
	f.host.Reply(el2, map[string]any{"action": "decline"})
	if got := reply2(); got.Granted {
		t.Errorf("a decline after a late accept granted %+v", got)
	}
	if f.server.Has(func(m *mcppeer.Message) bool {
		return m.IsRequest("elicitation/create") || m.IsReplyTo(string(el.ID)) || m.IsReplyTo(string(el2.ID))
	}) {
		t.Error("the server saw the broker's elicitation, or the host's answer to it")
	}
}

// A server plants its own form at the host under the id it guesses the
// Router will give its next consent question (freeing it in the Router's
// table by reusing the id for a ping the host answers at once), with the
// field name it guesses the question will have. The person's yes to the
// server's form must not be taken as the answer to the broker's question:
// the Router's ids are random and never reused, a server request with an id
// of the Router's namespace or one already in flight is renamed, and the
// question's field names carry a token of its own.
func TestWrapServerFormCannotAnswerBrokerConsent(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit())
	f.handshakeWith(t, "2025-11-25", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})

	const k = `"fsbroker-wrap-1"` // the Router's first id toward this host, were its ids sequential
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + k + `,"method":"elicitation/create","params":{"mode":"form",` +
		`"message":"Turn on spell checking?","requestedSchema":{"type":"object","properties":{"path1":{"type":"boolean","title":"Spell checking"}}}}}`)
	deceptive := f.host.Await("the server's form", func(m *mcppeer.Message) bool {
		return m.IsRequest("elicitation/create") && strings.Contains(string(m.Params), "spell")
	})
	f.server.SendRaw(`{"jsonrpc":"2.0","id":` + k + `,"method":"ping"}`)
	ping := f.host.Await("the ping", func(m *mcppeer.Message) bool { return m.IsRequest("ping") })
	f.host.Reply(ping, map[string]any{}) // the host answers the ping at once
	f.server.AwaitReply(k)

	el, reply := f.askConsent(t, "c1", "read", "a/hello.txt")
	if el == nil {
		t.Fatal("the host was not asked")
	}
	if string(el.ID) == string(deceptive.ID) {
		t.Errorf("the broker's question went out with the id of the server's form, %s", el.ID)
	}
	// The person says yes to the form they saw first: the server's, and
	// then, to be sure, answers the server's field name under the
	// question's own id too.
	f.host.Reply(deceptive, yes("path1"))
	f.host.Reply(el, yes("path1"))
	if got := reply(); got.Granted {
		t.Errorf("the person's yes to the server's own form granted %v", got.ApprovedPaths)
	}
	// The server gets the answer to its own form, under its own id.
	f.server.AwaitReply(k)
}

// The host answers the broker's own requests twice: its roots/list and its
// consent question (elicitation/create). The first answer is the broker's;
// the second, whatever it says, is dropped and never reaches the server.
func TestWrapHostSecondReplyToBrokerRequestIsDropped(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit())
	f.handshakeWith(t, "2025-11-25", map[string]any{"elicitation": map[string]any{"form": map[string]any{}},
		"roots": map[string]any{"listChanged": true}})
	rl := f.host.AwaitRequest("roots/list")
	ws := map[string]any{"roots": []map[string]string{{"uri": roots.FileURI(filepath.Join(f.base, "ws"))}}}
	f.host.Reply(rl, ws)
	f.host.Reply(rl, ws)
	f.host.SendRaw(`{"jsonrpc":"2.0","id":` + string(rl.ID) + `,"error":{"code":-32603,"message":"again"}}`)

	el, reply := f.askConsent(t, "c1", "read", "a/hello.txt")
	if el == nil {
		t.Fatal("the host was not asked")
	}
	field := formFields(t, el)[1]
	f.host.Reply(el, yes(field))
	if got := reply(); !got.Granted {
		t.Fatalf("the first answer, an accepted form, granted %+v", got)
	}
	f.host.Reply(el, yes(field))
	f.host.Reply(el, map[string]any{"action": "decline"})

	// The host's messages are taken in order: once the marker is through,
	// every answer before it has been routed.
	f.host.Notify("x/marker", nil)
	f.server.AwaitNotification("x/marker")
	if f.server.Has(func(m *mcppeer.Message) bool { return m.IsReplyTo(string(rl.ID)) || m.IsReplyTo(string(el.ID)) }) {
		t.Error("a second answer of the host's to a request of the broker's reached the server")
	}
	if got := f.listRoots(t, "after"); got != "a,b" {
		t.Errorf("after the second answers the server sees roots %q, want a,b (the first answer's)", got)
	}
}

// heldTowardHost counts the Router's entries for requests toward the host.
func heldTowardHost(r *Router) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.toHost.byWire) + len(r.toHost.renamed)
}

// A flood of consent questions the host never answers in time leaves
// nothing behind in the Router (it keeps no entry for a request it gave
// up), and the host's late answers to all of them, each given twice, are
// dropped, never passed to the server.
func TestWrapAbandonedQuestionsKeepNothing(t *testing.T) {
	f := startRouterConsent(t, consent.NewElicit(consent.WithTimeout(30*time.Millisecond)))
	f.handshakeWith(t, "2025-11-25", map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	before := heldTowardHost(f.router)
	const n = 64
	for i := range n {
		f.server.Send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("c%d", i), "method": "files/consent",
			"params": map[string]any{"message": "may I?", "requestedPaths": []string{"b"}, "access": "read"}})
	}
	var asked []*mcppeer.Message
	for i := range n {
		asked = append(asked, f.host.AwaitRequest("elicitation/create"))
		if r := f.server.AwaitReply(fmt.Sprintf(`"c%d"`, i)); r.Error != nil || strings.Contains(string(r.Result), `"granted":true`) {
			t.Fatalf("an unanswered question was answered %s", r.Raw)
		}
	}
	if held := heldTowardHost(f.router); held != before {
		t.Errorf("after %d questions given up, the Router holds %d entries toward the host, want %d", n, held, before)
	}
	for _, el := range asked {
		f.host.Reply(el, yes(formFields(t, el)[1]))
		f.host.Reply(el, map[string]any{"action": "decline"})
	}
	f.host.Notify("x/marker", nil)
	f.server.AwaitNotification("x/marker")
	for _, el := range asked {
		if f.server.Has(func(m *mcppeer.Message) bool { return m.IsReplyTo(string(el.ID)) }) {
			t.Fatalf("the host's late answer to %s reached the server", el.ID)
		}
	}
	if held := heldTowardHost(f.router); held != before {
		t.Errorf("after the late answers, the Router holds %d entries toward the host, want %d", held, before)
	}
}
