// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package corridor is fsbroker's request pipeline, the stages of
// docs/protocol.md section 1 after a front end decoded a request and
// validated its params: canonicalize the paths, check consent, ask the
// policy, record the decision, execute, record the outcome. Every front end
// calls it (the MCP session of package broker for files/* and roots/list;
// the tools of fsbroker serve), so that every way in runs the same stages in
// the same order.
//
// A Corridor serves one session. Its entry points (Read, Write, List,
// Create, Delete, Rename, Watch, Consent, Roots, Stat) take the caller's identity
// and a typed request, with the paths as the caller wrote them, and return a
// typed result or an error; a brokered failure is an *errcode.Error, which
// carries the decision id of the request's audit record (DecisionID). The
// front end validates the params against its protocol's schema before it
// calls the corridor, and reports a request it refuses before (its params do
// not match the schema) with Refuse, so that every request leaves a record.
//
// stages.go holds the stages in order and the one function that runs them;
// the rest are the stages' parts: consent.go (grants, blocks and the
// files/consent flow), input.go (the policy input), trail.go (the audit
// records), staged.go (chunked writes), visibility.go (what a listing or a
// change event may show), subtree.go (the checked contents of a directory
// operation), usage.go (the daily write count) and watch.go (watches).
//
// The corridor fails closed: without a decider it refuses every request,
// and without an audit trail every audited one unless the host says
// WithoutAuditTrail.
package corridor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/usage"
)

// Limits are the configurable bounds of docs/protocol.md section 6 that the
// corridor enforces.
type Limits struct {
	// MaxReadBytes is the largest length a read may ask for.
	MaxReadBytes int64
	// MaxWriteBytes is the largest content of one write.
	MaxWriteBytes int64
	// OperationTimeout is each operation's deadline.
	OperationTimeout time.Duration
	// StageIdle is how long a staged write waits for its next chunk.
	StageIdle time.Duration
	// MaxWatches is the most watches the session may hold.
	MaxWatches int
}

// Default limits (docs/protocol.md section 6).
const (
	DefaultReadLength       = 1 << 20
	DefaultMaxReadBytes     = 16 << 20
	DefaultMaxWriteBytes    = 16 << 20
	DefaultOperationTimeout = 60 * time.Second
	DefaultStageIdle        = 60 * time.Second
	DefaultMaxWatches       = 64
)

// DefaultLimits returns the limits of docs/protocol.md section 6.
func DefaultLimits() Limits {
	return Limits{
		MaxReadBytes:     DefaultMaxReadBytes,
		MaxWriteBytes:    DefaultMaxWriteBytes,
		OperationTimeout: DefaultOperationTimeout,
		StageIdle:        DefaultStageIdle,
		MaxWatches:       DefaultMaxWatches,
	}
}

// Option configures a Corridor.
type Option func(*Corridor)

// WithLogger sets the corridor's logger.
func WithLogger(l hclog.Logger) Option { return func(c *Corridor) { c.log = l } }

// WithRoots sets the source of the current roots, asked on every request, so
// that a set swapped in by a config reload is seen at once.
func WithRoots(current func() *roots.Set) Option { return func(c *Corridor) { c.roots = current } }

// NarrowRoots makes the corridor serve its roots as narrow returns them:
// at each request, narrow gets the set the roots source (WithRoots) gives
// now, so that a config reload is still seen, and returns the set the
// request is served under (fsbroker serve: roots.Intersect with the host's
// roots, which may scope roots to subtrees). It is for the session that
// owns the corridor, before the corridor serves its first request.
func (c *Corridor) NarrowRoots(narrow func(*roots.Set) *roots.Set) {
	source := c.roots
	c.roots = func() *roots.Set { return narrow(source()) }
}

// requestRootsKey is the context key of a request's own narrowing
// (WithRequestRoots).
type requestRootsKey struct{}

// WithRequestRoots returns ctx carrying narrow, the narrowing of the roots
// for the requests run under it alone: the corridor serves such a request
// under narrow applied to the set it serves otherwise (the roots source,
// and the session's NarrowRoots), for every stage (canonicalization, the
// policy input's grants, listings, the consent question). fsbroker serve
// runs a request of protocol 2026-07-28 so, under the roots the host gave
// with that request.
func WithRequestRoots(ctx context.Context, narrow func(*roots.Set) *roots.Set) context.Context {
	return context.WithValue(ctx, requestRootsKey{}, narrow)
}

// RequestRoots returns set narrowed as ctx says (WithRequestRoots), or set
// itself when ctx carries no narrowing.
func RequestRoots(ctx context.Context, set *roots.Set) *roots.Set {
	if narrow, ok := ctx.Value(requestRootsKey{}).(func(*roots.Set) *roots.Set); ok && narrow != nil {
		return narrow(set)
	}
	return set
}

