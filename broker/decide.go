package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/engine"
)

// Operation kinds, as the decision stage sees them.
const (
	OpRead   = "read"
	OpList   = "list"
	OpWatch  = "watch"
	OpWrite  = "write"
	OpCreate = "create"
	OpDelete = "delete"
	OpRename = "rename"
)

// Request is what the decision stage decides on: one brokered request after
// its paths were canonicalized and resolved, before anything touches the
// disk. Input is the policy input document built from it.
type Request struct {
	// Method is the canonical method name (files/read, ...).
	Method string
	// Operation is the kind of access (OpRead, OpWrite, ...).
	Operation string
	// Path is the resolved (canonical) path the request acts on; its zero
	// value for roots/list.
	Path executor.Target
	// Requested is the path as the server wrote it.
	Requested string
	// NewPath is the rename target, resolved; nil for other methods.
	NewPath *executor.Target
	// NewRequested is the rename target as the server wrote it.
	NewRequested string
	// Bytes is the number of bytes to write or the most to read.
	Bytes int64
	// Params are the request's params (content is removed before a policy
	// sees them).
	Params []byte
	// Input is the policy input document, filled in by the session.
	Input *PolicyInput
}

// Verdict is the decision on one request.
type Verdict struct {
	// Allow is true when the request may go on.
	Allow bool
	// Code is the refusal's code (PERMISSION_DENIED or QUOTA_EXCEEDED) when
	// Allow is false.
	Code errcode.Code
	// Reasons explain a refusal (and may accompany an allow).
	Reasons []string
	// Revision is the revision of the policy set that decided, "" when no
	// policy did.
	Revision string
}

// deny is a refusal with one reason.
func deny(code errcode.Code, reason, revision string) Verdict {
	return Verdict{Code: code, Reasons: []string{reason}, Revision: revision}
}

// Decider decides whether a request may go on, and which entries of a
// listing or which change events a server may see. Visible returns the
// mountPaths of entries that may be shown. A Decider that fails to decide
// must refuse and show nothing: the broker never fails open.
//
// Consentable returns the mountPaths of the entries a files/consent request
// may grant at all (before the consent provider is asked); on failure,
// none.
//
// Carried decides a delete or rename of a directory as a whole, after the
// request itself was allowed: entries are everything beneath the directory,
// which the operation carries along without a decision of its own. On
// failure it refuses.
type Decider interface {
	Decide(ctx context.Context, req Request) Verdict
	Visible(ctx context.Context, req Request, entries []InputPath) (map[string]bool, error)
	Consentable(ctx context.Context, req Request, entries []InputPath) (map[string]bool, error)
	Carried(ctx context.Context, req Request, entries []InputPath) Verdict
}

// errNoDecider is why a session built without a decider shows nothing.
var errNoDecider = errors.New("no decider: the session was built without WithDecider")

// reasonNoDecider is the refusal of every request of a session built
// without a decider.
const reasonNoDecider = "no policy decides for this session: every request is refused"

// denyAll is the decision stage of a session built without WithDecider: it
// refuses every request and shows nothing, so that a host that forgot the
// decider gets a broker that does nothing, never one that allows.
type denyAll struct{}

var _ Decider = denyAll{}

// Decide implements Decider: every request is refused.
func (denyAll) Decide(context.Context, Request) Verdict {
	return deny(errcode.PermissionDenied, reasonNoDecider, "")
}

// Visible implements Decider: nothing may be seen.
func (denyAll) Visible(context.Context, Request, []InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Consentable implements Decider: nothing may be granted.
func (denyAll) Consentable(context.Context, Request, []InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Carried implements Decider: nothing is carried along.
func (denyAll) Carried(context.Context, Request, []InputPath) Verdict {
	return deny(errcode.PermissionDenied, reasonNoDecider, "")
}

// PolicyDecider asks the Rego policy engine: data.fsbroker.authz.decision for
// every request and data.fsbroker.authz.visible for listings and change
// events. (Decisions reach a decision-log service from the audit trail: see
// package decisionlog.)
type PolicyDecider struct {
	Engine *engine.Engine
	Log    hclog.Logger
}

var _ Decider = PolicyDecider{}

// Decide implements Decider. The engine fails closed on its own (a denial
// with a generic reason); the error behind it goes to the log.
func (d PolicyDecider) Decide(ctx context.Context, req Request) Verdict {
	doc := inputDoc(req.Input)
	dec, err := d.Engine.DecideCached(ctx, cacheKey(doc), doc)
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide; denying", "method", req.Method, "error", err)
	}
	return verdictOf(dec)
}

// verdictOf is the Verdict of a policy decision: a refusal is QUOTA_EXCEEDED
// or else PERMISSION_DENIED, whatever code the policy gave.
func verdictOf(dec engine.Decision) Verdict {
	v := Verdict{Allow: dec.Allow, Reasons: dec.Reasons, Revision: dec.Revision}
	if !dec.Allow {
		v.Code = errcode.Code(dec.Code)
		if v.Code != errcode.QuotaExceeded {
			v.Code = errcode.PermissionDenied
		}
	}
	return v
}

// Visible implements Decider.
func (d PolicyDecider) Visible(ctx context.Context, req Request, entries []InputPath) (map[string]bool, error) {
	in := *req.Input
	in.Operation, in.Entries = "visible", entries
	vis, err := d.Engine.Visible(ctx, inputDoc(&in))
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide visibility; hiding the entries", "method", req.Method, "error", err)
	}
	return vis, err
}

// Carried implements Decider with data.fsbroker.authz.decision, the
// request's input with the entries in input.entries. It is not cached (the
// key would hold every entry). The session records the verdict in the trail
// (recordDecision), from which it is uploaded like every decision, with the
// request's paths, not the entries.
func (d PolicyDecider) Carried(ctx context.Context, req Request, entries []InputPath) Verdict {
	in := *req.Input
	in.Entries = entries
	dec, err := d.Engine.Decide(ctx, inputDoc(&in))
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide on a directory's entries; denying", "method", req.Method, "error", err)
	}
	return verdictOf(dec)
}

// cacheKey is the decision cache's key for an encoded policy input: the
// document without its time member, which PolicyInput encodes last. "" (no
// caching) if it is not there.
func cacheKey(doc json.RawMessage) []byte {
	i := bytes.LastIndex(doc, []byte(`,"time":{`))
	if i < 0 {
		return nil
	}
	return doc[:i]
}

// Consentable implements Decider with data.fsbroker.authz.consentable.
func (d PolicyDecider) Consentable(ctx context.Context, req Request, entries []InputPath) (map[string]bool, error) {
	in := *req.Input
	in.Operation, in.Entries = "consent", entries
	ok, err := d.Engine.Consentable(ctx, inputDoc(&in))
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide what may be granted; granting nothing", "error", err)
	}
	return ok, err
}

// inputDoc encodes a policy input for the engine.
func inputDoc(in *PolicyInput) json.RawMessage {
	b, err := in.appendJSON(make([]byte, 0, 1024+320*len(in.Entries))) // an entry is about 250 bytes
	if err != nil {
		return json.RawMessage("null") // undefined input: the policy denies
	}
	return b
}
