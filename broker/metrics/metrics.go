// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package metrics is a broker process's Prometheus metrics
// (docs/metrics.md): its decisions by result and code and how long they
// took, its audit appends (their latency, and the failures and timeouts of
// the process's audit guard), the requests in flight, the waits for file
// locks and for consent, the process's CPU, memory and open files, and the
// free space of the file systems that hold the state and audit directories.
//
// New makes one Metrics per process, on a registry of its own (never the
// client library's global default one, so nothing else registers on it
// and a test may make as many as it likes). Its methods are what the
// corridor's observer (corridor.Observer, wired by broker/runtime) and the
// executor's lock hook (executor.WithLockWaits) call on the request path:
// each is a few atomic operations on metrics made in advance, with no
// allocation. Handler serves the registry in Prometheus text format: fsbroker
// --metrics ADDR mounts it at /metrics, and fsbroker console at GET
// /metrics.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// Namespace starts the name of every metric: fsbroker_decisions_total, ...
const Namespace = "fsbroker"

// Options say where the metrics that are read at each scrape come from.
type Options struct {
	// StateDir and AuditDir are the directories whose file systems' free
	// space is reported (fsbroker_filesystem_*_bytes); "" leaves one out.
	StateDir, AuditDir string
	// AuditStats returns the counts of the process's audit guard
	// (audit.Guarded.Stats); nil leaves the fsbroker_audit_appends* counts
	// out.
	AuditStats func() audit.GuardStats
}

// The label values of decisions' results, lock waits' and consent answers'
// outcomes.
const (
	ResultAllow = "allow"
	ResultDeny  = "deny"

	// CodeNone is the code label of an allowed decision, which has none.
	CodeNone = "none"
	// CodeOther is the code label of a refusal whose code is none of
	// errcode.Codes() or INTERNAL_ERROR (a policy's own), so that the codes a
	// policy makes up cannot grow the label set without bound.
	CodeOther = "other"

	LockAcquired = "acquired" // the operation got its locks after waiting
	LockConflict = "conflict" // the lock wait ran out (CONCURRENCY_CONFLICT)
	LockTimeout  = "timeout"  // the operation's deadline passed first (TIMEOUT)
	LockError    = "error"    // a lock file could not be used

	ConsentAll     = "all"     // every path asked about was approved
	ConsentSome    = "some"    // some were
	ConsentNone    = "none"    // none was (a no, a decline, a cancel)
	ConsentTimeout = "timeout" // nobody answered in time: nothing approved
	ConsentError   = "error"   // the provider failed: nothing approved
)

// Bucket bounds, in seconds, of the histograms.
var (
	decisionBuckets    = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}
	auditBuckets       = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 2.5, 5, 10}
	lockWaitBuckets    = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	consentWaitBuckets = []float64{.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}
)

// Metrics are one broker process's metrics. Its methods are safe for
// concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	allowed   prometheus.Counter
	denied    map[string]prometheus.Counter // by code, every code known in advance
	decisions *prometheus.CounterVec
	decided   prometheus.Histogram
	appended  prometheus.Histogram
	inFlight  prometheus.Gauge

	lockWaits    map[string]prometheus.Counter // by result
	lockWaitTime prometheus.Histogram

	consentWaits   *prometheus.HistogramVec // by provider
	consentAnswers *prometheus.CounterVec   // by provider and outcome
}

// New makes a process's metrics on a registry of their own, with the
// process collector and, as o says, the audit guard's counts and the file
// systems' free space.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "decisions_total",
		Help: "Decisions recorded in the audit trail (every decision record: the policy's, and the refusals before it), by result and code."},
		[]string{"result", "code"})
	m.allowed = m.decisions.WithLabelValues(ResultAllow, CodeNone)
	m.denied = map[string]prometheus.Counter{CodeOther: m.decisions.WithLabelValues(ResultDeny, CodeOther)}
	for _, code := range append(errcode.Codes(), "INTERNAL_ERROR") {
		m.denied[string(code)] = m.decisions.WithLabelValues(ResultDeny, string(code))
	}
	m.decided = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "decision_duration_seconds",
		Help: "How long each decision took: the consent check and the policy (the decision record's latencyUs).", Buckets: decisionBuckets})
	m.appended = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "audit_append_duration_seconds",
		Help: "How long each append of a session's record to the audit trail took, failed ones included.", Buckets: auditBuckets})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "requests_in_flight",
		Help: "Requests in the corridor now (files/*, roots/list, files/consent, and fsbroker serve's tools' requests)."})
	waits := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "lock_waits_total",
		Help: "File operations that waited for a lock another operation held, by how the wait ended."}, []string{"result"})
	m.lockWaits = map[string]prometheus.Counter{}
	for _, r := range []string{LockAcquired, LockConflict, LockTimeout, LockError} {
		m.lockWaits[r] = waits.WithLabelValues(r)
	}
	m.lockWaitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "lock_wait_duration_seconds",
		Help: "How long file operations waited for their locks, when they had to.", Buckets: lockWaitBuckets})
	m.consentWaits = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "consent_wait_duration_seconds",
		Help: "How long consent questions waited for a person to answer, by provider.", Buckets: consentWaitBuckets}, []string{"provider"})
	m.consentAnswers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "consent_answers_total",
		Help: "Consent questions put to a provider, by provider and outcome."}, []string{"provider", "outcome"})
	m.reg.MustRegister(m.decisions, m.decided, m.appended, m.inFlight, waits, m.lockWaitTime, m.consentWaits, m.consentAnswers,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: Namespace}))
	if o.AuditStats != nil {
		m.reg.MustRegister(auditStatsCollectors(o.AuditStats)...)
	}
	var dirs []watchedDir
	if o.StateDir != "" {
		dirs = append(dirs, watchedDir{role: "state", path: o.StateDir})
	}
	if o.AuditDir != "" {
		dirs = append(dirs, watchedDir{role: "audit", path: o.AuditDir})
	}
	if len(dirs) > 0 {
		m.reg.MustRegister(newFilesystemCollector(dirs))
	}
	return m
}

