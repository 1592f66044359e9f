// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/internal/testfs"
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

// askHook is an operator's consent provider that runs a hook when asked,
// then approves what it is asked.
type askHook struct {
	mu     sync.Mutex
	onAsk  func()
	called bool
}

// Ask runs the hook once, then approves req.Paths.
func (a *askHook) Ask(_ context.Context, req consent.Request) (consent.Decision, error) {
	a.mu.Lock()
	hook := a.onAsk
	if a.called {
		hook = nil
	}
	a.called = true
	a.mu.Unlock()
	if hook != nil {
		hook()
	}
	return consent.Decision{Approved: req.Paths, Provider: consent.NameAuto}, nil
}

// TestModernListenAcknowledgesOnlyWhatItWatches (attack, review of
// subscriptions/listen): a listen names a file its host holds a grant for,
// then one no grant covers; while the operator is asked about the second,
// another process revokes the first's grant, which ends its watch. The
// acknowledgment names only the resource still watched (the revision's
// basic/patterns/subscriptions: it reflects what the server agreed to
// honor), and a change of the revoked file is never announced while the
// other's is.
func TestModernListenAcknowledgesOnlyWhatItWatches(t *testing.T) {
	hook := &askHook{}
	ls := startListenSessionWith(t, hook)
	hook.mu.Lock()
	hook.onAsk = func() {
		if _, err := ls.store.Revoke(grants.RevokeFilter{Server: corridor.StateKeyOf(listenHost, false), Path: "proj/dir"}); err != nil {
			t.Errorf("revoke: %v", err)
		}
		// The revocation ends the first resource's watch (awaited here, on
		// the session's goroutine: no t.Fatal).
		for deadline := time.Now().Add(10 * time.Second); ls.sess.cfg.Corridor.Stats().Watches != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the revocation did not end the watch within 10 s")
				return
			}
		}
	}
	hook.mu.Unlock()
	a, b := ls.uri("dir/a.txt"), ls.uri("other/b.txt")
	id := ls.listen(ls.h, a, b)
	if got := ls.awaitAck(t, id); !slices.Equal(got, []string{b}) {
		t.Errorf("acknowledged %q, want only %s: the other's watch had ended", got, b)
	}
	ls.awaitWatches(t, 1)
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed after the revocation\n")
	testfs.WriteFile(t, filepath.Join(ls.proj, "other", "b.txt"), "changed\n")
	ls.awaitListenUpdate(t, id, b)
	if got := updates(ls.host); !slices.Equal(got, []string{b}) {
		t.Errorf("updates %q: a change under the revoked grant was announced", got)
	}
}
