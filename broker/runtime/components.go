// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package runtime turns a broker's settings into running components and
// keeps them running: it opens the state directory's stores (grants, usage),
// the audit trail with its witnesses and its per-append deadline, the
// policies, the decision-log uploader, the executor and the file watcher;
// it starts sessions with all of them; and it owns what happens while they
// run (the policies and the roots reloaded when their files change, SIGHUP,
// revocations reaching the sessions) and at the end (Close). Open closes
// everything it opened when a step fails, so a host never holds half a
// broker.
//
// cmd/fsbroker uses it for every command that serves, after parsing its
// flags and config file into a Config; a Go host that embeds the broker
// uses it the same way (see the package example).
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/decisionlog"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/metrics"
	"github.com/fsbroker/fsbroker/broker/notify"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/sandbox"
	"github.com/fsbroker/fsbroker/broker/usage"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
	"github.com/fsbroker/fsbroker/schema"
)

// Config is what a broker process runs with: what cmd/fsbroker's flags and
// config file become once parsed. Errors name settings as fsbroker's flags
// and config file do (OwnPaths and roots.Spec.Origin carry the host's own
// names).
type Config struct {
	// StateDir holds the consent grants, usage counts, lock files, audit keys
	// and, unless Audit.Dir places it elsewhere, the audit trail. Required.
	StateDir string
	// Roots are the operator's roots at start.
	Roots []roots.Spec
	// ConfigFile, when set, is watched: after an edit settles, ReloadRoots
	// gives the roots again, and a set that differs replaces the current one.
	// It is also where errors about OPA say the opa member is.
	ConfigFile string
	// ReloadRoots reads the roots again (cmd/fsbroker: the config file's and
	// the --root flags'), for the config watch and Reload; nil: the roots stay
	// as they started.
	ReloadRoots func() ([]roots.Spec, error)
	// OwnPaths are the broker's own files and directories, each named as the
	// host names it; no root may hold one, or lie inside one, at Open and at
	// every reload. Nil: the state directory, the audit directory, the
	// policy directory or bundle and its key, and ConfigFile, named by these
	// fields.
	OwnPaths []OwnPath
	// Policies is where the policy set comes from.
	Policies Policies
	// OPA is OPA's own configuration (the config file's opa member): services,
	// bundles (when Policies.Remote), keys, labels and decision_logs.
	OPA json.RawMessage
	// Audit is the audit trail's settings.
	Audit Audit
	// Consent answers files/consent; nil: every request for consent is denied.
	Consent consent.Provider
	// ServerID pins the served server's identity ("": the name it declares).
	ServerID string
	// Limits bound each session; the zero value is DefaultLimits().
	Limits Limits
	// Sandbox is the Landlock confinement Confine applies.
	Sandbox Sandbox
	// Version is the broker's version in initialize and session_start records.
	Version string
	// Validator checks params against the JSON Schemas; nil: a new one.
	Validator *schema.Validator
	// Metrics turns the process's metrics on (Runtime.Metrics): the
	// sessions' decisions, audit appends, requests in flight and consent
	// questions, the executor's lock waits, the audit guard's failures, the
	// process, and the free space of the state and audit directories.
	Metrics bool
	// Notifications turns desktop notifications on where a session D-Bus
	// exists (broker/notify): a consent question waiting for a person, a
	// server's first allowed file request of a session.
	Notifications bool
	// Preflight, when set, runs once the roots are built and before anything
	// is opened: a host's own checks (cmd/fsbroker: that the server command
	// can be found), so that a usage error leaves nothing made. What it
	// makes is the host's: Open does not close it when a later step fails
	// (cmd/fsbroker closes its remote stream then).
	Preflight func() error
}

// Policies is the source of the policy set: Dir, Bundle (with BundleKey) or
// Remote; none: the built-in policies. A set from Dir, Bundle or Remote is
// tested when it loads, and reloaded when it changes.
type Policies struct {
	Dir          string // a policy directory: Rego files and data.json or data.yaml
	Bundle       string // a policy bundle (.tar.gz, as opa build makes it)
	BundleKey    string // the file with the key the bundle must be signed with
	BundleKeyAlg string // its algorithm (RS256, ES256, HS256, ...)
	BundleKeyID  string // its id
	Remote       bool   // pull the set from a bundle server, as Config.OPA says
}

