// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// ReasonNoConsent starts the refusal (data.reason) of a request no grant
// covers.
const ReasonNoConsent = "no consent grant covers"

// accessOf is the grant access an operation needs.
func accessOf(op string) grants.Access {
	switch op {
	case decision.OpRead, decision.OpList, decision.OpWatch:
		return grants.Read
	}
	return grants.Write
}

// consentCovers reports whether the server may use a path with access: a
// live grant given under the same root covers it (a grant made when its
// mount named another directory covers nothing), or its root is
// pre-approved and no block of the operator (fsbroker grants revoke) covers
// the path for this server. (A write under a pre-approved read-only root
// passes here and is refused by the decision stage, which says the root is
// read-only.) An unreadable grant store covers nothing, and a block that
// cannot be read blocks (the error says why).
func (c *Corridor) consentCovers(caller Caller, t executor.Target, access grants.Access, now time.Time) (bool, error) {
	if c.grants == nil {
		return t.Path.Root.Preapproved, nil
	}
	mp := t.Path.MountPath()
	if t.Path.Root.Preapproved {
		_, blocked, err := c.grants.Blocked(caller.StateKey(), mp)
		if err != nil {
			return false, err
		}
		if !blocked {
			return true, nil
		}
	}
	_, ok, err := c.grants.Covers(caller.StateKey(), access, mp, grants.RootOf(t.Path.Root), now)
	return ok, err
}

// blocksUnder returns the operator's blocks of the server that may cover a
// path under root: none unless root is pre-approved (a block takes away
// pre-approval only); those on every path or under root's mount otherwise.
// Blocks that cannot be read are an error.
func (c *Corridor) blocksUnder(caller Caller, root roots.Root) ([]grants.Block, error) {
	if !root.Preapproved || c.grants == nil {
		return nil, nil
	}
	bs, err := c.grants.BlocksOf(caller.StateKey())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(bs, func(b grants.Block) bool { return b.Path != "" && b.Mount() != root.Mount }), nil
}

// checkConsent refuses a request whose paths no grant or pre-approval covers:
// PERMISSION_DENIED, with a reason that names consent. It runs before the
// policy decision.
func (c *Corridor) checkConsent(caller Caller, req request) *decision.Verdict {
	access := accessOf(req.operation)
	now := time.Now()
	check := func(role string, t executor.Target) *decision.Verdict {
		ok, err := c.consentCovers(caller, t, access, now)
		if err != nil {
			c.log.Error("cannot read the consent grants; refusing", "error", err)
			v := decision.Deny(errcode.PermissionDenied, "consent grants cannot be read", "")
			return &v
		}
		if !ok {
			v := decision.Deny(errcode.PermissionDenied, fmt.Sprintf("%s %s for %s access (ask with files/consent)",
				ReasonNoConsent, role, access), "")
			return &v
		}
		return nil
	}
	if v := check("path", req.path); v != nil {
		return v
	}
	if req.newPath != nil {
		return check("newPath", *req.newPath)
	}
	return nil
}

// inputGrants lists what the server holds for the policy input of req: a
// grant per pre-approved root (write for a writable one) that no block of
// the server covers, neither on its mount nor on a path of req (a block
// beneath the mount leaves the root's grant in the input of requests
// elsewhere in the root), then those of its live consent grants whose mount
// still names the root they were given under (grantCounts), so that no
// policy can honour a grant or a pre-approval the consent check would not,
// and whose path is one of related, above one or beneath one (every grant
// when related is nil). A grant elsewhere can neither cover a path of the
// request nor lie in a directory it lists, deletes, renames or watches, and
// leaving it out keeps the cost of a request independent of how many grants
// the server holds (docs/policy.md).
func (c *Corridor) inputGrants(ctx context.Context, caller Caller, req request, related []string, now time.Time) []decision.InputGrant {
	set := c.rootsOf(ctx)
	all := set.All()
	out := make([]decision.InputGrant, 0, len(all))
	granted := c.started.UTC().Format(time.RFC3339)
	var (
		blocks  []grants.Block
		readErr error
	)
	if c.grants != nil && slices.ContainsFunc(all, func(r roots.Root) bool { return r.Preapproved }) {
		if blocks, readErr = c.grants.BlocksOf(caller.StateKey()); readErr != nil {
			c.log.Error("cannot read the blocks of pre-approved roots for the policy input", "error", readErr)
		}
	}
	for _, r := range all {
		if !r.Preapproved || readErr != nil { // blocks that cannot be read block; the consent check refuses anyway
			continue
		}
		if blockedIn(blocks, r, &req.path, req.newPath) {
			continue
		}
		access := "read"
		if r.Writable {
			access = "write"
		}
		out = append(out, decision.InputGrant{Access: access, Path: r.Mount, Granted: granted})
	}
	if c.grants == nil {
		return out
	}
	var (
		gs  []grants.Grant
		err error
	)
	if related == nil {
		gs, err = c.grants.List(caller.StateKey())
	} else {
		gs, err = c.grants.Related(caller.StateKey(), related...)
	}
	if err != nil {
		c.log.Error("cannot read the consent grants for the policy input", "error", err)
		return out // the consent check refuses the request anyway
	}
	for _, g := range gs {
		if !g.Live(now) || !grantCounts(set, g) {
			continue
		}
		in := decision.InputGrant{Access: string(g.Access), Path: g.Path, Granted: g.Granted.UTC().Format(time.RFC3339)}
		if !g.Expires.IsZero() {
			in.Expires = g.Expires.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, in)
	}
	return out
}

