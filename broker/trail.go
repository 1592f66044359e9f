// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/corridor"
)

// WithAudit writes the session's audit trail to sink: its start and end, and
// the records of every audited request (corridor.WithAudit says which, and
// how each append is guarded by a deadline). A session built without
// WithAudit, or with a nil sink (a nil *audit.Writer too), refuses every
// audited request as if its trail had failed, unless the host passes
// WithoutAuditTrail; of the two options, the last one given counts. The
// caller owns sink and closes it after the session.
func WithAudit(sink audit.Sink, redactPaths bool) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithAudit(sink, redactPaths)) }
}

// WithoutAuditTrail runs the session without an audit trail: audited requests
// go on, and nothing records them. It is for a host that keeps no trail on
// purpose (tests, a sandbox); without it, a session given no trail refuses
// them.
func WithoutAuditTrail() Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithoutAuditTrail()) }
}

// DeclaredPrefix starts the state key of a server whose identity is only the
// name it declared (corridor.Caller.StateKey).
const DeclaredPrefix = corridor.DeclaredPrefix

// StateKeyOf is the state key of the identity id, pinned by the operator or
// only declared by the server (corridor.StateKeyOf).
func StateKeyOf(id string, pinned bool) string { return corridor.StateKeyOf(id, pinned) }

// IdentityOf undoes StateKeyOf (corridor.IdentityOf).
func IdentityOf(key string) (id string, pinned bool) { return corridor.IdentityOf(key) }

// WithConfinementNote adds note (how the server process and the broker are
// confined, cmd/fsbroker's --sandbox) to the session_start record's detail.
func WithConfinementNote(note string) Option {
	return func(s *Session) { s.confinementNote = note }
}

// recordSession writes a session_start or session_end record.
func (s *Session) recordSession(ctx context.Context, kind audit.Kind, detail string) {
	if kind == audit.KindSessionStart && s.confinementNote != "" {
		detail += "; " + s.confinementNote
	}
	s.corridor.RecordSession(ctx, s.caller(), kind, detail)
}

// ServerID is the server's identity for grants, quotas and the audit trail:
// the id the operator pinned (WithServerID), else the name the server
// declared in initialize ("" before).
func (s *Session) ServerID() string { return s.caller().ID }

// StateKey is what the server's grants, daily write count and rate limit are
// kept under (corridor.Caller.StateKey).
func (s *Session) StateKey() string { return s.caller().StateKey() }

// caller is who sends the session's requests, as the corridor knows them:
// the server's identity (the pinned id, else its declared name) and the
// session.
func (s *Session) caller() corridor.Caller {
	info := s.Server()
	c := corridor.Caller{ID: s.pinnedID, Pinned: true, Name: info.Name, Version: info.Version,
		SessionID: s.id, ProtocolVersion: info.ProtocolVersion, Transport: s.transport}
	if c.ID == "" {
		c.ID, c.Pinned = info.Name, false
	}
	return c
}
