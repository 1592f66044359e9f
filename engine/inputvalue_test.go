// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/policies"
)

// requestValueCases are inputs of every shape Decider.Decide gets: typical ones, one with every
// field set by reflection (so that a field added to the input but not to requestValue fails
// here), grants nil and empty, numbers past the interned ones, escapes and invalid UTF-8.
func requestValueCases(t *testing.T) []decision.Input {
	t.Helper()
	path := decision.InputPath{Requested: "m/a <b>.txt", Canonical: "/r/a <b>.txt", Root: "/r", Mount: "m", Relative: "a <b>.txt",
		MountPath: "m/a <b>.txt", Writable: true, Exists: true, Type: "file", Size: 1 << 40, Nlink: 2}
	var full decision.Input
	fillValue(t, reflect.ValueOf(&full).Elem(), "input")
	full.Entries = nil // the broker sends entries to Carried, Visible and Consentable only
	return []decision.Input{
		{},
		{Version: 1, Method: "files/read", Operation: "read", Server: decision.InputServer{ID: "declared:x\u2028", Name: "x\"y"},
			Path: &path, Params: json.RawMessage(`{ "path": "m/<a>&b\u2028", "length": 5.0, "nested": {"k": [true, null, 1e400]}}`),
			Grants: []decision.InputGrant{}, Time: decision.NewInputTime(time.Date(2026, 11, 22, 9, 0, 0, 123, time.UTC))},
		{Version: 1, Operation: "rename", Grants: []decision.InputGrant{{Access: "read", Path: "/r"}}, Params: json.RawMessage(`[1]`),
			Path: &path, NewPath: &path, Usage: decision.InputUsage{BytesWrittenToday: -1, Watches: 3}, Bytes: 1 << 62,
			FrontEnd: &decision.InputFrontEnd{Name: "serve", Tool: "read_text_file"}},
		{Version: 1, Method: "files/read", Params: json.RawMessage("{\"bad\": \"a\xffb\", \"esc\": \"\\u00e9\\n\"}"),
			Path: &decision.InputPath{Relative: "caf\xc3", Nlink: 1<<64 - 1}, Server: decision.InputServer{Name: "n\xff\xfe"},
			Grants: []decision.InputGrant{{Path: "p/\xc3\x28"}}},
		full,
	}
}

// TestRequestValueMatchesParse: the input requestValue builds is the value the engine got before,
// by parsing encodeInput's JSON, for inputs of every shape.
func TestRequestValueMatchesParse(t *testing.T) {
	for i, in := range requestValueCases(t) {
		doc, _ := encodeInput(&in)
		want, err := parsedWithFacts(doc)
		if err != nil {
			t.Fatalf("input %d: parse %s: %v", i, doc, err)
		}
		got, ok := requestValue(newSessionPart(&in), &in)
		if !ok {
			t.Fatalf("input %d: not built", i)
		}
		if got.Compare(want) != 0 {
			t.Errorf("input %d:\n got %v\nwant %v", i, got, want)
		}
	}
}

// TestRequestValueLeavesOddInputsToJSON: params that are not JSON (which encodeInput makes the
// document null, which the policy denies) and entries are not built.
func TestRequestValueLeavesOddInputsToJSON(t *testing.T) {
	for _, in := range []decision.Input{
		{Params: json.RawMessage(`{"a":`)},
		{Entries: []decision.InputPath{{}}},
	} {
		if v, ok := requestValue(newSessionPart(&in), &in); ok {
			t.Errorf("%+v: built %v", in, v)
		}
	}
}

