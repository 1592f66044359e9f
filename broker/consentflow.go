// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"errors"
	"strings"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/usage"
)

// WithConsent sets how consent is given (corridor.WithConsent): provider
// answers files/consent, and store keeps the grants it approves and the
// operator's blocks of pre-approved roots, shared by every session and
// broker process on the state directory. Without it no grant is ever given,
// and only the roots the operator pre-approved (roots.Spec.Preapproved) can
// be used, every path of them.
func WithConsent(provider consent.Provider, store *grants.Store) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithConsent(provider, store)) }
}

// WithUsage keeps the bytes each server writes per UTC day in a store shared
// by every session and broker process on the state directory (so the daily
// quota survives reconnects and restarts), instead of per session in memory.
func WithUsage(st *usage.Store) Option {
	return func(s *Session) { s.corridorOpts = append(s.corridorOpts, corridor.WithUsage(st)) }
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
	if ended := s.corridor.GrantsChanged(grants.AnyServer); len(ended) > 0 {
		s.log.Info("consent revoked: watches ended", "watches", strings.Join(ended, ","))
	}
	if err := s.RootsChanged(); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("cannot notify the server of the grant change", "error", err)
	}
}
