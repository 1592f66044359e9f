// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/fsbroker/fsbroker/internal/testfs"
)

// subscribeAll subscribes the host to each uri, failing the test on a
// refusal.
func subscribeAll(t *testing.T, p *referenceClient, uris ...string) {
	t.Helper()
	for _, uri := range uris {
		requireEmpty(t, "subscribe "+uri, p.rpc(MethodResourcesSubscribe, map[string]any{"uri": uri}))
	}
}

// TestServeSubscriptionsFollowTheHostRoots (review 19 finding 4), through
// the real fsbroker serve and a scripted host: once the host's
// notifications/roots/list_changed narrows its roots so that a subscribed
// file is outside them, a write to that file on disk is never announced
// (a write to a file still inside, made after it, is); nor after the host
// narrows its roots to nothing and then names a root again.
func TestServeSubscriptionsFollowTheHostRoots(t *testing.T) {
	rt := newRootsTree(t)
	a, b := filepath.Join(rt.ws, "a"), filepath.Join(rt.ws, "b")
	fa, fb := filepath.Join(a, "f.txt"), filepath.Join(b, "f.txt")
	uriA, uriB := FileURL(fa), FileURL(fb)
	r := &scriptedRoots{}
	r.answer(rootsResult(a, b), nil)
	p := rt.start(t, rootsHostInit, r)
	requireAllowed(t, p, a, b)
	subscribeAll(t, p, uriA, uriB)
	testfs.WriteFile(t, fa, "changed while inside\n")
	awaitUpdate(t, p, uriA)

	r.answer(rootsResult(b), nil)
	p.Notify("notifications/roots/list_changed", nil)
	requireAllowed(t, p, b)
	testfs.WriteFile(t, fa, "changed outside the host's roots\n")
	testfs.WriteFile(t, fb, "changed inside, after\n")
	awaitUpdate(t, p, uriB)
	if got := updates(p); !slices.Equal(got, []string{uriA, uriB}) {
		t.Fatalf("updates %q: a change outside the host's roots was announced", got)
	}

	r.answer(rootsResult(), nil)
	p.Notify("notifications/roots/list_changed", nil)
	requireAllowed(t, p)
	testfs.WriteFile(t, fa, "changed with no root at all\n")
	r.answer(rootsResult(b), nil)
	p.Notify("notifications/roots/list_changed", nil)
	requireAllowed(t, p, b)
	subscribeAll(t, p, uriB)
	testfs.WriteFile(t, fb, "changed inside, last\n")
	awaitUpdate(t, p, uriB)
	if got := updates(p); !slices.Equal(got, []string{uriA, uriB, uriB}) {
		t.Fatalf("updates %q: a change was announced while the host's roots held nothing, or outside them", got)
	}
}

// TestServeSubscriptionsFollowAConfigReload (review 19 finding 4): the
// operator's config file drops a root while the host (which declares no
// roots) holds a subscription in it; a write to that file is never
// announced afterwards (a write in the root that stays, made after it,
// is).
func TestServeSubscriptionsFollowAConfigReload(t *testing.T) {
	rt := newRootsTree(t)
	config := filepath.Join(filepath.Dir(rt.state), "fsbroker.yaml")
	writeConfig := func(dirs ...string) { writeRootsConfig(t, config, false, dirs...) }
	writeConfig(rt.ws, rt.other)
	p := startServeWith(t, rt.state, serveHost{init: testClientInit}, "--config", config, "--consent", "auto")
	requireAllowed(t, p, rt.ws, rt.other)
	fo, fb := filepath.Join(rt.other, "o.txt"), filepath.Join(rt.ws, "b", "f.txt")
	uriO, uriB := FileURL(fo), FileURL(fb)
	subscribeAll(t, p, uriO, uriB)
	testfs.WriteFile(t, fo, "changed while a root\n")
	awaitUpdate(t, p, uriO)

	writeConfig(rt.ws)
	requireAllowed(t, p, rt.ws)
	testfs.WriteFile(t, fo, "changed after its root was dropped\n")
	testfs.WriteFile(t, fb, "changed in the root that stays, after\n")
	awaitUpdate(t, p, uriB)
	if got := updates(p); !slices.Equal(got, []string{uriO, uriB}) {
		t.Fatalf("updates %q: a change in a root the operator dropped was announced", got)
	}
}
