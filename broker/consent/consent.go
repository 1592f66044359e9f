// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Access values of a Request.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// Names of the providers, as they appear in Decision.Provider (a command
// provider appends its program: "command:/usr/local/bin/ask").
const (
	NameAuto    = "auto"
	NameDeny    = "deny"
	NamePrompt  = "prompt"
	NameCommand = "command"
)

// DefaultTimeout bounds one consent question (the prompt's wait for the
// person, the command's run) unless WithTimeout says otherwise. A shorter
// deadline on the context given to Ask wins.
const DefaultTimeout = 60 * time.Second

// MaxAnswerBytes is the most a consent command may write to its stdout.
const MaxAnswerBytes = 1 << 20

// ErrNoTerminal is returned (wrapped) by the prompt provider when the process
// has no controlling terminal to ask on; nothing is approved.
var ErrNoTerminal = errors.New("consent: no terminal to ask on")

// Server identifies the server that asks. Name and Version are what the server
// declared in initialize; only ID, when Pinned, was set by the operator.
type Server struct {
	// ID is the identity grants are kept under: the operator's pinned id, or
	// the declared name when nothing is pinned.
	ID string `json:"id"`
	// Name is the name the server declared (untrusted).
	Name string `json:"name"`
	// Version is the version the server declared (untrusted).
	Version string `json:"version"`
	// Pinned is true when the operator pinned the identity; false means the
	// identity is only what the server says it is.
	Pinned bool `json:"pinned"`
}

// Root is display information about the root that holds requested paths.
type Root struct {
	// Mount is the root's handle, the first segment of mount-relative paths.
	Mount string `json:"mount"`
	// Name is the root's display name.
	Name string `json:"name"`
	// Path is the root's absolute directory on this machine.
	Path string `json:"path"`
	// Writable is true when the operator made the root writable.
	Writable bool `json:"writable"`
}

// Request is one files/consent question.
type Request struct {
	// Server is who asks.
	Server Server `json:"server"`
	// Message is the server's explanation (at most 2000 characters). It
	// comes from the server and is untrusted: it may lie, and it may hold
	// terminal escapes or markup.
	Message string `json:"message"`
	// Paths are the requested paths: mount-relative, with '/' separators,
	// canonical and inside the roots (the caller checked; providers do not).
	Paths []string `json:"paths"`
	// Access is AccessRead or AccessWrite; empty means AccessRead.
	Access string `json:"access"`
	// Roots optionally describe the roots of Paths, for display; a path's
	// root is the one whose Mount is the path's first segment.
	Roots []Root `json:"roots"`
	// Removed are the requested paths that are not asked about, and why:
	// those outside every root, and those the policy lets nobody grant. They
	// are for display only: nothing a provider answers grants them.
	Removed []Removed `json:"removed"`
}

// Removed is a requested path left out of a consent question.
type Removed struct {
	// Path is the path: mount-relative when it is inside a root, else as
	// the server wrote it (untrusted).
	Path string `json:"path"`
	// Reason says why it is not asked about: "outside every root", or the
	// policy's reasons (which may quote what the server sent).
	Reason string `json:"reason"`
}

// Decision is a provider's answer.
type Decision struct {
	// Approved is the subset of Request.Paths that was approved, in the
	// request's order and without repeats; empty means nothing was.
	Approved []string `json:"approved"`
	// Provider names the provider that decided (for the audit trail).
	Provider string `json:"provider"`
}

// Provider answers consent requests. Ask returns the approved subset of the
// requested paths. An error means nothing is approved (the caller fails
// closed and logs the error; it is never sent to the server, since it may name
// host paths); the returned Decision still names the provider.
type Provider interface {
	Ask(ctx context.Context, req Request) (Decision, error)
}

// Option configures the providers that take options (prompt and command).
type Option func(*options)

type options struct {
	timeout time.Duration
	env     []string
	envSet  bool
	held    *HeldOutput
}

