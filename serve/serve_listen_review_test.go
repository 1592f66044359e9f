// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// TestServeListenFollowsAConfigReload (attack, review of subscriptions/
// listen): through the real fsbroker serve, a host of protocol 2026-07-28
// listens to a file of a root the operator's config file then drops. The
// listen's only watch is outside the roots served now, so the session
// ends the listen as it ends a revoked one (notifications/cancelled naming
// it, then its complete result), instead of holding a silent watch and a
// listen slot until the host cancels; a later change of the file is never
// announced.
func TestServeListenFollowsAConfigReload(t *testing.T) {
	rt := newRootsTree(t)
	config := filepath.Join(filepath.Dir(rt.state), "fsbroker.yaml")
	writeRootsConfig(t, config, false, rt.ws, rt.other)
	p := startServeWith(t, rt.state, serveHost{init: testClientInit}, "--config", config, "--consent", "auto")
	requireAllowed(t, p, rt.ws, rt.other)
	fo := filepath.Join(rt.other, "o.txt")
	uri := FileURL(fo)
	meta := map[string]any{modern.MetaProtocolVersion: modern.Version, modern.MetaClientCapabilities: map[string]any{},
		modern.MetaClientInfo: map[string]any{"name": "reload-listener", "version": "1"}}
	id := p.Request(9001, MethodSubscriptionsListen, map[string]any{"_meta": meta,
		"notifications": map[string]any{"resourceSubscriptions": []string{uri}}})
	p.Await("the acknowledgment", func(m *mcppeer.Message) bool {
		return m.IsNotification(NotificationSubscriptionsAcknowledged) && subscriptionOf(m.Params) == id
	})

	writeRootsConfig(t, config, false, rt.ws)
	requireAllowed(t, p, rt.ws)
	p.Await("notifications/cancelled of the listen whose root was dropped", func(m *mcppeer.Message) bool {
		var c struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		return m.IsNotification("notifications/cancelled") && json.Unmarshal(m.Params, &c) == nil && string(c.RequestID) == id
	})
	requireComplete(t, "the end of a listen whose root was dropped", p.AwaitReply(id))
	testfs.WriteFile(t, fo, "changed after its root was dropped\n")
	if got := updates(p); len(got) != 0 {
		t.Fatalf("updates %q after the root was dropped", got)
	}
}
