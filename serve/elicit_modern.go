// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// errInputRequired ends a call of protocol 2026-07-28 whose consent
// question goes to the host: the session answers the request with an
// InputRequiredResult, and nothing more of the call runs (consented).
var errInputRequired = errors.New("the consent question goes to the host in an InputRequiredResult (protocol " +
	modern.Version + "); the call runs again when the host retries it with the answer")

// sealedQuestion is a consent form as a requestState keeps it: a digest of
// the question without its field names (the message, and each field's
// schema: title, description, type, default), and the field names as
// asked, in the digest's order (questionOf).
type sealedQuestion struct {
	Digest string   `json:"digest"`
	Fields []string `json:"fields"`
}

// pendingQuestion is a consent question put while a call ran, for the
// InputRequiredResult.
type pendingQuestion struct {
	message string
	schema  json.RawMessage
	sealed  sealedQuestion
}

// questionOf is the sealed form of a consent question (message and
// requestedSchema, a flat object schema). The elicit provider names a
// question's fields afresh each time it puts it (consent.Elicit: a random
// token in every field name), so a question is recognized by what the
// person is shown: the digest covers the message, the schema's members but
// its properties, and the properties' schemas ordered by their JSON; Fields
// lists the names in that order.
func questionOf(message string, schema json.RawMessage) (sealedQuestion, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(schema, &members); err != nil {
		return sealedQuestion{}, fmt.Errorf("serve: the consent form: %w", err)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(members["properties"], &props); err != nil || props == nil {
		return sealedQuestion{}, errors.New("serve: the consent form has no properties")
	}
	delete(members, "properties")
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := bytes.Compare(props[a], props[b]); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a), []byte(b))
	})
	shown := make([]json.RawMessage, len(names))
	for i, name := range names {
		shown[i] = props[name]
	}
	canonical, err := json.Marshal(struct {
		Message string                     `json:"message"`
		Schema  map[string]json.RawMessage `json:"schema"`
		Fields  []json.RawMessage          `json:"fields"`
	}{message, members, shown})
	if err != nil {
		return sealedQuestion{}, fmt.Errorf("serve: the consent form: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return sealedQuestion{Digest: hex.EncodeToString(sum[:]), Fields: names}, nil
}

// modernElicitor is the consent.Elicitor of one request of protocol
// 2026-07-28. It asks nobody: the first time the elicit provider puts a
// question it records it and fails with errInputRequired (the session turns
// the call into an InputRequiredResult); on the retry, when the verified
// requestState says the same question was asked, it returns the host's
// answer, the values of the asked fields under the names the provider gave
// them now, and nothing else the host sent.
type modernElicitor struct {
	elicitsForms bool            // the request's client declared form elicitation
	asked        *sealedQuestion // the question the verified requestState says was asked
	answer       json.RawMessage // the host's answer to it (nil: none)

	mu      sync.Mutex
	used    bool             // the answer was given to the provider
	pending *pendingQuestion // the question to put to the host
}

// ElicitForm answers the elicit provider's question (consent.Elicitor).
func (e *modernElicitor) ElicitForm(_ context.Context, message string, requestedSchema json.RawMessage) (consent.ElicitResult, error) {
	if !e.elicitsForms {
		return consent.ElicitResult{}, consent.ErrNoFormElicitation
	}
	q, err := questionOf(message, requestedSchema)
	if err != nil {
		return consent.ElicitResult{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.answer != nil && !e.used && e.asked.Digest == q.Digest && len(e.asked.Fields) == len(q.Fields) {
		e.used = true
		return answerFor(e.answer, e.asked.Fields, q.Fields)
	}
	if e.pending == nil {
		e.pending = &pendingQuestion{message: message, schema: requestedSchema, sealed: q}
	}
	return consent.ElicitResult{}, errInputRequired
}

// answerFor is the host's answer (an ElicitResult) to the question whose
// fields it was asked as asked, for the provider that now names them now
// (in the same order): the action as answered, and each asked field's value
// under its name of now. A field the host answered that was not asked is
// dropped. An answer that is not an ElicitResult is an error (nothing is
// approved).
func answerFor(answer json.RawMessage, asked, now []string) (consent.ElicitResult, error) {
	var got consent.ElicitResult
	if err := json.Unmarshal(answer, &got); err != nil || string(answer) == "null" {
		return consent.ElicitResult{}, fmt.Errorf("the host's answer to the consent form is not an ElicitResult: %.200s", answer)
	}
	out := consent.ElicitResult{Action: got.Action}
	if got.Content != nil {
		out.Content = make(map[string]json.RawMessage, len(now))
		for i, name := range asked {
			if v, ok := got.Content[name]; ok {
				out.Content[now[i]] = v
			}
		}
	}
	return out, nil
}

// question returns the question put to the host, or nil.
func (e *modernElicitor) question() *pendingQuestion {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pending
}

var _ consent.Elicitor = (*modernElicitor)(nil)

// modernElicitorKey is the context key of a request's modernElicitor.
type modernElicitorKey struct{}

// withModernElicitor returns ctx carrying el as the Elicitor of the
// request's consent questions (consent.WithElicitor), and for inputPending.
func withModernElicitor(ctx context.Context, el *modernElicitor) context.Context {
	return consent.WithElicitor(context.WithValue(ctx, modernElicitorKey{}, el), el)
}

// inputPending returns errInputRequired when the request run under ctx put
// a question to its host (protocol 2026-07-28) that awaits the answer:
// nothing more of the call may run.
func inputPending(ctx context.Context) error {
	if el, ok := ctx.Value(modernElicitorKey{}).(*modernElicitor); ok && el.question() != nil {
		return errInputRequired
	}
	return nil
}

// cannotAsk is the Elicitor of a request of protocol 2026-07-28 that
// cannot carry an InputRequiredResult (resources/list): nobody is asked
// through the host, so the elicit provider's fallback answers, as for a
// host without elicitation.
type cannotAsk struct{}

// errNoInputRequired is why cannotAsk asks nobody.
var errNoInputRequired = fmt.Errorf("%w: protocol %s asks the host only in the results of tools/call, resources/read and prompts/get",
	consent.ErrNoElicitation, modern.Version)

// ElicitForm fails with errNoInputRequired (consent.Elicitor).
func (cannotAsk) ElicitForm(context.Context, string, json.RawMessage) (consent.ElicitResult, error) {
	return consent.ElicitResult{}, errNoInputRequired
}
