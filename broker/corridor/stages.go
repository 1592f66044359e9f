// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// The stages of docs/protocol.md section 1 that follow the front end's
// decoding and schema validation, in their order:
//
//	checkLimits -> canonicalize -> checkConsent -> decide (policy) -> recordDecision
//	            -> execute -> recordOutcome
//
// Each entry point (ops.go) hands its request to its operation: its limits,
// how its paths are canonicalized into the requests to decide, and what it
// executes once every decision allowed it. run takes a request through the
// stages of its operation; end writes the request's last record, chosen from
// where the request stopped.

// request is what the decision stage decides on: one request after its
// paths were canonicalized and resolved, before anything touches the disk.
// The decider sees only the policy input built from it (policyInput).
type request struct {
	method    string          // the canonical method name (files/read, ...)
	operation string          // decision.OpRead, ...
	path      executor.Target // the resolved path; zero for roots/list
	requested string          // the path as the caller wrote it
	newPath   *executor.Target
	// newRequested is the rename target as the caller wrote it.
	newRequested string
	bytes        int64  // bytes to write, or the most to read
	params       []byte // the params document, content not yet removed
}

// requests are the requests one operation decides, in order: one for most
// operations, two for a rename (its source, then its target), held in place
// rather than in a slice of their own.
type requests struct {
	n   int
	all [2]request
}

// oneRequest is the requests of an operation with one path.
func oneRequest(req request) requests { return requests{n: 1, all: [2]request{req}} }

// list returns the requests in the order they are decided.
func (rs *requests) list() []request { return rs.all[:rs.n] }

// release closes what the requests' targets hold open (a read's file, kept
// from its resolution: executor.ResolveRead).
func (rs *requests) release() {
	for _, req := range rs.list() {
		req.path.Release()
		if req.newPath != nil {
			req.newPath.Release()
		}
	}
}

// operation is one request's own part of the corridor, for a request of type
// Q with a result of type R. Each is a package-level value (ops.go): its
// steps take the corridor and the request as arguments, so that a request
// allocates no closures of its own.
type operation[Q, R any] struct {
	method string
	// named are the paths the request's refusal record names (refused
	// before a decision): the params' path and newPath members.
	named func(q Q) [2]string
	// checkLimits refuses a request over the configured limits before
	// anything else; nil when the operation has none.
	checkLimits func(c *Corridor, q Q) error
	// canonicalize resolves the request's paths and returns the requests to
	// decide, in order (a rename decides its source and its target).
	canonicalize func(ctx context.Context, c *Corridor, q Q) (requests, error)
	// execute runs once every decision allowed the request. A directory
	// operation decides there what it carries along (guardSubtree).
	execute func(ctx context.Context, c *Corridor, cl *call, q Q, reqs requests) (R, error)
	// attempts bounds how often a conflict in execute (the file opened is
	// not the one decided on: a read racing an atomic replace) runs
	// canonicalize, the decisions and execute again; 0 or 1: once.
	attempts int
}

// call is one audited request on its way through the corridor: its decision
// id (in every record of the request and in its error), its caller, when it
// was decided and the bytes it moved. It is passed along explicitly.
type call struct {
	caller    Caller
	id        string
	method    string
	named     [2]string
	decidedAt time.Time
	bytes     int64
}

// run takes one audited request q through the corridor, under the
// operation's deadline, and returns its result, or its error carrying the
// decision id. The request's last record is decided here, from where it
// stopped (end): a refusal before any decision, the refusing decision
// itself, or the outcome of a request every decision allowed.
func run[Q, R any](ctx context.Context, c *Corridor, caller Caller, op *operation[Q, R], q Q) (R, error) {
	var zero R
	if c.observer != nil {
		c.observer.RequestStarted()
		defer c.observer.RequestEnded()
	}
	cl := c.newCall(caller, op.method, op.named(q))
	stageCtx, cancel := context.WithTimeout(ctx, c.limits.OperationTimeout)
	defer cancel()
	if op.checkLimits != nil {
		if err := op.checkLimits(c, q); err != nil {
			return zero, c.end(ctx, cl, err, false)
		}
	}
	// What the requests hold open (a read's file) is released as soon as
	// they are decided or done, and here in any case: a panic in a decision
	// or an execution, which the JSON-RPC layer recovers, leaves nothing open.
	var reqs requests
	defer func() { reqs.release() }()
	for attempt := 1; ; attempt++ {
		// A retried attempt is decided, and recorded, on its own: the file
		// the path names now may be another one (a link, a secret), and the
		// policy must see that one.
		var err error
		reqs, err = op.canonicalize(stageCtx, c, q)
		if err != nil {
			return zero, c.end(ctx, cl, err, attempt > 1)
		}
		for i, req := range reqs.list() {
			if err := c.decide(stageCtx, cl, req); err != nil {
				reqs.release()
				return zero, c.end(ctx, cl, err, attempt > 1 || i > 0)
			}
		}
		c.observeFirstFileUse(cl, reqs.all[0])
		result, err := op.execute(stageCtx, c, cl, q, reqs)
		reqs.release()
		if err != nil && errcode.Of(err) == errcode.ConcurrencyConflict && attempt < op.attempts {
			continue
		}
		return result, c.end(ctx, cl, err, true)
	}
}

