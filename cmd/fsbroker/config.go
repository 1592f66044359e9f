// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/schema"
)

// fileConfig is the config file (schema/config.json is its contract).
type fileConfig struct {
	Version  int          `json:"version"`
	Roots    []rootConfig `json:"roots"`
	StateDir string       `json:"stateDir"`
	Policies string       `json:"policies"`
	Consent  string       `json:"consent"`
	ServerID string       `json:"serverId"`
	// Metrics is --metrics ADDR, Notify --notify (nil: not in the file).
	Metrics string `json:"metrics"`
	Notify  *bool  `json:"notify"`
	// OPA is OPA's own configuration (services, bundles, keys) for pulling the policy set
	// from a bundle server.
	OPA json.RawMessage `json:"opa"`
	// Remote is the MCP server that connect serves over Streamable HTTP.
	Remote *remoteConfig `json:"remote"`
	Audit  struct {
		Dir             string `json:"dir"`
		Sync            string `json:"sync"`
		RedactPaths     bool   `json:"redactPaths"`
		MaxSegmentBytes int64  `json:"maxSegmentBytes"`
		MaxSegmentAge   string `json:"maxSegmentAge"`
		RetentionAge    string `json:"retentionAge"`
		RetentionBytes  int64  `json:"retentionBytes"`
		// Witness is --audit-witness: where the trail's checkpoints are sent.
		Witness []string `json:"witness"`
	} `json:"audit"`
	Log struct {
		Level  string `json:"level"`
		Format string `json:"format"`
	} `json:"log"`
	Limits struct {
		MaxMessageBytes  int    `json:"maxMessageBytes"`
		MaxInFlight      int    `json:"maxInFlight"`
		InitTimeout      string `json:"initTimeout"`
		ShutdownTimeout  string `json:"shutdownTimeout"`
		MaxReadBytes     int64  `json:"maxReadBytes"`
		MaxWriteBytes    int64  `json:"maxWriteBytes"`
		OperationTimeout string `json:"operationTimeout"`
		LockWait         string `json:"lockWait"`
		MaxWatches       int    `json:"maxWatches"`
		// RateLimit is a pointer: 0 (no limit) is a value of its own.
		RateLimit            *float64 `json:"rateLimit"`
		RateBurst            int      `json:"rateBurst"`
		MaxInFlightPerServer int      `json:"maxInFlightPerServer"`
	} `json:"limits"`
	// Sandbox is --sandbox and the paths its rules add (see docs/sandbox.md).
	Sandbox *sandboxConfig `json:"sandbox"`
}

// rootConfig is one entry of the config file's roots.
type rootConfig struct {
	Path     string `json:"path"`
	Mount    string `json:"mount"`
	Name     string `json:"name"`
	Writable bool   `json:"writable"`
	Consent  string `json:"consent"`
}

// configError is a usage or configuration error: the command exits 2 with its
// message, which names the bad setting.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// loadConfig reads, schema-checks and decodes the config file at path.
func loadConfig(path string, v *schema.Validator) (*fileConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, configErrorf("--config %s: %v", path, err)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, configErrorf("config %s: not valid YAML: %v", path, err)
	}
	if t := bytes.TrimSpace(doc); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		doc = []byte("{}")
	}
	if err := v.ValidateConfig(doc); err != nil {
		var serr *schema.Error
		if errors.As(err, &serr) {
			parts := make([]string, 0, len(serr.Errors))
			for _, fe := range serr.Errors {
				ptr := fe.Pointer
				if ptr == "" {
					ptr = "/"
				}
				parts = append(parts, ptr+": "+fe.Message)
			}
			return nil, configErrorf("config %s: %s", path, strings.Join(parts, "; "))
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var cfg fileConfig
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, configErrorf("config %s: %v", path, err)
	}
	return &cfg, nil
}

// rootSpecs returns the config's roots as specs; relative paths are relative
// to the config file's directory.
func (c *fileConfig) rootSpecs(configPath string) []roots.Spec {
	base := filepath.Dir(configPath)
	specs := make([]roots.Spec, 0, len(c.Roots))
	for i, r := range c.Roots {
		p := r.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		specs = append(specs, roots.Spec{Path: p, Mount: r.Mount, Name: r.Name, Writable: r.Writable,
			Preapproved: r.Consent == "preapproved", Origin: fmt.Sprintf("config %s: /roots/%d", configPath, i)})
	}
	return specs
}

// configDuration parses a duration setting that the schema has already
// checked for shape.
func configDuration(path, pointer, value string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	d, err := parseDuration(value)
	switch {
	case err != nil:
		return 0, configErrorf("config %s: %s: %q: %v", path, pointer, value, err)
	case d <= 0:
		return 0, configErrorf("config %s: %s: %q is not a positive duration", path, pointer, value)
	}
	return d, nil
}
