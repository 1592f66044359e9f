// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/metrics/metricstest"
	"github.com/fsbroker/fsbroker/broker/notify"
	"github.com/fsbroker/fsbroker/broker/ptytest"
	"github.com/fsbroker/fsbroker/internal/dbustest"
)

// metricsURL waits for the broker to log where it serves its metrics.
func (p *proc) metricsURL() string {
	p.t.Helper()
	return p.waitLog(regexp.MustCompile(`serving metrics: url=(http://127\.0\.0\.1:\d+/metrics)`))[1]
}

// trailRecords reads the trail under state with fsbroker audit query
// --format json.
func trailRecords(t *testing.T, state string) []audit.Record {
	t.Helper()
	out, errOut, code := runFsbroker(t, nil, "audit", "query", "--state-dir", state, "--format", "json")
	if code != 0 {
		t.Fatalf("audit query: exit status %d: %s", code, errOut)
	}
	var recs []audit.Record
	for line := range strings.Lines(out) {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit query line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestMetricsOverStdio: fsbroker stdio --metrics 127.0.0.1:0 serves its
// metrics over HTTP; after allowed and denied requests of a real session
// they parse with the Prometheus text parser, and the decision counter
// holds exactly the decisions of the audit trail, by result and code.
func TestMetricsOverStdio(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p := startBroker(t, "", "stdio", "--root", w.proj, "--root", w.rw+":rw", "--state-dir", w.state,
		"--metrics", "127.0.0.1:0", "--notify=false")
	url := p.metricsURL()
	p.handshake("2025-11-25")
	p.listRoots(1)
	csRead(t, p, 2, "proj/a.txt", "alpha")
	csRefused(t, p, 3, "files/write", map[string]any{"path": "proj/a.txt", "content": "no"}, "PERMISSION_DENIED")
	csRefused(t, p, 4, "files/read", map[string]any{"path": "rw/.env"}, "PERMISSION_DENIED")
	csRefused(t, p, 5, "files/read", map[string]any{"path": "proj/../../etc/passwd"}, "PERMISSION_DENIED")
	csRefused(t, p, 6, "files/read", map[string]any{"path": 7}, "INVALID_PARAMS")
	csResult(t, p, 7, "files/write", map[string]any{"path": "rw/new.txt", "content": "new"})
	csRefused(t, p, 8, "files/read", map[string]any{"path": "proj/missing.txt"}, "FILE_NOT_FOUND")

	fams := metricstest.Scrape(t, url)
	got, fromTrail := fams.Decisions(), metricstest.TrailDecisions(trailRecords(t, w.state))
	if !maps.Equal(got, fromTrail) {
		t.Errorf("fsbroker_decisions_total = %v, the trail's decision records %v: want the same", got, fromTrail)
	}
	if got[metricstest.Decision{Result: metrics.ResultAllow, Code: metrics.CodeNone}] < 4 ||
		got[metricstest.Decision{Result: metrics.ResultDeny, Code: "INVALID_PARAMS"}] != 1 {
		t.Errorf("fsbroker_decisions_total = %v: want the session's allowed reads and writes and its one invalid request", got)
	}
	if v, ok := fams.Value("fsbroker_requests_in_flight"); !ok || v != 0 {
		t.Errorf("fsbroker_requests_in_flight = %v (present: %v), want 0", v, ok)
	}
	for _, name := range []string{"fsbroker_decision_duration_seconds", "fsbroker_audit_append_duration_seconds",
		"fsbroker_process_open_fds", "fsbroker_process_resident_memory_bytes"} {
		if v, ok := fams.Value(name); !ok || v == 0 {
			t.Errorf("%s = %v (present: %v)", name, v, ok)
		}
	}
	if v, ok := fams.Value("fsbroker_filesystem_avail_bytes", "dir", "audit", "path", w.trail()); !ok || v <= 0 {
		t.Errorf("fsbroker_filesystem_avail_bytes of the audit directory = %v (present: %v)", v, ok)
	}
	if v, ok := fams.Value("fsbroker_audit_append_failures_total"); !ok || v != 0 {
		t.Errorf("fsbroker_audit_append_failures_total = %v (present: %v), want 0", v, ok)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// TestMetricsLoopbackOnly attacks the metrics' address: a --metrics address
// that is not loopback (every interface, a public or private address, a
// host name to look up) is refused at start with exit status 2, before
// anything listens; and a request whose Host is not loopback (a page whose
// name a DNS rebinding pointed at 127.0.0.1) gets 421 and no metrics.
func TestMetricsLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.10:9464", "metrics.example:9464", "127.0.0.1", "127.0.0.1:http"} {
		state := t.TempDir()
		_, errOut, code := runFsbroker(t, nil, "stdio", "--root", t.TempDir(), "--state-dir", state, "--metrics", addr)
		if code != 2 || !strings.Contains(errOut, "--metrics") || strings.Contains(errOut, "serving metrics") {
			t.Errorf("--metrics %s: exit status %d, stderr %q: want 2, naming --metrics, nothing served", addr, code, errOut)
		}
		if addr != "127.0.0.1" && addr != "127.0.0.1:http" && !strings.Contains(errOut, "loopback only") {
			t.Errorf("--metrics %s: stderr %q does not say the metrics are served on loopback only", addr, errOut)
		}
	}

	p := startBroker(t, "", "stdio", "--root", t.TempDir(), "--state-dir", t.TempDir(), "--metrics", "127.0.0.1:0", "--notify=false")
	url := p.metricsURL()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET /metrics with Host %s: %s, want 421", req.Host, resp.Status)
	}
	metricstest.Scrape(t, url) // and with its own Host, it answers
	p.closeStdin()
	p.waitExit()
}

// TestNotifyDesktop: a broker whose environment names a session bus (one
// the test starts, with a notification service of the test's) shows a
// notification when the consent prompt waits for the person, closes it
// once they answered on the terminal, and shows one when the server starts
// using files: once per session, not at each request.
func TestNotifyDesktop(t *testing.T) {
	t.Parallel()
	addr := dbustest.StartBus(t)
	svc := dbustest.ServeNotifications(t, addr)
	w := newConsentWorld(t)
	cmd := exec.Command(brokerBin, w.args("prompt")...)
	term := ptytest.Attach(t, cmd)
	p := startProcEnv(t, cmd, notify.BusAddressEnv+"="+addr)
	term.Started()
	screen := ttyScreen{term}
	p.handshake("2025-11-25")

	p.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "files/consent", "params": map[string]any{
		"message": "I index your notes.", "requestedPaths": []string{"proj/a.txt"}}})
	screen.waitFor(t, askAll, 1)
	asked := svc.Await(t, "the consent notification", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "Notify" && strings.Contains(c.Summary, "asks for file access")
	})
	if want := `"cli-test-peer" (unverified name) asks for read access to proj/a.txt. Answer on the terminal`; !strings.Contains(asked.Body, want) {
		t.Errorf("consent notification body %q, want %q", asked.Body, want)
	}
	if used := svc.Calls(); len(used) != 1 {
		t.Errorf("before any file request the service got %+v", used)
	}
	screen.typeLine(t, "y")
	if r := p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("1") }); r.Error != nil {
		t.Fatalf("files/consent: %s", r.Raw)
	}
	svc.Await(t, "the consent notification closed", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "CloseNotification" && c.ID == asked.ID
	})

	csRead(t, p, 2, "proj/a.txt", "alpha")
	used := svc.Await(t, "the files-used notification", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "Notify" && strings.Contains(c.Summary, "is using files")
	})
	if want := `"cli-test-peer" (unverified name) started using files: read in root "proj"`; !strings.Contains(used.Body, want) {
		t.Errorf("files-used notification body %q, want %q", used.Body, want)
	}
	csRead(t, p, 3, "proj/a.txt", "alpha")
	// A second question: its notification comes after anything the second
	// read queued (one sender, in order).
	p.Send(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "files/consent", "params": map[string]any{
		"message": "And this one.", "requestedPaths": []string{"proj/b.txt"}}})
	screen.waitFor(t, askAll, 2)
	svc.Await(t, "the second consent notification", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "Notify" && strings.Contains(c.Body, "proj/b.txt")
	})
	screen.typeLine(t, "n")
	p.Await("the reply to the second files/consent", func(m *message) bool { return m.IsReplyTo("4") })
	filesUsed := 0
	for _, c := range svc.Calls() {
		if c.Method == "Notify" && strings.Contains(c.Summary, "is using files") {
			filesUsed++
		}
	}
	if filesUsed != 1 {
		t.Errorf("the service got %d files-used notifications, want 1 for the session: %+v", filesUsed, svc.Calls())
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// TestConsoleMetricsMatchTheTrail: fsbroker console serves GET /metrics
// (docs/protocol.md section 11) to a scraper that sends its token as a
// bearer token, and to nobody else; its decision counter holds exactly the
// decision records of the trail it follows, written by a broker process
// of its own, by result and code.
func TestConsoleMetricsMatchTheTrail(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p := startBroker(t, "", "stdio", "--root", w.proj, "--root", w.rw+":rw", "--state-dir", w.state, "--notify=false")
	p.handshake("2025-11-25")
	csRead(t, p, 1, "proj/a.txt", "alpha")
	csRefused(t, p, 2, "files/read", map[string]any{"path": "rw/.env"}, "PERMISSION_DENIED")
	csRefused(t, p, 3, "files/read", map[string]any{"path": 7}, "INVALID_PARAMS")
	csResult(t, p, 4, "files/write", map[string]any{"path": "rw/new.txt", "content": "new"})

	c := startConsole(t, "--state-dir", w.state)
	token := c.url[strings.Index(c.url, "?token=")+len("?token="):]
	scrape := func(auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, c.base+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
		if code, body := scrape(auth); code != http.StatusUnauthorized || strings.Contains(body, "fsbroker_decisions_total") {
			t.Errorf("GET /metrics with Authorization %q: %d, want 401 and no metrics", auth, code)
		}
	}
	fromTrail := metricstest.TrailDecisions(trailRecords(t, w.state))
	var got map[metricstest.Decision]float64
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, body := scrape("Bearer " + token)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics with the token: %d\n%s", code, body)
		}
		if got = metricstest.Parse(t, body).Decisions(); maps.Equal(got, fromTrail) {
			break
		}
	}
	if !maps.Equal(got, fromTrail) {
		t.Errorf("the console's fsbroker_decisions_total = %v, the trail's decision records %v: want the same", got, fromTrail)
	}
	if got[metricstest.Decision{Result: metrics.ResultDeny, Code: "INVALID_PARAMS"}] != 1 {
		t.Errorf("fsbroker_decisions_total = %v: want the session's one invalid request", got)
	}
}