// auditStatsCollectors read the audit guard's counts at each scrape.
func auditStatsCollectors(stats func() audit.GuardStats) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "audit_appends_total",
			Help: "Appends to the audit trail through the process's guard, failed ones included."},
			func() float64 { return float64(stats().Appends) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "audit_append_failures_total",
			Help: "Appends to the audit trail that failed, timeouts included: each refused its request (a decision record) or was lost (docs/audit.md)."},
			func() float64 { return float64(stats().Failures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "audit_append_timeouts_total",
			Help: "Appends to the audit trail that failed because the trail did not answer within the audit timeout."},
			func() float64 { return float64(stats().Timeouts) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "audit_appends_stuck",
			Help: "Appends that timed out and have not returned yet; while there is one, appends fail at once."},
			func() float64 { return float64(stats().Stuck) }),
	}
}

// Registry returns the registry the metrics are on, to serve (Handler) or
// to add a host's own collectors to.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics g gathers in Prometheus text format (or
// another format the scraper asks for); a collector that fails leaves its
// metrics out rather than failing the scrape.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4,
		Timeout: 10 * time.Second})
}

// RequestStarted counts a request into the corridor.
func (m *Metrics) RequestStarted() {
	if m != nil {
		m.inFlight.Inc()
	}
}

// RequestEnded counts a request out of the corridor.
func (m *Metrics) RequestEnded() {
	if m != nil {
		m.inFlight.Dec()
	}
}

// Decided counts a decision record: allowed, or refused with code.
func (m *Metrics) Decided(allow bool, code string) {
	switch {
	case m == nil:
	case allow:
		m.allowed.Inc()
	default:
		c, ok := m.denied[code]
		if !ok {
			c = m.denied[CodeOther]
		}
		c.Inc()
	}
}

// DecisionTook observes how long a decision took.
func (m *Metrics) DecisionTook(d time.Duration) {
	if m != nil {
		m.decided.Observe(d.Seconds())
	}
}

// AuditAppended observes how long an append to the audit trail took; its
// failures are the audit guard's to count (Options.AuditStats).
func (m *Metrics) AuditAppended(took time.Duration, _ error) {
	if m != nil {
		m.appended.Observe(took.Seconds())
	}
}

// LockWaited counts an operation's wait for its locks, and observes how
// long it was, by how it ended: err nil (acquired), CONCURRENCY_CONFLICT
// (the lock wait ran out), TIMEOUT, or another error. It is the function
// for executor.WithLockWaits.
func (m *Metrics) LockWaited(d time.Duration, err error) {
	if m == nil {
		return
	}
	result := LockAcquired
	switch {
	case err == nil:
	case errcode.Of(err) == errcode.ConcurrencyConflict:
		result = LockConflict
	case errcode.Of(err) == errcode.Timeout:
		result = LockTimeout
	default:
		result = LockError
	}
	m.lockWaits[result].Inc()
	m.lockWaitTime.Observe(d.Seconds())
}

// ConsentWaiting starts timing a consent question put to a person by
// provider; the function it returns observes the wait, unless nobody could
// be asked after all.
func (m *Metrics) ConsentWaiting(provider string) (ended func(asked bool)) {
	if m == nil {
		return func(bool) {}
	}
	start := time.Now()
	return func(asked bool) {
		if asked {
			m.consentWaits.WithLabelValues(providerLabel(provider)).Observe(time.Since(start).Seconds())
		}
	}
}

// ConsentAnswered counts a consent question a provider answered: asked
// paths, approved of them, and the provider's error (nil: it answered).
func (m *Metrics) ConsentAnswered(provider string, asked, approved int, err error) {
	if m == nil {
		return
	}
	var outcome string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = ConsentTimeout
	case err != nil:
		outcome = ConsentError
	case approved == 0:
		outcome = ConsentNone
	case approved >= asked:
		outcome = ConsentAll
	default:
		outcome = ConsentSome
	}
	m.consentAnswers.WithLabelValues(providerLabel(provider), outcome).Inc()
}

// providerLabel is a provider's label value: its name without what follows
// a colon ("command:/usr/local/bin/ask" is "command"), "none" for no name.
func providerLabel(name string) string {
	name, _, _ = strings.Cut(name, ":")
	if name == "" {
		return "none"
	}
	return name
}