// Audit is the audit trail's settings.
type Audit struct {
	// Dir is where this process writes its segments; "": StateDir/audit.
	Dir string
	// Options are the writer's options (sync, segments, retention, key);
	// Open adds audit.WithStateDir(StateDir) before them, and the witnesses
	// and the log after.
	Options []audit.Option
	// RedactPaths records paths as keyed digests.
	RedactPaths bool
	// Witnesses are where the signed checkpoints go (audit.ParseWitnessSpec),
	// relative file paths relative to WitnessBase ("": the working directory).
	Witnesses   []string
	WitnessBase string
	// AppendTimeout is each append's deadline; 0: audit.DefaultAppendTimeout.
	AppendTimeout time.Duration
}

// DirIn is the audit trail's directory for the state directory stateDir:
// Dir, else stateDir/audit.
func (a Audit) DirIn(stateDir string) string {
	if a.Dir != "" {
		return a.Dir
	}
	return filepath.Join(stateDir, "audit")
}

// Limits bound each session (see the broker options of the same names).
type Limits struct {
	MaxMessageBytes      int
	MaxInFlight          int
	InitTimeout          time.Duration
	ShutdownTimeout      time.Duration
	PingInterval         time.Duration // 0: never
	MaxReadBytes         int64
	MaxWriteBytes        int64
	OperationTimeout     time.Duration
	LockWait             time.Duration
	MaxWatches           int
	Rate                 float64 // requests per second per server; 0: no limit
	Burst                int
	MaxInFlightPerServer int
}

// DefaultLimits are fsbroker's defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxMessageBytes:      jsonrpc.DefaultMaxMessageBytes,
		MaxInFlight:          jsonrpc.DefaultMaxInFlight,
		InitTimeout:          broker.DefaultInitTimeout,
		ShutdownTimeout:      jsonrpc.DefaultShutdownTimeout,
		MaxReadBytes:         corridor.DefaultMaxReadBytes,
		MaxWriteBytes:        corridor.DefaultMaxWriteBytes,
		OperationTimeout:     corridor.DefaultOperationTimeout,
		LockWait:             executor.DefaultLockWait,
		MaxWatches:           broker.DefaultMaxWatches,
		Rate:                 broker.DefaultRate,
		Burst:                broker.DefaultBurst,
		MaxInFlightPerServer: broker.DefaultMaxInFlightServer,
	}
}

// Sandbox is the Landlock confinement of the broker and the server it
// starts (docs/sandbox.md).
type Sandbox struct {
	Mode  sandbox.Mode   // off ("" too), on or best-effort
	Paths sandbox.Config // the system paths, and what the server may read and write besides the roots
	// BrokerReads are more files the broker itself reads (cmd/fsbroker: the
	// remote server's CA file).
	BrokerReads []string
}

