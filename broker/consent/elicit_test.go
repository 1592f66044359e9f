// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"errors"
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