// WithTimeout bounds one question: how long the prompt waits for the person,
// how long a command may run. Zero or less keeps DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithEnv sets the environment of a consent command ("KEY=value" entries),
// instead of the broker's own. An empty, non-nil list runs it with none.
func WithEnv(env []string) Option {
	return func(o *options) { o.env, o.envSet = env, true }
}

// WithHeldOutput has the prompt hold h (the log, written to the terminal
// the prompt asks on) while a question is on the terminal: what is written
// to h meanwhile comes out once the question is answered or ends. Other
// providers ignore it.
func WithHeldOutput(h *HeldOutput) Option {
	return func(o *options) { o.held = h }
}

func newOptions(opts []Option) options {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Parse returns the provider a --consent value names: "auto", "deny",
// "prompt", "elicit" or "command:PROG [ARGS...]" (see the package doc for how
// PROG and its arguments are split). PROG is looked up at once, so a missing program
// is a configuration error rather than a denial at the first request.
func Parse(spec string, opts ...Option) (Provider, error) {
	switch {
	case spec == NameAuto:
		return Auto{}, nil
	case spec == NameDeny:
		return Deny{}, nil
	case spec == NamePrompt:
		return NewPrompt(opts...)
	case spec == NameElicit:
		return NewElicit(opts...), nil
	case strings.HasPrefix(spec, NameCommand+":"):
		words, err := splitWords(strings.TrimPrefix(spec, NameCommand+":"))
		if err != nil {
			return nil, fmt.Errorf("consent %q: %w", spec, err)
		}
		if len(words) == 0 {
			return nil, fmt.Errorf("consent %q: no program after command:", spec)
		}
		return NewCommand(words[0], words[1:], opts...)
	}
	return nil, fmt.Errorf("consent %q: want auto, deny, prompt, elicit or command:PROG [ARGS...]", spec)
}

// Default is the provider PROTOCOL.md section 7 names when --consent is not
// given: prompt where this process has a controlling terminal, else deny.
func Default(opts ...Option) Provider {
	if TerminalAvailable() {
		if p, err := NewPrompt(opts...); err == nil {
			return p
		}
	}
	return Deny{}
}

// TerminalAvailable reports whether the process has a controlling terminal
// the prompt provider could ask on.
func TerminalAvailable() bool {
	f, err := openTerminal()
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// Auto approves every requested path: the operator has chosen to let policy
// alone decide.
type Auto struct{}

// Ask approves all of req.Paths.
func (Auto) Ask(_ context.Context, req Request) (Decision, error) {
	req, err := req.normalize()
	if err != nil {
		return Decision{Provider: NameAuto}, err
	}
	return Decision{Approved: req.Paths, Provider: NameAuto}, nil
}

// Deny approves nothing.
type Deny struct{}

// Ask approves none of req.Paths.
func (Deny) Ask(context.Context, Request) (Decision, error) {
	return Decision{Provider: NameDeny}, nil
}

var (
	_ Provider = Auto{}
	_ Provider = Deny{}
	_ Provider = (*Prompt)(nil)
	_ Provider = (*Command)(nil)
)

// normalize checks the access and returns the request with empty access read
// and the paths without repeats.
func (r Request) normalize() (Request, error) {
	switch r.Access {
	case "":
		r.Access = AccessRead
	case AccessRead, AccessWrite:
	default:
		return r, fmt.Errorf("consent: access %q is neither read nor write", r.Access)
	}
	r.Paths = keep(r.Paths, r.Paths)
	return r, nil
}

// keep returns the members of requested that are in approved, in the order of
// requested and without repeats; anything else in approved is dropped.
func keep(requested, approved []string) []string {
	if len(approved) == 0 {
		return nil
	}
	want := make(map[string]bool, len(approved))
	for _, p := range approved {
		want[p] = true
	}
	out := make([]string, 0, len(approved))
	for _, p := range requested {
		if want[p] {
			out = append(out, p)
			delete(want, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// rootOf returns the display information of the root that holds path.
func (r Request) rootOf(path string) (Root, bool) {
	mount, _, _ := strings.Cut(path, "/")
	for _, root := range r.Roots {
		if root.Mount == mount {
			return root, true
		}
	}
	return Root{}, false
}
