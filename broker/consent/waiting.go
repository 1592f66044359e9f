// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"fmt"
	"strings"
)

// WaitNotice is told when a provider starts waiting for a person to answer
// req: provider names it (NamePrompt, NameElicit, ...). It returns the
// function the provider calls once the wait ends, with asked false when
// nobody could be asked after all (the host cannot show a form). It must
// not block: it runs on the request's goroutine (the corridor's observer:
// the metrics of consent waits, and a desktop notification).
type WaitNotice func(provider string, req Request) (ended func(asked bool))

type waitNoticeKey struct{}

// WithWaitNotice returns ctx carrying n, for the providers that wait for a
// person (Waiting) under it.
func WithWaitNotice(ctx context.Context, n WaitNotice) context.Context {
	return context.WithValue(ctx, waitNoticeKey{}, n)
}

// Waiting is what a provider that waits for a person (prompt, elicit, or
// one of a host's own) calls as it puts req to the person: it tells the
// WaitNotice ctx carries, and returns the function to call, once, when the
// wait ends (answered, timed out or withdrawn). Without a WaitNotice it
// returns a function that does nothing.
func Waiting(ctx context.Context, provider string, req Request) (ended func(asked bool)) {
	if n, ok := ctx.Value(waitNoticeKey{}).(WaitNotice); ok && n != nil {
		return n(provider, req)
	}
	return func(bool) {}
}

// Describe names the server in a few words of plain text, as the prompt
// does: its pinned id, or the name it declares marked as unverified, quoted
// with anything not plainly visible escaped, for a desktop notification or
// a log line.
func (s Server) Describe() string {
	if s.Pinned {
		return quoted(s.ID)
	}
	return quoted(s.Name) + " (unverified name)"
}

// maxDescribedPaths is how many paths Describe lists; it counts the others.
const maxDescribedPaths = 3

// Describe says what req asks, in one line of plain text: who asks
// (Server.Describe), the access, and the paths (the first few, escaped as
// the prompt shows them, then a count of the others).
func (r Request) Describe() string {
	access := r.Access
	if access == "" {
		access = AccessRead
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s asks for %s access to ", r.Server.Describe(), access)
	for i, p := range r.Paths {
		if i == maxDescribedPaths {
			fmt.Fprintf(&b, " and %d more", len(r.Paths)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(showPath(cutRunes(p, maxRemovedPathRunes)))
	}
	return b.String()
}
