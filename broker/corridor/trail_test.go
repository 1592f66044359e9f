// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/engine"
)

// methodPolicy allows exactly the policy inputs whose method is files/read,
// files/write or files/rename (and denies files/list), so that a request it
// allows proves its policy input named the corridor's method, whatever the
// front end.
const methodPolicy = `package fsbroker.authz

default decision := {"allow": false, "reasons": ["method: the policy input names another method"]}

decision := {"allow": true} if input.method in {"files/read", "files/write", "files/rename"}
`

// decisionIDOf is the decision id err carries.
func decisionIDOf(t *testing.T, err error) string {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) || e.DecisionID == "" {
		t.Fatalf("error %v carries no decision id", err)
	}
	return e.DecisionID
}

// TestRecordsNameTheFrontEndsMethod: the decision and outcome records of a
// request of fsbroker serve name the front end's own method (the tool, or
// the resources method) as their method, and the tool as before, while the
// policy input keeps the corridor's files/* method (a real engine whose
// one-file policy allows only files/* methods allows the requests); the
// records of a client-role request keep the files/* method and no tool.
// Refusals by the policy (a listing, which this one denies), before it (a
// path that climbs out) and by the front end are named the same way.
func TestRecordsNameTheFrontEndsMethod(t *testing.T) {
	f := newFixture(t)
	e, err := engine.New(context.Background(), engine.Source{FS: fstest.MapFS{"policy.rego": {Data: []byte(methodPolicy)}}},
		engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := audittest.Open(t)
	sink := &keptSink{Writer: w}
	c := f.corridor(t, WithDecider(engine.Decider{Engine: e}), WithAudit(sink, false))
	ctx := context.Background()
	serveCaller := func(tool string) Caller {
		caller := f.caller
		caller.FrontEnd, caller.Tool = "serve", tool
		return caller
	}
	want := func(id, method, tool string, kinds ...audit.Kind) {
		t.Helper()
		recs := sink.records(id)
		if len(recs) != len(kinds) {
			t.Fatalf("%s: %d records %+v, want %v", id, len(recs), recs, kinds)
		}
		for n, r := range recs {
			if r.Kind != kinds[n] || r.Method != method || r.Tool != tool {
				t.Errorf("%s: record %d is %s of method %q, tool %q; want %s of method %q, tool %q",
					id, n, r.Kind, r.Method, r.Tool, kinds[n], method, tool)
			}
		}
	}

	// Allowed: the policy saw files/read and files/write.
	if _, err := c.Read(ctx, serveCaller("read_text_file"), ReadRequest{Path: "ro/a.txt", Length: -1}); err != nil {
		t.Fatalf("serve read: %v", err)
	}
	want("s1-1", "read_text_file", "read_text_file", audit.KindDecision, audit.KindOutcome)
	if _, err := c.Read(ctx, serveCaller("resources/read"), ReadRequest{Path: "ro/a.txt", Length: -1}); err != nil {
		t.Fatalf("serve resources read: %v", err)
	}
	want("s1-2", "resources/read", "resources/read", audit.KindDecision, audit.KindOutcome)
	if _, err := c.Write(ctx, serveCaller("write_file"), WriteRequest{Path: "rw/new.txt", Data: []byte("x"), Create: true, Final: true}); err != nil {
		t.Fatalf("serve write: %v", err)
	}
	want("s1-3", "write_file", "write_file", audit.KindDecision, audit.KindOutcome)
	if recs := sink.records("s1-3"); recs[0].Operation != decision.OpWrite {
		t.Errorf("write_file's decision has operation %q, want write", recs[0].Operation)
	}
	if _, err := c.Read(ctx, f.caller, ReadRequest{Path: "ro/a.txt", Length: -1}); err != nil {
		t.Fatalf("client-role read: %v", err)
	}
	want("s1-4", "files/read", "", audit.KindDecision, audit.KindOutcome)

	// A rename: both decisions (source, target) and the outcome.
	if _, err := c.Rename(ctx, serveCaller("move_file"), RenameRequest{OldPath: "rw/new.txt", NewPath: "rw/moved.txt"}); err != nil {
		t.Fatalf("serve rename: %v", err)
	}
	want("s1-5", "move_file", "move_file", audit.KindDecision, audit.KindDecision, audit.KindOutcome)

	// Refused by the policy.
	_, err = c.List(ctx, serveCaller("list_directory"), ListRequest{Path: "ro", MaxDepth: -1, Limit: 10})
	want(decisionIDOf(t, err), "list_directory", "list_directory", audit.KindDecision)

	// Refused before the policy: a path that climbs out of its root.
	_, err = c.Read(ctx, serveCaller("read_text_file"), ReadRequest{Path: "ro/../../x", Length: -1})
	want(decisionIDOf(t, err), "read_text_file", "read_text_file", audit.KindDecision)
	_, err = c.Read(ctx, f.caller, ReadRequest{Path: "ro/../../x", Length: -1})
	want(decisionIDOf(t, err), "files/read", "", audit.KindDecision)

	// Refused by the front end before the corridor.
	err = c.Refuse(ctx, serveCaller("resources/read"), "resources/read", "file:///x", "", errcode.New(errcode.InvalidParams, "bad uri"))
	want(decisionIDOf(t, err), "resources/read", "resources/read", audit.KindDecision)
	err = c.Refuse(ctx, serveCaller("read_text_file"), "tools/call", "", "", errcode.New(errcode.InvalidParams, "bad arguments"))
	want(decisionIDOf(t, err), "read_text_file", "read_text_file", audit.KindDecision)
	err = c.Refuse(ctx, f.caller, "files/read", "", "", errcode.New(errcode.InvalidParams, "bad params"))
	want(decisionIDOf(t, err), "files/read", "", audit.KindDecision)
}