// end writes the last record of a request that ended with err (nil: done),
// and returns err with the request's decision id. A request refused by a
// decision has its decision record, which says why, as its last; one that
// ended before any decision was recorded (decided is false) gets a refusal
// record, so that probing leaves a trace too; one that every decision
// allowed gets its outcome record.
func (c *Corridor) end(ctx context.Context, cl *call, err error, decided bool) error {
	switch {
	case isRefusal(err):
	case !decided:
		c.recordRefusal(ctx, cl, err)
	default:
		c.recordOutcome(ctx, cl, err)
	}
	return withDecisionID(err, cl.id)
}

// canonicalize is the canonicalization stage for one path as the caller
// wrote it: parsed against the roots (docs/protocol.md section 3), then
// resolved by the executor, links followed inside the root when follow is
// set. A link can lead into a nested root; the resolved path is then
// resolved again under that root, so that the deepest root's settings
// always apply. When the roots are scoped to subtrees (roots.Intersect:
// fsbroker serve under a host's roots), both the path as written and the
// path it resolves to must lie in one of them.
func (c *Corridor) canonicalize(ctx context.Context, raw string, follow bool) (executor.Target, error) {
	return c.canonicalizeFor(ctx, raw, follow, false)
}

// canonicalizeFor is canonicalize; forRead resolves for a read
// (executor.ResolveRead: links followed, the file kept open until its
// requests are released).
func (c *Corridor) canonicalizeFor(ctx context.Context, raw string, follow, forRead bool) (executor.Target, error) {
	set := c.rootsOf(ctx)
	p, err := canon.Parse(set, raw)
	if err != nil {
		return executor.Target{}, err
	}
	if !set.Allows(p.Root, p.Rel) {
		return executor.Target{}, errcode.New(errcode.PermissionDenied, ReasonOutsideHostRoots)
	}
	for seg := range strings.SplitSeq(p.Rel, "/") {
		if executor.IsTempName(seg) {
			// The broker's own temporary files are hidden from listings and
			// watches; a caller may not name them (a hidden channel).
			return executor.Target{}, errcode.New(errcode.InvalidPath, "names starting with "+executor.TempPrefix+" are reserved")
		}
	}
	var t executor.Target
	if forRead {
		t, err = c.exec.ResolveRead(ctx, p)
	} else {
		t, err = c.exec.Resolve(ctx, p, follow)
	}
	if err != nil {
		return executor.Target{}, err
	}
	if r := canon.Reroot(set, t.Path); r.Root != t.Path.Root {
		t.Release()
		if t, err = c.exec.Resolve(ctx, r, follow); err != nil {
			return executor.Target{}, err
		}
	}
	if !set.Allows(t.Path.Root, t.Path.Rel) {
		t.Release()
		return executor.Target{}, errcode.New(errcode.PermissionDenied, "a symbolic link on the path leaves the host's roots")
	}
	return t, nil
}

// ReasonOutsideHostRoots is the refusal (data.reason) of a path outside
// the subtrees a host's roots narrowed the operator's roots to.
const ReasonOutsideHostRoots = "the path is outside the host's roots"

// decide is the decision stage for one request: the daily write quota must
// be checkable (writes), a grant or a pre-approval must cover the paths
// (checkConsent), then the policy decides; the decision is recorded before
// anything touches the disk (recordDecision). It returns nil when the
// request may go on, else its refusal.
func (c *Corridor) decide(ctx context.Context, cl *call, req request) error {
	if req.operation == decision.OpWrite {
		if err := c.checkUsage(cl.caller, time.Now()); err != nil {
			return err
		}
	}
	start := time.Now()
	if req.method != methodRootsList {
		if v := c.checkConsent(cl.caller, req); v != nil {
			return c.recordDecision(ctx, cl, req, *v, c.tookToDecide(start))
		}
	}
	v := c.decider.Decide(ctx, c.policyInput(ctx, cl.caller, req))
	return c.recordDecision(ctx, cl, req, v, c.tookToDecide(start))
}

// tookToDecide is the time since a decision started, told to the observer.
func (c *Corridor) tookToDecide(start time.Time) time.Duration {
	took := time.Since(start)
	if c.observer != nil {
		c.observer.DecisionTook(took)
	}
	return took
}
