package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// reasonAuditUnavailable is data.reason of a request refused because its
// decision record could not be written (docs/protocol.md section 1, the audit stage).
const reasonAuditUnavailable = "audit unavailable"

// WithAudit writes the session's audit trail to sink: its start and end, a
// decision record for every audited request (written before anything touches
// the disk; a request whose record cannot be written is refused with IO_ERROR
// and data.reason "audit unavailable") and an outcome record after every
// allowed one. With redactPaths, paths are recorded as sink.PathDigest of the
// canonical path. The caller owns sink and closes it after the session.
//
// A session built without WithAudit, or with a nil sink (a nil *audit.Writer
// too), refuses every audited request as if its trail had failed, unless the
// host passes WithoutAuditTrail; of the two options, the last one given
// counts.
//
// Every append has a deadline: an *audit.Guarded sink's, else the session
// guards sink with audit.Guard(sink, audit.DefaultAppendTimeout, the session's
// logger). An append that passes it fails like any other (the request is
// refused, and an outcome record is logged as lost). A host that wants another
// timeout, or one count of failures over all its sessions (audit.Guarded.Stats),
// gives every session the same *audit.Guarded.
func WithAudit(sink audit.Sink, redactPaths bool) Option {
	return func(s *Session) { s.auditSink, s.redactPaths, s.withoutTrail = sink, redactPaths, false }
}

// WithoutAuditTrail runs the session without an audit trail: audited requests
// go on, and nothing records them. It is for a host that keeps no trail on
// purpose (tests, a sandbox); without it, a session given no trail refuses
// them.
func WithoutAuditTrail() Option {
	return func(s *Session) { s.auditSink, s.withoutTrail = nil, true }
}

// errNoAuditTrail fails every append of a session built without a trail and
// without WithoutAuditTrail: its audited requests are refused.
var errNoAuditTrail = fmt.Errorf("%w: the session was built without an audit trail (WithAudit) and without WithoutAuditTrail", audit.ErrUnavailable)

// guardTrail is the trail a session writes to: sink as it is if it is
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

// call is one audited request on its way through the pipeline. The request's
// context carries it (callFrom), so that the decision stage, deep in a
// method's handler, can record the decision and the handler can count bytes.
type call struct {
	id        string // the decision id, returned in data.decisionId
	method    string
	decided   bool // the decision stage ran
	allowed   bool
	decidedAt time.Time
	bytes     atomic.Int64 // bytes read or written, for the outcome record
}

type callKey struct{}

// withCall returns ctx carrying c.
func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callFrom returns the audited request ctx carries, or nil.
func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// countBytes adds n to the bytes the request in ctx read or wrote.
func countBytes(ctx context.Context, n int64) {
	if c := callFrom(ctx); c != nil {
		c.bytes.Add(n)
	}
}

// newCall starts an audited request.
func (s *Session) newCall(method string) *call {
	return &call{id: s.id + "-" + strconv.FormatUint(s.decisions.Add(1), 10), method: method}
}

// ServerID is the server's identity for grants, quotas and the audit trail:
// the id the operator pinned (WithServerID), else the name the server
// declared in initialize ("" before).
func (s *Session) ServerID() string {
	id, _ := s.serverID()
	return id
}

// DeclaredPrefix starts the state key of a server whose identity is only the
// name it declared (see StateKey).
const DeclaredPrefix = "declared:"

// StateKey is what the server's grants, daily write count and rate limit are
// kept under: the pinned id as it is, and a declared name behind
// DeclaredPrefix. A server that declares the name an operator pinned for
// another one therefore never holds that one's grants, nor spends its quota.
func (s *Session) StateKey() string {
	return StateKeyOf(s.serverID())
}

// StateKeyOf is the state key of the identity id, pinned by the operator or
// only declared by the server (see StateKey).
func StateKeyOf(id string, pinned bool) string {
	if pinned {
		return id
	}
	return DeclaredPrefix + id
}

// IdentityOf undoes StateKeyOf: the identity a state key is kept for, as the
// audit trail names the server, and whether the operator pinned it.
func IdentityOf(key string) (id string, pinned bool) {
	id, declared := strings.CutPrefix(key, DeclaredPrefix)
	return id, !declared
}

// serverID is the server's identity: the pinned id, else its declared name.
func (s *Session) serverID() (id string, pinned bool) {
	if s.pinnedID != "" {
		return s.pinnedID, true
	}
	return s.Server().Name, false
}

// auditPath is how a path appears in the trail.
func (s *Session) auditPath(p string) string {
	if s.redactPaths && s.trail != nil {
		return s.trail.PathDigest(p)
	}
	return p
}

// appendAudit appends one record. Without a trail it does nothing under
// WithoutAuditTrail, and fails otherwise.
func (s *Session) appendAudit(ctx context.Context, rec audit.Record) error {
	if s.trail == nil {
		if s.withoutTrail {
			return nil
		}
		return errNoAuditTrail
	}
	server, _ := s.serverID()
	rec.Server, rec.SessionID = server, s.id
	if _, err := s.trail.Append(ctx, rec); err != nil {
		// The guard logs a run of failures once; this names each record lost.
		s.log.Debug("audit record not written", "kind", rec.Kind, "decisionId", rec.DecisionID, "error", err)
		return err
	}
	return nil
}

