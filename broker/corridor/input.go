// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// methodRootsList is the one audited request without a path.
const methodRootsList = "roots/list"

// policyInput builds the policy input of a request of caller:
// input.grants holds its pre-approved roots and the caller's grants that can
// matter to the request (inputGrants): those on its path or newPath, above
// one or beneath one; for roots/list, every grant.
func (c *Corridor) policyInput(ctx context.Context, caller Caller, req request) *decision.Input {
	return c.policyInputFor(ctx, caller, req, requestMountPaths(req))
}

// requestMountPaths are the mount-relative paths of req's grants
// (inputGrants): its path and newPath; nil for roots/list, which has none.
func requestMountPaths(req request) []string {
	if req.method == methodRootsList {
		return nil
	}
	related := make([]string, 0, 2)
	if mp := req.path.Path.MountPath(); mp != "" {
		related = append(related, mp)
	}
	if req.newPath != nil {
		related = append(related, req.newPath.Path.MountPath())
	}
	return related
}

// policyInputFor is policyInput with the caller's grants on, above or
// beneath the mount-relative paths related (nil: every grant).
func (c *Corridor) policyInputFor(ctx context.Context, caller Caller, req request, related []string) *decision.Input {
	now := time.Now()
	in := &decision.Input{
		Version:   1,
		Method:    req.method,
		Operation: req.operation,
		Server:    decision.InputServer{ID: caller.ID, Name: caller.Name, Version: caller.Version, Pinned: caller.Pinned},
		Session:   decision.InputSession{ID: caller.SessionID, ProtocolVersion: caller.ProtocolVersion, Transport: caller.Transport},
		Params:    paramsWithoutContent(req.params),
		Bytes:     req.bytes,
		Grants:    c.inputGrants(ctx, caller, req, related, now),
		Usage:     decision.InputUsage{BytesWrittenToday: c.writtenToday(caller, now), Watches: c.watches.count()},
		Time:      decision.NewInputTime(now),
	}
	if caller.FrontEnd != "" {
		in.FrontEnd = &decision.InputFrontEnd{Name: caller.FrontEnd, Tool: caller.Tool}
	}
	if req.method != methodRootsList {
		p := newInputPath(req.requested, req.path)
		in.Path = &p
	}
	if req.newPath != nil {
		p := newInputPath(req.newRequested, *req.newPath)
		in.NewPath = &p
	}
	return in
}

// newInputPath describes a resolved target for the policy.
func newInputPath(requested string, t executor.Target) decision.InputPath {
	p := decision.InputPath{
		Requested: requested,
		Canonical: canonicalPath(t),
		Root:      t.Path.Root.Path,
		Mount:     t.Path.Root.Mount,
		Relative:  t.Path.Rel,
		MountPath: t.Path.MountPath(),
		Writable:  t.Path.Root.Writable,
		Exists:    t.Exists,
		Hidden:    isHidden(t.Path.Rel),
	}
	if t.Exists {
		p.Type, p.Size, p.Nlink = t.Info.Type, max(t.Info.Size, 0), t.Info.Nlink
	}
	return p
}

// entryInputPaths describes listed entries for the visibility decision: each
// entry's mountPath and canonical path are carved from one string each for
// the whole batch (a listing's entries share their root).
func entryInputPaths(entries []executor.Entry) []decision.InputPath {
	batch := make([]decision.InputPath, len(entries))
	if len(entries) == 0 {
		return batch
	}
	mountLen, canonLen := 0, 0
	for _, e := range entries {
		mountLen += len(e.Path.Root.Mount) + 1 + len(e.Path.Rel)
		canonLen += canonicalLen(e.Path)
	}
	mounts := make([]byte, 0, mountLen)
	canons := make([]byte, 0, canonLen)
	for _, e := range entries {
		mounts = append(mounts, e.Path.Root.Mount...)
		if e.Path.Rel != "" {
			mounts = append(append(mounts, '/'), e.Path.Rel...)
		}
		canons = appendCanonical(canons, e.Path)
	}
	allMounts, allCanons := string(mounts), string(canons)
	m, cn := 0, 0
	for i, e := range entries {
		ml := len(e.Path.Root.Mount)
		if e.Path.Rel != "" {
			ml += 1 + len(e.Path.Rel)
		}
		cl := canonicalLen(e.Path)
		mp := allMounts[m : m+ml]
		batch[i] = decision.InputPath{Requested: mp, Canonical: allCanons[cn : cn+cl], Root: e.Path.Root.Path,
			Mount: e.Path.Root.Mount, Relative: e.Path.Rel, MountPath: mp, Writable: e.Path.Root.Writable,
			Exists: true, Type: e.Type, Size: max(e.Size, 0), Hidden: isHidden(e.Path.Rel)}
		m, cn = m+ml, cn+cl
	}
	return batch
}

// canonicalPath is the absolute canonical path of a resolved target.
func canonicalPath(t executor.Target) string {
	return string(appendCanonical(make([]byte, 0, canonicalLen(t.Path)), t.Path))
}

// appendCanonical appends the host path of p: its root's directory, then its
// relative path.
func appendCanonical(b []byte, p canon.Path) []byte {
	b = append(b, p.Root.Path...)
	if p.Rel != "" {
		if !strings.HasSuffix(p.Root.Path, "/") {
			b = append(b, '/')
		}
		b = append(b, p.Rel...)
	}
	return b
}

// canonicalLen is the length appendCanonical appends.
func canonicalLen(p canon.Path) int {
	n := len(p.Root.Path)
	if p.Rel != "" {
		if !strings.HasSuffix(p.Root.Path, "/") {
			n++
		}
		n += len(p.Rel)
	}
	return n
}

// isHidden reports whether any segment of a clean relative path starts with
// a dot (found without splitting the path: every listed entry is asked).
func isHidden(rel string) bool {
	return strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.")
}

// paramsWithoutContent returns a request's params for the policy input: the
// JSON object as sent, except that file content never reaches the policy (or
// anything it logs): every "content" member is cut out by scanning, never
// decoded. It is nil (no params member) when raw is absent, not an object,
// or has no other member.
func paramsWithoutContent(raw []byte) []byte {
	rest, ok := withoutMember(raw, "content")
	if !ok || len(rest) <= 2 { // "{}"
		return nil
	}
	return rest
}

// withoutMember returns the JSON object raw without its members named key
// (compared after unescaping, so "cont\u0065nt" is "content"), by scanning
// rather than decoding: a skipped value is never unescaped or copied. ok is
// false when raw is not an object the scan can follow; the caller then
// decodes raw whole.
func withoutMember(raw []byte, key string) (rest []byte, ok bool) {
	out := make([]byte, 0, 256)
	out = append(out, '{')
	s := jsonx.ScanObject(raw)
	for s.Next() {
		m := s.Member()
		name, ok := jsonx.UnquoteBytes(m.Name)
		if !ok {
			return nil, false
		}
		if string(name) != key {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, raw[m.Start:m.End]...)
		}
	}
	if _, ok := s.End(); !ok {
		return nil, false
	}
	return append(out, '}'), true
}
