// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package exampleserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds each wait for something that should happen promptly.
const waitLimit = 30 * time.Second

// httpClient bounds each request, so that a server that never answers fails
// the test instead of hanging it.
var httpClient = &http.Client{Timeout: waitLimit}

// reportWriter collects Run's report and hands its lines to the test.
type reportWriter struct {
	mu    sync.Mutex
	all   strings.Builder
	buf   bytes.Buffer // the lines not handed over yet
	lines chan string
}

func (w *reportWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // an incomplete line waits for the rest
			return len(p), nil
		}
		select {
		case w.lines <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
}

// client is the test's side of the Streamable HTTP session.
type client struct {
	t       *testing.T
	url     string
	session string
}

// post sends one message with the given headers and returns the response's
// status and body.
func (c *client) post(body string, header map[string]string) (int, http.Header, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set(headerSessionID, c.session)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The Streamable HTTP side of the scripted server, driven by hand over a
// real loopback connection: initialize gets a JSON reply and a session id;
// requests without the id, with another id, with another protocol version,
// batches and foreign origins are refused with the statuses the transport
// prescribes; notifications and replies get 202; a ping POSTed gets its
// reply; the server's requests come on the GET event stream; DELETE ends the
// session, and Run returns.
func TestExampleServerHTTPTransport(t *testing.T) {
	t.Parallel()
	report := &reportWriter{lines: make(chan string, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Config{Script: DemoScript, HTTPAddr: "127.0.0.1:0", Report: report})
	}()
	var url string
	select {
	case line := <-report.lines:
		m := regexp.MustCompile(`^listening on (http://\S+)$`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("first report line %q, want listening on URL", line)
		}
		url = m[1]
	case <-time.After(waitLimit):
		t.Fatal("the server did not say where it listens")
	}
	c := &client{t: t, url: url}

	if code, _, _ := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusBadRequest {
		t.Errorf("a message without a session id: %d, want 400", code)
	}
	code, header, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`, nil)
	c.session = header.Get(headerSessionID)
	if code != http.StatusOK || c.session == "" || header.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"protocolVersion":"2025-06-18"`) || !strings.Contains(body, `"name":"`+ServerName+`"`) {
		t.Fatalf("initialize: %d, session %q, %s, want 200 JSON with a session id and version 2025-06-18", code, c.session, body)
	}
	version := map[string]string{headerProtocolVersion: "2025-06-18"}
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		want   int
	}{
		{"a second initialize", `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}`, nil, http.StatusBadRequest},
		{"another session id", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{headerSessionID: "nope"}, http.StatusNotFound},
		{"another protocol version", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{headerProtocolVersion: "2025-03-26"}, http.StatusBadRequest},
		{"a batch", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, version, http.StatusBadRequest},
		{"a foreign origin", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		if code, _, body := c.post(tc.body, tc.header); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}

	// The event stream, then initialized: the script's first request comes on it.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, c.session)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %s %q, want 200 text/event-stream", resp.Status, resp.Header.Get("Content-Type"))
	}
	if code, _, _ := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, version); code != http.StatusAccepted {
		t.Errorf("notifications/initialized: %d, want 202", code)
	}
	events := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
		close(events)
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case data, ok := <-events:
			if !ok {
				t.Fatal("the event stream ended")
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			return m
		case <-time.After(waitLimit):
			t.Fatal("no event from the server")
			return nil
		}
	}
	if m := next(); m["method"] != "roots/list" || m["id"] != float64(1) {
		t.Fatalf("first event %v, want the request roots/list with id 1", m)
	}
	if code, _, body := c.post(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`, version); code != http.StatusOK ||
		!strings.Contains(body, `"id":"p1"`) || !strings.Contains(body, `"result":{}`) {
		t.Errorf("ping: %d %s, want 200 and the reply {}", code, body)
	}
	if code, _, _ := c.post(`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`, version); code != http.StatusAccepted {
		t.Errorf("the reply to roots/list: %d, want 202", code)
	}
	if m := next(); m["method"] != "files/read" || m["id"] != float64(2) {
		t.Fatalf("second event %v, want the request files/read with id 2", m)
	}

	req, _ = http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set(headerSessionID, c.session)
	del, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if del.StatusCode != http.StatusOK {
		t.Errorf("DELETE: %s, want 200", del.Status)
	}
	select {
	case err := <-ran:
		if !errors.Is(err, errSessionEnded) {
			t.Errorf("Run returned %v, want the session's end (mid-script)", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return once the session was deleted")
	}
	report.mu.Lock()
	defer report.mu.Unlock()
	if t.Failed() {
		t.Logf("report:\n%s", report.all.String())
	}
}
