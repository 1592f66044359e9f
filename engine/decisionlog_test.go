package engine

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// logServer is a real decision-log service: it collects the events OPA's plugin uploads
// (gzip-compressed JSON arrays POSTed to /logs).
type logServer struct {
	*httptest.Server
	mu     sync.Mutex
	events []map[string]any
}

func newLogServer(t *testing.T) *logServer {
	s := &logServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/logs" {
			http.NotFound(w, r)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch []map[string]any
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.events = append(s.events, batch...)
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *logServer) received() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.events...)
}

func TestDecisionLogUpload(t *testing.T) {
	srv := newLogServer(t)
	config := fmt.Sprintf(`{"services": {"siem": {"url": %q}}, "labels": {"fleet": "dev"},
		"decision_logs": {"service": "siem", "reporting": {"min_delay_seconds": 1, "max_delay_seconds": 1}}}`, srv.URL)
	ctx := context.Background()
	l, err := NewDecisionLogger(ctx, []byte(config), "broker-1", "v9")
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, map[string]string{"authz.rego": "package fsbroker.authz\n\ndecision := {\"allow\": false, \"code\": \"PERMISSION_DENIED\", \"reasons\": [\"no\"]}\n"})
	in := testInput(t, "write", "proj/a.txt", true)
	d, _ := e.Decide(ctx, in)
	if err := l.LogDecision(ctx, "sess-1", in, d, 42*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l.Close(closeCtx) // flushes
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.received()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := srv.received()
	if len(got) != 1 {
		t.Fatalf("received %d events, want 1", len(got))
	}
	ev := got[0]
	labels, _ := ev["labels"].(map[string]any)
	result, _ := ev["result"].(map[string]any)
	input, _ := ev["input"].(map[string]any)
	metrics, _ := ev["metrics"].(map[string]any)
	if ev["decision_id"] != "sess-1" || ev["path"] != DecisionPath || ev["revision"] != e.Revision() ||
		labels["id"] != "broker-1" || labels["fsbroker_version"] != "v9" || labels["fleet"] != "dev" ||
		result["allow"] != false || result["code"] != "PERMISSION_DENIED" || input["method"] != "files/write" ||
		metrics["timer_rego_query_eval_ns"] != float64(42000) {
		t.Errorf("event = %v", ev)
	}
}

func TestDecisionLoggerConfig(t *testing.T) {
	ctx := context.Background()
	if l, err := NewDecisionLogger(ctx, []byte(`{"services": {"a": {"url": "http://x"}}}`), "b", "v"); l != nil || err != nil {
		t.Errorf("without decision_logs: %v, %v; want nil, nil", l, err)
	}
	for name, c := range map[string]string{
		"unknown service": `{"services": {"a": {"url": "http://x"}}, "decision_logs": {"service": "b"}}`,
		"console":         `{"decision_logs": {"console": true}}`,
		"not json":        `decision_logs: {}`,
	} {
		if _, err := NewDecisionLogger(ctx, []byte(c), "b", "v"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
