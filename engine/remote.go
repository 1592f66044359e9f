// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/open-policy-agent/opa/v1/logging"
	bundleplugin "github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// Remote is a policy set pulled from a bundle server, configured the way OPA itself is: the
// services, bundles and keys members of an OPA configuration file
// (https://www.openpolicyagent.org/docs/configuration). Exactly one bundle must be configured:
// it is the broker's whole policy set. The download, polling (with ETags and long polling),
// authentication, size limit and signature verification are OPA's own (v1/download,
// v1/plugins/rest, v1/bundle); what is downloaded then goes through the same compilation,
// type-check and tests as any other source before it decides.
//
// With keys configured, every bundle must be signed by one of them, signing block or not
// (OPA alone would accept an unsigned bundle when keys come without a signing block).
type Remote struct {
	name       string
	source     *bundleplugin.Source
	client     rest.Client
	persistDir string
}

// opaConfig is the part of an OPA configuration file that Remote reads.
type opaConfig struct {
	Services json.RawMessage `json:"services"`
	Bundles  json.RawMessage `json:"bundles"`
	Keys     json.RawMessage `json:"keys"`
}

// ParseRemote reads an OPA configuration (JSON) with services, bundles and keys. persistDir,
// when not empty, is where a bundle configured with "persist": true is kept
// (<persistDir>/<bundle name>/bundle.tar.gz), so that a broker restarted while the bundle
// server is unreachable decides with the last bundle it activated (its signature is verified
// again when it is loaded) instead of denying everything.
func ParseRemote(config []byte, persistDir string) (*Remote, error) {
	var c opaConfig
	dec := json.NewDecoder(bytes.NewReader(config))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("opa configuration: %w", err)
	}
	keyConfigs := map[string]*keys.Config{}
	if len(c.Keys) > 0 && string(c.Keys) != "null" {
		var err error
		if keyConfigs, err = keys.ParseKeysConfig(c.Keys); err != nil {
			return nil, fmt.Errorf("opa configuration: keys: %w", err)
		}
	}
	services, err := parseServices(c.Services, keyConfigs)
	if err != nil {
		return nil, fmt.Errorf("opa configuration: services: %w", err)
	}
	if len(c.Bundles) == 0 || string(c.Bundles) == "null" {
		return nil, errors.New("opa configuration: bundles: no bundle is configured")
	}
	parsed, err := bundleplugin.NewConfigBuilder().
		WithBytes(c.Bundles).
		WithServices(slices.Sorted(maps.Keys(services))).
		WithKeyConfigs(keyConfigs).
		Parse()
	if err != nil {
		return nil, fmt.Errorf("opa configuration: bundles: %w", err)
	}
	if len(parsed.Bundles) != 1 {
		return nil, fmt.Errorf("opa configuration: bundles: configure exactly one bundle (the broker's policy set), got %d", len(parsed.Bundles))
	}
	r := &Remote{persistDir: persistDir}
	for name, src := range parsed.Bundles {
		r.name, r.source = name, src
	}
	r.source.Signing = requireSignature(r.source.Signing)
	if strings.HasPrefix(r.source.Resource, "file://") {
		return nil, fmt.Errorf("opa configuration: bundles.%s: a file:// resource is a local bundle: use --bundle", r.name)
	}
	r.client = services[r.source.Service].WithHeader("Accept", "application/gzip")
	return r, nil
}

