// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"fmt"
	"testing"
)

// TestModernListenManyResourcesRefusedAtOnce (attack, review of
// subscriptions/listen): a host names 300 000 distinct resources in one
// listen (7 MB, under the message limit). The listen is refused
// QUOTA_EXCEEDED as one over MaxListenResources, without the session first
// comparing each uri with every one before it (300 000² / 2 comparisons
// held a request slot and a core for minutes), and the session goes on
// serving.
func TestModernListenManyResourcesRefusedAtOnce(t *testing.T) {
	ls := startListenSession(t)
	many := make([]string, 300_000)
	for i := range many {
		many[i] = fmt.Sprintf("file:///r/%07d", i)
	}
	requireError(t, "300 000 resources", ls.host.AwaitReply(ls.listen(ls.h, many...)), -32007, "over the limit")
	if n := len(ls.listenRecords(t, "deny")); n != 1 {
		t.Errorf("%d refusing records, want 1", n)
	}
	requireComplete(t, "server/discover after the refusal", ls.h.rpc("server/discover", nil))
}