// Runtime is a broker process's running components. Its methods are safe
// for concurrent use.
type Runtime struct {
	cfg       Config
	log       hclog.Logger
	validator *schema.Validator
	consent   consent.Provider

	// current is the operator's roots now: those at start, then each set a
	// reload brings. The executor reads it to know every root's directory (a
	// nested root is never entered through its outer root).
	current atomic.Pointer[roots.Set]
	started *roots.Set // the roots at start

	grants    *grants.Store
	usage     *usage.Store
	engine    *engine.Engine
	trail     *audit.Writer
	sink      *audit.Guarded // the trail under its per-append deadline: one failure count for the process
	decisions *decisionlog.Uploader
	limiter   *broker.Limiter
	hub       *watch.Hub
	exec      *executor.Executor
	metrics   *metrics.Metrics // Config.Metrics; nil: off
	notes     *notify.Notifier // Config.Notifications, where a session bus exists; nil: none
	// confinement is what Confine set up; nil before.
	confinement *confinement

	// background is the life of the runtime's own goroutines (watches,
	// stale temporary files, signals), ended by Close.
	background context.Context
	stop       context.CancelFunc
	tasks      sync.WaitGroup
	reloadMu   sync.Mutex // one roots reload at a time

	sessionsMu sync.Mutex
	sessions   map[*broker.Session]struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open builds the roots, runs cfg.Preflight, then opens the grants and
// usage stores, the audit witnesses, the policies, the audit trail, the
// decision-log uploader, the file watcher and the executor, and starts
// watching the policies, the config file and the grants. On any error it
// closes what it opened and returns a *ConfigError for a setting that
// cannot be used (a root, the state directory, a policy set that does not
// load, ...). log may be nil.
func Open(ctx context.Context, cfg Config, log hclog.Logger) (_ *Runtime, err error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.StateDir == "" {
		return nil, configErrorf("no state directory")
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if err := sandboxAvailable(cfg.Sandbox.Mode); err != nil {
		return nil, err // before anything is opened or loaded
	}
	rt := &Runtime{cfg: cfg, log: log, validator: cfg.Validator, consent: cfg.Consent, sessions: map[*broker.Session]struct{}{}}
	rt.background, rt.stop = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			_ = rt.Close()
		}
	}()
	if rt.validator == nil {
		if rt.validator, err = schema.New(); err != nil {
			return nil, fmt.Errorf("compile schemas: %w", err)
		}
	}
	if rt.consent == nil {
		if rt.consent, err = consent.Parse(consent.NameDeny); err != nil {
			return nil, err
		}
	}
	if rt.started, err = rt.buildRoots(cfg.Roots); err != nil {
		return nil, err
	}
	rt.current.Store(rt.started)
	if cfg.Preflight != nil {
		if err := cfg.Preflight(); err != nil {
			return nil, err
		}
	}
	if err := rt.openComponents(ctx); err != nil {
		return nil, err
	}
	rt.startWatching()
	return rt, nil
}

// openComponents opens the components in turn; Open closes what it opened
// when one fails.
func (rt *Runtime) openComponents(ctx context.Context) error {
	cfg, log := rt.cfg, rt.log
	var err error
	if rt.grants, err = grants.Open(filepath.Join(cfg.StateDir, grants.DirName), grants.WithLogger(log.Named("grants"))); err != nil {
		return configErrorf("--state-dir %s: %v", cfg.StateDir, err)
	}
	if rt.usage, err = usage.Open(filepath.Join(cfg.StateDir, usage.DirName), usage.WithLogger(log.Named("usage"))); err != nil {
		return configErrorf("--state-dir %s: %v", cfg.StateDir, err)
	}
	witnesses, err := openWitnesses(cfg, rt.started)
	if err != nil {
		return err
	}
	if rt.engine, err = loadPolicies(ctx, cfg, log.Named("policy")); err != nil {
		closeWitnesses(witnesses)
		return err
	}
	opts := append([]audit.Option{audit.WithStateDir(cfg.StateDir)}, cfg.Audit.Options...)
	if len(witnesses) > 0 {
		opts = append(opts, audit.WithLogger(log.Named("audit")))
		for _, w := range witnesses {
			opts = append(opts, audit.WithWitness(w))
		}
	}
	dir := cfg.Audit.DirIn(cfg.StateDir)
	if rt.trail, err = audit.Open(dir, opts...); err != nil { // it closes the witnesses
		return configErrorf("--audit %s: %v", dir, err)
	}
	rt.sink = audit.Guard(rt.trail, cfg.Audit.AppendTimeout, log.Named("audit"))
	execOpts := []executor.Option{executor.WithLockWait(cfg.Limits.LockWait),
		executor.WithLogger(log.Named("executor")), executor.WithRoots(rt.current.Load)}
	if cfg.Metrics {
		rt.metrics = metrics.New(metrics.Options{StateDir: cfg.StateDir, AuditDir: dir, AuditStats: rt.sink.Stats})
		execOpts = append(execOpts, executor.WithLockWaits(rt.metrics.LockWaited))
	}
	if cfg.Notifications {
		rt.notes = notify.New(notify.WithLogger(log.Named("notify")))
	}
	if len(cfg.OPA) > 0 {
		rt.decisions, err = decisionlog.New(decisionlog.Options{Config: cfg.OPA, Trail: rt.trail,
			StateDir: cfg.StateDir, Version: cfg.Version, Logger: log.Named("decisionlog")})
		if err != nil {
			return configErrorf("%s: /opa: %v", cfg.ConfigFile, err)
		}
	}
	rt.limiter = broker.NewLimiter(cfg.Limits.Rate, cfg.Limits.Burst, cfg.Limits.MaxInFlightPerServer)
	if rt.hub, err = watch.NewHub(watch.WithLogger(log.Named("watch"))); err != nil {
		return fmt.Errorf("start the file watcher: %w", err)
	}
	if rt.exec, err = executor.New(cfg.StateDir, execOpts...); err != nil {
		return configErrorf("--state-dir %s: %v", cfg.StateDir, err)
	}
	return nil
}