// blockedIn reports whether one of blocks (the server's) covers the
// pre-approved root r's mount, or the path of one of the targets that lies
// in r (a target of another root, or none, is passed over).
func blockedIn(blocks []grants.Block, r roots.Root, targets ...*executor.Target) bool {
	for _, b := range blocks {
		if b.CoversPath(r.Mount) {
			return true
		}
		for _, t := range targets {
			if t != nil && t.Path.Root.Mount == r.Mount && b.CoversPath(t.Path.MountPath()) {
				return true
			}
		}
	}
	return false
}

// unblocked returns the entries (of one listing page or change event, all
// under one root) that no block of the server covers, or that a grant
// covers: a block beneath a pre-approved root hides what it covers from the
// listings and watches of the paths above it, as it refuses reading it. When
// the blocks cannot be read, nothing is returned.
func (c *Corridor) unblocked(caller Caller, entries []executor.Entry) []executor.Entry {
	root := entries[0].Path.Root
	blocks, err := c.blocksUnder(caller, root)
	if err != nil {
		c.log.Error("cannot read the blocks of a pre-approved root; reporting no entry", "error", err)
		return nil
	}
	if len(blocks) == 0 {
		return entries
	}
	now := time.Now()
	out := make([]executor.Entry, 0, len(entries))
	for _, e := range entries {
		mp := e.Path.MountPath()
		if slices.ContainsFunc(blocks, func(b grants.Block) bool { return b.CoversPath(mp) }) {
			if _, granted, err := c.grants.Covers(caller.StateKey(), grants.Read, mp, grants.RootOf(root), now); err != nil || !granted {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// grantCounts reports whether g was given under the root its mount names in
// set now: the same directory, by canonical path and by device and inode. A
// grant given when the mount named another directory, or written before
// grants recorded their root, counts for nothing.
func grantCounts(set *roots.Set, g grants.Grant) bool {
	r, ok := set.ByMount(g.Mount())
	return ok && g.Root.Same(grants.RootOf(r))
}

// ConsentResolve is how a consent request's paths are resolved to the
// paths put to the provider: as the operation the consent is for resolves
// them (ops.go), so that the question and the grant name what it acts on.
type ConsentResolve int

const (
	// ConsentFollow follows symbolic links inside the root, the last
	// segment's too, as files/consent always has, and as a read, a write, a
	// listing, a description and a watch do.
	ConsentFollow ConsentResolve = iota
	// ConsentFollowToFile is ConsentFollow for an operation on a file's
	// content (a read or a write of a file): a path that resolves to a
	// directory is not put to the provider (ReasonConsentDirectory), since
	// the operation cannot act on one, and a link to "." or ".." would ask
	// for the directory it leads to, a whole root included.
	ConsentFollowToFile
	// ConsentNoFollow does not follow a link in the last segment, as
	// create, delete and rename do (they act on the link itself): the
	// question names the link, never where it leads.
	ConsentNoFollow
)

// ReasonConsentDirectory is why a path of a ConsentFollowToFile request
// that resolves to a directory is not put to the provider.
const ReasonConsentDirectory = "the path leads to a directory, and the tool reads or writes a file"

// Consent answers a files/consent request of caller: the requested paths
// inside the roots that the policy lets be granted are put to the consent
// provider; what it approves becomes grants. Each path is resolved as
// r.Resolve says (links followed for files/consent). The consent record is
// written before any grant is stored (failing closed like every other
// record). A path outside every root is never approvable; an invalid one
// refuses the request.
func (c *Corridor) Consent(ctx context.Context, caller Caller, r ConsentRequest) (ConsentResult, error) {
	// The operation's deadline bounds the provider's wait too (a person who
	// does not answer).
	ctx, cancel := context.WithTimeout(ctx, c.limits.OperationTimeout)
	defer cancel()
	if c.observer != nil {
		c.observer.RequestStarted()
		defer c.observer.RequestEnded()
		ctx = consent.WithWaitNotice(ctx, c.observer.ConsentWaiting)
	}
	access := grants.Access(r.Access)
	if r.Params == nil {
		// A front end that asks for consent itself (fsbroker serve) has no
		// files/consent params: the policy's consentable rule reads the
		// access from input.params, so they are made from the request.
		r.Params, _ = json.Marshal(map[string]any{"paths": r.Paths, "access": r.Access})
	}
	var (
		entries []decision.InputPath
		targets = map[string]executor.Target{}
		removed []consent.Removed // for the provider to show: never approvable, and why
	)
	for _, raw := range r.Paths {
		t, err := c.canonicalize(ctx, raw, r.Resolve != ConsentNoFollow)
		if err != nil {
			if errcode.Of(err) == errcode.InvalidPath {
				return ConsentResult{}, err
			}
			// Outside every root (or unreachable): never approvable.
			removed = append(removed, consent.Removed{Path: raw, Reason: unresolvedReason(err)})
			continue
		}
		mp := t.Path.MountPath()
		if r.Resolve == ConsentFollowToFile && t.Exists && t.Info.Type == "directory" {
			removed = append(removed, consent.Removed{Path: mp, Reason: ReasonConsentDirectory})
			continue
		}
		if _, dup := targets[mp]; dup {
			continue
		}
		targets[mp] = t
		entries = append(entries, newInputPath(raw, t))
	}
	var approvable []string
	if len(entries) > 0 {
		askedPaths := make([]string, len(entries))
		for i, e := range entries {
			askedPaths[i] = e.MountPath
		}
		in := c.policyInputFor(ctx, caller, request{method: "files/consent", operation: decision.OpConsent, params: r.Params}, askedPaths)
		ok, err := c.decider.Consentable(ctx, in, entries)
		if err != nil {
			ok = nil // nothing is approvable when the policy cannot say; the decider logged why
		}
		for _, e := range entries {
			if ok[e.MountPath] {
				approvable = append(approvable, e.MountPath)
			} else if err == nil {
				removed = append(removed, consent.Removed{Path: e.MountPath,
					Reason: c.whyNotConsentable(ctx, caller, access, targets[e.MountPath], e.Requested)})
			}
		}
	}
	var (
		answer consent.Decision
		asked  bool
		askErr error
	)
	if len(approvable) > 0 && c.consent != nil {
		asked = true
		answer, askErr = c.consent.Ask(ctx, consent.Request{
			Server:  consent.Server{ID: caller.ID, Name: caller.Name, Version: caller.Version, Pinned: caller.Pinned},
			Message: r.Message,
			Paths:   approvable,
			Access:  string(access),
			Roots:   c.consentRoots(ctx),
			Removed: removed,
		})
		if askErr != nil {
			c.log.Warn("consent was not given", "provider", answer.Provider, "error", askErr)
			answer.Approved = nil
		}
	}
	// Only what the policy let be asked can be granted, whatever a provider
	// answers.
	approved := []string{}
	for _, mp := range answer.Approved {
		if slices.Contains(approvable, mp) && !slices.Contains(approved, mp) {
			approved = append(approved, mp)
		}
	}
	if asked && c.observer != nil {
		c.observer.ConsentAnswered(answer.Provider, len(approvable), len(approved), askErr)
	}

	// The record first: no grant exists that the trail does not show.
	paths := make([]string, 0, len(approved))
	for _, mp := range approved {
		paths = append(paths, c.auditPath(canonicalPath(targets[mp])))
	}
	detail := fmt.Sprintf("%s access; %d requested, %d approvable, %d approved by %s",
		access, len(r.Paths), len(approvable), len(approved), providerName(answer, c.consent))
	// The provider may have used up the request's time (a person who did not
	// answer): the records are written regardless.
	recordCtx := context.WithoutCancel(ctx)
	if err := c.appendAudit(recordCtx, caller, audit.Record{Kind: audit.KindConsent, Method: "files/consent",
		Operation: string(access), Paths: paths, Allow: audit.Bool(len(approved) > 0), Detail: detail}); err != nil {
		return ConsentResult{}, errcode.Wrap(errcode.IOError, ReasonAuditUnavailable, err)
	}
	if len(approved) > 0 {
		if c.grants == nil {
			return ConsentResult{}, errcode.New(errcode.IOError, "no grant store: consent cannot be kept")
		}
		now := time.Now().UTC()
		gs := make([]grants.Grant, 0, len(approved))
		for _, mp := range approved {
			gs = append(gs, grants.Grant{Access: access, Path: mp, Root: grants.RootOf(targets[mp].Path.Root),
				Granted: now, By: answer.Provider})
		}
		stored, err := c.grants.Grant(caller.StateKey(), gs...)
		if err != nil {
			c.log.Error("cannot store the consent grants", "error", err)
			return ConsentResult{}, errcode.Wrap(errcode.IOError, "the consent grants cannot be stored", err)
		}
		for _, g := range stored {
			c.appendAudit(recordCtx, caller, audit.Record{Kind: audit.KindGrant, Method: "files/consent", Operation: string(g.Access),
				Paths: []string{c.auditPath(canonicalPath(targets[g.Path]))}, Allow: audit.Bool(true),
				Detail: Truncate("granted "+g.ID+" by "+g.By, audit.MaxDetail-8)})
		}
	}
	return ConsentResult{Granted: len(approved) > 0, Approved: approved, Removed: removed}, nil
}

// unresolvedReason says why a requested path that could not be resolved is
// not asked about: the refusal's reason, else that it is outside every root.
func unresolvedReason(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) && e.Reason != "" {
		return e.Reason
	}
	return "outside every root"
}

// whyNotConsentable says why the policy lets nobody grant access to t (as
// the caller wrote it, requested) for the consent provider to show: the
// reasons of the policy's decision on a request of that access on t, made
// as if a grant covered t (so that the missing grant is not the reason), or,
// when that decision allows it, that the policy's consentable rule leaves
// it out. The decision is not recorded: nothing is done on t.
func (c *Corridor) whyNotConsentable(ctx context.Context, caller Caller, access grants.Access, t executor.Target, requested string) string {
	req := request{method: "files/read", operation: decision.OpRead, path: t, requested: requested}
	if access == grants.Write {
		req.method, req.operation = "files/write", decision.OpWrite
	}
	in := c.policyInput(ctx, caller, req)
	in.Grants = append(in.Grants, decision.InputGrant{Access: string(access), Path: t.Path.MountPath(),
		Granted: in.Time.RFC3339})
	if v := c.decider.Decide(ctx, in); !v.Allow && len(v.Reasons) > 0 {
		return strings.Join(v.Reasons, "; ")
	}
	return "the policy does not let it be granted"
}

// providerName names who decided, for the audit record.
func providerName(d consent.Decision, p consent.Provider) string {
	switch {
	case d.Provider != "":
		return d.Provider
	case p == nil:
		return "no provider"
	}
	return "nobody (nothing approvable)"
}

// consentRoots describes the roots for the consent provider.
func (c *Corridor) consentRoots(ctx context.Context) []consent.Root {
	all := c.rootsOf(ctx).All()
	out := make([]consent.Root, 0, len(all))
	for _, r := range all {
		out = append(out, consent.Root{Mount: r.Mount, Name: r.Name, Path: r.Path, Writable: r.Writable})
	}
	return out
}

// GrantsChanged takes a change of the grants or blocks of server (a state
// key; grants.AnyServer: of every server, or of one the change cannot be
// told of; a revocation by another process, say): each watch made for such
// a caller ends when neither a grant of the caller it was made for (not
// one session-wide caller: a session of protocol 2026-07-28 serves one
// identity per request) nor a pre-approval no block takes away covers it
// any longer. The ended watches' ids are returned.
func (c *Corridor) GrantsChanged(server string) (ended []string) {
	now := time.Now()
	return c.endWatches(func(w watched) bool {
		if server != grants.AnyServer && w.caller.StateKey() != server {
			return true
		}
		covered, err := c.consentCovers(w.caller, w.target, grants.Read, now)
		return covered && err == nil
	})
}
