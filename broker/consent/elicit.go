// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// NameElicit names the provider that asks through the MCP host's own UI.
const NameElicit = "elicit"

// ErrNoElicitation is returned (wrapped) by the elicit provider when there
// is no host to ask, or the host cannot show a form: it did not declare the
// elicitation capability (with form mode), or the protocol revision it
// negotiated has no elicitation. Nothing is approved.
var ErrNoElicitation = errors.New("consent: the host cannot be asked (no elicitation)")

// ElicitResult is the host's answer to an elicitation/create.
type ElicitResult struct {
	// Action is "accept", "decline" or "cancel".
	Action string `json:"action"`
	// Content holds the form's values when Action is "accept".
	Content map[string]json.RawMessage `json:"content"`
}

// Elicitor asks the person at an MCP host through the host's own UI: the
// transport that faces the host (fsbroker wrap's Router) implements it and
// puts itself in the context of the session's requests (WithElicitor).
type Elicitor interface {
	// ElicitForm sends the host elicitation/create in form mode, in the
	// shape of the protocol revision the host negotiated, with message and
	// the flat object schema requestedSchema, and returns the host's
	// answer. It fails, wrapping ErrNoElicitation, when the host cannot be
	// asked, and with ctx's error when ctx ends first (the host is then told
	// the request is cancelled).
	ElicitForm(ctx context.Context, message string, requestedSchema json.RawMessage) (ElicitResult, error)
}

type elicitorKey struct{}

// WithElicitor returns ctx carrying e, for the elicit provider of the
// requests run under it.
func WithElicitor(ctx context.Context, e Elicitor) context.Context {
	return context.WithValue(ctx, elicitorKey{}, e)
}

// elicitorFrom returns the Elicitor ctx carries.
func elicitorFrom(ctx context.Context) (Elicitor, bool) {
	e, ok := ctx.Value(elicitorKey{}).(Elicitor)
	return e, ok && e != nil
}

// Elicit asks the person through the MCP host's own UI (--consent elicit):
// elicitation/create in form mode, with what the prompt shows as the message
// and one yes/no field per path, no by default. Only the paths the person
// sets to yes in an accepted form are approved; a decline or a cancel
// approves nothing, and so does a host that cannot be asked (no Elicitor in
// the context, or one that fails with ErrNoElicitation), a malformed answer
// or one that does not come within the time limit.
type Elicit struct {
	timeout time.Duration
}

// NewElicit returns the elicit provider; WithTimeout bounds the wait for
// the person (DefaultTimeout).
func NewElicit(opts ...Option) *Elicit {
	o := newOptions(opts)
	return &Elicit{timeout: o.timeout}
}

