package broker

import (
	"context"
	"errors"
	"time"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// Names of package decision kept while the pipeline moves to a package of its
// own (issue 18); removed once it has.
type (
	// PolicyInput is decision.Input.
	PolicyInput = decision.Input
	// InputServer is decision.InputServer.
	InputServer = decision.InputServer
	// InputSession is decision.InputSession.
	InputSession = decision.InputSession
	// InputPath is decision.InputPath.
	InputPath = decision.InputPath
	// InputGrant is decision.InputGrant.
	InputGrant = decision.InputGrant
	// InputUsage is decision.InputUsage.
	InputUsage = decision.InputUsage
	// InputTime is decision.InputTime.
	InputTime = decision.InputTime
	// Verdict is decision.Verdict.
	Verdict = decision.Verdict
	// Decider is decision.Decider.
	Decider = decision.Decider
)

// Operation kinds of package decision, kept while the pipeline moves.
const (
	OpRead   = decision.OpRead
	OpList   = decision.OpList
	OpWatch  = decision.OpWatch
	OpWrite  = decision.OpWrite
	OpCreate = decision.OpCreate
	OpDelete = decision.OpDelete
	OpRename = decision.OpRename
)

// NewInputTime is decision.NewInputTime, kept while the pipeline moves.
func NewInputTime(t time.Time) InputTime { return decision.NewInputTime(t) }

// Request is what the pipeline decides on: one brokered request after its
// paths were canonicalized and resolved, before anything touches the disk.
// The decider sees only Input, the policy input document built from it.
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
func (denyAll) Decide(context.Context, *PolicyInput) Verdict {
	return decision.Deny(errcode.PermissionDenied, reasonNoDecider, "")
}

// Visible implements Decider: nothing may be seen.
func (denyAll) Visible(context.Context, *PolicyInput, []InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Consentable implements Decider: nothing may be granted.
func (denyAll) Consentable(context.Context, *PolicyInput, []InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Carried implements Decider: nothing is carried along.
func (denyAll) Carried(context.Context, *PolicyInput, []InputPath) Verdict {
	return decision.Deny(errcode.PermissionDenied, reasonNoDecider, "")
}
