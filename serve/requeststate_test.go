// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

// testClock is a clock the test moves.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func testBinding() StateBinding {
	return StateBinding{Principal: "host-a/session-1", Method: "tools/call", Target: "read_text_file",
		Arguments: sha256.Sum256([]byte(`{"path":"/r/a.txt"}`))}
}

func newTestSealer(t *testing.T, clock *testClock) *stateSealer {
	t.Helper()
	s, err := newStateSealer(time.Minute, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRequestStateRoundTrip(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	for _, payload := range [][]byte{nil, []byte("x"), []byte(`{"fields":{"p1":"/r/a.txt"}}`)} {
		token := s.seal(testBinding(), payload)
		got, err := s.open(testBinding(), token)
		if err != nil {
			t.Fatalf("open(seal(%q)): %v", payload, err)
		}
		if string(got) != string(payload) {
			t.Fatalf("payload %q came back as %q", payload, got)
		}
	}
}

// TestRequestStateTamperedRefused changes every byte of a state in turn: no
// change verifies.
func TestRequestStateTamperedRefused(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	token := s.seal(testBinding(), []byte(`{"grant":["/r/a.txt"]}`))
	for i := range len(token) {
		for _, c := range []byte{'A', '_', '0', '.'} {
			if token[i] == c {
				continue
			}
			b := []byte(token)
			b[i] = c
			if _, err := s.open(testBinding(), string(b)); !errors.Is(err, ErrStateInvalid) {
				t.Fatalf("byte %d changed to %q: err = %v, want ErrStateInvalid", i, c, err)
			}
		}
	}
	for _, cut := range []int{1, 10, len(token) / 2, len(token) - 1} {
		if _, err := s.open(testBinding(), token[:cut]); !errors.Is(err, ErrStateInvalid) {
			t.Fatalf("state cut to %d bytes: err = %v", cut, err)
		}
	}
	if _, err := s.open(testBinding(), token+"AA"); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("state with bytes added: err = %v", err)
	}
}

// TestRequestStateHasOneSpelling changes the state's last character to
// every other base64url character: none verifies, not even one that decodes
// to the same bytes with other unused bits.
func TestRequestStateHasOneSpelling(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, payload := range []string{"", "p", "pq", "pqr"} {
		token := s.seal(testBinding(), []byte(payload))
		for _, c := range []byte(alphabet) {
			if c == token[len(token)-1] {
				continue
			}
			changed := token[:len(token)-1] + string(c)
			if _, err := s.open(testBinding(), changed); !errors.Is(err, ErrStateInvalid) {
				t.Fatalf("payload %q, last character %q changed to %q: err = %v", payload, token[len(token)-1], c, err)
			}
		}
	}
}

// TestRequestStateBoundToItsRequest presents a good state with each part of
// its binding changed: another principal, method, target or arguments.
func TestRequestStateBoundToItsRequest(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	token := s.seal(testBinding(), []byte("payload"))
	other := []func(*StateBinding){
		func(b *StateBinding) { b.Principal = "host-b/session-1" },
		func(b *StateBinding) { b.Principal = "host-a/session-2" },
		func(b *StateBinding) { b.Method = "resources/read" },
		func(b *StateBinding) { b.Target = "write_file" },
		func(b *StateBinding) { b.Arguments = sha256.Sum256([]byte(`{"path":"/r/.env"}`)) },
		// Length prefixes: moving a byte from one field to the next changes the binding.
		func(b *StateBinding) { b.Principal, b.Method = "host-a/session-1t", "ools/call" },
	}
	for n, change := range other {
		b := testBinding()
		change(&b)
		if _, err := s.open(b, token); !errors.Is(err, ErrStateInvalid) {
			t.Fatalf("binding change %d: err = %v, want ErrStateInvalid", n, err)
		}
	}
}

func TestRequestStateExpires(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	token := s.seal(testBinding(), []byte("p"))
	clock.t = clock.t.Add(time.Minute - time.Nanosecond)
	if _, err := s.open(testBinding(), token); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	clock.t = clock.t.Add(time.Nanosecond)
	if _, err := s.open(testBinding(), token); !errors.Is(err, ErrStateExpired) {
		t.Fatalf("at expiry: err = %v, want ErrStateExpired", err)
	}
}

// TestRequestStateOfAnotherProcessRefused: a state sealed under another key
// (another fsbroker process, or one before a restart) does not verify.
func TestRequestStateOfAnotherProcessRefused(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	a, b := newTestSealer(t, clock), newTestSealer(t, clock)
	if _, err := b.open(testBinding(), a.seal(testBinding(), []byte("p"))); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("err = %v, want ErrStateInvalid", err)
	}
}

func TestRequestStateMalformedRefused(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	for _, token := range []string{"", "fsb1.", "fsb1.!!!!", "fsb2.AAAA", "AAAA", "fsb1." + strings.Repeat("A", 50),
		"fsb1." + strings.Repeat("A", maxStateTokenBytes)} {
		if _, err := s.open(testBinding(), token); !errors.Is(err, ErrStateInvalid) {
			t.Fatalf("open(%.20q…): err = %v, want ErrStateInvalid", token, err)
		}
	}
}

// FuzzOpenRequestState: no host-sent state panics the opener or verifies
// unless it is one the sealer issued.
func FuzzOpenRequestState(f *testing.F) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s, err := newStateSealer(time.Minute, clock.now)
	if err != nil {
		f.Fatal(err)
	}
	issued := s.seal(testBinding(), []byte("payload"))
	f.Add(issued)
	f.Add("fsb1.")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		payload, err := s.open(testBinding(), token)
		if err == nil && (token != issued || string(payload) != "payload") {
			t.Fatalf("a state the sealer did not issue verified: %q", token)
		}
	})
}

// TestCursorNeverExpires: a resources/list cursor opens long after it was
// sealed, bound like a state.
func TestCursorNeverExpires(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	b := StateBinding{Principal: "declared:host/1", Method: MethodResourcesList}
	cursor := s.sealCursor(b, []byte("position"))
	clock.t = clock.t.Add(24 * 365 * time.Hour)
	if got, err := s.openCursor(b, cursor); err != nil || string(got) != "position" {
		t.Fatalf("a year on: %q, %v", got, err)
	}
	other := b
	other.Principal = "declared:other/1"
	if _, err := s.openCursor(other, cursor); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("another principal's cursor: err = %v, want ErrStateInvalid", err)
	}
}

// TestCursorAndStateDoNotOpenAsEachOther: a cursor presented as a
// requestState, or a requestState as a cursor, under the same binding,
// fails verification: the purpose is under the MAC.
func TestCursorAndStateDoNotOpenAsEachOther(t *testing.T) {
	clock := &testClock{t: time.Unix(1_800_000_000, 0)}
	s := newTestSealer(t, clock)
	if _, err := s.open(testBinding(), s.sealCursor(testBinding(), []byte("p"))); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("a cursor as a requestState: err = %v, want ErrStateInvalid", err)
	}
	if _, err := s.openCursor(testBinding(), s.seal(testBinding(), []byte("p"))); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("a requestState as a cursor: err = %v, want ErrStateInvalid", err)
	}
}