// loadPolicies loads the policy set: Dir or Bundle (tested before use),
// Remote (the persisted copy, if any; Watch pulls), else the built-in set
// (whose tests run in the project's own test suite, so start-up does not
// pay for them). A set that does not load is a configuration error naming
// the file and line.
func loadPolicies(ctx context.Context, cfg Config, log hclog.Logger) (*engine.Engine, error) {
	p := cfg.Policies
	src := engine.Source{FS: policies.FS}
	runTests := false
	switch {
	case p.Dir != "" && p.Bundle != "":
		return nil, configErrorf("--policies and --bundle: give one policy source")
	case p.Dir != "":
		src, runTests = engine.Source{Dir: p.Dir}, true
	case p.Bundle != "":
		src, runTests = engine.Source{Bundle: p.Bundle}, true
		if p.BundleKey != "" {
			key, err := os.ReadFile(p.BundleKey)
			if err != nil {
				return nil, configErrorf("--bundle-key %s: %v", p.BundleKey, err)
			}
			src.BundleVerification = bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
				p.BundleKeyID: {Key: string(key), Algorithm: p.BundleKeyAlg},
			}, p.BundleKeyID, "", nil)
		}
	case p.BundleKey != "":
		return nil, configErrorf("--bundle-key needs --bundle")
	case p.Remote:
		remote, err := engine.ParseRemote(cfg.OPA, filepath.Join(cfg.StateDir, "bundles"))
		if err != nil {
			return nil, configErrorf("%s: /opa: %v", cfg.ConfigFile, err)
		}
		src, runTests = engine.Source{Remote: remote}, true
	}
	e, err := engine.New(ctx, src, engine.WithLogger(log), engine.WithRunTests(runTests))
	if err != nil {
		var lerr *engine.LoadError
		if errors.As(err, &lerr) {
			return nil, configErrorf("policies (%s): %v", src, err)
		}
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return e, nil
}

// watchesPolicies reports whether the policy set can change while the
// broker runs (the built-in set cannot).
func (p Policies) watchesPolicies() bool { return p.Dir != "" || p.Bundle != "" || p.Remote }

// Roots returns the operator's roots now.
func (rt *Runtime) Roots() *roots.Set { return rt.current.Load() }

// Log returns the runtime's logger.
func (rt *Runtime) Log() hclog.Logger { return rt.log }

// Trail returns the audit trail this process writes.
func (rt *Runtime) Trail() *audit.Writer { return rt.trail }

// AuditSink returns the trail under its per-append deadline, the sink the
// sessions write to: for what records beside them (wrap's forward records).
func (rt *Runtime) AuditSink() *audit.Guarded { return rt.sink }

// AuditStats reports the appends to the trail and their failures, over
// every session.
func (rt *Runtime) AuditStats() audit.GuardStats { return rt.sink.Stats() }

// Limits returns the limits the runtime runs with (Config.Limits, or the
// defaults).
func (rt *Runtime) Limits() Limits { return rt.cfg.Limits }
