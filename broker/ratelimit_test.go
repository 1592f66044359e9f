// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
)

func TestLimiterAdmit(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(10, 2, 0)
	l.clock = func() time.Time { return now }
	for i := range 2 {
		if _, refusal, _, _ := l.admit("s"); refusal != nil {
			t.Fatalf("request %d of the burst refused: %v", i, refusal)
		}
	}
	_, refusal, record, suppressed := l.admit("s")
	if refusal == nil || refusal.Details["retryAfterMs"] != int64(100) || !record || suppressed != 0 {
		t.Fatalf("third request: %v (retry %v), record %v, suppressed %d; want QUOTA_EXCEEDED, retry after 100 ms, recorded",
			refusal, refusal.Details["retryAfterMs"], record, suppressed)
	}
	// Refusals within the record interval are counted, not recorded.
	for range 5 {
		if _, refusal, record, _ := l.admit("s"); refusal == nil || record {
			t.Fatalf("refusal %v recorded %v", refusal, record)
		}
	}
	// Another server has its own bucket.
	if _, refusal, _, _ := l.admit("other"); refusal != nil {
		t.Errorf("another server refused: %v", refusal)
	}
	// After the interval (and a refill), the next refusal is recorded with the count.
	now = now.Add(refusalRecordInterval)
	for {
		_, refusal, record, suppressed := l.admit("s")
		if refusal != nil {
			if !record || suppressed != 5 {
				t.Errorf("first refusal after the interval: record %v, suppressed %d; want true, 5", record, suppressed)
			}
			break
		}
	}
	if n := l.flushSuppressed("s"); n != 0 {
		t.Errorf("flushSuppressed = %d after a recorded refusal", n)
	}

	// The in-flight cap.
	c := NewLimiter(0, 1, 1)
	c.clock = func() time.Time { return now }
	release, refusal, _, _ := c.admit("s")
	if refusal != nil {
		t.Fatal(refusal)
	}
	if _, refusal, _, _ := c.admit("s"); refusal == nil {
		t.Error("a second request in flight was admitted over a cap of 1")
	}
	release()
	if _, refusal, _, _ := c.admit("s"); refusal != nil {
		t.Errorf("refused after the release: %v", refusal)
	}
}

// TestRateLimitFlood sends 5,000 pipelined requests: the limit holds, ping is
// answered throughout, and the audit trail stays small.
func TestRateLimitFlood(t *testing.T) {
	w := openTrail(t)
	f := startFiles(t, WithAudit(w.Writer, false), WithLimiter(NewLimiter(DefaultRate, DefaultBurst, 0)))
	const n = 5000
	start := time.Now()
	go func() {
		for i := range n {
			if err := f.Write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"files/read","params":{"path":"ro/a.txt","length":1}}`, i+1)); err != nil {
				t.Error(err)
				return
			}
			if i%1000 == 0 {
				if err := f.Write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}`, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var ok, limited, pings int
	for ok+limited < n || pings < n/1000 {
		m := f.Next()
		var id string
		_ = json.Unmarshal(m.ID, &id)
		switch {
		case len(id) > 5 && id[:5] == "ping-":
			if m.Error != nil {
				t.Errorf("ping refused: %s", m.Raw)
			}
			pings++
		case m.Error != nil:
			_, code, data := errorOf(t, m)
			if code != "QUOTA_EXCEEDED" || data["retryAfterMs"] == nil {
				t.Fatalf("refusal %v, want QUOTA_EXCEEDED with retryAfterMs", data)
			}
			limited++
		default:
			ok++
		}
	}
	elapsed := time.Since(start)
	allowed := DefaultBurst + int(elapsed.Seconds()*DefaultRate) + 1
	t.Logf("%d allowed, %d limited in %s (the bucket allows at most %d)", ok, limited, elapsed, allowed)
	if ok > allowed || limited == 0 {
		t.Errorf("%d requests allowed in %s; the limit allows %d", ok, elapsed, allowed)
	}
	recs, _ := trailRecords(t, w)
	var rateRecords int
	for _, r := range recs {
		if r.Kind == audit.KindDecision && r.Code == "QUOTA_EXCEEDED" {
			rateRecords++
		}
	}
	if max := int(elapsed/refusalRecordInterval) + 2; rateRecords > max || rateRecords == 0 {
		t.Errorf("%d rate-limit records for %d refusals in %s; want between 1 and %d", rateRecords, limited, elapsed, max)
	}
}

// TestRateLimitCountsUnknownMethods: requests for methods the broker does not
// know count against the server's rate too (only ping is exempt), so a flood
// of them is refused like any other, recorded with the method cut short.
func TestRateLimitCountsUnknownMethods(t *testing.T) {
	w := openTrail(t)
	f := startFiles(t, WithAudit(w.Writer, false), WithLimiter(NewLimiter(1, 2, 0)))
	long := "x/" + strings.Repeat("y", 1000)
	var notFound, limited int
	for i := range 6 {
		f.SendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, long))
		m := f.Next()
		if m.Error == nil {
			t.Fatalf("reply %s: want an error", m.Raw)
		}
		switch m.Error.Code {
		case -32601:
			notFound++
		default:
			if _, code, _ := errorOf(t, m); code != "QUOTA_EXCEEDED" {
				t.Fatalf("refusal %s, want QUOTA_EXCEEDED", m.Raw)
			}
			limited++
		}
	}
	if notFound > 3 || limited == 0 {
		t.Errorf("%d answered method not found, %d refused by the rate limit; want at most the burst (and a little refill) answered", notFound, limited)
	}
	recs, _ := trailRecords(t, w)
	for _, r := range recs {
		if r.Code == "QUOTA_EXCEEDED" && (len(r.Method) > 128+len("...") || !strings.HasPrefix(r.Method, "x/y")) {
			t.Errorf("rate refusal recorded with method %q (%d bytes)", r.Method[:min(len(r.Method), 40)], len(r.Method))
		}
	}
}
