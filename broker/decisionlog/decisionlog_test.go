// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/decisionlog/decisionlogtest"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// fixture is a state directory with its audit directory, as brokers share them, and a
// decision-log service.
type fixture struct {
	state, dir string
	srv        *decisionlogtest.Service
}

// newFixture makes a fixture whose service is down or up.
func newFixture(t *testing.T, down bool) *fixture {
	state := t.TempDir()
	f := &fixture{state: state, dir: filepath.Join(state, "audit"), srv: decisionlogtest.New(t)}
	f.srv.SetDown(down)
	return f
}

// writer opens a broker process's audit writer on the fixture's trail.
func (f *fixture) writer(t *testing.T, opts ...audit.Option) *audit.Writer {
	t.Helper()
	w, err := audit.Open(f.dir, append([]audit.Option{audit.WithStateDir(f.state)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// immediate reports as soon as events wait, and retries at most a second after a failure.
var immediate = map[string]any{"trigger": "immediate", "min_delay_seconds": 1, "max_delay_seconds": 1}

// uploader starts an uploader of the fixture's trail for trail (nil: none of its own), with the
// labels {fleet: dev} and the given reporting options, logging to log (nil: nowhere).
func (f *fixture) uploader(t *testing.T, trail *audit.Writer, reporting map[string]any, log *testlog.Lines) *Uploader {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"services":      map[string]any{"siem": map[string]any{"url": f.srv.URL}},
		"labels":        map[string]any{"fleet": "dev"},
		"decision_logs": map[string]any{"service": "siem", "reporting": reporting},
	})
	if err != nil {
		t.Fatal(err)
	}
	if log == nil {
		log = &testlog.Lines{}
	}
	u, err := New(Options{Config: cfg, Trail: trail, AuditDir: f.dir, StateDir: f.state, Version: "v-test",
		Logger: log.Logger(), PollInterval: 20 * time.Millisecond, ScanInterval: 100 * time.Millisecond})
	if err != nil || u == nil {
		t.Fatalf("New = %v, %v", u, err)
	}
	return u
}

// broker starts what a broker process runs: its audit writer and its uploader.
func (f *fixture) broker(t *testing.T, log *testlog.Lines, opts ...audit.Option) (*audit.Writer, *Uploader) {
	t.Helper()
	w := f.writer(t, opts...)
	return w, f.uploader(t, w, immediate, log)
}

// stop stops a broker as it stops: the trail closed, then the uploader given d to flush.
func stop(t *testing.T, trail *audit.Writer, u *Uploader, d time.Duration) {
	t.Helper()
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	u.Close(ctx)
}

// awaitEvents waits until the service holds n events, and returns them by decision id.
func (f *fixture) awaitEvents(t *testing.T, n int) map[string]decisionlogtest.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		events := f.srv.Events(t)
		if len(events) >= n {
			return decisionlogtest.ByID(t, events)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service holds %d events after 20 s, want %d", len(events), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// appendAll appends records to w.
func appendAll(t *testing.T, w *audit.Writer, recs ...audit.Record) {
	t.Helper()
	for _, r := range recs {
		if _, err := w.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// denials appends n decision records of refused requests, with ids prefix0, prefix1, ...
func denials(t *testing.T, w *audit.Writer, prefix string, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		appendAll(t, w, audit.Record{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: id,
			Method: "files/read", Operation: "read", Paths: []string{"/work/" + id}, Allow: audit.Bool(false),
			Code: "PERMISSION_DENIED", Reasons: []string{"no consent grant covers the path"}})
	}
}

// allowed is the decision record of an allowed request, and its outcome.
func allowed(id string) []audit.Record {
	return []audit.Record{
		{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: id, Method: "files/write", Operation: "write",
			Paths: []string{"/work/" + id}, Allow: audit.Bool(true), PolicyRevision: "rev-7", LatencyUs: 30},
		{Kind: audit.KindOutcome, Server: "notes", SessionID: "s1", DecisionID: id, Outcome: "ok", Bytes: 5, DurationUs: 70},
	}
}

// TestUploadEveryDecision: every decision record reaches the service (refusals before the
// policy, consent refusals, listings), and consent rounds; each event is OPA's EventV1 (a
// bundles map, no top-level revision) with the mapping of audit export --format opa.
func TestUploadEveryDecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	trail, u := f.broker(t, nil)
	escape := audit.Record{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: "s1-2", Method: "files/read",
		Allow: audit.Bool(false), Code: "INVALID_PATH", Detail: `refused before the policy decision: the path escapes its root; path "proj/../../etc/passwd"`}
	consentRefused := audit.Record{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: "s1-3", Method: "files/read",
		Operation: "read", Paths: []string{"/work/x"}, Allow: audit.Bool(false), Code: "PERMISSION_DENIED",
		Reasons: []string{"no consent grant covers the path"}}
	list := []audit.Record{
		{Kind: audit.KindDecision, Server: "notes", SessionID: "s1", DecisionID: "s1-4", Method: "files/list", Operation: "list",
			Paths: []string{"/work"}, Allow: audit.Bool(true), PolicyRevision: "rev-7"},
		{Kind: audit.KindOutcome, Server: "notes", SessionID: "s1", DecisionID: "s1-4", Outcome: "ok"},
	}
	consent := audit.Record{Kind: audit.KindConsent, Server: "notes", SessionID: "s1", Method: "files/consent", Operation: "read",
		Paths: []string{"/work/docs"}, Allow: audit.Bool(true), Detail: "read access; 2 requested, 1 approvable, 1 approved by auto"}
	appendAll(t, trail, audit.Record{Kind: audit.KindSessionStart, Server: "notes", SessionID: "s1", Transport: "stdio"})
	appendAll(t, trail, allowed("s1-1")...)
	appendAll(t, trail, escape, consentRefused)
	appendAll(t, trail, list...)
	appendAll(t, trail, consent,
		audit.Record{Kind: audit.KindGrant, Server: "notes", SessionID: "s1", Method: "files/consent", Operation: "read",
			Paths: []string{"/work/docs"}, Allow: audit.Bool(true), Detail: "granted g1 by auto"},
		audit.Record{Kind: audit.KindSessionEnd, Server: "notes", SessionID: "s1"})
	got := f.awaitEvents(t, 5)
	segment := trimSegment(trail.Segment())
	stop(t, trail, u, 5*time.Second)
	if len(got) != 5 || len(f.srv.Events(t)) != 5 {
		t.Fatalf("uploaded %v, want the 4 decisions and the consent round, once each", got)
	}

	// The same mapping as audit export --format opa: each decision event is the exported one,
	// with the configuration's labels added, and a refusal's detail as its reason.
	exported := map[string]audit.OPAEvent{}
	for ev, err := range audit.ExportOPA(context.Background(), f.dir, audit.OPAOptions{Version: "v-test"}) {
		if err != nil {
			t.Fatal(err)
		}
		ev.Labels["fleet"] = "dev"
		if ev.DecisionID == escape.DecisionID {
			ev.Result.Reasons = []string{escape.Detail}
		}
		exported[ev.DecisionID] = ev
	}
	for _, id := range []string{"s1-1", "s1-2", "s1-3", "s1-4"} {
		var up audit.OPAEvent
		if err := json.Unmarshal(got[id].Raw, &up); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(up, exported[id]) {
			t.Errorf("%s: uploaded %+v\nexported %+v", id, up, exported[id])
		}
	}
	if out, _ := got["s1-1"].Member("custom", "outcome").(map[string]any); out["outcome"] != "ok" {
		t.Errorf("the allowed write's outcome is not joined: %s", got["s1-1"].Raw)
	}
	if r := got["s1-2"].Member("result", "reasons"); !reflect.DeepEqual(r, []any{escape.Detail}) {
		t.Errorf("the refusal before the policy carries reasons %v, want its detail", r)
	}
	var consentSeq uint64
	for r, err := range audit.Records(context.Background(), f.dir, audit.Filter{Kind: audit.KindConsent}) {
		if err != nil {
			t.Fatal(err)
		}
		consentSeq = r.Seq
	}
	cid := audit.ConsentDecisionID(segment, consentSeq)
	c, ok := got[cid]
	if !ok || c.Member("", "path") != audit.OPAConsentPath || c.Member("input", "method") != "files/consent" ||
		c.Member("result", "allow") != true || !reflect.DeepEqual(c.Member("result", "reasons"), []any{consent.Detail}) {
		t.Errorf("consent event %s: %s (events %v)", cid, c.Raw, got)
	}

	// OPA's own event type reads them: the bundles map, the decision id, labels, time.
	var ev logs.EventV1
	if err := json.Unmarshal(got["s1-1"].Raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.DecisionID != "s1-1" || ev.Bundles[audit.OPABundleName].Revision != "rev-7" || ev.Revision != "" ||
		ev.Path != audit.OPADecisionPath || ev.Labels["id"] != segment || ev.Labels["version"] != "v-test" ||
		ev.Labels["fleet"] != "dev" || ev.Timestamp.IsZero() || ev.Metrics["timer_rego_query_eval_ns"] != float64(30000) {
		t.Errorf("as OPA's EventV1: %+v", ev)
	}
	if _, old := got["s1-1"].Fields["revision"]; old {
		t.Errorf("event carries OPA's deprecated top-level revision: %s", got["s1-1"].Raw)
	}
	if s := u.Stats(); s.Delivered != 5 || s.Failures != 0 || s.Queued != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestCollectorOutage: while the service is down nothing is lost and the failure is logged
// once at error level and counted; when it is back every event arrives, once.
func TestCollectorOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	log := &testlog.Lines{}
	trail, u := f.broker(t, log)
	denials(t, trail, "d", 10)
	for u.Stats().Failures < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	s := u.Stats()
	if s.Failures < 3 || f.srv.Requests() < 3 || !strings.Contains(s.LastError, "503") || s.LastErrorTime.IsZero() || s.Queued != 10 {
		t.Errorf("Stats during the outage = %+v", s)
	}
	if n := log.Count("[ERROR]", "decision-log upload failed"); n != 1 {
		t.Errorf("%d error lines for one outage, want 1:\n%s", n, log)
	}
	f.srv.SetDown(false)
	got := f.awaitEvents(t, 10)
	stop(t, trail, u, 5*time.Second)
	if all := f.srv.Events(t); len(all) != 10 || len(got) != 10 {
		t.Errorf("received %d events, want each of the 10 once", len(all))
	}
	if log.Count("[INFO]", "decision-log upload recovered", "failed_attempts=") != 1 {
		t.Errorf("the recovery is not logged once:\n%s", log)
	}
}

// TestStoppedWhileCollectorDown: a broker stopped while the service is down says how many
// events it leaves; the next broker on the state directory sends them, across the segments
// of the stopped writer, with each allowed decision's outcome joined even when a rotation put
// it in the next segment.
func TestStoppedWhileCollectorDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	log := &testlog.Lines{}
	first, u := f.broker(t, log, audit.WithMaxSegmentBytes(4096))
	denials(t, first, "early", 10)
	f.awaitEvents(t, 10) // delivered: never sent again
	f.srv.SetDown(true)
	const n = 30
	for i := range n {
		appendAll(t, first, allowed(fmt.Sprintf("a%d", i))...)
	}
	stop(t, first, u, 500*time.Millisecond)
	if log.Count("[WARN]", fmt.Sprintf("decision log: %d events not delivered", n)) != 1 {
		t.Errorf("the stop does not say %d events are left:\n%s", n, log)
	}
	if len(f.srv.Events(t)) != 10 {
		t.Fatal("events arrived while the service was down")
	}
	if segs, _ := filepath.Glob(filepath.Join(f.dir, "*.jsonl")); len(segs) < 3 {
		t.Fatalf("%d segments, want rotations", len(segs))
	}

	f.srv.SetDown(false)
	second, u2 := f.broker(t, nil)
	got := f.awaitEvents(t, 10+n)
	stop(t, second, u2, 5*time.Second)
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		if out, _ := got[id].Member("custom", "outcome").(map[string]any); out["outcome"] != "ok" {
			t.Errorf("%s: %s; want it with its outcome", id, got[id].Raw)
		}
	}
	if all := f.srv.Events(t); len(all) != 10+n {
		t.Errorf("received %d events, want %d, each once", len(all), 10+n)
	}
}

// TestSharedStateDir: brokers sharing a state directory each deliver their own writer's
// decisions, and exactly one of them those of a broker that stopped.
func TestSharedStateDir(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	stopped, su := f.broker(t, nil)
	denials(t, stopped, "old", 20)
	stop(t, stopped, su, 100*time.Millisecond)
	f.srv.SetDown(false)

	var trails []*audit.Writer
	var ups []*Uploader
	for b := range 3 {
		trail, u := f.broker(t, nil)
		trails, ups = append(trails, trail), append(ups, u)
		denials(t, trail, fmt.Sprintf("b%d-", b), 5)
	}
	got := f.awaitEvents(t, 35)
	id1 := trimSegment(trails[1].Segment())
	for i, trail := range trails {
		stop(t, trail, ups[i], 5*time.Second)
	}
	if all := f.srv.Events(t); len(all) != 35 || len(got) != 35 {
		t.Errorf("received %d events (%d distinct), want 35, each once", len(all), len(got))
	}
	if got["b1-0"].Member("labels", "id") != id1 {
		t.Errorf("labels.id of broker 1's decision = %v, want %s", got["b1-0"].Member("labels", "id"), id1)
	}
}

// TestBoundedQueue: while the service is down, at most buffer_size_limit_events events wait in
// memory; the rest stays in the trail and arrives later.
func TestBoundedQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	trail := f.writer(t)
	u := f.uploader(t, trail, map[string]any{"trigger": "immediate", "min_delay_seconds": 1, "max_delay_seconds": 1,
		"buffer_type": "event", "buffer_size_limit_events": 5}, nil)
	denials(t, trail, "d", 200)
	for range 50 {
		if q := u.Stats().Queued; q > 5 {
			t.Fatalf("%d events queued, want at most 5", q)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.srv.SetDown(false)
	got := f.awaitEvents(t, 200)
	stop(t, trail, u, 5*time.Second)
	if len(got) != 200 {
		t.Errorf("%d distinct events, want 200", len(got))
	}
}

// TestSegmentRemovedBeforeDelivery: a segment that retention (or anyone) removes before its
// events were delivered is reported at error level, not passed over in silence: one whose
// delivery had begun, and one no broker had claimed yet.
func TestSegmentRemovedBeforeDelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	trail, u := f.broker(t, nil)
	denials(t, trail, "d", 1)
	begun := trail.Segment()
	stop(t, trail, u, 100*time.Millisecond)
	if err := os.Remove(begun); err != nil {
		t.Fatal(err)
	}

	log := &testlog.Lines{}
	next, u2 := f.broker(t, log)
	// A writer with no uploader of its own: its chain is delivered once it stops.
	other := f.writer(t, audit.WithMaxSegmentBytes(4096))
	unclaimed := other.Segment()
	denials(t, other, "o", 40)
	if err := os.Remove(unclaimed); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for log.Count("[ERROR]", "removed", trimSegment(unclaimed)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop(t, next, u2, 100*time.Millisecond)
	for _, seg := range []string{begun, unclaimed} {
		if n := log.Count("[ERROR]", "removed", trimSegment(seg)); n != 1 {
			t.Errorf("the lost segment %s is reported %d times, want once:\n%s", seg, n, log)
		}
	}
}

// TestConfig: what the uploader refuses, and no uploader without decision_logs.
func TestConfig(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	if u, err := New(Options{Config: []byte(`{"services": {"a": {"url": "http://x"}}}`), AuditDir: state, StateDir: state}); u != nil || err != nil {
		t.Errorf("without decision_logs: %v, %v; want nil, nil", u, err)
	}
	for name, c := range map[string]string{
		"unknown service": `{"services": {"a": {"url": "http://x"}}, "decision_logs": {"service": "b"}}`,
		"no service":      `{"decision_logs": {}}`,
		"console":         `{"decision_logs": {"console": true}}`,
		"manual":          `{"services": {"a": {"url": "http://x"}}, "decision_logs": {"reporting": {"trigger": "manual"}}}`,
		"mask":            `{"services": {"a": {"url": "http://x"}}, "decision_logs": {"mask_decision": "/acme/mask"}}`,
		"not json":        `decision_logs: {}`,
	} {
		if _, err := New(Options{Config: []byte(c), AuditDir: state, StateDir: state}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestBatchSizeLimit: a batch stays within upload_size_limit_bytes, compressed.
func TestBatchSizeLimit(t *testing.T) {
	t.Parallel()
	u := &Uploader{cfg: &config{uploadLimit: 2048}}
	var items []item
	for i := range 500 {
		ev, _ := json.Marshal(map[string]any{"decision_id": fmt.Sprintf("d%d", i), "noise": fmt.Sprintf("%x", bytes.Repeat([]byte{byte(i)}, 40))})
		items = append(items, item{segment: "s", seq: uint64(i + 1), event: ev})
	}
	n, payload, err := u.batch(items)
	if err != nil || n == 0 || n == len(items) || len(payload) > 2048 {
		t.Fatalf("batch = %d items, %d bytes, %v; want some of them within 2048 bytes", n, len(payload), err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	var evs []map[string]any
	if err := json.NewDecoder(zr).Decode(&evs); err != nil || len(evs) != n || evs[n-1]["decision_id"] != fmt.Sprintf("d%d", n-1) {
		t.Errorf("payload holds %d events (%v), want the first %d", len(evs), err, n)
	}
}
