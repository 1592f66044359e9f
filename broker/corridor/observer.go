// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
)

// Observer hears what the corridor does, for the process's metrics
// (broker/metrics) and the desktop notifications (broker/notify): a host
// gives every session's corridor the same one (WithObserver). Its methods
// are called on the request's own goroutine, on the request path: they must
// return at once, never block, and allocate nothing a request would pay
// for. Nothing it answers changes what the corridor decides.
type Observer interface {
	// RequestStarted and RequestEnded bracket every request an entry point
	// runs (files/consent included): the requests in flight.
	RequestStarted()
	RequestEnded()
	// Decided is told of every decision record, as it is written: whether
	// it allows, and its code ("" when it allows). A record that could not
	// be written is told too (AuditAppended says it failed).
	Decided(allow bool, code string)
	// DecisionTook is told how long each decision of the consent check and
	// the policy took (the decision record's latencyUs); a request refused
	// before them has none.
	DecisionTook(d time.Duration)
	// AuditAppended is told of every record the session appends to its
	// trail: how long the append took, and its error (nil: written).
	AuditAppended(took time.Duration, err error)
	// ConsentWaiting is told when a consent provider starts waiting for a
	// person to answer (consent.Waiting, the consent.WaitNotice the
	// corridor puts in the provider's context); the function it returns is
	// called once the wait ends.
	ConsentWaiting(provider string, req consent.Request) (ended func(asked bool))
	// ConsentAnswered is told of every files/consent question a provider
	// answered: the provider (the name it gave, "command:PROG" as
	// "command"), how many paths it was asked about and approved, and its
	// error (nil: it answered; an error approves nothing).
	ConsentAnswered(provider string, asked, approved int, err error)
	// FilesUsed is told of a session's first file request that a decision
	// allowed (roots/list aside): the server, the operation (decision.OpRead,
	// ...) and the root's display name.
	FilesUsed(caller Caller, operation, root string)
}

// WithObserver has o hear the corridor's requests, decisions, audit appends
// and consent questions (see Observer). Without it nothing is told, at no
// cost.
func WithObserver(o Observer) Option { return func(c *Corridor) { c.observer = o } }

// observeFirstFileUse tells the observer of the session's first file
// request that every decision allowed: req, the first of them.
func (c *Corridor) observeFirstFileUse(cl *call, req request) {
	if c.observer == nil || req.method == methodRootsList || c.filesUsed.Load() || !c.filesUsed.CompareAndSwap(false, true) {
		return
	}
	root := req.path.Path.Root
	name := root.Name
	if name == "" {
		name = root.Mount
	}
	c.observer.FilesUsed(cl.caller, req.operation, name)
}