// TestSessionPartFollowsEveryChange: the session part of an input is reused while the server,
// session, front end and grants stay the same, whatever else changes, and made anew (with a new
// generation, so no cached decision of the old one is found) when any of them changes, grants
// from nil to empty included.
func TestSessionPartFollowsEveryChange(t *testing.T) {
	var parts sessionParts
	base := requestValueCases(t)[4]
	first := parts.of(&base)
	other := base
	other.Path, other.Bytes, other.Time, other.Usage = nil, 7, decision.NewInputTime(time.Now()), decision.InputUsage{Watches: 9}
	if p := parts.of(&other); p != first {
		t.Fatal("a change outside the session part made a new one")
	}
	changes := map[string]func(in *decision.Input){
		"server pinned":  func(in *decision.Input) { in.Server.Pinned = false },
		"server version": func(in *decision.Input) { in.Server.Version = "2" },
		"session proto":  func(in *decision.Input) { in.Session.ProtocolVersion = "x" },
		"front end":      func(in *decision.Input) { in.FrontEnd = nil },
		"front end tool": func(in *decision.Input) { fe := *in.FrontEnd; fe.Tool = "t"; in.FrontEnd = &fe },
		"grant expires": func(in *decision.Input) {
			in.Grants = []decision.InputGrant{in.Grants[0], in.Grants[1]}
			in.Grants[1].Expires = ""
		},
		"grant dropped": func(in *decision.Input) { in.Grants = in.Grants[:1] },
		"grants nil":    func(in *decision.Input) { in.Grants = nil },
		"grants empty":  func(in *decision.Input) { in.Grants = []decision.InputGrant{} },
	}
	seen := map[uint64]string{first.gen: "base"}
	for name, change := range changes {
		in := base
		change(&in)
		p := parts.of(&in)
		if p == first {
			t.Errorf("%s: the old session part was reused", name)
			continue
		}
		if was, dup := seen[p.gen]; dup {
			t.Errorf("%s: generation %d again (%s)", name, p.gen, was)
		}
		seen[p.gen] = name
		if q := parts.of(&in); q != p {
			t.Errorf("%s: the new session part was not kept", name)
		}
		parts.of(&base) // back to the base, which is then a new part again
	}
	if p := parts.of(&base); p == first || seen[p.gen] != "" {
		t.Error("a session part made again reuses an old generation")
	}
}

