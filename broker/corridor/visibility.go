// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// nestedRoot is a root inside another root, with its directory relative to
// the outer root's.
type nestedRoot struct {
	rel  string
	root roots.Root
}

// nestedRoots are the roots held strictly inside one root. A path belongs to
// the deepest root that holds it (docs/protocol.md section 3): a listing or a
// watch of the outer root never reports what a nested root holds, which is
// named, decided and consented under the nested root's own mount.
type nestedRoots []nestedRoot

// nestedIn returns the roots of set strictly inside outer (none, in the
// common case: nothing is allocated then).
func nestedIn(set *roots.Set, outer roots.Root) nestedRoots {
	var out nestedRoots
	prefix := strings.TrimSuffix(filepath.ToSlash(outer.Path), "/") + "/"
	for _, r := range set.All() {
		if p := filepath.ToSlash(r.Path); r.Path != outer.Path && strings.HasPrefix(p, prefix) {
			out = append(out, nestedRoot{rel: p[len(prefix):], root: r})
		}
	}
	return out
}

// of places rel, a path relative to the outer root: inside is true when rel
// lies strictly inside a nested root (at any depth of nesting); otherwise
// own is true when rel is a nested root's directory, and r is that root.
func (ns nestedRoots) of(rel string) (r roots.Root, own, inside bool) {
	for _, n := range ns {
		switch {
		case len(rel) > len(n.rel) && rel[len(n.rel)] == '/' && strings.HasPrefix(rel, n.rel):
			return n.root, false, true
		case rel == n.rel:
			r, own = n.root, true
		}
	}
	return r, own, false
}

// reportable returns the entries of a listing page (all under one root) that
// a listing may report, in their order, dropping: those a block of the
// operator covers and no grant does (unblocked), those whose path the
// caller could not name back (canon.Returnable: over 4096 bytes from the
// mount, or a name canonicalization refuses), those inside a root nested in
// the listed one, and a nested root's own directory unless the caller could
// list that root itself (nestedRootShown). What is left goes to the policy's
// visibility decision. The executor cannot skip a directory, so a recursive
// listing still walks a nested root and its entries are filtered here: a
// page may come out short, or empty with a nextCursor.
func (c *Corridor) reportable(ctx context.Context, caller Caller, req request, entries []executor.Entry) []executor.Entry {
	if len(entries) == 0 {
		return entries
	}
	if entries = c.unblocked(caller, entries); len(entries) == 0 {
		return entries
	}
	ns := nestedIn(c.rootsOf(ctx), entries[0].Path.Root)
	var own []roots.Root // nested roots whose own directory is on the page
	dropped := 0
	for _, e := range entries {
		if !canon.Returnable(e.Path) {
			dropped++
		} else if r, isOwn, inside := ns.of(e.Path.Rel); inside {
			dropped++
		} else if isOwn {
			own = append(own, r)
		}
	}
	if dropped == 0 && len(own) == 0 {
		return entries
	}
	shown := c.nestedRootShown(ctx, caller, req, own)
	out := make([]executor.Entry, 0, len(entries)-dropped)
	unnameable := 0
	for _, e := range entries {
		if !canon.Returnable(e.Path) {
			unnameable++
			continue
		}
		if r, isOwn, inside := ns.of(e.Path.Rel); inside || isOwn && !shown[r.Mount] {
			continue
		}
		out = append(out, e)
	}
	if unnameable > 0 {
		c.log.Debug("entries left out: their paths cannot be named back", "count", unnameable)
	}
	return out
}

// nestedRootShown decides, by mount, which of the nested roots rs a listing or
// a watch of an outer root may show as a name in its parent directory: those
// the caller could list itself, decided as the nested root, never as a path
// of the outer one. Its consent must cover reading the nested root
// (pre-approval, or a grant given under it), and the policy's visibility
// decision on the nested root itself (the one roots/list makes) must show
// it.
func (c *Corridor) nestedRootShown(ctx context.Context, caller Caller, req request, rs []roots.Root) map[string]bool {
	if len(rs) == 0 {
		return nil
	}
	now := time.Now()
	batch := make([]decision.InputPath, 0, len(rs))
	for _, r := range rs {
		t := executor.Target{Path: canon.Path{Root: r}, Exists: true, Info: executor.Info{Type: executor.TypeDirectory}}
		if ok, err := c.consentCovers(caller, t, grants.Read, now); err != nil || !ok {
			continue // an unreadable grant store covers nothing
		}
		batch = append(batch, newInputPath(r.Mount, t))
	}
	visible := c.visible(ctx, caller, req, batch)
	shown := make(map[string]bool, len(batch))
	for _, in := range batch {
		shown[in.Mount] = visible[in.MountPath]
	}
	return shown
}

// visible decides, in one batch, which of the entries described for the
// policy the caller may see: their mountPaths. A decider that fails shows
// nothing (it logged why).
func (c *Corridor) visible(ctx context.Context, caller Caller, req request, batch []decision.InputPath) map[string]bool {
	if len(batch) == 0 {
		return map[string]bool{}
	}
	vis, err := c.decider.Visible(ctx, c.policyInput(ctx, caller, req), batch)
	if err != nil || vis == nil {
		return map[string]bool{}
	}
	return vis
}
