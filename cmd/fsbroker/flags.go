// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/broker/transport/child"
	"github.com/fsbroker/fsbroker/broker/transport/remote"
	"github.com/fsbroker/fsbroker/schema"
)

// options are the settings of a session command, from its flags and the
// config file (flags win).
type options struct {
	configPath      string
	rootFlags       []string
	logLevel        string
	logFormat       string
	maxMessageBytes int
	maxInFlight     int
	initTimeout     time.Duration
	shutdownTimeout time.Duration
	pingInterval    time.Duration
	stateDir        string
	maxReadBytes    int64
	maxWriteBytes   int64
	opTimeout       time.Duration
	lockWait        time.Duration
	maxWatches      int
	policiesDir     string
	bundle          string
	bundleKey       string
	bundleKeyAlg    string
	bundleKeyID     string
	consentSpec     string
	serverID        string
	rateLimit       float64
	rateBurst       int
	serverInFlight  int
	auditDir        string
	auditSync       string
	redactPaths     bool
	auditSegment    int64
	auditSegmentAge time.Duration
	retentionAge    time.Duration
	retentionBytes  int64
	auditWitness    []string        // --audit-witness SPECs, or the config's audit.witness
	witnessBase     string          // what a relative file: witness path is relative to ("": the working directory)
	opaConfig       json.RawMessage // the config file's opa member
	opaBundles      bool            // pull the policy set as opaConfig says
	remoteURL       string          // connect --url, or the config's remote.url
	command         string          // the session command: stdio, connect, wrap
	remoteCA        string          // --ca, or the config's remote.ca
	remoteHeaders   []string        // --header values, "NAME: VALUE"
	sandbox         sandboxOptions  // --sandbox and the config's sandbox section
	http            httpOptions     // serve --http and its TLS and session flags
	metricsAddr     string          // --metrics ADDR ("": no metrics)
	notify          bool            // --notify: desktop notifications

	set map[string]bool // flags given on the command line
}

// Titles of the groups session flags are listed under in help.
const (
	flagsRoots    = "Roots, configuration and state"
	flagsServer   = "Remote server"
	flagsConsent  = "Consent and the server's identity"
	flagsPolicies = "Policies"
	flagsAudit    = "Audit trail"
	flagsLimits   = "Limits"
	flagsSession  = "Session timing"
	flagsSandbox  = "Confinement"
	flagsLog      = "Logging"
)

// stateDirHelp says what the state directory holds.
const stateDirHelp = "`DIR` for the broker's state, outside every root: consent grants and blocks (grants/), " +
	"usage counters (usage/), the audit keys (audit.key, audit-checkpoint.key), the audit trail (audit/, unless --audit " +
	"places it), lock files (locks/), and policy bundles and decision-log progress when the config's opa member " +
	"uses them (bundles/, decisionlog/); default $XDG_STATE_HOME/fsbroker or ~/.local/state/fsbroker"

