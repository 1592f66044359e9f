// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// OPA's defaults for what a decision_logs member leaves out (v1/plugins/logs).
const (
	defaultMaskPath = "/system/log/mask"
	defaultDropPath = "/system/log/drop"
)

// config is what the uploader takes from an OPA configuration.
type config struct {
	service     string
	client      rest.Client
	resource    string            // the path events are POSTed to, under the service's URL
	labels      map[string]string // the configuration's labels
	minDelay    time.Duration     // between periodic uploads, at least
	maxDelay    time.Duration     // and at most; also the cap of the backoff after a failure
	immediate   bool              // upload as soon as events are waiting (trigger: immediate)
	uploadLimit int64             // the largest gzip-compressed batch, in bytes
	maxEvents   int               // events held in memory, at most
	maxBytes    int64             // their encoded bytes, at most (0: no limit)
}

// opaLogConfig is the part of an OPA configuration that the uploader reads.
type opaLogConfig struct {
	Services     json.RawMessage   `json:"services,omitempty"`
	Keys         json.RawMessage   `json:"keys,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	DecisionLogs json.RawMessage   `json:"decision_logs,omitempty"`
}

// parseConfig reads the services, keys, labels and decision_logs members of an OPA
// configuration (JSON) with OPA's own parsers; it returns nil, nil without decision_logs.
func parseConfig(raw []byte) (*config, error) {
	var c opaLogConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if len(c.DecisionLogs) == 0 || string(c.DecisionLogs) == "null" {
		return nil, nil
	}
	subset, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	quiet := logging.NewNoOpLogger()
	m, err := plugins.New(subset, "fsbroker", inmem.New(), plugins.Logger(quiet), plugins.ConsoleLogger(quiet))
	if err != nil {
		return nil, err
	}
	// The manager parses the services and keys; nothing of it runs. Stop
	// ends the goroutine New started (the REST client stays usable).
	defer m.Stop(context.Background())
	lc, err := logs.NewConfigBuilder().
		WithBytes(c.DecisionLogs).
		WithServices(m.Services()).
		WithPlugins(m.Plugins()).
		WithLogger(quiet).
		Parse()
	if err != nil {
		return nil, fmt.Errorf("decision_logs: %w", err)
	}
	switch {
	case lc == nil: // OPA's parser: no service to upload to, and nothing else
		return nil, errors.New("decision_logs: no service to upload to")
	case lc.ConsoleLogs || lc.Plugin != nil:
		return nil, errors.New("decision_logs: only upload to a service is supported (console and plugin are not)")
	case lc.Service == "":
		return nil, errors.New("decision_logs: no service to upload to")
	case *lc.Reporting.Trigger == plugins.TriggerManual:
		return nil, errors.New("decision_logs: reporting.trigger manual is not supported (nothing would trigger an upload): use periodic or immediate")
	case *lc.MaskDecision != defaultMaskPath || *lc.DropDecision != defaultDropPath:
		return nil, errors.New("decision_logs: mask_decision and drop_decision are not supported: events hold only what the audit trail holds (use audit.redactPaths to keep paths out)")
	}
	return &config{
		service:     lc.Service,
		client:      m.Client(lc.Service),
		resource:    *lc.Resource,
		labels:      c.Labels,
		minDelay:    time.Duration(*lc.Reporting.MinDelaySeconds), // OPA scaled these to nanoseconds
		maxDelay:    time.Duration(*lc.Reporting.MaxDelaySeconds),
		immediate:   *lc.Reporting.Trigger == plugins.TriggerImmediate,
		uploadLimit: *lc.Reporting.UploadSizeLimitBytes,
		maxEvents:   int(min(*lc.Reporting.BufferSizeLimitEvents, 1<<20)),
		maxBytes:    *lc.Reporting.BufferSizeLimitBytes,
	}, nil
}

// target names where events go, for logs, without credentials.
func (c *config) target() string {
	base := c.client.Config().URL
	if u, err := url.Parse(base); err == nil {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		base = u.String()
	}
	return base + c.resource
}