// parseServices reads OPA's services member: an object by service name, or an array of
// services that each carry a name.
func parseServices(raw json.RawMessage, keyConfigs map[string]*keys.Config) (map[string]rest.Client, error) {
	byName := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &byName); err != nil {
			var list []json.RawMessage
			if json.Unmarshal(raw, &list) != nil {
				return nil, errors.New("want an object by service name or an array of services")
			}
			for i, s := range list {
				var named struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(s, &named); err != nil || named.Name == "" {
					return nil, fmt.Errorf("service %d has no name", i)
				}
				byName[named.Name] = s
			}
		}
	}
	clients := map[string]rest.Client{}
	for name, s := range byName {
		c, err := rest.New(s, keyConfigs, rest.Name(name), rest.Logger(logging.NewNoOpLogger()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if c.Config().URL == "" {
			return nil, fmt.Errorf("%s: no url", name)
		}
		clients[name] = c
	}
	return clients, nil
}

// String names the remote source for logs, without credentials: the URL's
// user information and query are left out.
func (r *Remote) String() string {
	base := r.client.Config().URL
	if u, err := url.Parse(base); err == nil {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		base = u.String()
	}
	resource := r.source.Resource
	if i := strings.IndexByte(resource, '?'); i >= 0 {
		resource = resource[:i]
	}
	return fmt.Sprintf("bundle %q from %s%s", r.name, base, "/"+strings.TrimPrefix(resource, "/"))
}

// digestOf is the hex sha256 of a downloaded bundle ("" for none).
func digestOf(content []byte) string {
	if content == nil {
		return ""
	}
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// persistFile is where the last activated bundle is kept, or "" when it is not.
func (r *Remote) persistFile() string {
	if r.persistDir == "" || !r.source.Persist {
		return ""
	}
	return filepath.Join(r.persistDir, r.name, "bundle.tar.gz")
}

// loadPersisted builds the persisted bundle, when there is one.
func (r *Remote) loadPersisted(ctx context.Context, opts loadOptions) (*policySet, error) {
	file := r.persistFile()
	if file == "" {
		return nil, nil
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	raw, err := readBundle(file, r.source.Signing)
	if err != nil {
		return nil, err
	}
	return buildRaw(ctx, raw, opts)
}

// persist keeps content, the bundle file just activated, for the next start.
func (r *Remote) persist(content []byte) error {
	file := r.persistFile()
	if file == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("persist bundle: %w", err)
	}
	if err := atomicfile.WriteFile(file, content, 0o600); err != nil {
		return fmt.Errorf("persist bundle: %w", err)
	}
	return nil
}

// signature says how the bundles of r are checked, for the log.
func (r *Remote) signature() string {
	if r.source.Signing == nil {
		return "not checked (no keys configured)"
	}
	if r.source.Signing.KeyID != "" {
		return "required (key " + r.source.Signing.KeyID + ")"
	}
	return "required (any configured key)"
}

// maxDelay is the bundle's polling.max_delay_seconds (OPA's default, 120 s, when unset): the
// cap of the backoff after a failure.
func (r *Remote) maxDelay() time.Duration {
	if s := r.source.Config.Polling.MaxDelaySeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return defaultMaxPollDelay
}

// defaultMaxPollDelay is OPA's default polling.max_delay_seconds.
const defaultMaxPollDelay = 120 * time.Second

// failureBackoffBase is the first wait after a failed download or a refused bundle; each
// further failure in a row multiplies it by 1.6 (OPA's util.DefaultBackoff, with 20% jitter),
// up to the bundle's max_delay_seconds.
const failureBackoffBase = time.Second

// failureStreak is the run of failed downloads or refused bundles since the last bundle put in
// force, so that a bad bundle is reported once and not on every retry.
type failureStreak struct {
	attempts int       // failures in a row
	since    time.Time // the first of them
	last     string    // the message of the latest
}

// add counts a failure and reports whether it is news: the first of the streak, or another
// failure than the one before it.
func (s *failureStreak) add(err error) bool {
	if s.attempts == 0 {
		s.since = time.Now()
	}
	s.attempts++
	msg := err.Error()
	news := msg != s.last
	s.last = msg
	return news
}

// backoff is how long to wait before the next download after the streak's latest failure.
func (s *failureStreak) backoff(maxDelay time.Duration) time.Duration {
	return util.DefaultBackoff(float64(failureBackoffBase), float64(maxDelay), s.attempts)
}

// wait sleeps for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// watchRemote polls the bundle server until ctx ends. Each new bundle (its signature already
// verified by OPA's reader when keys are configured) is compiled, type-checked and tested,
// and swapped in only when all of that passes; a download that fails (unreachable server,
// unsigned or tampered bundle, over the size limit) or a bundle that does not build keeps the
// last good set deciding.
//
// Failures are bounded in noise: each one that differs from the one before is logged at error
// level and reported to onReload (the broker writes an audit record for each); a repeat is
// logged at debug level only; the recovery is logged once, with the count. After a failure the
// next download waits failureBackoffBase * 1.6^(n-1) for the n-th failure in a row, capped at
// max_delay_seconds, before OPA's downloader adds its own retry delay (from 0.1 s, capped the
// same way): the callback holds the downloader for that long.
func (e *Engine) watchRemote(ctx context.Context, r *Remote, onReload func(string, error)) error {
	var streak failureStreak // used by the downloader's goroutine only
	d := download.New(r.source.Config, r.client, r.source.Resource).
		WithBundleVerificationConfig(r.source.Signing).
		WithSizeLimitBytes(r.source.SizeLimitBytes).
		WithBundleName(r.name).
		WithBundlePersistence(true). // keeps the raw bytes: the revision digest and the persisted copy
		WithBundleParserOpts(ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}).
		WithCallback(func(ctx context.Context, u download.Update) error {
			err := e.remoteUpdate(ctx, r, u, onReload, &streak)
			if err != nil && ctx.Err() == nil {
				wait(ctx, streak.backoff(r.maxDelay()))
			}
			return err
		})
	e.logger.Info("pulling policies", "source", r.String(),
		"signature", r.signature(), "persist", r.persistFile() != "")
	e.watching.Add(1)
	defer e.watching.Add(-1)
	d.Start(ctx)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.Stop(stopCtx)
	return nil
}

// remoteUpdate handles one download result; streak is the run of failures before it.
func (e *Engine) remoteUpdate(ctx context.Context, r *Remote, u download.Update, onReload func(string, error), streak *failureStreak) error {
	if u.Error == nil && u.Bundle == nil {
		return nil // 304 Not Modified
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	start := time.Now()
	old := e.set.Load()
	var (
		set     *policySet
		content []byte
		err     = u.Error
	)
	if err == nil {
		if u.Raw != nil {
			var buf bytes.Buffer
			if _, rerr := buf.ReadFrom(u.Raw); rerr == nil {
				content = buf.Bytes()
			}
		}
		var raw *rawSet
		if raw, err = rawFromBundle(u.Bundle, "bundle "+r.name, content); err == nil {
			// The same revision with other content (a bundle tool that keeps a
			// static revision) is a new set all the same.
			if old != nil && raw.revision == old.revision && digestOf(content) == e.remoteDigest && !e.failing {
				return nil
			}
			set, err = buildRaw(ctx, raw, e.loadOptions())
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		err = remoteError(r, err)
		e.failing = true
		if !streak.add(err) {
			e.logger.Debug("policy bundle still refused; the last good policy set stays in force",
				"source", r.String(), "failed_attempts", streak.attempts, "error", err)
			return err
		}
		e.logReloadFailure(err, old)
		if onReload != nil {
			onReload("", err)
		}
		return err
	}
	e.set.Store(set)
	e.failing = false
	e.remoteDigest = digestOf(content)
	if streak.attempts > 0 {
		e.logger.Info("the bundle server's policies are in force again",
			"failed_attempts", streak.attempts, "failing_for", time.Since(streak.since).Round(time.Millisecond))
		*streak = failureStreak{}
	}
	e.logLoaded("policies reloaded", set, time.Since(start))
	if perr := r.persist(content); perr != nil {
		e.logger.Warn("the new policy bundle is in force but could not be persisted", "error", perr)
	}
	if onReload != nil {
		onReload(set.revision, nil)
	}
	return nil
}

// remoteError makes a download failure a *LoadError naming the bundle.
func remoteError(r *Remote, err error) error {
	var le *LoadError
	if errors.As(err, &le) {
		return err
	}
	return fileError(r.String(), err)
}
