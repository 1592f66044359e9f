// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package metrics_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/metrics/metricstest"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
)

// world is a broker runtime with metrics on: a pre-approved read-only root
// ro, a root ask that needs consent, and a corridor of one session.
type world struct {
	rt       *runtime.Runtime
	corridor *corridor.Corridor
	caller   corridor.Caller
	state    string
	url      string // the metrics, served by metrics.Handler over HTTP
}

func newWorld(t *testing.T, provider consent.Provider) *world {
	t.Helper()
	state, ro, ask := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, name := range map[string]string{ro: "a.txt", ask: "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := runtime.Open(context.Background(), runtime.Config{
		StateDir: state,
		Roots:    []roots.Spec{{Path: ro, Mount: "ro", Preapproved: true}, {Path: ask, Mount: "ask"}},
		Consent:  provider,
		Metrics:  true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	c := rt.NewCorridor()
	t.Cleanup(c.Close)
	srv := httptest.NewServer(metrics.Handler(rt.Metrics().Registry()))
	t.Cleanup(srv.Close)
	return &world{rt: rt, corridor: c, state: state, url: srv.URL + "/metrics",
		caller: corridor.Caller{ID: "metrics-test", Name: "metrics-test", SessionID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"}}
}

// trail returns the records of the runtime's audit trail.
func (w *world) trail(t *testing.T) []audit.Record {
	t.Helper()
	var out []audit.Record
	for r, err := range audit.Records(context.Background(), filepath.Join(w.state, "audit"), audit.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// want fails the test unless fams has name with labels at value v.
func want(t *testing.T, fams metricstest.Families, v float64, name string, labels ...string) {
	t.Helper()
	if got, ok := fams.Value(name, labels...); !ok || got != v {
		t.Errorf("%s%v = %v (present: %v), want %v", name, labels, got, ok, v)
	}
}

// TestMetricsMatchTheTrail: after allowed and refused requests of every
// kind (the policy's denial, the consent check's, a refusal before the
// policy, a front end's refusal) and a consent round, the scrape parses with
// the Prometheus text parser, its decisions by result and code are the
// trail's decision records, each decision and each append of the session's
// records was timed, nothing is in flight, and the audit guard's counts,
// the process's and the file systems' metrics are there.
func TestMetricsMatchTheTrail(t *testing.T) {
	w := newWorld(t, consent.Auto{})
	ctx := context.Background()
	c, caller := w.corridor, w.caller
	if _, err := c.Read(ctx, caller, corridor.ReadRequest{Path: "ro/a.txt", Length: -1}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write(ctx, caller, corridor.WriteRequest{Path: "ro/a.txt", Data: []byte("x"), Final: true})
	if errcode.Of(err) != errcode.PermissionDenied {
		t.Fatalf("write to a read-only root: %v", err)
	}
	if _, err := c.Read(ctx, caller, corridor.ReadRequest{Path: "ro/" + executor.TempPrefix + "x", Length: -1}); errcode.Of(err) != errcode.InvalidPath {
		t.Fatalf("a read of a reserved name: %v", err)
	}
	if _, err := c.Read(ctx, caller, corridor.ReadRequest{Path: "ask/b.txt", Length: -1}); errcode.Of(err) != errcode.PermissionDenied {
		t.Fatalf("a read without consent: %v", err)
	}
	if res, err := c.Consent(ctx, caller, corridor.ConsentRequest{Paths: []string{"ask/b.txt"}, Access: "read"}); err != nil || !res.Granted {
		t.Fatalf("consent: %+v, %v", res, err)
	}
	if _, err := c.Read(ctx, caller, corridor.ReadRequest{Path: "ask/b.txt", Length: -1}); err != nil {
		t.Fatal(err)
	}
	_ = c.Refuse(ctx, caller, "files/read", "x", "", errcode.New(errcode.InvalidParams, "params do not match the schema"))

	fams := metricstest.Scrape(t, w.url)
	recs := w.trail(t)
	got, fromTrail := fams.Decisions(), metricstest.TrailDecisions(recs)
	if !maps.Equal(got, fromTrail) || len(got) < 4 {
		t.Errorf("fsbroker_decisions_total = %v, the trail's decision records %v: want the same, of at least 4 kinds", got, fromTrail)
	}
	decided, appended := 0, 0
	for _, r := range recs {
		if r.SessionID != caller.SessionID {
			continue
		}
		appended++
		if r.Kind == audit.KindDecision && !strings.HasPrefix(r.Detail, "refused before the policy decision") {
			decided++
		}
	}
	want(t, fams, float64(decided), "fsbroker_decision_duration_seconds")
	want(t, fams, float64(appended), "fsbroker_audit_append_duration_seconds")
	want(t, fams, 0, "fsbroker_requests_in_flight")
	want(t, fams, 1, "fsbroker_consent_answers_total", "provider", "auto", "outcome", metrics.ConsentAll)
	want(t, fams, 0, "fsbroker_audit_append_failures_total")
	want(t, fams, 0, "fsbroker_audit_append_timeouts_total")
	if n, _ := fams.Value("fsbroker_audit_appends_total"); n < float64(appended) {
		t.Errorf("fsbroker_audit_appends_total = %v, want at least the session's %d records", n, appended)
	}
	for _, dir := range []string{"state", "audit"} {
		if size, ok := fams.Value("fsbroker_filesystem_size_bytes", "dir", dir); !ok || size <= 0 {
			t.Errorf("fsbroker_filesystem_size_bytes{dir=%q} = %v (present: %v), want the file system's size", dir, size, ok)
		}
		if _, ok := fams.Value("fsbroker_filesystem_avail_bytes", "dir", dir); !ok {
			t.Errorf("no fsbroker_filesystem_avail_bytes{dir=%q}", dir)
		}
	}
	if goruntime.GOOS == "linux" {
		for _, name := range []string{"fsbroker_process_cpu_seconds_total", "fsbroker_process_resident_memory_bytes", "fsbroker_process_open_fds"} {
			if v, ok := fams.Value(name); !ok || (name == "fsbroker_process_open_fds" && v < 1) {
				t.Errorf("%s = %v (present: %v)", name, v, ok)
			}
		}
	}
}

// holdingElicitor is the MCP host's side of --consent elicit (the seam
// fsbroker wrap's router implements): it tells the test that the question
// arrived, waits for the test, and then approves the question's first path.
type holdingElicitor struct {
	asked   chan struct{}
	release chan struct{}
}

func (e *holdingElicitor) ElicitForm(ctx context.Context, _ string, schema json.RawMessage) (consent.ElicitResult, error) {
	close(e.asked)
	select {
	case <-e.release:
	case <-ctx.Done():
		return consent.ElicitResult{}, ctx.Err()
	}
	var form struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &form); err != nil {
		return consent.ElicitResult{}, err
	}
	fields := slices.Sorted(maps.Keys(form.Properties))
	return consent.ElicitResult{Action: "accept", Content: map[string]json.RawMessage{fields[0]: json.RawMessage("true")}}, nil
}

// TestMetricsConsentWait: while a person is asked (elicit), the request is
// in flight; once answered, the wait is timed under its provider and the
// answer counted as approving some of the paths.
func TestMetricsConsentWait(t *testing.T) {
	w := newWorld(t, consent.NewElicit())
	host := &holdingElicitor{asked: make(chan struct{}), release: make(chan struct{})}
	ctx := consent.WithElicitor(context.Background(), host)
	done := make(chan error, 1)
	go func() {
		res, err := w.corridor.Consent(ctx, w.caller, corridor.ConsentRequest{Paths: []string{"ask/b.txt", "ro/a.txt"}, Access: "read"})
		if err == nil && len(res.Approved) != 1 {
			t.Errorf("approved %v, want one path", res.Approved)
		}
		done <- err
	}()
	<-host.asked
	fams := metricstest.Scrape(t, w.url)
	want(t, fams, 1, "fsbroker_requests_in_flight")
	if _, ok := fams.Value("fsbroker_consent_wait_duration_seconds", "provider", "elicit"); ok {
		t.Error("a consent wait was timed before it ended")
	}
	close(host.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fams = metricstest.Scrape(t, w.url)
	want(t, fams, 0, "fsbroker_requests_in_flight")
	want(t, fams, 1, "fsbroker_consent_wait_duration_seconds", "provider", "elicit")
	want(t, fams, 1, "fsbroker_consent_answers_total", "provider", "elicit", "outcome", metrics.ConsentSome)
}
