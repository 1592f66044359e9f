package broker

import (
	"context"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
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
// disk.
type Request struct {
	// Method is the canonical method name (files/read, ...).
	Method string
	// Operation is the kind of access (OpRead, OpWrite, ...).
	Operation string
	// Path is the resolved (canonical) path the request acts on.
	Path executor.Target
	// NewPath is the rename target, resolved; nil for other methods.
	NewPath *executor.Target
	// Bytes is the number of bytes to write or the most to read.
	Bytes int64
	// Server is what the server declared in initialize.
	Server ServerInfo
}

// Decider decides whether a request may go on. It returns nil to allow, or
// the refusal (an *errcode.Error, normally PERMISSION_DENIED or
// QUOTA_EXCEEDED). A Decider that fails to decide must refuse: the broker
// never fails open.
type Decider interface {
	Decide(ctx context.Context, req Request) error
}

// RootModeDecider allows reads everywhere inside the roots and changes only
// inside writable roots. It is the decision stage until a policy engine is
// configured.
type RootModeDecider struct{}

var _ Decider = RootModeDecider{}

// Decide implements Decider.
func (RootModeDecider) Decide(_ context.Context, req Request) error {
	switch req.Operation {
	case OpRead, OpList, OpWatch:
		return nil
	}
	if !req.Path.Path.Root.Writable || (req.NewPath != nil && !req.NewPath.Path.Root.Writable) {
		return errcode.New(errcode.PermissionDenied, "the root is read-only")
	}
	return nil
}
