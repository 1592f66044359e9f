// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// testPipeline is how the tests' sessions decide and record unless a test
// says otherwise: by the roots' modes (rootModeDecider) and without an audit
// trail, both given explicitly, since a session given neither refuses every
// request (TestSessionWithoutDeciderOrTrailRefuses).
func testPipeline() []Option {
	return []Option{WithDecider(rootModeDecider{}), WithoutAuditTrail()}
}

// rootModeDecider allows reads everywhere inside the roots and changes only
// inside writable roots: the decision stage of the tests that are not about
// policy (the library itself has no default but to deny).
type rootModeDecider struct{}

var _ decision.Decider = rootModeDecider{}

// Decide implements decision.Decider.
func (rootModeDecider) Decide(_ context.Context, in *decision.Input) decision.Verdict {
	switch in.Operation {
	case decision.OpRead, decision.OpList, decision.OpWatch:
		return decision.Verdict{Allow: true}
	}
	if in.Path == nil || !in.Path.Writable || (in.NewPath != nil && !in.NewPath.Writable) {
		return decision.Deny(errcode.PermissionDenied, "the root is read-only", "")
	}
	return decision.Verdict{Allow: true}
}

// Visible implements decision.Decider: everything inside the roots may be seen.
func (rootModeDecider) Visible(_ context.Context, _ *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		out[e.MountPath] = true
	}
	return out, nil
}

// Consentable implements decision.Decider: every entry inside the roots may be
// granted.
func (d rootModeDecider) Consentable(ctx context.Context, in *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	return d.Visible(ctx, in, entries)
}

// Carried implements decision.Decider: the request was decided on the root's mode,
// which holds for everything beneath it too.
func (rootModeDecider) Carried(context.Context, *decision.Input, []decision.InputPath) decision.Verdict {
	return decision.Verdict{Allow: true}
}