// Ask puts req to the person at the host.
func (p *Elicit) Ask(ctx context.Context, req Request) (Decision, error) {
	d := Decision{Provider: NameElicit}
	req, err := req.normalize()
	if err != nil {
		return d, err
	}
	e, ok := elicitorFrom(ctx)
	if !ok {
		return d, fmt.Errorf("%w: no MCP host faces this session (elicit works under fsbroker wrap and fsbroker serve)", ErrNoElicitation)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	token := newFormToken()
	ended := Waiting(ctx, NameElicit, req)
	res, err := e.ElicitForm(ctx, render(req), consentForm(req, token))
	ended(!errors.Is(err, ErrNoElicitation))
	if err != nil {
		return d, fmt.Errorf("consent: elicitation: %w", err)
	}
	switch res.Action {
	case "accept":
	case "decline", "cancel":
		return d, nil
	default:
		return d, fmt.Errorf("consent: elicitation: the host answered with action %.32q", res.Action)
	}
	var approved []string
	for i, path := range req.Paths {
		if string(res.Content[formField(token, i)]) == "true" {
			approved = append(approved, path)
		}
	}
	d.Approved = keep(req.Paths, approved)
	return d, nil
}

// formField names the form's field for the i-th path of the question with
// token: "path<i+1>-<token>". The token is fresh for each question, so no
// other form (one a server put to the host itself) can have the question's
// field names, and an answer to another form approves nothing.
func formField(token string, i int) string { return "path" + strconv.Itoa(i+1) + "-" + token }

// newFormToken returns a question's random token: 64 bits, in hex.
func newFormToken() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// consentForm is the requestedSchema of a consent question: a flat object
// with one boolean per path, false by default, titled with the path as the
// prompt shows it, named with the question's token (formField).
func consentForm(req Request, token string) json.RawMessage {
	type field struct {
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Default     bool   `json:"default"`
	}
	props := make(map[string]field, len(req.Paths))
	for i, path := range req.Paths {
		desc := "Allow " + req.Access + " access to this path and everything beneath it"
		if root, ok := req.rootOf(path); ok {
			desc += " (root " + quoted(root.Name) + ")"
		}
		props[formField(token, i)] = field{Type: "boolean", Title: strconv.Itoa(i+1) + ". " + showPath(path), Description: desc}
	}
	schema, err := json.Marshal(map[string]any{"type": "object", "properties": props})
	if err != nil {
		panic(fmt.Sprintf("consent: encode the form: %v", err)) // strings and booleans always encode
	}
	return schema
}

// ErrNoFormElicitation is ErrNoElicitation for a host that did not declare
// the elicitation capability with form mode in its initialize.
var ErrNoFormElicitation = fmt.Errorf("%w: the host did not declare the elicitation capability with form mode", ErrNoElicitation)

// elicitationFormVersions are the protocol revisions in which the client
// answers elicitation/create in form mode, and whether the request names the
// mode ("mode": "form" from 2025-11-25; 2025-06-18 has no mode member).
var elicitationFormVersions = map[string]bool{"2025-06-18": false, "2025-11-25": true}

// HostElicitsForms reports whether the params of a host's initialize
// declare the elicitation capability with form mode (CapabilitiesElicitForms
// of their capabilities).
func HostElicitsForms(initializeParams json.RawMessage) bool {
	var p struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	return json.Unmarshal(initializeParams, &p) == nil && CapabilitiesElicitForms(p.Capabilities)
}

// CapabilitiesElicitForms reports whether a client's capabilities (of its
// initialize, or of one request on protocol 2026-07-28) declare the
// elicitation capability with form mode: {} (form only, as 2025-06-18 has
// it) or an object with a form member.
func CapabilitiesElicitForms(capabilities json.RawMessage) bool {
	var c struct {
		Elicitation *map[string]json.RawMessage `json:"elicitation"`
	}
	if json.Unmarshal(capabilities, &c) != nil || c.Elicitation == nil || *c.Elicitation == nil {
		return false
	}
	modes := *c.Elicitation
	_, form := modes["form"]
	return len(modes) == 0 || form
}

// ElicitFormParams returns the params of an elicitation/create request in
// form mode, as the protocol revision version writes them, with message and
// the flat object schema requestedSchema, to a host that declared form
// elicitation (hostElicitsForms: HostElicitsForms of its initialize). A host
// that did not (ErrNoFormElicitation), or a revision without elicitation, is
// an error wrapping ErrNoElicitation: nobody can be asked.
func ElicitFormParams(hostElicitsForms bool, version, message string, requestedSchema json.RawMessage) (json.RawMessage, error) {
	if !hostElicitsForms {
		return nil, ErrNoFormElicitation
	}
	named, known := elicitationFormVersions[version]
	if !known {
		return nil, fmt.Errorf("%w: protocol revision %q has no elicitation/create the broker may send", ErrNoElicitation, version)
	}
	return formParams(named, message, requestedSchema)
}

// InputRequestFormParams returns the params of an elicitation/create in
// form mode as protocol 2026-07-28 puts it among an InputRequiredResult's
// inputRequests (the mode named), with message and the flat object schema
// requestedSchema. The caller checks that the request's client declared
// form elicitation (CapabilitiesElicitForms).
func InputRequestFormParams(message string, requestedSchema json.RawMessage) (json.RawMessage, error) {
	return formParams(true, message, requestedSchema)
}

// formParams are the params of an elicitation/create in form mode, with the
// mode member when named.
func formParams(named bool, message string, requestedSchema json.RawMessage) (json.RawMessage, error) {
	params := struct {
		Mode            string          `json:"mode,omitempty"`
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}{Message: message, RequestedSchema: requestedSchema}
	if named {
		params.Mode = "form"
	}
	out, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("consent: encode elicitation/create: %w", err)
	}
	return out, nil
}

// ElicitOr asks through the MCP host's own UI (Elicit) when the session's
// host can show a form, and otherwise puts the question to its fallback:
// fsbroker serve's provider when the operator chose none (--consent elicit
// is the default for a host that declares elicitation). A host that cannot
// be asked is one whose Elicitor fails with ErrNoElicitation, or a session
// with no Elicitor; any other failure of the host's (an error answer, a
// malformed one, no answer in time) approves nothing, as Elicit's does.
type ElicitOr struct {
	elicit   *Elicit
	fallback Provider
}

// NewElicitOr returns the provider that asks the host, else fallback; opts
// configure the elicitation as NewElicit's do.
func NewElicitOr(fallback Provider, opts ...Option) *ElicitOr {
	return &ElicitOr{elicit: NewElicit(opts...), fallback: fallback}
}

// Ask puts req to the person at the host, or to the fallback when the host
// cannot be asked.
func (p *ElicitOr) Ask(ctx context.Context, req Request) (Decision, error) {
	d, err := p.elicit.Ask(ctx, req)
	if errors.Is(err, ErrNoElicitation) {
		return p.fallback.Ask(ctx, req)
	}
	return d, err
}

var (
	_ Provider = (*Elicit)(nil)
	_ Provider = (*ElicitOr)(nil)
)
