// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import (
	"context"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
)

// NewSession builds a session over stream with the runtime's components:
// its roots (the operator's now, seen through view: wrap narrows them by
// the host's; nil: as they are), schemas, executor and watcher, the policy
// decider, the audit trail under its deadline, usage, rate limits, consent
// and grants, the server's pinned identity, the limits and the
// confinement's note. extra options come after these. Run it with Serve.
func (rt *Runtime) NewSession(stream jsonrpc.Stream, view func(func() *roots.Set) func() *roots.Set,
	extra ...broker.Option) (*broker.Session, error) {
	rootsOf := rt.current.Load
	if view != nil {
		rootsOf = view(rt.current.Load)
	}
	l := rt.cfg.Limits
	sess, err := broker.NewSession(stream, append([]broker.Option{
		broker.WithLogger(rt.log),
		broker.WithRoots(rootsOf),
		broker.WithValidator(rt.validator),
		broker.WithVersion(rt.cfg.Version),
		broker.WithInitTimeout(l.InitTimeout),
		broker.WithPingInterval(l.PingInterval),
		broker.WithExecutor(rt.exec),
		broker.WithWatchHub(rt.hub, l.MaxWatches),
		broker.WithDecider(engine.Decider{Engine: rt.engine, Log: rt.log.Named("policy")}),
		broker.WithAudit(rt.sink, rt.cfg.Audit.RedactPaths),
		broker.WithUsage(rt.usage),
		broker.WithLimiter(rt.limiter),
		broker.WithConsent(rt.consent, rt.grants),
		broker.WithServerID(rt.cfg.ServerID),
		broker.WithConfinementNote(rt.confinementNote()),
		broker.WithObserver(rt.corridorObserver()),
		broker.WithLimits(corridor.Limits{MaxReadBytes: l.MaxReadBytes, MaxWriteBytes: l.MaxWriteBytes,
			OperationTimeout: l.OperationTimeout}),
		broker.WithConnOptions(
			jsonrpc.WithMaxInFlight(l.MaxInFlight),
			jsonrpc.WithShutdownTimeout(l.ShutdownTimeout),
		),
	}, extra...)...)
	if err != nil {
		return nil, err
	}
	if rt.started.Len() == 0 {
		rt.log.Warn("no roots configured: the server will see none (use --root DIR or a config file)")
	}
	return sess, nil
}

// Serve runs sess until it ends (see broker.Session.Run) and returns its
// error. While it runs, the session hears of what changes around it: a
// revocation, block or restore of its server's grants by any process on the
// state directory (it re-checks its watches and tells its server), and new
// roots from a reload (notifications/roots/list_changed).
func (rt *Runtime) Serve(ctx context.Context, sess *broker.Session) error {
	rt.sessionsMu.Lock()
	rt.sessions[sess] = struct{}{}
	rt.sessionsMu.Unlock()
	defer func() {
		rt.sessionsMu.Lock()
		delete(rt.sessions, sess)
		rt.sessionsMu.Unlock()
	}()
	return sess.Run(ctx)
}

// liveSessions are the sessions Serve runs now.
func (rt *Runtime) liveSessions() []*broker.Session {
	rt.sessionsMu.Lock()
	defer rt.sessionsMu.Unlock()
	out := make([]*broker.Session, 0, len(rt.sessions))
	for s := range rt.sessions {
		out = append(out, s)
	}
	return out
}

// NewCorridor returns the corridor of one session of a front end other than
// the client role's MCP session (fsbroker serve), with the same parts
// NewSession gives a session's corridor: the operator's roots now, the
// executor and watcher, the policy decider, the audit trail under its
// deadline, usage, consent and grants, and the limits. The caller closes it
// when the session ends.
func (rt *Runtime) NewCorridor() *corridor.Corridor {
	l := rt.cfg.Limits
	return corridor.New(
		corridor.WithLogger(rt.log),
		corridor.WithRoots(rt.current.Load),
		corridor.WithExecutor(rt.exec),
		corridor.WithWatchHub(rt.hub),
		corridor.WithDecider(engine.Decider{Engine: rt.engine, Log: rt.log.Named("policy")}),
		corridor.WithAudit(rt.sink, rt.cfg.Audit.RedactPaths),
		corridor.WithUsage(rt.usage),
		corridor.WithConsent(rt.consent, rt.grants),
		corridor.WithObserver(rt.corridorObserver()),
		corridor.WithLimits(corridor.Limits{MaxReadBytes: l.MaxReadBytes, MaxWriteBytes: l.MaxWriteBytes,
			OperationTimeout: l.OperationTimeout, MaxWatches: l.MaxWatches}),
	)
}

// PinnedID is the identity the operator pinned for the peer (Config.ServerID;
// in fsbroker serve, the host), or "" when the peer's declared name is its
// identity.
func (rt *Runtime) PinnedID() string { return rt.cfg.ServerID }

// Version is the broker's version, as sessions report it.
func (rt *Runtime) Version() string { return rt.cfg.Version }

// WatchGrants calls changed with the state key of each server whose grants
// or blocks any process on the state directory changes (grants.AnyServer
// when it cannot tell), until ctx ends: for the sessions of a front end
// other than the client role's (fsbroker serve), which Serve does not run.
func (rt *Runtime) WatchGrants(ctx context.Context, changed func(server string)) error {
	return rt.grants.Watch(ctx, changed)
}
