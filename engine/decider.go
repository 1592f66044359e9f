// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// Decider is the broker's policy decision stage (decision.Decider) over an Engine:
// data.fsbroker.authz.decision for every request and data.fsbroker.authz.visible and
// consentable for listings, change events and files/consent. It builds each input itself, as
// OPA values (requestValue, batchValue), and keys its caches on the input's fields (requestKey,
// batchValueKey), so no caller depends on how an input is built. (Decisions reach a
// decision-log service from the audit trail: see package decisionlog.)
type Decider struct {
	Engine *Engine
	// Log receives the errors behind fail-closed answers; nil logs nothing.
	Log hclog.Logger
}

var _ decision.Decider = Decider{}

// Decide implements decision.Decider with a cached decision (as DecideCached: reused for the
// same input but its time). The input is built as OPA values with its session part converted
// once per change (decideInput). The engine fails closed on its own (a denial with a generic
// reason); the error behind it goes to the log.
func (d Decider) Decide(ctx context.Context, in *decision.Input) decision.Verdict {
	dec, err := d.Engine.decideInput(ctx, in)
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide; denying", "method", in.Method, "error", err)
	}
	return verdictOf(dec)
}

// Visible implements decision.Decider with data.fsbroker.authz.visible over in with the entries
// in input.entries (with their facts: batchinput.go), from the batch cache when it holds them.
func (d Decider) Visible(ctx context.Context, in *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	batch := *in
	batch.Operation, batch.Entries = decision.OpVisible, entries
	vis, err := d.Engine.decideBatch(ctx, &batch, false)
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide visibility; hiding the entries", "method", in.Method, "error", err)
	}
	return vis, err
}

// Consentable implements decision.Decider with data.fsbroker.authz.consentable.
func (d Decider) Consentable(ctx context.Context, in *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	batch := *in
	batch.Operation, batch.Entries = decision.OpConsent, entries
	ok, err := d.Engine.decideBatch(ctx, &batch, true)
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide what may be granted; granting nothing", "error", err)
	}
	return ok, err
}

// Carried implements decision.Decider with data.fsbroker.authz.decision, the request's input
// with the entries in input.entries. It is not cached (the key would hold every entry). The
// pipeline records the verdict in the trail, from which it is uploaded like every decision,
// with the request's paths, not the entries.
func (d Decider) Carried(ctx context.Context, in *decision.Input, entries []decision.InputPath) decision.Verdict {
	batch := *in
	batch.Entries = entries
	dec, err := d.Engine.Decide(ctx, brokerBatchInput(d.Engine.sessions.of(&batch), &batch, allEntryMembers))
	if err != nil && d.Log != nil {
		d.Log.Error("the policy could not decide on a directory's entries; denying", "method", in.Method, "error", err)
	}
	return verdictOf(dec)
}

// verdictOf is the Verdict of a policy decision: a refusal is QUOTA_EXCEEDED or else
// PERMISSION_DENIED, whatever code the policy gave.
func verdictOf(dec Decision) decision.Verdict {
	v := decision.Verdict{Allow: dec.Allow, Reasons: dec.Reasons, Revision: dec.Revision}
	if !dec.Allow {
		v.Code = errcode.Code(dec.Code)
		if v.Code != errcode.QuotaExceeded {
			v.Code = errcode.PermissionDenied
		}
	}
	return v
}
