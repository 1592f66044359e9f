// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// Multi round-trip requests (protocol 2026-07-28, basic/patterns/mrtr):
// fsbroker serve sends no request of its own to a host on this revision.
// When a tools/call or resources/read needs the host's roots (its client
// declared roots in the request) or the person's consent (through the
// host's form, its client declared form elicitation), the answer is an
// InputRequiredResult: inputRequests with roots/list under "roots" and an
// elicitation/create form under "consent", and a requestState sealed for
// this request (requeststate.go: bound to the host, the method, the tool or
// URI and a digest of the arguments; expiring) that says what was asked.
// The host retries the request with inputResponses and the requestState.
//
// Before anything of the retry runs, its requestState is verified: one
// that fails (changed, made up, another session's or host's, presented on
// another tool, URI or arguments) or expired refuses the request, recorded
// in the trail. Only the answers to what the state says was asked are
// read, and only for the questions asked: a roots answer narrows this
// request alone, as the host's roots narrow on earlier revisions; a
// consent answer approves only the fields of the asked form. An answer
// missing, or a question that changed since (a new one is needed), gets a
// new InputRequiredResult, not an error. A request whose client declares
// roots is asked for them on every round, so that each round's state holds
// no answer, only questions.

// The keys of fsbroker's inputRequests.
const (
	inputKeyRoots   = "roots"
	inputKeyConsent = "consent"
)

// sealedInputs is the payload of a requestState: what the host was asked.
type sealedInputs struct {
	// Roots: roots/list was asked under inputKeyRoots.
	Roots bool `json:"roots,omitempty"`
	// Consent is the consent form asked under inputKeyConsent.
	Consent *sealedQuestion `json:"consent,omitempty"`
}

// retryInputs are the inputs a request carries: its inputResponses, and
// what its verified requestState says was asked (nothing without one).
type retryInputs struct {
	asked     sealedInputs
	responses map[string]json.RawMessage
}

// answer returns the host's answer under key when the state asked for it.
func (in retryInputs) answer(key string) (json.RawMessage, bool) {
	asked := key == inputKeyRoots && in.asked.Roots || key == inputKeyConsent && in.asked.Consent != nil
	if !asked {
		return nil, false
	}
	v, ok := in.responses[key]
	return v, ok
}

// Why a retry is refused, in the words of the refusal's reason.
const (
	reasonStateInvalid = "requestState failed verification: fsbroker did not issue it for this client, session and request " +
		"(tool or URI, and arguments), or it was changed; send the request again without requestState and inputResponses"
	reasonStateExpired = "requestState expired; send the request again without requestState and inputResponses"
)

// readRetryInputs verifies the retry members of a request's params against
// b: a requestState (a string) that the sealer opens for b, and
// inputResponses (an object). A request without requestState has no
// inputs: its inputResponses answer nothing fsbroker asked and are ignored
// (basic/patterns/mrtr: what is not recognized is ignored). A refusal is
// INVALID_PARAMS.
func (s *Session) readRetryInputs(params json.RawMessage, b StateBinding) (retryInputs, *errcode.Error) {
	var members map[string]json.RawMessage
	if json.Unmarshal(params, &members) != nil {
		return retryInputs{}, nil // not an object: the method's own decoding refused it already
	}
	rawState, hasState := members[modern.ParamRequestState]
	if !hasState {
		return retryInputs{}, nil
	}
	var token string
	if len(rawState) == 0 || rawState[0] != '"' || json.Unmarshal(rawState, &token) != nil {
		return retryInputs{}, invalidParam("/"+modern.ParamRequestState, "requestState must be a string")
	}
	var in retryInputs
	if raw, ok := members[modern.ParamInputResponses]; ok {
		if json.Unmarshal(raw, &in.responses) != nil || in.responses == nil {
			return retryInputs{}, invalidParam("/"+modern.ParamInputResponses, "inputResponses must be an object")
		}
	}
	payload, err := s.sealer.open(b, token)
	switch {
	case errors.Is(err, ErrStateExpired):
		return retryInputs{}, errcode.New(errcode.InvalidParams, reasonStateExpired)
	case err != nil:
		return retryInputs{}, errcode.New(errcode.InvalidParams, reasonStateInvalid)
	}
	if json.Unmarshal(payload, &in.asked) != nil {
		return retryInputs{}, errcode.New(errcode.InvalidParams, reasonStateInvalid)
	}
	return in, nil
}

