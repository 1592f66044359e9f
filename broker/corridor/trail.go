// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// ReasonAuditUnavailable is data.reason of a request refused because its
// decision record could not be written (docs/protocol.md section 1, the
// audit stage).
const ReasonAuditUnavailable = "audit unavailable"

// WithAudit writes the trail to sink: a decision record for every audited
// request (written before anything touches the disk; a request whose record
// cannot be written is refused with IO_ERROR and data.reason "audit
// unavailable"), an outcome record after every allowed one, the records of
// consent, and the session's start and end (RecordSession). With
// redactPaths, paths are recorded as sink.PathDigest of the canonical path.
// The caller owns sink and closes it after the session.
//
// A corridor built without WithAudit, or with a nil sink (a nil
// *audit.Writer too), refuses every audited request as if its trail had
// failed, unless the host passes WithoutAuditTrail; of the two options, the
// last one given counts.
//
// Every append has a deadline: an *audit.Guarded sink's, else the corridor
// guards sink with audit.Guard(sink, audit.DefaultAppendTimeout, its logger).
// An append that passes it fails like any other (the request is refused, and
// an outcome record is logged as lost). A host that wants another timeout,
// or one count of failures over all its sessions (audit.Guarded.Stats), gives
// every session the same *audit.Guarded.
func WithAudit(sink audit.Sink, redactPaths bool) Option {
	return func(c *Corridor) { c.auditSink, c.redactPaths, c.withoutTrail = sink, redactPaths, false }
}

// WithoutAuditTrail runs the corridor without an audit trail: audited
// requests go on, and nothing records them. It is for a host that keeps no
// trail on purpose (tests, a sandbox); without it, a corridor given no trail
// refuses them.
func WithoutAuditTrail() Option {
	return func(c *Corridor) { c.auditSink, c.withoutTrail = nil, true }
}

// errNoAuditTrail fails every append of a corridor built without a trail and
// without WithoutAuditTrail: its audited requests are refused.
var errNoAuditTrail = fmt.Errorf("%w: the session was built without an audit trail (WithAudit) and without WithoutAuditTrail", audit.ErrUnavailable)

// guardTrail is the trail a corridor writes to: sink as it is if it is
// guarded already, else sink guarded with the default timeout and log; nil
// without a sink (nil, or a nil *audit.Writer).
func guardTrail(sink audit.Sink, log hclog.Logger) *audit.Guarded {
	if w, ok := sink.(*audit.Writer); sink == nil || ok && w == nil {
		return nil
	}
	if g, ok := sink.(*audit.Guarded); ok {
		return g
	}
	return audit.Guard(sink, audit.DefaultAppendTimeout, log)
}

// newCall starts an audited request of caller; its records name the method
// recordedMethod gives.
func (c *Corridor) newCall(caller Caller, method string, named [2]string) *call {
	return &call{caller: caller, method: recordedMethod(caller, method), named: named,
		id: caller.SessionID + "-" + strconv.FormatUint(c.decisions.Add(1), 10)}
}

// recordedMethod is the method the decision and outcome records of a
// request of caller name (docs/protocol.md section 8): under a front end
// other than the client role's (fsbroker serve), the front end's own
// method, caller.Tool (the tool, or the resources method), when it has one;
// else method, the corridor's. The policy input keeps the corridor's method
// (policyInput): the policies decide on files/* requests whatever the front
// end.
func recordedMethod(caller Caller, method string) string {
	if caller.FrontEnd != "" && caller.Tool != "" {
		return caller.Tool
	}
	return method
}

// auditPath is how a path appears in the trail.
func (c *Corridor) auditPath(p string) string {
	if c.redactPaths && c.trail != nil {
		return c.trail.PathDigest(p)
	}
	return p
}