// TestDecideFollowsGrantChanges: through the broker's decision stage, a read allowed under a
// grant is refused once the grant is gone and allowed again when it is back, each time at once:
// no decision made for one set of grants answers for another, though the request is the same.
func TestDecideFollowsGrantChanges(t *testing.T) {
	e, err := New(context.Background(), Source{FS: policies.FS}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	d := Decider{Engine: e}
	in := decision.Input{Version: 1, Method: "files/read", Operation: decision.OpRead,
		Server:  decision.InputServer{ID: "example", Name: "example", Version: "1.0.0"},
		Session: decision.InputSession{ID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"},
		Time:    decision.NewInputTime(time.Now())}
	setFirstTouchInput(&in, 1)
	for i, grants := range [][]decision.InputGrant{firstTouchGrants(3), nil, {}, firstTouchGrants(3), firstTouchGrants(3)[:2]} {
		in.Grants = grants
		want := len(grants) == 3
		if v := d.Decide(context.Background(), &in); v.Allow != want {
			t.Errorf("step %d, %d grants: allow %t, want %t (%v)", i, len(grants), v.Allow, want, v.Reasons)
		}
	}
}

// TestRequestKeyTellsInputsApart: two inputs with one session part have the same key only when
// they are the same but for their time: every field of the request's own part changes the key.
func TestRequestKeyTellsInputsApart(t *testing.T) {
	base := requestValueCases(t)[4]
	p := newSessionPart(&base)
	key := string(requestKey(nil, p, &base))
	timed := base
	timed.Time = decision.NewInputTime(time.Unix(5, 0))
	if string(requestKey(nil, p, &timed)) != key {
		t.Error("the time changed the key")
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		switch name {
		case "Server", "Session", "FrontEnd", "Grants", "Time", "Entries":
			continue // the session part's, the time, and what Decide does not build
		}
		changed := base
		cv := reflect.ValueOf(&changed).Elem().Field(i)
		switch cv.Kind() {
		case reflect.Pointer:
			cv.Set(reflect.Zero(cv.Type()))
		case reflect.Slice:
			cv.SetBytes(append(cv.Bytes(), ' '))
		case reflect.String:
			cv.SetString(cv.String() + "x")
		case reflect.Int, reflect.Int64:
			cv.SetInt(cv.Int() + 1)
		case reflect.Struct: // usage
			cv.Field(0).SetInt(cv.Field(0).Int() + 1)
		default:
			t.Fatalf("%s: %s", name, cv.Kind())
		}
		if string(requestKey(nil, p, &changed)) == key {
			t.Errorf("a change of %s left the key as it was", name)
		}
	}
	for _, field := range []func(*decision.InputPath){
		func(q *decision.InputPath) { q.Canonical += "x" }, func(q *decision.InputPath) { q.Nlink++ },
		func(q *decision.InputPath) { q.Hidden = !q.Hidden }, func(q *decision.InputPath) { q.Type = "directory" },
	} {
		changed := base
		np := *base.NewPath
		field(&np)
		changed.NewPath = &np
		if string(requestKey(nil, p, &changed)) == key {
			t.Errorf("a change of newPath (%+v) left the key as it was", np)
		}
	}
	if got := (ast.Null{}); got.Compare(p.grantsTerm.Value) == 0 {
		t.Error("grants converted to null")
	}
}

// FuzzRequestValue holds requestValue to the parse of encodeInput's JSON for inputs whose
// strings and params are arbitrary bytes: the same value, or neither way makes one (params with a
// number OPA refuses, as 1e49300, fail closed either way).
func FuzzRequestValue(f *testing.F) {
	f.Add("proj/a.go", "srv", "proj", []byte(`{"path":"proj/a.go"}`), int64(5))
	f.Add("a\xffb", "\u2028<&>", "", []byte(`[1, 1e400, "\u00e9"]`), int64(-1))
	f.Fuzz(func(t *testing.T, rel, server, grant string, params []byte, n int64) {
		in := decision.Input{Version: 1, Method: "files/read", Operation: rel, Params: params, Bytes: n,
			Server: decision.InputServer{ID: server, Name: rel}, Grants: []decision.InputGrant{{Access: "read", Path: grant}},
			Path: &decision.InputPath{Relative: rel, MountPath: grant + "/" + rel, Size: n}, Time: decision.InputTime{RFC3339: server, UnixNano: n}}
		got, ok := requestValue(newSessionPart(&in), &in)
		doc, _ := encodeInput(&in)
		want, err := parsedWithFacts(doc)
		switch {
		case !ok && string(doc) != "null" && err == nil:
			t.Fatalf("not built, though encodeInput made %s, which parses", doc)
		case !ok: // neither way makes a value (a number OPA refuses, say): both fail closed
		case err != nil:
			t.Fatalf("parse %s: %v", doc, err)
		case got.Compare(want) != 0:
			t.Fatalf("\n got %v\nwant %v", got, want)
		}
	})
}

// TestObligationsFollowTheDecision: each decision has the obligations its evaluation gave,
// though their Go form is kept from one decision to the next: a policy whose obligations follow
// the input gives each input its own, alternating or not.
func TestObligationsFollowTheDecision(t *testing.T) {
	e := newTestEngine(t, map[string]string{"p.rego": `package fsbroker.authz

decision := {"allow": true, "obligations": {"maxReadBytes": input.bytes}}
`}, WithRunTests(false))
	for _, n := range []int{1, 1, 2, 1, 3, 3} {
		in := testInput(t, "read", "proj/a.txt", false)
		in["bytes"] = n
		d, err := e.Decide(context.Background(), in)
		if err != nil || d.Obligations["maxReadBytes"] != json.Number(strconv.Itoa(n)) {
			t.Errorf("bytes %d: obligations %v, %v", n, d.Obligations, err)
		}
	}
}
