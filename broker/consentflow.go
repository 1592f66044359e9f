package broker

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

// WithConsent sets how consent is given: provider answers files/consent
// (after the policy's consentable query narrowed the request), and store
// keeps the grants it approves and the operator's blocks of pre-approved
// roots, shared by every session and broker process on the state directory.
// Without it no grant is ever given, and only the roots the operator
// pre-approved (roots.Spec.Preapproved) can be used, every path of them.
func WithConsent(provider consent.Provider, store *grants.Store) Option {
	return func(s *Session) { s.consent, s.grantStore = provider, store }
}

// reasonNoConsent starts the refusal of a request no grant covers.
const reasonNoConsent = "no consent grant covers"

// accessOf is the grant access an operation needs.
func accessOf(op string) grants.Access {
	switch op {
	case OpRead, OpList, OpWatch:
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
func (s *Session) consentCovers(t executor.Target, access grants.Access, now time.Time) (bool, error) {
	if s.grantStore == nil {
		return t.Path.Root.Preapproved, nil
	}
	mp := t.Path.MountPath()
	if t.Path.Root.Preapproved {
		_, blocked, err := s.grantStore.Blocked(s.StateKey(), mp)
		if err != nil {
			return false, err
		}
		if !blocked {
			return true, nil
		}
	}
	_, ok, err := s.grantStore.Covers(s.StateKey(), access, mp, grants.RootOf(t.Path.Root), now)
	return ok, err
}

// blocksUnder returns the operator's blocks of the server that may cover a
// path under root: none unless root is pre-approved (a block takes away
// pre-approval only); those on every path or under root's mount otherwise.
// Blocks that cannot be read are an error.
func (s *Session) blocksUnder(root roots.Root) ([]grants.Block, error) {
	if !root.Preapproved || s.grantStore == nil {
		return nil, nil
	}
	bs, err := s.grantStore.BlocksOf(s.StateKey())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(bs, func(b grants.Block) bool { return b.Path != "" && b.Mount() != root.Mount }), nil
}

// checkConsent refuses a request whose paths no grant or pre-approval covers:
// PERMISSION_DENIED, with a reason that names consent. It runs before the
// policy decision.
func (s *Session) checkConsent(req Request) *Verdict {
	access := accessOf(req.Operation)
	now := time.Now()
	check := func(role string, t executor.Target) *Verdict {
		ok, err := s.consentCovers(t, access, now)
		if err != nil {
			s.log.Error("cannot read the consent grants; refusing", "error", err)
			v := decision.Deny(errcode.PermissionDenied, "consent grants cannot be read", "")
			return &v
		}
		if !ok {
			v := decision.Deny(errcode.PermissionDenied, fmt.Sprintf("%s %s for %s access (ask with files/consent)",
				reasonNoConsent, role, access), "")
			return &v
		}
		return nil
	}
	if v := check("path", req.Path); v != nil {
		return v
	}
	if req.NewPath != nil {
		return check("newPath", *req.NewPath)
	}
	return nil
}

// inputGrants lists what the server holds for the policy input of req: a
// grant per pre-approved root (write for a writable one) that no block of
// the server covers, neither on its mount nor on a path of req (a block
// beneath the mount leaves the root's grant in the input of requests
// elsewhere in the root), then its live consent grants whose mount still
// names the root they were given under (grantCounts), so that no policy can
// honour a grant or a pre-approval the consent check would not.
func (s *Session) inputGrants(req Request, now time.Time) []InputGrant {
	set := s.roots()
	all := set.All()
	out := make([]InputGrant, 0, len(all))
	granted := s.started.UTC().Format(time.RFC3339)
	var (
		blocks  []grants.Block
		readErr error
	)
	if s.grantStore != nil && slices.ContainsFunc(all, func(r roots.Root) bool { return r.Preapproved }) {
		if blocks, readErr = s.grantStore.BlocksOf(s.StateKey()); readErr != nil {
			s.log.Error("cannot read the blocks of pre-approved roots for the policy input", "error", readErr)
		}
	}
	for _, r := range all {
		if !r.Preapproved || readErr != nil { // blocks that cannot be read block; the consent check refuses anyway
			continue
		}
		if blockedIn(blocks, r, &req.Path, req.NewPath) {
			continue
		}
		access := "read"
		if r.Writable {
			access = "write"
		}
		out = append(out, InputGrant{Access: access, Path: r.Mount, Granted: granted})
	}
	if s.grantStore == nil {
		return out
	}
	gs, err := s.grantStore.List(s.StateKey())
	if err != nil {
		s.log.Error("cannot read the consent grants for the policy input", "error", err)
		return out // the consent check refuses the request anyway
	}
	for _, g := range gs {
		if !g.Live(now) || !grantCounts(set, g) {
			continue
		}
		in := InputGrant{Access: string(g.Access), Path: g.Path, Granted: g.Granted.UTC().Format(time.RFC3339)}
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
func (s *Session) unblocked(entries []executor.Entry) []executor.Entry {
	root := entries[0].Path.Root
	blocks, err := s.blocksUnder(root)
	if err != nil {
		s.log.Error("cannot read the blocks of a pre-approved root; reporting no entry", "error", err)
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
			if _, granted, err := s.grantStore.Covers(s.StateKey(), grants.Read, mp, grants.RootOf(root), now); err != nil || !granted {
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

type consentParams struct {
	Message        string   `json:"message"`
	RequestedPaths []string `json:"requestedPaths"`
	Access         string   `json:"access"`
}

type consentResult struct {
	Granted       bool     `json:"granted"`
	ApprovedPaths []string `json:"approvedPaths"`
}

// filesConsent answers files/consent: the requested paths inside the roots
// that the policy lets be granted are put to the consent provider; what it
// approves becomes grants. The consent record is written before any grant
// is stored (failing closed like every other record).
func (s *Session) filesConsent(ctx context.Context, params json.RawMessage) (any, error) {
	p := consentParams{Access: string(grants.Read)}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	access := grants.Access(p.Access)
	var (
		entries []InputPath
		targets = map[string]executor.Target{}
		removed []consent.Removed // for the provider to show: never approvable, and why
	)
	for _, raw := range p.RequestedPaths {
		t, err := s.resolve(ctx, raw, true)
		if err != nil {
			if errcode.Of(err) == errcode.InvalidPath {
				return nil, err
			}
			// Outside every root (or unreachable): never approvable.
			removed = append(removed, consent.Removed{Path: raw, Reason: unresolvedReason(err)})
			continue
		}
		mp := t.Path.MountPath()
		if _, dup := targets[mp]; dup {
			continue
		}
		targets[mp] = t
		entries = append(entries, NewInputPath(raw, t))
	}
	var approvable []string
	if len(entries) > 0 {
		req := Request{Method: "files/consent", Operation: "consent", Params: params}
		req.Input = s.policyInput(req)
		ok, err := s.decider.Consentable(ctx, req.Input, entries)
		if err != nil {
			ok = nil // nothing is approvable when the policy cannot say; the decider logged why
		}
		for _, e := range entries {
			if ok[e.MountPath] {
				approvable = append(approvable, e.MountPath)
			} else if err == nil {
				removed = append(removed, consent.Removed{Path: e.MountPath,
					Reason: s.whyNotConsentable(ctx, access, targets[e.MountPath], e.Requested)})
			}
		}
	}
	var decision consent.Decision
	if len(approvable) > 0 && s.consent != nil {
		var err error
		decision, err = s.consent.Ask(ctx, consent.Request{
			Server:  s.consentServer(),
			Message: p.Message,
			Paths:   approvable,
			Access:  string(access),
			Roots:   s.consentRoots(),
			Removed: removed,
		})
		if err != nil {
			s.log.Warn("consent was not given", "provider", decision.Provider, "error", err)
			decision.Approved = nil
		}
	}
	// Only what the policy let be asked can be granted, whatever a provider
	// answers.
	approved := []string{}
	for _, mp := range decision.Approved {
		if slices.Contains(approvable, mp) && !slices.Contains(approved, mp) {
			approved = append(approved, mp)
		}
	}

	// The record first: no grant exists that the trail does not show.
	paths := make([]string, 0, len(approved))
	for _, mp := range approved {
		paths = append(paths, s.auditPath(canonicalPath(targets[mp])))
	}
	detail := fmt.Sprintf("%s access; %d requested, %d approvable, %d approved by %s",
		access, len(p.RequestedPaths), len(approvable), len(approved), providerName(decision, s.consent))
	// The provider may have used up the request's time (a person who did not
	// answer): the records are written regardless.
	recordCtx := context.WithoutCancel(ctx)
	if err := s.appendAudit(recordCtx, audit.Record{Kind: audit.KindConsent, Method: "files/consent",
		Operation: string(access), Paths: paths, Allow: audit.Bool(len(approved) > 0), Detail: detail}); err != nil {
		return nil, errcode.Wrap(errcode.IOError, reasonAuditUnavailable, err)
	}
	if len(approved) > 0 {
		if s.grantStore == nil {
			return nil, errcode.New(errcode.IOError, "no grant store: consent cannot be kept")
		}
		server := s.StateKey()
		now := time.Now().UTC()
		gs := make([]grants.Grant, 0, len(approved))
		for _, mp := range approved {
			gs = append(gs, grants.Grant{Access: access, Path: mp, Root: grants.RootOf(targets[mp].Path.Root),
				Granted: now, By: decision.Provider})
		}
		stored, err := s.grantStore.Grant(server, gs...)
		if err != nil {
			s.log.Error("cannot store the consent grants", "error", err)
			return nil, errcode.Wrap(errcode.IOError, "the consent grants cannot be stored", err)
		}
		for _, g := range stored {
			s.appendAudit(recordCtx, audit.Record{Kind: audit.KindGrant, Method: "files/consent", Operation: string(g.Access),
				Paths: []string{s.auditPath(canonicalPath(targets[g.Path]))}, Allow: audit.Bool(true),
				Detail: truncate("granted "+g.ID+" by "+g.By, audit.MaxDetail-8)})
		}
	}
	return consentResult{Granted: len(approved) > 0, ApprovedPaths: approved}, nil
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
// the server wrote it, requested) for the consent provider to show: the
// reasons of the policy's decision on a request of that access on t, made
// as if a grant covered t (so that the missing grant is not the reason), or,
// when that decision allows it, that the policy's consentable rule leaves
// it out. The decision is not recorded: nothing is done on t.
func (s *Session) whyNotConsentable(ctx context.Context, access grants.Access, t executor.Target, requested string) string {
	req := Request{Method: "files/read", Operation: OpRead, Path: t, Requested: requested}
	if access == grants.Write {
		req.Method, req.Operation = "files/write", OpWrite
	}
	req.Input = s.policyInput(req)
	req.Input.Grants = append(req.Input.Grants, InputGrant{Access: string(access), Path: t.Path.MountPath(),
		Granted: req.Input.Time.RFC3339})
	if v := s.decider.Decide(ctx, req.Input); !v.Allow && len(v.Reasons) > 0 {
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

// consentServer is the server's identity as the consent provider shows it.
func (s *Session) consentServer() consent.Server {
	info := s.Server()
	id, pinned := s.serverID()
	return consent.Server{ID: id, Name: info.Name, Version: info.Version, Pinned: pinned}
}

// consentRoots describes the roots for the consent provider.
func (s *Session) consentRoots() []consent.Root {
	all := s.roots().All()
	out := make([]consent.Root, 0, len(all))
	for _, r := range all {
		out = append(out, consent.Root{Mount: r.Mount, Name: r.Name, Path: r.Path, Writable: r.Writable})
	}
	return out
}

// GrantsChanged takes a change of the server's grants or blocks (a
// revocation by another process, say): watches no longer covered (by a
// grant, or by a pre-approval no block takes away) end, and the server is
// told its roots may have changed. The caller (the grant store's watcher)
// calls it for the sessions of the server whose grants changed, and for
// every session when the blocks for every server changed.
func (s *Session) GrantsChanged() {
	if !s.initialized.Load() {
		return
	}
	now := time.Now()
	s.watches.mu.Lock()
	var ended []string
	for id, sub := range s.watches.subs {
		t, ok := s.watches.targets[id]
		if sub == nil || !ok {
			continue
		}
		if covered, err := s.consentCovers(t, grants.Read, now); covered && err == nil {
			continue
		}
		sub.Close()
		delete(s.watches.subs, id)
		delete(s.watches.targets, id)
		ended = append(ended, id)
	}
	s.watches.mu.Unlock()
	if len(ended) > 0 {
		s.log.Info("consent revoked: watches ended", "watches", strings.Join(ended, ","))
	}
	if err := s.RootsChanged(); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("cannot notify the server of the grant change", "error", err)
	}
}
