// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
)

// Protocol revision 2026-07-28 has no server-initiated requests: a server
// that needs the host's roots or the person's consent answers the request
// with an InputRequiredResult, and the host retries it with inputResponses
// and the requestState it was given. The revision (basic/patterns/mrtr)
// makes requestState attacker-controlled input: a server whose state
// influences access must protect its integrity and should bind it to the
// principal, to the request it answers, and to a short expiry. fsbroker
// serve's state decides what a consent answer approves, so it is sealed:
// an HMAC-SHA256 under a key of the session (random when it starts, never
// written anywhere: on stdio the session is the process) over the binding
// and the payload.
//
// The same sealer makes resources/list's cursors, in a mode of their own: a
// cursor has no expiry (a host may page through a listing at its pace, as
// on earlier revisions), and its MAC covers a purpose byte that a
// requestState's does not share, so that neither token opens as the other.

// DefaultStateTTL is how long a requestState fsbroker serve issues stays
// good: long enough for a person to answer a consent form, short enough
// that a leaked state is soon worthless.
const DefaultStateTTL = 5 * time.Minute

// maxStateTokenBytes bounds a requestState the sealer opens (a host may send
// anything); the states fsbroker issues are far smaller.
const maxStateTokenBytes = 64 << 10

// statePrefix starts every requestState fsbroker serve issues, with the
// format's version.
const statePrefix = "fsb1."

// stateEncoding is base64url without padding, strict: a last character
// whose unused bits are not zero is refused, so that each state has one
// spelling and a changed character never verifies.
var stateEncoding = base64.RawURLEncoding.Strict()

// ErrStateInvalid is why a requestState is refused: it was not issued by
// this process, was changed, or is presented by another principal or on
// another request than the one it answers. Nothing it says is used.
var ErrStateInvalid = errors.New("requestState failed verification")

// ErrStateExpired is why a requestState that verified is refused: it was
// presented after its expiry.
var ErrStateExpired = errors.New("requestState expired")

// StateBinding is what a requestState is bound to, checked on every retry:
// a state presented with a different binding fails verification.
type StateBinding struct {
	// Principal is the host's identity (its pinned or declared name) and
	// the session, so that one host's state is refused to another.
	Principal string
	// Method is the request's method (tools/call, resources/read).
	Method string
	// Target is the tool's name or the resource's URI.
	Target string
	// Arguments digests the request's arguments (SHA-256 of their JSON as
	// sent), so that a state is refused on a request asking for other paths.
	Arguments [sha256.Size]byte
}

// sealPurpose says what a sealed token is; the MAC covers it.
type sealPurpose byte

const (
	// purposeRequestState: a requestState, with an expiry.
	purposeRequestState sealPurpose = 's'
	// purposeCursor: a resources/list cursor, with no expiry.
	purposeCursor sealPurpose = 'c'
)

// noExpiry is the expiry field of a token that never expires (a cursor).
const noExpiry = 0

// principalOf is the principal a requestState (and a resources/list
// cursor) is bound to: the host's identity as its grants are kept
// (corridor.Caller.StateKey) and the session.
func principalOf(c corridor.Caller) string { return c.StateKey() + "\n" + c.SessionID }

// stateSealer seals and opens the requestStates (and resources/list
// cursors) of one session.
type stateSealer struct {
	key [32]byte
	ttl time.Duration
	now func() time.Time
}

// newStateSealer returns a sealer with a fresh random key whose states live
// ttl (DefaultStateTTL when ttl <= 0); now is the clock (time.Now when nil).
func newStateSealer(ttl time.Duration, now func() time.Time) (*stateSealer, error) {
	if ttl <= 0 {
		ttl = DefaultStateTTL
	}
	if now == nil {
		now = time.Now
	}
	s := &stateSealer{ttl: ttl, now: now}
	if _, err := rand.Read(s.key[:]); err != nil {
		return nil, fmt.Errorf("serve: requestState key: %w", err)
	}
	return s, nil
}

// seal returns the requestState carrying payload, bound to b, expiring the
// sealer's TTL from now.
func (s *stateSealer) seal(b StateBinding, payload []byte) string {
	return s.sealAs(purposeRequestState, b, uint64(s.now().Add(s.ttl).UnixNano()), payload)
}

// open verifies the requestState token against b and returns its payload:
// ErrStateInvalid when it is not one this sealer issued for b, unchanged;
// ErrStateExpired when it is, but too late.
func (s *stateSealer) open(b StateBinding, token string) ([]byte, error) {
	expires, payload, err := s.openAs(purposeRequestState, b, token)
	if err != nil {
		return nil, err
	}
	if !s.now().Before(time.Unix(0, int64(expires))) {
		return nil, ErrStateExpired
	}
	return payload, nil
}

// sealCursor returns a cursor carrying payload, bound to b, that never
// expires.
func (s *stateSealer) sealCursor(b StateBinding, payload []byte) string {
	return s.sealAs(purposeCursor, b, noExpiry, payload)
}

// openCursor verifies a cursor of sealCursor against b and returns its
// payload, or ErrStateInvalid.
func (s *stateSealer) openCursor(b StateBinding, token string) ([]byte, error) {
	_, payload, err := s.openAs(purposeCursor, b, token)
	return payload, err
}

// sealAs seals payload for purpose, bound to b, with the expiry field
// expires (nanoseconds since the Unix epoch, or noExpiry).
func (s *stateSealer) sealAs(purpose sealPurpose, b StateBinding, expires uint64, payload []byte) string {
	body := make([]byte, 8, 8+len(payload)+sha256.Size)
	binary.BigEndian.PutUint64(body, expires)
	body = append(body, payload...)
	body = append(body, s.mac(purpose, b, body)...)
	return statePrefix + stateEncoding.EncodeToString(body)
}

// openAs verifies token as sealed for purpose and b, and returns its expiry
// field and payload; ErrStateInvalid when it was not sealed so, unchanged.
func (s *stateSealer) openAs(purpose sealPurpose, b StateBinding, token string) (expires uint64, payload []byte, err error) {
	if len(token) > maxStateTokenBytes || !strings.HasPrefix(token, statePrefix) {
		return 0, nil, ErrStateInvalid
	}
	body, err := stateEncoding.DecodeString(token[len(statePrefix):])
	if err != nil || len(body) < 8+sha256.Size {
		return 0, nil, ErrStateInvalid
	}
	signed, sum := body[:len(body)-sha256.Size], body[len(body)-sha256.Size:]
	if !hmac.Equal(sum, s.mac(purpose, b, signed)) {
		return 0, nil, ErrStateInvalid
	}
	return binary.BigEndian.Uint64(signed[:8]), signed[8:], nil
}

// mac is the HMAC-SHA256 of the purpose, the binding and the signed body
// (expiry and payload). Each binding field is length-prefixed, so no two
// bindings encode alike.
func (s *stateSealer) mac(purpose sealPurpose, b StateBinding, signed []byte) []byte {
	h := hmac.New(sha256.New, s.key[:])
	h.Write([]byte(statePrefix))
	h.Write([]byte{byte(purpose)})
	for _, field := range []string{b.Principal, b.Method, b.Target} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write([]byte(field))
	}
	h.Write(b.Arguments[:])
	h.Write(signed)
	return h.Sum(nil)
}
