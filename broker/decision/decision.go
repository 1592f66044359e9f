// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package decision holds what the policy decision stage decides on and what
// it answers: the policy input document (Input, the contract of
// schema/policy-input.json), the operations, the Verdict and the Decider
// interface that a policy engine implements (engine.Decider over OPA).
//
// It imports neither the executor nor the engine: a decider sees the policy
// input and nothing else, so the request pipeline (broker/corridor) and the
// engine both depend on this package and not on each other.
package decision

import (
	"context"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// Operation kinds, as a policy sees them in input.operation.
const (
	OpRead   = "read"
	OpList   = "list"
	OpWatch  = "watch"
	OpWrite  = "write"
	OpCreate = "create"
	OpDelete = "delete"
	OpRename = "rename"
	// OpConsent is the operation of a files/consent request's consentable
	// query.
	OpConsent = "consent"
	// OpVisible is the operation of a visibility query (listing entries,
	// change events, roots).
	OpVisible = "visible"
)

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

// Deny is a refusal with one reason, decided by the policy set revision
// ("" when no policy decided).
func Deny(code errcode.Code, reason, revision string) Verdict {
	return Verdict{Code: code, Reasons: []string{reason}, Revision: revision}
}

// Decider decides whether a request may go on, and which entries of a
// listing or which change events a server may see. Each method gets the
// request's policy input, built by the pipeline. A Decider that fails to
// decide must refuse and show nothing: the broker never fails open.
//
// Decide decides the request itself.
//
// Visible returns the mountPaths of the entries that may be shown.
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
	Decide(ctx context.Context, in *Input) Verdict
	Visible(ctx context.Context, in *Input, entries []InputPath) (map[string]bool, error)
	Consentable(ctx context.Context, in *Input, entries []InputPath) (map[string]bool, error)
	Carried(ctx context.Context, in *Input, entries []InputPath) Verdict
}