// recordDecision writes the decision record of a request, before anything
// touches the disk. It returns the error that refuses the request: the
// verdict's own refusal, or "audit unavailable" for an allowed request whose
// record could not be written.
func (s *Session) recordDecision(ctx context.Context, req Request, v Verdict, took time.Duration) error {
	var refusal error
	if !v.Allow {
		reason := strings.Join(v.Reasons, "; ")
		if reason == "" {
			reason = "denied by policy"
		}
		e := errcode.New(v.Code, reason)
		if v.Revision != "" {
			e.With("policyRevision", v.Revision)
		}
		refusal = e
	}
	c := callFrom(ctx)
	if c == nil {
		if !s.withoutTrail && v.Allow {
			// A decision outside an audited request would have no record:
			// refused rather than run unrecorded.
			s.log.Error("a decision outside an audited request; refusing", "method", req.Method)
			return errcode.New(errcode.IOError, reasonAuditUnavailable)
		}
		return refusal
	}
	c.decided, c.allowed, c.decidedAt = true, v.Allow, time.Now()
	rec := audit.Record{
		Kind:           audit.KindDecision,
		DecisionID:     c.id,
		Method:         req.Method,
		Operation:      req.Operation,
		Allow:          audit.Bool(v.Allow),
		Code:           string(v.Code),
		Reasons:        v.Reasons,
		PolicyRevision: v.Revision,
		LatencyUs:      took.Microseconds(),
	}
	if req.Method != "roots/list" {
		rec.Paths = append(rec.Paths, s.auditPath(canonicalPath(req.Path)))
	}
	if req.NewPath != nil {
		rec.Paths = append(rec.Paths, s.auditPath(canonicalPath(*req.NewPath)))
	}
	if err := s.appendAudit(ctx, rec); err != nil && v.Allow {
		c.allowed = false
		return errcode.Wrap(errcode.IOError, reasonAuditUnavailable, err)
	}
	return refusal
}

// recordRefusal writes the decision record of a request refused before the
// decision stage (invalid params, an invalid or missing path, a limit), so
// that probing a broker leaves a trace too. The path as the server wrote it
// goes in the detail, shortened.
func (s *Session) recordRefusal(ctx context.Context, c *call, params json.RawMessage, err error) {
	code := errcode.Of(err)
	reason := "internal error"
	var e *errcode.Error
	if errors.As(err, &e) {
		reason = e.Reason
	} else {
		code = "INTERNAL_ERROR"
	}
	detail := "refused before the policy decision: " + reason
	var p struct {
		Path    string `json:"path"`
		NewPath string `json:"newPath"`
	}
	if json.Unmarshal(params, &p) == nil {
		for _, x := range []struct{ name, value string }{{"path", p.Path}, {"newPath", p.NewPath}} {
			if x.value != "" {
				detail += fmt.Sprintf("; %s %q", x.name, truncate(s.auditPath(x.value), 256))
			}
		}
	}
	s.appendAudit(ctx, audit.Record{
		Kind:       audit.KindDecision,
		DecisionID: c.id,
		Method:     c.method,
		Allow:      audit.Bool(false),
		Code:       string(code),
		Detail:     truncate(detail, audit.MaxDetail-8),
	})
}

// recordRateRefusal writes the record of a request refused by the rate
// limiter, with the count of refusals left out since the last one recorded
// (a flood must not flood the trail), and returns its decision id.
func (s *Session) recordRateRefusal(ctx context.Context, method string, refusal *errcode.Error, suppressed int) string {
	c := s.newCall(method)
	detail := "refused before the policy decision: " + refusal.Reason
	if suppressed > 0 {
		detail += fmt.Sprintf("; %d more refusals of this server since the last one recorded", suppressed)
	}
	s.appendAudit(ctx, audit.Record{
		Kind:       audit.KindDecision,
		DecisionID: c.id,
		Method:     method,
		Allow:      audit.Bool(false),
		Code:       string(refusal.Code),
		Detail:     truncate(detail, audit.MaxDetail-8),
	})
	return c.id
}

// recordOutcome writes the outcome record of an allowed request.
func (s *Session) recordOutcome(ctx context.Context, c *call, err error) {
	rec := audit.Record{
		Kind:       audit.KindOutcome,
		DecisionID: c.id,
		Method:     c.method,
		Outcome:    "ok",
		Bytes:      c.bytes.Load(),
		DurationUs: time.Since(c.decidedAt).Microseconds(),
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
	s.appendAudit(context.WithoutCancel(ctx), rec)
}

// WithConfinementNote adds note (how the server process and the broker are
// confined, cmd/fsbroker's --sandbox) to the session_start record's detail.
func WithConfinementNote(note string) Option {
	return func(s *Session) { s.confinementNote = note }
}

// recordSession writes a session_start or session_end record.
func (s *Session) recordSession(ctx context.Context, kind audit.Kind, detail string) {
	if kind == audit.KindSessionStart && s.confinementNote != "" {
		detail += "; " + s.confinementNote
	}
	info := s.Server()
	s.appendAudit(context.WithoutCancel(ctx), audit.Record{
		Kind:            kind,
		ProtocolVersion: info.ProtocolVersion,
		Transport:       s.transport,
		Detail:          truncate(detail, audit.MaxDetail-8),
	})
}