// runWithInputs runs a tools/call or resources/read of protocol 2026-07-28
// (run, with the context it must run under) with what its host answered:
//
//   - a retry's requestState is verified first (readRetryInputs); a refusal
//     is recorded (Corridor.Refuse, with path) and the request ends, -32602;
//   - when the request's client declares roots, the request runs only under
//     the host's answer to roots/list of this round (corridor.WithRequestRoots:
//     roots.Intersect with the operator's, an empty or unusable answer
//     leaving nothing accessible); without that answer nothing runs and the
//     host is asked for it;
//   - a consent question the elicit provider puts while it runs (the
//     session's Elicitor for the request, modernElicitor) ends it, and the
//     host is asked in its stead; the answer of the round, to the same
//     question, is the person's.
func (s *Session) runWithInputs(ctx context.Context, rq modernRequest, caller corridor.Caller, b StateBinding,
	params json.RawMessage, path string, run func(context.Context) (any, error)) (any, error) {
	inputs, refusal := s.readRetryInputs(params, b)
	if refusal != nil {
		s.log.Warn("refused a retry of the host's", "method", b.Method, "target", b.Target, "why", refusal.Reason)
		return nil, s.refuse(ctx, caller, b.Method, path, refusal)
	}
	s.awaitHostRoots(ctx)
	var ask sealedInputs
	if rq.declaresRoots {
		ask.Roots = true
		answer, ok := inputs.answer(inputKeyRoots)
		if !ok {
			return s.inputRequired(b, ask, nil)
		}
		ctx = corridor.WithRequestRoots(ctx, requestNarrowing(s.hostRootsOf(answer)))
	}
	el := &modernElicitor{elicitsForms: rq.elicitsForms, asked: inputs.asked.Consent}
	if el.asked != nil {
		el.answer, _ = inputs.answer(inputKeyConsent)
	}
	res, err := run(withModernElicitor(ctx, el))
	if q := el.question(); q != nil {
		ask.Consent = &q.sealed
		return s.inputRequired(b, ask, q)
	}
	return res, err
}

// inputRequired is the InputRequiredResult that asks the host for roots
// (ask.Roots) and the consent question q (when not nil), under a
// requestState sealed for b that says what was asked.
func (s *Session) inputRequired(b StateBinding, ask sealedInputs, q *pendingQuestion) (json.RawMessage, error) {
	type inputRequest struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}
	requests := map[string]inputRequest{}
	if ask.Roots {
		requests[inputKeyRoots] = inputRequest{Method: "roots/list", Params: json.RawMessage(`{}`)} // params optional; the Go SDK needs them
	}
	if q != nil {
		params, err := consent.InputRequestFormParams(q.message, q.schema)
		if err != nil {
			return nil, err
		}
		requests[inputKeyConsent] = inputRequest{Method: "elicitation/create", Params: params}
	}
	payload, err := json.Marshal(ask)
	if err != nil {
		return nil, err
	}
	s.log.Debug("asking the host in an InputRequiredResult", "method", b.Method, "target", b.Target,
		"roots", ask.Roots, "consent", q != nil)
	return json.Marshal(map[string]any{
		"resultType":               modern.ResultTypeInputRequired,
		modern.ResultInputRequests: requests,
		modern.ParamRequestState:   s.sealer.seal(b, payload),
		"_meta":                    s.resultMeta(),
	})
}
