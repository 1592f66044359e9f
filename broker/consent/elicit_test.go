// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Without a host to ask (no Elicitor in the request's context: a session
// that no fsbroker wrap faces), elicit approves nothing and says why. What a
// host's answers approve is tested with the real Router, in
// broker/transport/proxy (TestWrapElicit*).
func TestElicitWithoutAHost(t *testing.T) {
	req := Request{Server: Server{ID: "s", Name: "s"}, Message: "hi", Paths: []string{"proj/a"}}
	d, err := NewElicit().Ask(context.Background(), req)
	if !errors.Is(err, ErrNoElicitation) || len(d.Approved) != 0 || d.Provider != NameElicit {
		t.Fatalf("no elicitor: %+v, %v; want nothing approved and ErrNoElicitation", d, err)
	}
}

// ElicitOr asks the fallback only when the host cannot be asked: without
// an Elicitor the fallback's answer stands (auto here), and its provider
// names it.
func TestElicitOrFallsBackWithoutAHost(t *testing.T) {
	req := Request{Server: Server{ID: "s", Name: "s"}, Message: "hi", Paths: []string{"proj/a"}}
	d, err := NewElicitOr(Auto{}).Ask(context.Background(), req)
	if err != nil || len(d.Approved) != 1 || d.Provider != NameAuto {
		t.Fatalf("no elicitor: %+v, %v; want the fallback's answer", d, err)
	}
}

// The capability and the request's shape by revision: {} and {"form": ...}
// declare form mode, {"url": {}} alone and null do not; 2025-11-25 names the
// mode, 2025-06-18 does not, and a revision without elicitation is refused.
func TestElicitFormShapes(t *testing.T) {
	for params, want := range map[string]bool{
		`{"capabilities":{"elicitation":{}}}`:                  true,
		`{"capabilities":{"elicitation":{"form":{}}}}`:         true,
		`{"capabilities":{"elicitation":{"url":{}}}}`:          false,
		`{"capabilities":{"elicitation":null}}`:                false,
		`{"capabilities":{}}`:                                  false,
		`{"capabilities":{"elicitation":{"form":{},"url":1}}}`: true,
	} {
		if got := HostElicitsForms([]byte(params)); got != want {
			t.Errorf("HostElicitsForms(%s) = %v, want %v", params, got, want)
		}
	}
	for version, mode := range map[string]bool{"2025-11-25": true, "2025-06-18": false} {
		raw, err := ElicitFormParams(true, version, "m", []byte(`{"type":"object"}`))
		if err != nil || strings.Contains(string(raw), `"mode":"form"`) != mode {
			t.Errorf("%s: %s, %v", version, raw, err)
		}
	}
	if _, err := ElicitFormParams(true, "2025-03-26", "m", []byte(`{}`)); !errors.Is(err, ErrNoElicitation) {
		t.Errorf("2025-03-26: %v, want ErrNoElicitation", err)
	}
	if _, err := ElicitFormParams(false, "2025-11-25", "m", []byte(`{}`)); !errors.Is(err, ErrNoFormElicitation) {
		t.Errorf("a host without form elicitation: %v, want ErrNoFormElicitation", err)
	}
}