// registerSessionFlags registers the flags of the session command cmd
// (stdio, connect, wrap) on fs, bound to a fresh options value with the
// defaults.
func registerSessionFlags(fs *pflag.FlagSet, cmd string) *options {
	o := &options{
		logLevel:        "info",
		logFormat:       "text",
		maxMessageBytes: jsonrpc.DefaultMaxMessageBytes,
		maxInFlight:     jsonrpc.DefaultMaxInFlight,
		initTimeout:     broker.DefaultInitTimeout,
		shutdownTimeout: jsonrpc.DefaultShutdownTimeout,
		maxReadBytes:    corridor.DefaultMaxReadBytes,
		maxWriteBytes:   corridor.DefaultMaxWriteBytes,
		opTimeout:       corridor.DefaultOperationTimeout,
		lockWait:        executor.DefaultLockWait,
		command:         cmd,
	}
	fs.SortFlags = false
	fs.Func("root", "a root `DIR`; DIR:rw makes it writable (read-only is the default); repeatable", func(v string) error {
		o.rootFlags = append(o.rootFlags, v)
		return nil
	})
	fs.StringVar(&o.configPath, "config", "", "config `FILE` (YAML; see docs/config.md); watched and reloaded on change")
	fs.StringVar(&o.stateDir, "state-dir", "", stateDirHelp)
	setFlagGroup(fs, flagsRoots, "root", "config", "state-dir")
	if cmd == "connect" || cmd == "wrap" {
		registerRemoteFlags(fs, o)
		setFlagGroup(fs, flagsServer, "url", "ca", "header")
	}
	if cmd == "serve" {
		registerHTTPFlags(fs, o)
	}

	fs.StringVar(&o.consentSpec, "consent", "", "who answers files/consent (`MODE`): auto (approves every approvable path a server asks for; nothing in advance: pre-approval is roots[].consent: preapproved in the config file), deny, prompt (the terminal), elicit (the MCP host's own UI: wrap and serve), console (the person at fsbroker console on the state directory) or command:PROG; default prompt where a terminal exists, else deny (serve on stdio: elicit when the host declares elicitation, else that default; serve --http: deny)")
	fs.StringVar(&o.serverID, "server-id", "", "pin the server's identity to `ID` for grants, quotas, per-server policy and the audit trail (default: the name the server declares, which any server can claim)")
	setFlagGroup(fs, flagsConsent, "consent", "server-id")

	fs.StringVar(&o.policiesDir, "policies", "", "policy `DIR` (Rego and data.json/yaml), tested at load and reloaded on change; default: the built-in policies")
	fs.StringVar(&o.bundle, "bundle", "", "policy bundle `FILE` (.tar.gz as opa build makes it), instead of --policies; reloaded on change")
	fs.StringVar(&o.bundleKey, "bundle-key", "", "`FILE` with the key that must have signed the bundle: a PEM public key, or the shared secret for HS256")
	fs.StringVar(&o.bundleKeyAlg, "bundle-key-alg", "RS256", "the bundle signature's `ALG` (RS256, ES256, HS256, ...)")
	fs.StringVar(&o.bundleKeyID, "bundle-key-id", "default", "the `ID` of the signing key, as opa build --signing-key names it")
	setFlagGroup(fs, flagsPolicies, "policies", "bundle", "bundle-key", "bundle-key-alg", "bundle-key-id")

	fs.StringVar(&o.auditDir, "audit", "", "audit trail `DIR`, where this process writes its own segment files; default <state-dir>/audit")
	fs.StringVar(&o.auditSync, "audit-sync", "batch", "audit durability `MODE`: batch (fsync within 10 ms), always (fsync before the operation) or none")
	fs.BoolVar(&o.redactPaths, "audit-redact-paths", false, "record paths in the audit trail as keyed digests (see fsbroker audit hash)")
	fs.Int64Var(&o.auditSegment, "audit-segment-bytes", audit.DefaultMaxSegmentBytes, "start a new audit segment file after `BYTES`")
	durationVar(fs, &o.auditSegmentAge, "audit-segment-age", audit.DefaultMaxSegmentAge, "start a new audit segment file once the current one is this old")
	durationVar(fs, &o.retentionAge, "audit-retention-age", 0, "delete closed audit segments older than this (0: keep them all)")
	fs.Int64Var(&o.retentionBytes, "audit-retention-bytes", 0, "delete the oldest closed audit segments while all of them hold more than `BYTES` (0: no limit)")
	fs.Func("audit-witness", "send the audit trail's signed checkpoints to `SPEC`, outside the state directory: syslog, syslog:udp://HOST:PORT, syslog:tcp://HOST:PORT, syslog:unixgram:///PATH or file:PATH; repeatable (see fsbroker audit verify --witness)", func(v string) error {
		o.auditWitness = append(o.auditWitness, v)
		return nil
	})
	setFlagGroup(fs, flagsAudit, "audit", "audit-sync", "audit-redact-paths", "audit-segment-bytes", "audit-segment-age",
		"audit-retention-age", "audit-retention-bytes", "audit-witness")

	fs.IntVar(&o.maxMessageBytes, "max-message-bytes", o.maxMessageBytes, "largest accepted message, in `BYTES`")
	fs.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, "requests handled at once (`N`)")
	fs.Int64Var(&o.maxReadBytes, "max-read-bytes", o.maxReadBytes, "largest length one files/read may ask for, in `BYTES`")
	fs.Int64Var(&o.maxWriteBytes, "max-write-bytes", o.maxWriteBytes, "largest content of one files/write, and the most serve reads whole in one call, in `BYTES`")
	fs.IntVar(&o.maxWatches, "max-watches", broker.DefaultMaxWatches, "watches one server may hold (`N`)")
	fs.Float64Var(&o.rateLimit, "rate-limit", broker.DefaultRate, "requests per second one server may make (`N`; 0: no limit); ping is never limited")
	fs.IntVar(&o.rateBurst, "rate-burst", broker.DefaultBurst, "requests one server may make at once above the rate (`N`)")
	fs.IntVar(&o.serverInFlight, "max-in-flight-per-server", broker.DefaultMaxInFlightServer, "requests of one server handled at once, over all its sessions (`N`)")
	durationVar(fs, &o.opTimeout, "operation-timeout", o.opTimeout, "deadline of each file operation")
	durationVar(fs, &o.lockWait, "lock-wait", o.lockWait, "how long an operation waits for a file lock before CONCURRENCY_CONFLICT")
	setFlagGroup(fs, flagsLimits, "max-message-bytes", "max-in-flight", "max-read-bytes", "max-write-bytes", "max-watches",
		"rate-limit", "rate-burst", "max-in-flight-per-server", "operation-timeout", "lock-wait")

	durationVar(fs, &o.initTimeout, "init-timeout", o.initTimeout, "how long to wait for the server's initialize result")
	durationVar(fs, &o.shutdownTimeout, "shutdown-timeout", o.shutdownTimeout, "how long in-flight requests may run after the session ends, and each step of stopping a child")
	durationVar(fs, &o.pingInterval, "ping-interval", 0, "ping the server at this interval (0: never)")
	setFlagGroup(fs, flagsSession, "init-timeout", "shutdown-timeout", "ping-interval")

	registerSandboxFlag(fs, o)
	setFlagGroup(fs, flagsSandbox, "sandbox")

	registerObserveFlags(fs, o)

	fs.StringVar(&o.logLevel, "log-level", o.logLevel, "log `LEVEL`: trace, debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, "log `FORMAT`: text or json (logs go to stderr)")
	setFlagGroup(fs, flagsLog, "log-level", "log-format")
	return o
}

