// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package metricstest is the tests' reader of a broker's metrics: it
// scrapes a /metrics URL over HTTP, parses the Prometheus text format with
// the Prometheus text parser, and counts the decisions there and in an
// audit trail the same way, so that a test can hold the one to the other.
// Only tests import this package.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/metrics"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape gets url (a /metrics URL), checks that it answers 200 in the
// text format, and parses it.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape %s: %s, Content-Type %q:\n%s", url, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return Parse(t, string(body))
}

// Parse parses a scrape in the Prometheus text format.
func Parse(t testing.TB, text string) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the scrape does not parse as the Prometheus text format: %v\n%s", err, text)
	}
	return fams
}

// Value returns the value of the counter, gauge or untyped metric name
// whose labels are the name=value pairs of labels (its other labels are
// not looked at), or, for a histogram, its count; ok is false when there is
// none.
func (f Families) Value(name string, labels ...string) (v float64, ok bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// hasLabels reports whether m has every name=value pair of labels.
func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Decision is a decision's result and code, as fsbroker_decisions_total
// labels them.
type Decision struct{ Result, Code string }

func (d Decision) String() string { return fmt.Sprintf("%s/%s", d.Result, d.Code) }

// Decisions returns fsbroker_decisions_total by result and code, leaving
// out the series that are zero.
func (f Families) Decisions() map[Decision]float64 {
	out := map[Decision]float64{}
	fam := f[metrics.Namespace+"_decisions_total"]
	if fam == nil {
		return out
	}
	for _, m := range fam.GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			var d Decision
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "result":
					d.Result = l.GetValue()
				case "code":
					d.Code = l.GetValue()
				}
			}
			out[d] += v
		}
	}
	return out
}

// TrailDecisions counts the decision records of recs by result and code,
// labelled as fsbroker_decisions_total labels them.
func TrailDecisions(recs []audit.Record) map[Decision]float64 {
	out := map[Decision]float64{}
	for _, r := range recs {
		if r.Kind != audit.KindDecision {
			continue
		}
		d := Decision{Result: metrics.ResultDeny, Code: r.Code}
		if r.Allow != nil && *r.Allow {
			d = Decision{Result: metrics.ResultAllow, Code: metrics.CodeNone}
		}
		out[d]++
	}
	return out
}