// TestMetricsAndNotifyFromTheConfigFile: the config file's metrics and
// notify keys are --metrics and --notify: a metrics address that is not
// loopback is refused there too (exit status 2, nothing served); a
// loopback one is served; notify: false sends no notification, and the
// flag, when given, wins over the file.
func TestMetricsAndNotifyFromTheConfigFile(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	config := func(metricsAddr string) string {
		path := filepath.Join(t.TempDir(), "fsbroker.yaml")
		writeFile(t, path, fmt.Sprintf("roots:\n  - path: %s\n    consent: preapproved\nstateDir: %s\nmetrics: %q\nnotify: false\n",
			w.proj, w.state, metricsAddr))
		return path
	}
	for _, addr := range []string{"0.0.0.0:9464", "192.0.2.10:9464", "metrics.example:9464"} {
		_, errOut, code := runFsbroker(t, nil, "stdio", "--config", config(addr))
		if code != 2 || !strings.Contains(errOut, "loopback only") || strings.Contains(errOut, "serving metrics") {
			t.Errorf("metrics: %s in the config file: exit status %d, stderr %q: want 2, loopback only, nothing served", addr, code, errOut)
		}
	}

	addr := dbustest.StartBus(t)
	svc := dbustest.ServeNotifications(t, addr)
	quiet := startProcEnv(t, exec.Command(brokerBin, "stdio", "--config", config("127.0.0.1:0")), notify.BusAddressEnv+"="+addr)
	metricstest.Scrape(t, quiet.metricsURL())
	quiet.handshake("2025-11-25")
	csRead(t, quiet, 1, "proj/a.txt", "alpha")
	quiet.closeStdin()
	if code := quiet.waitExit(); code != 0 {
		t.Errorf("exit status %d", code)
	}

	// The flag wins over the file: this broker notifies, and the service
	// gets its notification alone (the first broker, gone now, sent none).
	loud := startProcEnv(t, exec.Command(brokerBin, "stdio", "--config", config("127.0.0.1:0"), "--notify"), notify.BusAddressEnv+"="+addr)
	loud.handshake("2025-11-25")
	csRead(t, loud, 1, "proj/a.txt", "alpha")
	svc.Await(t, "the files-used notification of the broker with --notify", waitLimit, func(c dbustest.Call) bool {
		return c.Method == "Notify" && strings.Contains(c.Summary, "is using files")
	})
	if calls := svc.Calls(); len(calls) != 1 {
		t.Errorf("the service got %d calls, want the one of --notify (notify: false sends none): %+v", len(calls), calls)
	}
	loud.closeStdin()
	loud.waitExit()
}