// markSet records which flags of fs the command line gave.
func (o *options) markSet(fs *pflag.FlagSet) {
	o.set = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.set[f.Name] = true })
}

// parseOptions parses the flags of the session command cmd from args, as
// its command line would give them (the demo builds its session so). It
// returns the arguments after the flags.
func parseOptions(cmd string, args []string) (*options, []string, error) {
	fs := pflag.NewFlagSet("fsbroker "+cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := registerSessionFlags(fs, cmd)
	if err := fs.Parse(args); err != nil {
		return nil, nil, &configError{msg: err.Error()}
	}
	o.markSet(fs)
	return o, fs.Args(), nil
}

// setup is what a session command needs once its options are checked: the
// logger, the config file, and the runtime built from them.
type setup struct {
	opts      *options
	log       hclog.Logger
	flagRoots []roots.Spec
	cfg       *fileConfig
	rt        *runtime.Runtime
	proc      *child.Process // the server process fsbroker started (connect, wrap, demo), else nil
	// remote is the stream to the remote server (connect and wrap with
	// --url), made by remoteCheck in the runtime's preflight, else nil.
	remote *remote.Stream
	// metricsServer serves --metrics once the runtime is open, else nil.
	metricsServer *http.Server
}

// close closes what the setup holds: the remote server's stream, then the
// runtime (see runtime.Runtime.Close). prepare calls it when opening
// fails, so that what a check made before is closed too.
func (s *setup) close() {
	s.stopMetrics()
	if s.remote != nil {
		_ = s.remote.Close()
	}
	if s.rt != nil {
		_ = s.rt.Close()
	}
}

// auditSettings checks the audit trail's settings and returns the writer's
// options they make (the witnesses aside).
func auditSettings(o *options) ([]audit.Option, error) {
	mode, err := audit.ParseSyncMode(o.auditSync)
	if err != nil {
		return nil, configErrorf("--audit-sync %q: want batch, always or none", o.auditSync)
	}
	if o.auditSegment < 4096 {
		return nil, configErrorf("--audit-segment-bytes %d: must be at least 4096", o.auditSegment)
	}
	if o.auditSegmentAge <= 0 || o.retentionAge < 0 || o.retentionBytes < 0 {
		return nil, configErrorf("--audit-segment-age must be positive, --audit-retention-age and --audit-retention-bytes not negative")
	}
	opts := []audit.Option{audit.WithSync(mode), audit.WithStateDir(o.stateDir), audit.WithMaxSegmentBytes(o.auditSegment),
		audit.WithMaxSegmentAge(o.auditSegmentAge), audit.WithRetention(o.retentionAge, o.retentionBytes)}
	if hexKey := os.Getenv(auditKeyEnv); hexKey != "" {
		key, err := hex.DecodeString(hexKey)
		if err != nil || len(key) != audit.KeySize {
			return nil, configErrorf("%s: want %d hex digits", auditKeyEnv, 2*audit.KeySize)
		}
		opts = append(opts, audit.WithKey(key))
	}
	return opts, nil
}

// openAudit opens this process's audit writer, with extra options (its witnesses) after the
// others.
func openAudit(o *options, extra ...audit.Option) (*audit.Writer, error) {
	opts, err := auditSettings(o)
	if err != nil {
		return nil, err
	}
	dir := runtime.Audit{Dir: o.auditDir}.DirIn(o.stateDir)
	w, err := audit.Open(dir, append(opts, extra...)...)
	if err != nil {
		return nil, configErrorf("--audit %s: %v", dir, err)
	}
	return w, nil
}

// prepare is configure, then open: the setup of a session command, with
// its runtime open. The checks run in the runtime's preflight; what one
// makes (the remote stream) it hangs on the setup, and when opening fails
// after it, prepare closes the setup, so that nothing made is left open.
func prepare(o *options, stderr io.Writer, checks ...func(*setup) error) (*setup, error) {
	s, cfg, err := configure(o, stderr, checks...)
	if err != nil {
		return nil, err
	}
	if err := s.open(cfg); err != nil {
		s.close()
		return nil, err
	}
	if err := s.serveMetrics(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// configure loads the config file, merges it under the flags, checks every
// setting, and builds the logger and the runtime's Config. Errors are
// configErrors. Every check of a setting, and the checks the command adds
// (its server command, its remote server; run by the runtime once it has
// built the roots), runs before anything is opened or the policies are
// loaded, so that a usage error is the only thing a mistyped command line
// prints.
func configure(o *options, stderr io.Writer, checks ...func(*setup) error) (*setup, runtime.Config, error) {
	tuneGC()
	v, err := schema.New()
	if err != nil {
		return nil, runtime.Config{}, fmt.Errorf("compile schemas: %w", err)
	}
	s := &setup{opts: o}
	if o.configPath != "" {
		if s.cfg, err = loadConfig(o.configPath, v); err != nil {
			return nil, runtime.Config{}, err
		}
		if err := o.mergeConfig(s.cfg); err != nil {
			return nil, runtime.Config{}, err
		}
	}
	level := hclog.LevelFromString(o.logLevel)
	if level == hclog.NoLevel || strings.EqualFold(o.logLevel, "off") {
		return nil, runtime.Config{}, configErrorf("--log-level %q: want trace, debug, info, warn or error", o.logLevel)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, runtime.Config{}, configErrorf("--log-format %q: want text or json", o.logFormat)
	}
	if o.maxMessageBytes < 1024 {
		return nil, runtime.Config{}, configErrorf("--max-message-bytes %d: must be at least 1024", o.maxMessageBytes)
	}
	if o.maxInFlight < 1 || o.maxInFlight > 4096 {
		return nil, runtime.Config{}, configErrorf("--max-in-flight %d: must be between 1 and 4096", o.maxInFlight)
	}
	if o.rateLimit < 0 || o.rateBurst < 1 || o.serverInFlight < 1 {
		return nil, runtime.Config{}, configErrorf("--rate-limit must not be negative, --rate-burst and --max-in-flight-per-server must be at least 1")
	}
	if o.maxWatches < 1 {
		return nil, runtime.Config{}, configErrorf("--max-watches %d: must be at least 1", o.maxWatches)
	}
	if o.maxReadBytes < 1 || o.maxWriteBytes < 1 {
		return nil, runtime.Config{}, configErrorf("--max-read-bytes and --max-write-bytes must be positive")
	}
	for name, d := range map[string]time.Duration{"--init-timeout": o.initTimeout, "--shutdown-timeout": o.shutdownTimeout,
		"--operation-timeout": o.opTimeout, "--lock-wait": o.lockWait} {
		if d <= 0 {
			return nil, runtime.Config{}, configErrorf("%s %s: must be positive", name, d)
		}
	}
	if o.pingInterval < 0 {
		return nil, runtime.Config{}, configErrorf("--ping-interval %s: must not be negative", o.pingInterval)
	}
	if o.metricsAddr != "" {
		if err := checkMetricsAddr(o.metricsAddr); err != nil {
			return nil, runtime.Config{}, err
		}
	}
	// The log is held while a consent prompt is on the terminal (which is,
	// as a rule, where stderr goes too), and comes out once it is answered.
	logOutput := consent.NewHeldOutput(stderr, func(writes int) {
		s.log.Warn("log lines dropped while the consent prompt was on the terminal (over 1 MiB held)", "lines", writes)
	})
	s.log = hclog.New(&hclog.LoggerOptions{
		Name:       "fsbroker",
		Level:      level,
		Output:     logOutput,
		JSONFormat: o.logFormat == "json",
	})
	for _, f := range o.rootFlags {
		spec, err := roots.ParseFlag(f)
		if err != nil {
			return nil, runtime.Config{}, &configError{msg: err.Error()}
		}
		s.flagRoots = append(s.flagRoots, spec)
	}
	if o.stateDir == "" {
		if o.stateDir, err = defaultStateDir(); err != nil {
			return nil, runtime.Config{}, configErrorf("--state-dir: %v; set one", err)
		}
	}
	var consentProvider consent.Provider
	if o.consentSpec == "" && o.command == "serve" && o.servesHTTP() {
		// Over HTTP nobody is asked unless the operator says how: the
		// client that asks could answer its own question (elicit).
		consentProvider = consent.Deny{}
	} else if o.consentSpec == "" {
		consentProvider = consent.Default(consent.WithHeldOutput(logOutput))
		if o.command == "serve" { // the host's own UI when it can show forms
			consentProvider = consent.NewElicitOr(consentProvider)
		}
	} else if o.consentSpec == consent.NameConsole { // the queue of fsbroker console, in the state directory
		if consentProvider, err = consent.NewConsole(o.stateDir); err != nil {
			return nil, runtime.Config{}, configErrorf("--consent console: %v", err)
		}
	} else if consentProvider, err = consent.Parse(o.consentSpec, consent.WithHeldOutput(logOutput)); err != nil {
		return nil, runtime.Config{}, configErrorf("--consent %q: %v", o.consentSpec, err)
	} else if o.consentSpec == consent.NameElicit && o.command != "wrap" && o.command != "serve" {
		return nil, runtime.Config{}, configErrorf("--consent elicit asks through the MCP host's own UI: it works under fsbroker wrap and fsbroker serve, not %s", o.command)
	}
	auditOptions, err := auditSettings(o)
	if err != nil {
		return nil, runtime.Config{}, err
	}
	var specs []roots.Spec
	if s.cfg != nil {
		specs = s.cfg.rootSpecs(o.configPath)
	}
	cfg := runtime.Config{
		StateDir: o.stateDir,
		Roots:    append(specs, s.flagRoots...),
		OwnPaths: s.ownPaths(),
		Policies: runtime.Policies{Dir: o.policiesDir, Bundle: o.bundle, BundleKey: o.bundleKey,
			BundleKeyAlg: o.bundleKeyAlg, BundleKeyID: o.bundleKeyID, Remote: o.opaBundles},
		OPA: o.opaConfig,
		Audit: runtime.Audit{Dir: o.auditDir, Options: auditOptions, RedactPaths: o.redactPaths,
			Witnesses: o.auditWitness, WitnessBase: o.witnessBase, AppendTimeout: audit.DefaultAppendTimeout},
		Consent:  consentProvider,
		ServerID: o.serverID,
		Limits: runtime.Limits{MaxMessageBytes: o.maxMessageBytes, MaxInFlight: o.maxInFlight,
			InitTimeout: o.initTimeout, ShutdownTimeout: o.shutdownTimeout, PingInterval: o.pingInterval,
			MaxReadBytes: o.maxReadBytes, MaxWriteBytes: o.maxWriteBytes, OperationTimeout: o.opTimeout,
			LockWait: o.lockWait, MaxWatches: o.maxWatches, Rate: o.rateLimit, Burst: o.rateBurst,
			MaxInFlightPerServer: o.serverInFlight},
		Sandbox:   runtime.Sandbox{Mode: o.sandbox.mode, Paths: o.sandbox.config},
		Version:   brokerVersion(),
		Validator: v,
		Preflight: func() error {
			for _, check := range checks {
				if err := check(s); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cfg.Metrics, cfg.Notifications = o.metricsAddr != "", o.notify
	if o.remoteCA != "" {
		cfg.Sandbox.BrokerReads = []string{o.remoteCA}
	}
	if o.configPath != "" {
		cfg.ConfigFile = o.configPath
		cfg.ReloadRoots = func() ([]roots.Spec, error) {
			c, err := loadConfig(o.configPath, v)
			if err != nil {
				return nil, err
			}
			return append(c.rootSpecs(o.configPath), s.flagRoots...), nil
		}
	}
	return s, cfg, nil
}

// open opens the runtime cfg describes, whose SIGHUP handling starts with it.
func (s *setup) open(cfg runtime.Config) error {
	rt, err := runtime.Open(context.Background(), cfg, s.log)
	if err != nil {
		return err
	}
	rt.HandleSignals()
	s.rt = rt
	return nil
}

// defaultStateDir is $XDG_STATE_HOME/fsbroker, else ~/.local/state/fsbroker
// (on Windows, %LocalAppData%\fsbroker).
func defaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "fsbroker"), nil
	}
	if goruntime.GOOS == "windows" {
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "fsbroker"), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "fsbroker"), nil
}

// ownPaths are the broker's own paths, each with the setting that names it
// (the flag, the config file's member, or the default): the state directory
// (grants, usage, locks, audit keys, and the audit trail unless --audit
// places it), the audit directory, the policy directory or bundle and its
// key, and the config file.
func (s *setup) ownPaths() []runtime.OwnPath {
	o := s.opts
	var cfg fileConfig
	if s.cfg != nil {
		cfg = *s.cfg
	}
	setting := func(flag, member, fromConfig, def string) string {
		switch {
		case o.set[flag]:
			return "--" + flag
		case fromConfig != "":
			return "config " + o.configPath + ": " + member
		}
		return def
	}
	state := setting("state-dir", "/stateDir", cfg.StateDir, "the default state directory")
	out := []runtime.OwnPath{{Setting: state, Path: o.stateDir,
		Fix: "set --state-dir (or stateDir in the config file) to another directory"}}
	if o.auditDir != "" {
		out = append(out, runtime.OwnPath{Setting: setting("audit", "/audit/dir", cfg.Audit.Dir, "--audit"), Path: o.auditDir,
			Fix: "set --audit (or audit.dir in the config file) to another directory"})
	}
	if o.policiesDir != "" {
		out = append(out, runtime.OwnPath{Setting: setting("policies", "/policies", cfg.Policies, "--policies"), Path: o.policiesDir,
			Fix: "keep the policy directory elsewhere"})
	}
	if o.bundle != "" {
		out = append(out, runtime.OwnPath{Setting: "--bundle", Path: o.bundle, Fix: "keep the bundle elsewhere"})
	}
	if o.bundleKey != "" {
		out = append(out, runtime.OwnPath{Setting: "--bundle-key", Path: o.bundleKey, Fix: "keep the bundle's key elsewhere"})
	}
	if o.configPath != "" {
		out = append(out, runtime.OwnPath{Setting: "--config", Path: o.configPath, Fix: "keep the config file elsewhere"})
	}
	if o.http.tokenFile != "" {
		out = append(out, runtime.OwnPath{Setting: "--http-token-file", Path: o.http.tokenFile, Fix: "keep the token file elsewhere"})
	}
	return out
}

// opaBundles reports whether an OPA configuration configures bundles.
func opaBundles(raw json.RawMessage) bool {
	var c struct {
		Bundles map[string]json.RawMessage `json:"bundles"`
	}
	return len(raw) > 0 && json.Unmarshal(raw, &c) == nil && len(c.Bundles) > 0
}

// mergeConfig takes the config file's settings for every flag not given.
func (o *options) mergeConfig(c *fileConfig) error {
	if c.Log.Level != "" && !o.set["log-level"] {
		o.logLevel = c.Log.Level
	}
	if c.Log.Format != "" && !o.set["log-format"] {
		o.logFormat = c.Log.Format
	}
	if c.Limits.MaxMessageBytes != 0 && !o.set["max-message-bytes"] {
		o.maxMessageBytes = c.Limits.MaxMessageBytes
	}
	if c.Limits.MaxInFlight != 0 && !o.set["max-in-flight"] {
		o.maxInFlight = c.Limits.MaxInFlight
	}
	if c.Policies != "" && !o.set["policies"] {
		o.policiesDir = c.Policies
		if !filepath.IsAbs(o.policiesDir) {
			o.policiesDir = filepath.Join(filepath.Dir(o.configPath), o.policiesDir)
		}
	}
	o.opaConfig = c.OPA
	if opaBundles(c.OPA) {
		if c.Policies != "" {
			return configErrorf("%s: /policies and /opa/bundles: give one policy source", o.configPath)
		}
		o.opaBundles = !o.set["policies"] && !o.set["bundle"]
	}
	if c.ServerID != "" && !o.set["server-id"] {
		o.serverID = c.ServerID
	}
	if c.Consent != "" && !o.set["consent"] {
		o.consentSpec = c.Consent
	}
	if c.Metrics != "" && !o.set["metrics"] {
		o.metricsAddr = c.Metrics
	}
	if c.Notify != nil && !o.set["notify"] {
		o.notify = *c.Notify
	}
	if c.Audit.Dir != "" && !o.set["audit"] {
		o.auditDir = c.Audit.Dir
		if !filepath.IsAbs(o.auditDir) {
			o.auditDir = filepath.Join(filepath.Dir(o.configPath), o.auditDir)
		}
	}
	if len(c.Audit.Witness) > 0 && !o.set["audit-witness"] {
		o.auditWitness, o.witnessBase = c.Audit.Witness, filepath.Dir(o.configPath)
	}
	if c.Audit.Sync != "" && !o.set["audit-sync"] {
		o.auditSync = c.Audit.Sync
	}
	if c.Audit.RedactPaths && !o.set["audit-redact-paths"] {
		o.redactPaths = true
	}
	if c.Audit.MaxSegmentBytes != 0 && !o.set["audit-segment-bytes"] {
		o.auditSegment = c.Audit.MaxSegmentBytes
	}
	if c.Audit.RetentionBytes != 0 && !o.set["audit-retention-bytes"] {
		o.retentionBytes = c.Audit.RetentionBytes
	}
	for _, d := range []struct {
		flag, pointer, value string
		dst                  *time.Duration
	}{
		{"audit-segment-age", "/audit/maxSegmentAge", c.Audit.MaxSegmentAge, &o.auditSegmentAge},
		{"audit-retention-age", "/audit/retentionAge", c.Audit.RetentionAge, &o.retentionAge},
	} {
		v, err := configDuration(o.configPath, d.pointer, d.value)
		if err != nil {
			return err
		}
		if v != 0 && !o.set[d.flag] {
			*d.dst = v
		}
	}
	if c.StateDir != "" && !o.set["state-dir"] {
		o.stateDir = c.StateDir
		if !filepath.IsAbs(o.stateDir) {
			o.stateDir = filepath.Join(filepath.Dir(o.configPath), o.stateDir)
		}
	}
	if c.Limits.MaxReadBytes != 0 && !o.set["max-read-bytes"] {
		o.maxReadBytes = c.Limits.MaxReadBytes
	}
	if c.Limits.MaxWriteBytes != 0 && !o.set["max-write-bytes"] {
		o.maxWriteBytes = c.Limits.MaxWriteBytes
	}
	if c.Limits.MaxWatches != 0 && !o.set["max-watches"] {
		o.maxWatches = c.Limits.MaxWatches
	}
	if c.Limits.RateLimit != nil && !o.set["rate-limit"] {
		o.rateLimit = *c.Limits.RateLimit
	}
	if c.Limits.RateBurst != 0 && !o.set["rate-burst"] {
		o.rateBurst = c.Limits.RateBurst
	}
	if c.Limits.MaxInFlightPerServer != 0 && !o.set["max-in-flight-per-server"] {
		o.serverInFlight = c.Limits.MaxInFlightPerServer
	}
	for _, d := range []struct {
		flag, pointer, value string
		dst                  *time.Duration
	}{
		{"init-timeout", "/limits/initTimeout", c.Limits.InitTimeout, &o.initTimeout},
		{"shutdown-timeout", "/limits/shutdownTimeout", c.Limits.ShutdownTimeout, &o.shutdownTimeout},
		{"operation-timeout", "/limits/operationTimeout", c.Limits.OperationTimeout, &o.opTimeout},
		{"lock-wait", "/limits/lockWait", c.Limits.LockWait, &o.lockWait},
	} {
		v, err := configDuration(o.configPath, d.pointer, d.value)
		if err != nil {
			return err
		}
		if v != 0 && !o.set[d.flag] {
			*d.dst = v
		}
	}
	o.mergeRemote(c)
	return o.mergeSandbox(c)
}

// durationValue is a duration flag whose error, for a number without a unit
// (--init-timeout 10), says that a unit is needed.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string {
	if *d == 0 {
		return "0" // what pflag takes for a zero default, which help leaves out
	}
	return time.Duration(*d).String()
}

// Type is the name help gives the flag's value.
func (d *durationValue) Type() string { return "duration" }

// durationVar registers a duration flag (see durationValue).
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// parseDuration parses a Go duration (300ms, 10s, 2m, 1h30m); a bare number
// other than 0 is refused with the unit it lacks named.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, numErr := strconv.ParseFloat(strings.TrimSpace(s), 64); numErr == nil {
		return 0, fmt.Errorf("a duration needs a unit, as in %ss (or ms, m, h)", strings.TrimSpace(s))
	}
	return 0, fmt.Errorf("not a duration: want a number and a unit, as in 500ms, 10s, 2m or 1h30m")
}
