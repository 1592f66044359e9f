// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// ElicitForm asks the host elicitation/create in form mode (consent.Elicitor):
// the broker session's elicit provider finds the Router in its requests'
// context. The host must have declared elicitation with form mode, on a
// revision that has it (2025-06-18, 2025-11-25); the request is written as
// that revision writes it. When ctx ends first the host gets
// notifications/cancelled and the reply, if it comes, is dropped.
func (r *Router) ElicitForm(ctx context.Context, message string, requestedSchema json.RawMessage) (consent.ElicitResult, error) {
	r.mu.Lock()
	forms, version := r.hostElicits, r.negotiated
	r.mu.Unlock()
	params, err := consent.ElicitFormParams(forms, version, message, requestedSchema)
	if err != nil {
		return consent.ElicitResult{}, err
	}
	reply := make(chan *jsonrpc.Message, 1)
	r.mu.Lock()
	wire := r.toHost.assign(inFlight{from: router, method: "elicitation/create", reply: reply})
	r.mu.Unlock()
	r.log.Debug("asking the host for consent (elicitation/create)", "id", string(wire))
	r.writeHost(mustMarshal(struct {
		request
		Params json.RawMessage `json:"params"`
	}{request{JSONRPC: jsonrpc.Version, ID: wire, Method: "elicitation/create"}, params}))
	select {
	case m := <-reply:
		if m.Error != nil {
			return consent.ElicitResult{}, fmt.Errorf("the host refused elicitation/create: %s (code %d)", shortText(m.Error.Message, 200), m.Error.Code)
		}
		var res consent.ElicitResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			return consent.ElicitResult{}, fmt.Errorf("the host's elicitation result cannot be read: %w", err)
		}
		return res, nil
	case <-ctx.Done():
		// Its late reply, under an id of the Router's namespace that no
		// longer awaits one, is dropped (fromHost): nothing is kept for it.
		r.mu.Lock()
		_, pending := r.toHost.settle(wire)
		r.mu.Unlock()
		if pending {
			r.writeHost(mustMarshal(map[string]any{"jsonrpc": jsonrpc.Version, "method": "notifications/cancelled",
				"params": map[string]any{"requestId": wire, "reason": "fsbroker: the consent question ended"}}))
		}
		return consent.ElicitResult{}, ctx.Err()
	case <-r.hostDone:
		return consent.ElicitResult{}, fmt.Errorf("%w: the host is gone", consent.ErrNoElicitation)
	}
}

var _ consent.Elicitor = (*Router)(nil)
