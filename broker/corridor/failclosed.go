// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// errNoDecider is why a corridor built without a decider shows nothing.
var errNoDecider = errors.New("no decider: the corridor was built without WithDecider")

// ReasonNoDecider is the refusal of every request of a corridor built
// without a decider.
const ReasonNoDecider = "no policy decides for this session: every request is refused"

// denyAll is the decision stage of a corridor built without WithDecider: it
// refuses every request and shows nothing, so that a host that forgot the
// decider gets a broker that does nothing, never one that allows.
type denyAll struct{}

var _ decision.Decider = denyAll{}

// Decide implements decision.Decider: every request is refused.
func (denyAll) Decide(context.Context, *decision.Input) decision.Verdict {
	return decision.Deny(errcode.PermissionDenied, ReasonNoDecider, "")
}

// Visible implements decision.Decider: nothing may be seen.
func (denyAll) Visible(context.Context, *decision.Input, []decision.InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Consentable implements decision.Decider: nothing may be granted.
func (denyAll) Consentable(context.Context, *decision.Input, []decision.InputPath) (map[string]bool, error) {
	return nil, errNoDecider
}

// Carried implements decision.Decider: nothing is carried along.
func (denyAll) Carried(context.Context, *decision.Input, []decision.InputPath) decision.Verdict {
	return decision.Deny(errcode.PermissionDenied, ReasonNoDecider, "")
}
