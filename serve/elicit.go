// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// ElicitForm asks the host elicitation/create in form mode
// (consent.Elicitor): the session puts itself in the context of its tool
// calls, so that the elicit provider (--consent elicit, or the default for a
// host that declared elicitation) asks the person through the host's own
// UI. The host must have declared elicitation with form mode in its
// initialize, on a revision that has it (2025-06-18, 2025-11-25); otherwise
// the error wraps consent.ErrNoElicitation and nobody is asked. An error
// answer, an answer that cannot be read, or none before ctx ends is an
// error: nothing is approved. When ctx ends first (the provider's time
// limit, or the tool call's end) the host gets notifications/cancelled for
// the question (jsonrpc.WithCancelNotification), and a late answer is
// dropped.
func (s *Session) ElicitForm(ctx context.Context, message string, requestedSchema json.RawMessage) (consent.ElicitResult, error) {
	s.mu.Lock()
	forms, version := s.hostElicits, s.protocolVersion
	s.mu.Unlock()
	params, err := consent.ElicitFormParams(forms, version, message, requestedSchema)
	if err != nil {
		return consent.ElicitResult{}, err
	}
	s.log.Debug("asking the host for consent (elicitation/create)")
	var res consent.ElicitResult
	if err := s.conn.Call(ctx, "elicitation/create", params, &res); err != nil {
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return consent.ElicitResult{}, fmt.Errorf("the host refused elicitation/create: %.200s (code %d)", rpcErr.Message, rpcErr.Code)
		}
		return consent.ElicitResult{}, fmt.Errorf("elicitation/create: %w", err)
	}
	return res, nil
}

var _ consent.Elicitor = (*Session)(nil)

// GrantsChanged takes a change of the grants or blocks of server
// (grants.AnyServer: of every server, or of one the watch cannot tell), made
// by any process on the state directory (fsbroker grants revoke): the
// watches made for a host of that state key, of resources/subscribe and of
// subscriptions/listen, that its grants no longer cover end (each checked
// against the grants of the host it was made for: a session of protocol
// 2026-07-28 serves one host per request). Tool calls need nothing: each
// checks consent afresh.
func (s *Session) GrantsChanged(server string) {
	ss := &s.resources.subs
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.subscriptionsEnded(s.cfg.Corridor.GrantsChanged(server), "consent revoked: watches ended")
}
