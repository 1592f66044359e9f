package decision

import (
	"context"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// RootModeDecider allows reads everywhere inside the roots and changes only
// inside writable roots, from the roots' modes in the policy input. It
// decides without a policy engine.
type RootModeDecider struct{}

var _ Decider = RootModeDecider{}

// Decide implements Decider.
func (RootModeDecider) Decide(_ context.Context, in *Input) Verdict {
	switch in.Operation {
	case OpRead, OpList, OpWatch:
		return Verdict{Allow: true}
	}
	if in.Path == nil || !in.Path.Writable || (in.NewPath != nil && !in.NewPath.Writable) {
		return Deny(errcode.PermissionDenied, "the root is read-only", "")
	}
	return Verdict{Allow: true}
}

// Visible implements Decider: everything inside the roots may be seen.
func (RootModeDecider) Visible(_ context.Context, _ *Input, entries []InputPath) (map[string]bool, error) {
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		out[e.MountPath] = true
	}
	return out, nil
}

// Consentable implements Decider: every entry inside the roots may be
// granted.
func (d RootModeDecider) Consentable(ctx context.Context, in *Input, entries []InputPath) (map[string]bool, error) {
	return d.Visible(ctx, in, entries)
}

// Carried implements Decider: the request was decided on the root's mode,
// which holds for everything beneath it too.
func (RootModeDecider) Carried(context.Context, *Input, []InputPath) Verdict {
	return Verdict{Allow: true}
}