// rootsOf returns the roots a request run under ctx is served under.
func (c *Corridor) rootsOf(ctx context.Context) *roots.Set { return RequestRoots(ctx, c.roots()) }

// WithExecutor enables the file operations, performed by x (shared by every
// session of the process).
func WithExecutor(x *executor.Executor) Option { return func(c *Corridor) { c.exec = x } }

// WithDecider sets the decision stage. Without it, or with a nil d, every
// request is refused with PERMISSION_DENIED and nothing is shown.
func WithDecider(d decision.Decider) Option { return func(c *Corridor) { c.decider = d } }

// WithConsent sets how consent is given: provider answers files/consent
// (after the policy's consentable query narrowed the request), and store
// keeps the grants it approves and the operator's blocks of pre-approved
// roots, shared by every session and broker process on the state directory.
// Without it no grant is ever given, and only the roots the operator
// pre-approved (roots.Spec.Preapproved) can be used, every path of them.
func WithConsent(provider consent.Provider, store *grants.Store) Option {
	return func(c *Corridor) { c.consent, c.grants = provider, store }
}

// WithUsage keeps the bytes each server writes per UTC day in a store shared
// by every session and broker process on the state directory (so the daily
// quota survives reconnects and restarts), instead of per session in memory.
func WithUsage(st *usage.Store) Option { return func(c *Corridor) { c.usage = st } }

// WithWatchHub enables watches, backed by hub (one per process).
func WithWatchHub(hub *watch.Hub) Option { return func(c *Corridor) { c.hub = hub } }

// WithLimits sets the limits; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(c *Corridor) {
		d := DefaultLimits()
		if l.MaxReadBytes > 0 {
			d.MaxReadBytes = l.MaxReadBytes
		}
		if l.MaxWriteBytes > 0 {
			d.MaxWriteBytes = l.MaxWriteBytes
		}
		if l.OperationTimeout > 0 {
			d.OperationTimeout = l.OperationTimeout
		}
		if l.StageIdle > 0 {
			d.StageIdle = l.StageIdle
		}
		if l.MaxWatches > 0 {
			d.MaxWatches = l.MaxWatches
		}
		c.limits = d
	}
}

// Corridor is the request pipeline of one session: the process-wide pieces
// it runs on (roots, executor, decider, consent, grants, usage, audit trail,
// watch hub) and the session's own state (staged writes, watches, its write
// count, its decision ids). Its methods are safe for concurrent use.
type Corridor struct {
	log          hclog.Logger
	roots        func() *roots.Set
	exec         *executor.Executor
	decider      decision.Decider
	consent      consent.Provider
	grants       *grants.Store
	usage        *usage.Store
	hub          *watch.Hub
	limits       Limits
	auditSink    audit.Sink     // as WithAudit gave it
	trail        *audit.Guarded // auditSink under its deadline; nil without a trail
	withoutTrail bool           // WithoutAuditTrail: no trail, and requests go on without one
	redactPaths  bool
	observer     Observer    // WithObserver; nil: nobody is told
	filesUsed    atomic.Bool // the session's first allowed file request was told

	started   time.Time     // pre-approvals are granted as of the session's start
	decisions atomic.Uint64 // decision ids issued
	staged    *stageTable
	watches   watchTable
	written   dailyCounter // this session's writes, today
}

// New returns the corridor of one session. Close ends it.
func New(opts ...Option) *Corridor {
	c := &Corridor{
		log:     hclog.NewNullLogger(),
		roots:   func() *roots.Set { return nil },
		decider: denyAll{},
		limits:  DefaultLimits(),
		started: time.Now(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.decider == nil {
		c.decider = denyAll{}
	}
	c.trail = guardTrail(c.auditSink, c.log)
	if c.trail == nil && !c.withoutTrail {
		c.log.Warn("no audit trail: every audited request is refused (WithAudit, or WithoutAuditTrail to run without one)")
	}
	c.staged = newStageTable(c.limits.StageIdle)
	c.watches.max = c.limits.MaxWatches
	return c
}

// Files reports whether the corridor performs file operations (it has an
// executor).
func (c *Corridor) Files() bool { return c.exec != nil }

// Watches reports whether the corridor serves watches (it has a hub).
func (c *Corridor) Watches() bool { return c.exec != nil && c.hub != nil }

// Limits returns the limits the corridor enforces (WithLimits).
func (c *Corridor) Limits() Limits { return c.limits }

// Stats counts what the session holds now.
type Stats struct {
	// StagedWrites counts the staged writes waiting for their next chunk.
	StagedWrites int
	// Watches counts the watches.
	Watches int
}

// Stats returns what the session holds now.
func (c *Corridor) Stats() Stats {
	return Stats{StagedWrites: c.staged.len(), Watches: c.watches.count()}
}

// Close ends the session's staged writes and watches; later ones are
// refused.
func (c *Corridor) Close() {
	c.staged.close()
	c.watches.closeAll()
}