// appendAudit appends one record of caller. Without a trail it does nothing
// under WithoutAuditTrail, and fails otherwise.
func (c *Corridor) appendAudit(ctx context.Context, caller Caller, rec audit.Record) error {
	if c.observer != nil && rec.Kind == audit.KindDecision {
		c.observer.Decided(rec.Allow != nil && *rec.Allow, rec.Code)
	}
	if c.trail == nil {
		if c.withoutTrail {
			return nil
		}
		return errNoAuditTrail
	}
	rec.Server, rec.SessionID = caller.ID, caller.SessionID
	var start time.Time
	if c.observer != nil {
		start = time.Now()
	}
	_, err := c.trail.Append(ctx, rec)
	if c.observer != nil {
		c.observer.AuditAppended(time.Since(start), err)
	}
	if err != nil {
		// The guard logs a run of failures once; this names each record lost.
		c.log.Debug("audit record not written", "kind", rec.Kind, "decisionId", rec.DecisionID, "error", err)
		return err
	}
	return nil
}

// refusal is the error of a request refused by a recorded decision: the
// verdict's refusal, or "audit unavailable" for an allowed request whose
// record could not be written. Its decision record is the request's last.
type refusal struct{ err *errcode.Error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// isRefusal reports whether err is a refusal by a recorded decision.
func isRefusal(err error) bool {
	if err == nil {
		return false // before errors.As: its target would cost every request an allocation
	}
	var r *refusal
	return errors.As(err, &r)
}

// withDecisionID returns err with the request's decision id set on its
// *errcode.Error (the reply's data.decisionId); any other error is returned
// as it is.
func withDecisionID(err error, id string) error {
	if err == nil {
		return nil // before errors.As: its target would cost every request an allocation
	}
	var e *errcode.Error
	if errors.As(err, &e) {
		e.DecisionID = id
		return e
	}
	return err
}

// recordDecision writes the decision record of a request, before anything
// touches the disk. It returns nil when the verdict allows and the record
// was written, else the *refusal that refuses the request.
func (c *Corridor) recordDecision(ctx context.Context, cl *call, req request, v decision.Verdict, took time.Duration) error {
	cl.decidedAt = time.Now()
	rec := audit.Record{
		Kind:           audit.KindDecision,
		DecisionID:     cl.id,
		Method:         recordedMethod(cl.caller, req.method),
		Tool:           cl.caller.Tool,
		Operation:      req.operation,
		Allow:          audit.Bool(v.Allow),
		Code:           string(v.Code),
		Reasons:        v.Reasons,
		PolicyRevision: v.Revision,
		LatencyUs:      took.Microseconds(),
	}
	if req.method != methodRootsList {
		rec.Paths = append(rec.Paths, c.auditPath(canonicalPath(req.path)))
	}
	if req.newPath != nil {
		rec.Paths = append(rec.Paths, c.auditPath(canonicalPath(*req.newPath)))
	}
	err := c.appendAudit(ctx, cl.caller, rec)
	if !v.Allow {
		reason := strings.Join(v.Reasons, "; ")
		if reason == "" {
			reason = "denied by policy"
		}
		e := errcode.New(v.Code, reason)
		if v.Revision != "" {
			e.With("policyRevision", v.Revision)
		}
		return &refusal{e}
	}
	if err != nil {
		return &refusal{errcode.Wrap(errcode.IOError, ReasonAuditUnavailable, err)}
	}
	return nil
}

// Refuse records a request of caller that its front end refused before the
// corridor (its params are not valid text or do not match the schema), with
// the paths its params name (path, newPath; "" for none), and returns err
// carrying the record's decision id.
func (c *Corridor) Refuse(ctx context.Context, caller Caller, method, path, newPath string, err error) error {
	cl := c.newCall(caller, method, [2]string{path, newPath})
	c.recordRefusal(ctx, cl, err)
	return withDecisionID(err, cl.id)
}

// NamedPaths returns the members path and newPath of a params document, as
// a refusal record names them (Refuse): "" for a member that is missing or
// params that cannot be decoded.
func NamedPaths(params []byte) (path, newPath string) {
	var p struct {
		Path    string `json:"path"`
		NewPath string `json:"newPath"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", ""
	}
	return p.Path, p.NewPath
}

// recordRefusal writes the decision record of a request refused before the
// decision stage (invalid params, an invalid or missing path, a limit), so
// that probing a broker leaves a trace too. The paths as the caller wrote
// them go in the detail, shortened.
func (c *Corridor) recordRefusal(ctx context.Context, cl *call, err error) {
	code := errcode.Of(err)
	reason := "internal error"
	var e *errcode.Error
	if errors.As(err, &e) {
		reason = e.Reason
	} else {
		code = "INTERNAL_ERROR"
	}
	detail := "refused before the policy decision: " + reason
	for i, name := range []string{"path", "newPath"} {
		if v := cl.named[i]; v != "" {
			detail += fmt.Sprintf("; %s %q", name, Truncate(c.auditPath(v), 256))
		}
	}
	c.appendAudit(ctx, cl.caller, audit.Record{
		Kind:       audit.KindDecision,
		DecisionID: cl.id,
		Method:     cl.method,
		Tool:       cl.caller.Tool,
		Allow:      audit.Bool(false),
		Code:       string(code),
		Detail:     Truncate(detail, audit.MaxDetail-8),
	})
}

// RefuseRate records a request of caller refused by the front end's rate
// limiter, with the count of refusals left out of the trail since the last
// one recorded (a flood must not flood the trail), and returns refusal
// carrying the record's decision id.
func (c *Corridor) RefuseRate(ctx context.Context, caller Caller, method string, refusal *errcode.Error, suppressed int) error {
	cl := c.newCall(caller, method, [2]string{})
	detail := "refused before the policy decision: " + refusal.Reason
	if suppressed > 0 {
		detail += fmt.Sprintf("; %d more refusals of this server since the last one recorded", suppressed)
	}
	c.appendAudit(ctx, caller, audit.Record{
		Kind:       audit.KindDecision,
		DecisionID: cl.id,
		Method:     cl.method,
		Tool:       caller.Tool,
		Allow:      audit.Bool(false),
		Code:       string(refusal.Code),
		Detail:     Truncate(detail, audit.MaxDetail-8),
	})
	return withDecisionID(refusal, cl.id)
}

// recordOutcome writes the outcome record of a request every decision
// allowed.
func (c *Corridor) recordOutcome(ctx context.Context, cl *call, err error) {
	rec := audit.Record{
		Kind:       audit.KindOutcome,
		DecisionID: cl.id,
		Method:     cl.method,
		Tool:       cl.caller.Tool,
		Outcome:    "ok",
		Bytes:      cl.bytes,
		DurationUs: time.Since(cl.decidedAt).Microseconds(),
	}
	if err != nil {
		rec.Outcome = string(errcode.Of(err))
		if rec.Outcome == "" {
			rec.Outcome = "INTERNAL_ERROR"
		}
		var e *errcode.Error
		if errors.As(err, &e) {
			if errno, ok := e.Details["errno"].(string); ok {
				rec.Detail = "errno " + errno
			}
		}
	}
	// The operation has happened: a failure here is logged and counted by the
	// guard, and the reply still goes out, within the guard's timeout.
	c.appendAudit(context.WithoutCancel(ctx), cl.caller, rec)
}

// RecordSession writes a session_start or session_end record of caller.
func (c *Corridor) RecordSession(ctx context.Context, caller Caller, kind audit.Kind, detail string) {
	c.appendAudit(context.WithoutCancel(ctx), caller, audit.Record{
		Kind:            kind,
		ProtocolVersion: caller.ProtocolVersion,
		Transport:       caller.Transport,
		Detail:          Truncate(detail, audit.MaxDetail-8),
	})
}

// Truncate shortens s to n bytes (and a mark) for a log line, an error
// message or an audit record's detail, never inside a character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
