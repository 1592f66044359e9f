package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// DecisionPath is the path decisions are logged under, as OPA logs a query of
// data.fsbroker.authz.decision.
const DecisionPath = "fsbroker/authz/decision"

// DecisionLogger uploads decisions to an OPA decision-log service through OPA's own
// decision-log plugin (v1/plugins/logs), so that pipelines that already ingest OPA decision
// logs take fsbroker's unchanged: the same event format, batching, gzip upload, retries with
// backoff, buffer limits, and masking and drop rules (data.system.log.mask and .drop, when a
// bundle defines them). It is configured by the decision_logs, services, keys and labels
// members of an OPA configuration.
//
// Upload is asynchronous: Log only buffers the event. The audit trail, not the decision log,
// is the record a request waits for.
type DecisionLogger struct {
	manager *plugins.Manager
	plugin  *logs.Plugin
}

// opaLogConfig is the part of an OPA configuration that the decision logger reads.
type opaLogConfig struct {
	Services     json.RawMessage   `json:"services,omitempty"`
	Keys         json.RawMessage   `json:"keys,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	DecisionLogs json.RawMessage   `json:"decision_logs,omitempty"`
}

// NewDecisionLogger starts a decision logger from an OPA configuration (JSON), or returns nil
// when it has no decision_logs member. id names this broker in the events' labels (OPA's
// labels.id); version goes in labels.fsbroker_version (labels.version is OPA's).
func NewDecisionLogger(ctx context.Context, config []byte, id, version string) (*DecisionLogger, error) {
	var c opaLogConfig
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("opa configuration: %w", err)
	}
	if len(c.DecisionLogs) == 0 || string(c.DecisionLogs) == "null" {
		return nil, nil
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels["fsbroker_version"] = version // OPA keeps labels.version for its own
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("opa configuration: %w", err)
	}
	quiet := logging.NewNoOpLogger()
	m, err := plugins.New(raw, id, inmem.New(), plugins.Logger(quiet), plugins.ConsoleLogger(quiet))
	if err != nil {
		return nil, fmt.Errorf("opa configuration: %w", err)
	}
	cfg, err := logs.NewConfigBuilder().
		WithBytes(c.DecisionLogs).
		WithServices(m.Services()).
		WithPlugins(m.Plugins()).
		WithLogger(quiet).
		Parse()
	if err != nil {
		return nil, fmt.Errorf("opa configuration: decision_logs: %w", err)
	}
	if cfg.ConsoleLogs || cfg.Plugin != nil {
		return nil, errors.New("opa configuration: decision_logs: only upload to a service is supported (console and plugin are not)")
	}
	p := logs.New(cfg, m)
	m.Register(logs.Name, p)
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the decision logger: %w", err)
	}
	return &DecisionLogger{manager: m, plugin: p}, nil
}

// LogDecision buffers one decision for upload: its id (the audit trail's decision id), the
// policy input document, the decision and the revision of the policy set that made it.
func (l *DecisionLogger) LogDecision(ctx context.Context, id string, input any, d Decision, took time.Duration) error {
	if l == nil {
		return nil
	}
	var result any = map[string]any{
		"allow": d.Allow, "code": d.Code, "reasons": nonNil(d.Reasons), "obligations": nonNilMap(d.Obligations),
	}
	m := evalMetrics{Metrics: metrics.NoOp(), took: took}
	return l.plugin.Log(ctx, &server.Info{
		DecisionID: id,
		Path:       DecisionPath,
		Input:      &input,
		Results:    &result,
		Revision:   d.Revision,
		RemoteAddr: "fsbroker",
		Timestamp:  time.Now().UTC(),
		Metrics:    m,
	})
}

// Close flushes what is buffered (within ctx) and stops the logger.
func (l *DecisionLogger) Close(ctx context.Context) {
	if l == nil {
		return
	}
	l.manager.Stop(ctx)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// evalMetrics reports how long the decision took, as OPA's timer_rego_query_eval_ns.
type evalMetrics struct {
	metrics.Metrics
	took time.Duration
}

// All implements metrics.Metrics.
func (m evalMetrics) All() map[string]any {
	return map[string]any{"timer_rego_query_eval_ns": m.took.Nanoseconds()}
}
