// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
)

// exportAll collects the events of ExportOPA, failing on any error.
func exportAll(t *testing.T, path string, opts OPAOptions) []OPAEvent {
	t.Helper()
	var out []OPAEvent
	for ev, err := range ExportOPA(context.Background(), path, opts) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestExportOPAIsOPAsFormat exports a real trail and decodes every event with OPA's own
// EventV1: each member fsbroker writes must be one OPA knows, under the same name and type,
// so that encoding OPA's struct again gives the same JSON.
func TestExportOPAIsOPAsFormat(t *testing.T) {
	dir := t.TempDir()
	keys := newTestKeys(t)
	w := keys.open(t, dir, WithMaxSegmentBytes(1024))
	ctx := context.Background()
	appendRec := func(r Record) {
		t.Helper()
		if _, err := w.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	appendRec(Record{Kind: KindSessionStart, Server: "notes", SessionID: "s1", Transport: "stdio"})
	appendRec(Record{Kind: KindDecision, Server: "notes", SessionID: "s1", DecisionID: "d1", Method: "files/write",
		Operation: "write", Paths: []string{"/w/a.txt"}, Allow: Bool(true), Code: "OK", PolicyRevision: "rev-9", LatencyUs: 17})
	appendRec(Record{Kind: KindDecision, Server: "notes", SessionID: "s1", DecisionID: "d2", Method: "files/read",
		Operation: "read", Paths: []string{"/etc/shadow"}, Allow: Bool(false), Code: "PERMISSION_DENIED",
		Reasons: []string{"outside the roots"}, PolicyRevision: "rev-9", LatencyUs: 9})
	appendRec(Record{Kind: KindOutcome, Server: "notes", SessionID: "s1", DecisionID: "d1", Outcome: "ok", Bytes: 5, DurationUs: 300})
	appendRec(Record{Kind: KindSessionEnd, Server: "notes", SessionID: "s1"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	decs := readAll(t, dir, Filter{Kind: KindDecision})

	evs := exportAll(t, dir, OPAOptions{Version: "v9.9.9"})
	if len(evs) != 2 {
		t.Fatalf("%d events, want one per decision", len(evs))
	}
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var opa logs.EventV1
		if err := json.Unmarshal(b, &opa); err != nil {
			t.Fatalf("OPA's EventV1 does not take event %d: %v\n%s", i, err, b)
		}
		again, err := json.Marshal(opa)
		if err != nil {
			t.Fatal(err)
		}
		var ours, theirs map[string]any
		if err := json.Unmarshal(b, &ours); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(again, &theirs); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("event %d changes through OPA's EventV1:\nours   %s\ntheirs %s", i, b, again)
		}

		rec := decs[i].Record
		when, _ := time.Parse(TimeLayout, rec.Time)
		switch {
		case opa.DecisionID != rec.DecisionID:
			t.Errorf("event %d: decision_id %s, want %s", i, opa.DecisionID, rec.DecisionID)
		case opa.Path != "fsbroker/authz/decision", opa.RequestedBy != "fsbroker":
			t.Errorf("event %d: path %q, requested_by %q", i, opa.Path, opa.RequestedBy)
		case !opa.Timestamp.Equal(when):
			t.Errorf("event %d: timestamp %s, want %s", i, opa.Timestamp, rec.Time)
		case opa.Labels["app"] != "fsbroker" || opa.Labels["version"] != "v9.9.9" || opa.Labels["id"] != decs[i].Writer:
			t.Errorf("event %d: labels %v", i, opa.Labels)
		case opa.Bundles[OPABundleName].Revision != "rev-9":
			t.Errorf("event %d: bundles %v", i, opa.Bundles)
		case opa.Metrics["timer_rego_query_eval_ns"] != float64(rec.LatencyUs*1000):
			t.Errorf("event %d: metrics %v, want %d ns", i, opa.Metrics, rec.LatencyUs*1000)
		}
		input := (*opa.Input).(map[string]any)
		result := (*opa.Result).(map[string]any)
		if input["method"] != rec.Method || input["operation"] != rec.Operation ||
			input["server"].(map[string]any)["id"] != "notes" || input["session"].(map[string]any)["id"] != "s1" ||
			!reflect.DeepEqual(input["paths"], []any{rec.Paths[0]}) {
			t.Errorf("event %d: input %v", i, input)
		}
		if result["allow"] != *rec.Allow || result["code"] != rec.Code {
			t.Errorf("event %d: result %v", i, result)
		}
		audit := opa.Custom["audit"].(map[string]any)
		if audit["segment"] != decs[i].Segment || audit["seq"] != float64(rec.Seq) {
			t.Errorf("event %d: custom.audit %v, want segment %s seq %d", i, audit, decs[i].Segment, rec.Seq)
		}
	}
	if out := evs[0].Custom.Outcome; out == nil || out.Outcome != "ok" || out.Bytes != 5 || out.DurationUs != 300 {
		t.Errorf("d1's outcome was not joined: %+v", out)
	}
	if evs[1].Custom.Outcome != nil || !slices.Equal(evs[1].Result.Reasons, []string{"outside the roots"}) {
		t.Errorf("d2: outcome %+v, reasons %v", evs[1].Custom.Outcome, evs[1].Result.Reasons)
	}

	denied := exportAll(t, dir, OPAOptions{Filter: Filter{Decision: "deny"}})
	if len(denied) != 1 || denied[0].DecisionID != "d2" {
		t.Errorf("export of denials: %v", denied)
	}
	// The filter selects decisions; their outcomes are joined all the same.
	writes := exportAll(t, dir, OPAOptions{Filter: Filter{Method: "files/write", Kind: KindOutcome}})
	if len(writes) != 1 || writes[0].Custom.Outcome == nil {
		t.Errorf("export of writes: %+v", writes)
	}
}

// TestExportOPAOutcomeWindow: an outcome is joined when it comes within the window, and the
// events keep the order of the decisions whichever outcome comes first.
func TestExportOPAOutcomeWindow(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "s.jsonl")
	dec := func(seq uint64, s int, id string) Record {
		return Record{Seq: seq, Time: at(s), Kind: KindDecision, DecisionID: id, Allow: Bool(true), Method: "files/read"}
	}
	out := func(seq uint64, s int, id string) Record {
		return Record{Seq: seq, Time: at(s), Kind: KindOutcome, DecisionID: id, Outcome: "ok"}
	}
	appendRecords(t, seg,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "s"},
		dec(1, 1, "slow"),
		dec(2, 2, "fast"),
		out(3, 3, "fast"),
		Record{Seq: 4, Time: at(100), Kind: KindSessionEnd},
		out(5, 101, "slow"),
	)
	evs := exportAll(t, dir, OPAOptions{OutcomeWindow: 60 * time.Second})
	if len(evs) != 2 || evs[0].DecisionID != "slow" || evs[1].DecisionID != "fast" {
		t.Fatalf("events %+v: want slow then fast", evs)
	}
	if evs[0].Custom.Outcome != nil {
		t.Errorf("an outcome 100 s after its decision was joined with a 60 s window")
	}
	if evs[1].Custom.Outcome == nil {
		t.Errorf("an outcome 1 s after its decision was not joined")
	}
	evs = exportAll(t, dir, OPAOptions{})
	if len(evs) != 2 || evs[0].Custom.Outcome == nil || evs[0].Custom.Outcome.Time != at(101) {
		t.Errorf("with the default window the late outcome is not joined: %+v", evs)
	}
	for _, err := range ExportOPA(context.Background(), dir, OPAOptions{Filter: Filter{Decision: "maybe"}}) {
		if err == nil {
			t.Error("a bad filter exports events")
		}
	}
}
