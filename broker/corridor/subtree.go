// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// maxGuardedEntries bounds the subtree a recursive delete or a rename of a
// directory may carry along: every entry in it is checked.
const maxGuardedEntries = 10000

// guardSubtree protects what a directory operation would carry along without
// its own decision: a delete or rename of a directory acts on everything
// below it, so it is refused when the directory holds another root (whose
// own settings would be bypassed; by its path, and by its directory's
// identity wherever another program moved it), or any entry the policy hides
// from this caller (a secret would otherwise be moved to where it can be
// read, or destroyed), or more entries than can be checked, or when the
// policy refuses the operation on those entries as a whole
// (decision.Decider.Carried: with the default policies, a directory holding
// a .git below it); that verdict is recorded as a decision. It returns the
// entries checked (none when t is not a directory): a recursive delete
// removes those and nothing else.
func (c *Corridor) guardSubtree(ctx context.Context, cl *call, t executor.Target, req request) ([]executor.Entry, error) {
	if !t.Exists || t.Info.Type != executor.TypeDirectory {
		return nil, nil
	}
	dir := t.Path.Root.Path
	if t.Path.Rel != "" {
		dir = strings.TrimSuffix(dir, "/") + "/" + t.Path.Rel
	}
	for _, r := range c.rootsOf(ctx).All() {
		if r.Path != t.Path.Root.Path && strings.HasPrefix(r.Path+"/", dir+"/") {
			return nil, errcode.New(errcode.PermissionDenied, "the directory holds another root, "+r.Mount)
		}
	}
	page, err := c.exec.ListSubtree(ctx, t, maxGuardedEntries)
	if err != nil {
		return nil, err
	}
	if page.NextCursor != "" {
		return nil, errcode.New(errcode.PermissionDenied,
			fmt.Sprintf("the directory holds more than %d entries, too many to check", maxGuardedEntries))
	}
	batch := entryInputPaths(page.Entries)
	visible := c.visible(ctx, cl.caller, req, batch)
	for _, e := range page.Entries {
		if !visible[e.Path.MountPath()] {
			return nil, errcode.New(errcode.PermissionDenied, "the directory holds entries this server may not see")
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	start := time.Now()
	v := c.decider.Carried(ctx, c.policyInput(ctx, cl.caller, req), batch)
	if err := c.recordDecision(ctx, cl, req, v, time.Since(start)); err != nil {
		return nil, err
	}
	return page.Entries, nil
}
