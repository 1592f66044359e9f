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
)

// Remote is a policy set pulled from a bundle server, configured the way OPA itself is: the
// services, bundles and keys members of an OPA configuration file
// (https://www.openpolicyagent.org/docs/configuration). Exactly one bundle must be configured:
// it is the broker's whole policy set. The download, polling (with ETags and long polling),
// authentication, size limit and signature verification are OPA's own (v1/download,
// v1/plugins/rest, v1/bundle); what is downloaded then goes through the same compilation,
// type-check and tests as any other source before it decides.
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
	tmp, err := os.CreateTemp(filepath.Dir(file), ".bundle-*.tar.gz")
	if err != nil {
		return fmt.Errorf("persist bundle: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("persist bundle: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("persist bundle: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("persist bundle: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("persist bundle: %w", err)
	}
	return nil
}

// watchRemote polls the bundle server until ctx ends. Each new bundle (its signature already
// verified by OPA's reader when signing is configured) is compiled, type-checked and tested,
// and swapped in only when all of that passes; a download that fails (unreachable server,
// unsigned or tampered bundle, over the size limit) or a bundle that does not build keeps the
// last good set deciding, and is logged and reported to onReload.
func (e *Engine) watchRemote(ctx context.Context, r *Remote, onReload func(string, error)) error {
	d := download.New(r.source.Config, r.client, r.source.Resource).
		WithBundleVerificationConfig(r.source.Signing).
		WithSizeLimitBytes(r.source.SizeLimitBytes).
		WithBundleName(r.name).
		WithBundlePersistence(true). // keeps the raw bytes: the revision digest and the persisted copy
		WithBundleParserOpts(ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}).
		WithCallback(func(ctx context.Context, u download.Update) error {
			return e.remoteUpdate(ctx, r, u, onReload)
		})
	e.logger.Info("pulling policies", "source", r.String(),
		"signed", r.source.Signing != nil, "persist", r.persistFile() != "")
	e.watching.Add(1)
	defer e.watching.Add(-1)
	d.Start(ctx)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.Stop(stopCtx)
	return nil
}

// remoteUpdate handles one download result.
func (e *Engine) remoteUpdate(ctx context.Context, r *Remote, u download.Update, onReload func(string, error)) error {
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
		e.logReloadFailure(err, old)
		if onReload != nil {
			onReload("", err)
		}
		return err
	}
	e.set.Store(set)
	e.failing = false
	e.remoteDigest = digestOf(content)
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
