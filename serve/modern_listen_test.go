// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/mcppeer"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// listenHost is the name of the modern host of the listen tests.
const listenHost = "listen-host"

// listenSession is a pipe session (consent deny: only the grants the test
// gives serve) whose tree holds, beside proj/dir/a.txt: proj/.env,
// proj/other/b.txt (no grant covers it), a file outside the root, and in
// proj/dir a link to that file and one to its directory. The host
// listenHost holds read grants on proj/dir and on proj/.env (so that the
// secret is refused by the policy, not for want of consent).
type listenSession struct {
	*pipeSession
	h       *modernHost
	outside string
	store   *grants.Store
}

func startListenSession(t *testing.T) *listenSession {
	t.Helper()
	return startListenSessionWith(t, consent.Deny{})
}

// startListenSessionWith is startListenSession with the operator's consent
// provider.
func startListenSessionWith(t *testing.T, provider consent.Provider) *listenSession {
	t.Helper()
	ps := startPipeSession(t, provider, "", nil)
	outside := filepath.Join(filepath.Dir(ps.proj), "outside")
	writeFiles(t, ps.proj, map[string]string{".env": "API_KEY=hunter2\n", "other/b.txt": "b\n"})
	writeFiles(t, outside, map[string]string{"secret.txt": "outside\n"})
	for link, target := range map[string]string{"link-out": filepath.Join(outside, "secret.txt"), "dir-out": outside} {
		if err := os.Symlink(target, filepath.Join(ps.proj, "dir", link)); err != nil {
			t.Fatal(err)
		}
	}
	store, err := grants.Open(filepath.Join(ps.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	root, _ := ps.rt.Roots().ByMount("proj")
	for _, p := range []string{"proj/dir", "proj/.env"} {
		if _, err := store.Grant(corridor.StateKeyOf(listenHost, false), grants.Grant{Access: grants.Read, Path: p,
			Root: grants.RootOf(root), Granted: time.Now().UTC(), By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	return &listenSession{pipeSession: ps, h: pipeHost(t, ps, listenHost, noCaps), outside: outside, store: store}
}

// uri is the file URI of a path under proj.
func (ls *listenSession) uri(rel string) string { return FileURL(filepath.Join(ls.proj, rel)) }

// listen sends subscriptions/listen for uris as h, without waiting, and
// returns its id's JSON text.
func (ls *listenSession) listen(h *modernHost, uris ...string) string {
	ls.ids++
	params := map[string]any{"_meta": h.meta(), "notifications": map[string]any{"resourceSubscriptions": uris,
		"toolsListChanged": true, "resourcesListChanged": true}}
	return ls.host.Request(ls.ids, MethodSubscriptionsListen, params)
}

// subscriptionOf is the subscription id in a message's params' (or
// result's) _meta.
func subscriptionOf(raw json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &p)
	return string(p.Meta[modern.MetaSubscriptionID])
}

// awaitAck takes the acknowledgment of the listen id and returns the
// resources it names.
func (ls *listenSession) awaitAck(t *testing.T, id string) []string {
	t.Helper()
	m := ls.host.Await("the acknowledgment of listen "+id, func(m *mcppeer.Message) bool {
		return m.IsNotification(NotificationSubscriptionsAcknowledged) && subscriptionOf(m.Params) == id
	})
	var p struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for key, raw := range p.Notifications {
		if key != "resourceSubscriptions" {
			t.Errorf("the acknowledgment agrees to %s, which fsbroker never sends: %s", key, m.Params)
		}
		_ = json.Unmarshal(raw, &uris)
	}
	return uris
}

// awaitListenUpdate takes the next notifications/resources/updated of the
// listen id and requires it to name uri.
func (ls *listenSession) awaitListenUpdate(t *testing.T, id, uri string) {
	t.Helper()
	m := ls.host.Await("an update on listen "+id, func(m *mcppeer.Message) bool {
		return m.IsNotification(NotificationResourceUpdated) && subscriptionOf(m.Params) == id
	})
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.URI != uri {
		t.Fatalf("update %s, want one for %s", m.Params, uri)
	}
}

// listenRecords are the trail's decision records of subscriptions/listen
// with decision ("allow", "deny").
func (ls *listenSession) listenRecords(t *testing.T, decision string) []audit.Record {
	t.Helper()
	return toolRecords(t, ls.state, MethodSubscriptionsListen, audit.Filter{Kind: audit.KindDecision, Decision: decision})
}

// TestModernListen: server/discover declares resources.subscribe; a
// listen is acknowledged with the resources it watches (and none of the
// list-changed types fsbroker never sends), then each change of a file on
// disk by another writer is one notifications/resources/updated with the
// uri as sent, both tagged with the listen's id; each watch's decision is
// in the trail. A second listen on the same stream is correlated by its own
// id. notifications/cancelled ends the listen and its watches, with no
// reply; a listen of no resources is acknowledged and ends at once with a
// complete result naming it.
func TestModernListen(t *testing.T) {
	ls := startListenSession(t)
	disc := requireComplete(t, "server/discover", ls.h.rpc("server/discover", nil))
	if caps, _ := disc["capabilities"].(map[string]any); fmt.Sprint(caps["resources"]) != "map[subscribe:true]" {
		t.Fatalf("capabilities %v", disc["capabilities"])
	}
	a, link := ls.uri("dir/a.txt"), ls.uri("dir/c.txt")
	writeFiles(t, filepath.Join(ls.proj, "dir"), map[string]string{"c.txt": "c\n"})
	first := ls.listen(ls.h, a, a)
	if got := ls.awaitAck(t, first); !slices.Equal(got, []string{a}) {
		t.Fatalf("acknowledged %q, want a's uri once", got)
	}
	second := ls.listen(ls.h, link)
	ls.awaitAck(t, second)
	ls.awaitWatches(t, 2)
	if n := len(ls.listenRecords(t, "allow")); n != 2 {
		t.Errorf("%d allowing decision records of subscriptions/listen, want one per watch", n)
	}

	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed\n")
	ls.awaitListenUpdate(t, first, a)
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "c.txt"), "changed\n")
	ls.awaitListenUpdate(t, second, link)

	ls.host.Notify("notifications/cancelled", map[string]any{"requestId": json.RawMessage(first)})
	ls.awaitWatches(t, 1)
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed after the cancellation\n")
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "c.txt"), "changed again\n")
	ls.awaitListenUpdate(t, second, link)
	if got := updates(ls.host); !slices.Equal(got, []string{a, link, link}) {
		t.Errorf("updates %q: a change after the cancellation was announced", got)
	}
	if ls.host.Has(func(m *mcppeer.Message) bool { return m.IsReplyTo(first) }) {
		t.Error("a cancelled listen was answered")
	}

	empty := ls.listen(ls.h)
	if got := ls.awaitAck(t, empty); len(got) != 0 {
		t.Errorf("a listen of nothing acknowledged %q", got)
	}
	end := ls.host.AwaitReply(empty)
	requireComplete(t, "a listen of nothing", end)
	if subscriptionOf(end.Result) != empty {
		t.Errorf("the end of a listen does not name it: %s", end.Raw)
	}
}

// TestModernListenRefusesWhatSubscribeRefuses (attacks): listening to a
// secret, to a path outside the roots (as written and through ..), to a
// file through a link out of the root and to one through a directory link
// out, to a file no grant covers, and, for a host that declares roots
// (which the listen cannot ask for), to a file it could otherwise watch:
// each refused with resources/subscribe's error (-32002 sent as -32602),
// the refusal in the trail, no watch held. A listen naming an allowed file
// before a refused one holds nothing either. Changes to the refused files,
// and to the secret inside a watched directory, are never announced.
func TestModernListenRefusesWhatSubscribeRefuses(t *testing.T) {
	ls := startListenSession(t)
	a := ls.uri("dir/a.txt")
	for _, attack := range []struct {
		what, uri, code string
		h               *modernHost
	}{
		{"a secret", ls.uri(".env"), "PERMISSION_DENIED", ls.h},
		{"outside the roots", FileURL(filepath.Join(ls.outside, "secret.txt")), "PERMISSION_DENIED", ls.h},
		{"outside through ..", "file://" + ls.proj + "/dir/%2e%2e/%2e%2e/outside/secret.txt", "PERMISSION_DENIED", ls.h},
		{"a link out", ls.uri("dir/link-out"), "PERMISSION_DENIED", ls.h},
		{"through a directory link out", ls.uri("dir/dir-out/secret.txt"), "PERMISSION_DENIED", ls.h},
		{"not consented", ls.uri("other/b.txt"), "PERMISSION_DENIED", ls.h},
		{"a host that declares roots", a, "PERMISSION_DENIED", ls.h.as(listenHost, rootsCaps)},
	} {
		t.Run(attack.what, func(t *testing.T) {
			refusedBefore := len(ls.listenRecords(t, "deny"))
			for _, uris := range [][]string{{attack.uri}, {a, attack.uri}} {
				id := ls.listen(attack.h, uris...)
				reply := ls.host.AwaitReply(id)
				data := requireError(t, attack.what, reply, -32602, "")
				if data["code"] != attack.code || data["uri"] != attack.uri {
					t.Errorf("refused with %v, want %s for %s", data, attack.code, attack.uri)
				}
				if ls.host.Has(func(m *mcppeer.Message) bool { return subscriptionOf(m.Params) == id }) {
					t.Error("a refused listen was acknowledged")
				}
				ls.awaitWatches(t, 0)
			}
			if n := len(ls.listenRecords(t, "deny")) - refusedBefore; n < 2 {
				t.Errorf("%d refusing decision records, want one per listen", n)
			}
		})
	}

	dir := ls.uri("dir")
	id := ls.listen(ls.h, dir)
	ls.awaitAck(t, id)
	ls.awaitWatches(t, 1)
	for _, p := range []string{filepath.Join(ls.proj, ".env"), filepath.Join(ls.outside, "secret.txt"),
		filepath.Join(ls.proj, "other", "b.txt"), filepath.Join(ls.proj, "dir", ".env")} {
		testfs.WriteFile(t, p, "changed\n")
	}
	// Past the hub's coalescing (100 ms), an event of these would have
	// been announced; none may be.
	time.Sleep(500 * time.Millisecond)
	if got := updates(ls.host); len(got) != 0 {
		t.Fatalf("updates %q for changes of hidden or refused paths", got)
	}
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed\n")
	ls.awaitListenUpdate(t, id, dir)
}

// TestModernListenBounded: a listen naming more than MaxListenResources
// resources is QUOTA_EXCEEDED, and so is one past MaxListens open listens,
// each recorded; once one ends, another opens. Past the session's watch
// limit (the default 64), shared by all listens, a listen is
// QUOTA_EXCEEDED too.
func TestModernListenBounded(t *testing.T) {
	ls := startListenSession(t)
	many := make([]string, MaxListenResources+1)
	for i := range many {
		many[i] = ls.uri(fmt.Sprintf("dir/f%d.txt", i))
	}
	requireError(t, "too many resources", ls.host.AwaitReply(ls.listen(ls.h, many...)), -32007, "over the limit")
	a := ls.uri("dir/a.txt")
	var open []string
	for range MaxListens {
		id := ls.listen(ls.h, a)
		ls.awaitAck(t, id)
		open = append(open, id)
	}
	requireError(t, "one listen too many", ls.host.AwaitReply(ls.listen(ls.h, a)), -32007, "open listens")
	if n := len(ls.listenRecords(t, "deny")); n != 2 {
		t.Errorf("%d refusing records, want 2", n)
	}
	ls.host.Notify("notifications/cancelled", map[string]any{"requestId": json.RawMessage(open[0])})
	ls.awaitWatches(t, MaxListens-1)
	open = append(open[1:], ls.listen(ls.h, a))
	ls.awaitAck(t, open[len(open)-1])

	// The watches of every listen count against the session's watch limit
	// (--max-watches), as resources/subscribe's do.
	for _, id := range open {
		ls.host.Notify("notifications/cancelled", map[string]any{"requestId": json.RawMessage(id)})
	}
	ls.awaitWatches(t, 0)
	files := map[string]string{}
	for i := range corridor.DefaultMaxWatches + 1 {
		files[fmt.Sprintf("f%02d.txt", i)] = "f\n"
	}
	writeFiles(t, filepath.Join(ls.proj, "dir"), files)
	full := make([]string, 0, corridor.DefaultMaxWatches)
	for i := range corridor.DefaultMaxWatches {
		full = append(full, ls.uri(fmt.Sprintf("dir/f%02d.txt", i)))
	}
	ls.awaitAck(t, ls.listen(ls.h, full...))
	data := requireError(t, "a watch past the limit", ls.host.AwaitReply(ls.listen(ls.h, ls.uri(fmt.Sprintf("dir/f%02d.txt", corridor.DefaultMaxWatches)))),
		-32007, "watches")
	if data["code"] != "QUOTA_EXCEEDED" {
		t.Errorf("past the watch limit: %v", data)
	}
	ls.awaitWatches(t, corridor.DefaultMaxWatches)
}

// TestModernListenRevoked: once another process revokes the grant the
// listen's watch was made under, the watch ends and the session tears the
// listen down: notifications/cancelled naming it, then a complete result
// naming it; a later change is never announced. Another
// host's listen under its own grant goes on.
func TestModernListenRevoked(t *testing.T) {
	ls := startListenSession(t)
	root, _ := ls.rt.Roots().ByMount("proj")
	if _, err := ls.store.Grant(corridor.StateKeyOf("other-host", false), grants.Grant{Access: grants.Read, Path: "proj/other",
		Root: grants.RootOf(root), Granted: time.Now().UTC(), By: "test"}); err != nil {
		t.Fatal(err)
	}
	a, b := ls.uri("dir/a.txt"), ls.uri("other/b.txt")
	revoked := ls.listen(ls.h, a)
	ls.awaitAck(t, revoked)
	kept := ls.listen(ls.h.as("other-host", noCaps), b)
	ls.awaitAck(t, kept)
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed\n")
	ls.awaitListenUpdate(t, revoked, a)

	start := time.Now()
	if n, err := ls.store.Revoke(grants.RevokeFilter{Server: corridor.StateKeyOf(listenHost, false), Path: "proj/dir"}); err != nil || len(n) != 1 {
		t.Fatalf("revoke: %v %v", n, err)
	}
	ls.host.Await("notifications/cancelled of the revoked listen", func(m *mcppeer.Message) bool {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		return m.IsNotification("notifications/cancelled") && json.Unmarshal(m.Params, &p) == nil && string(p.RequestID) == revoked
	})
	end := ls.host.AwaitReply(revoked)
	t.Logf("the listen ended %v after the revocation (PROTOCOL.md: within 1 s)", time.Since(start))
	requireComplete(t, "the end of a revoked listen", end)
	if subscriptionOf(end.Result) != revoked {
		t.Errorf("the end does not name the listen: %s", end.Raw)
	}
	ls.awaitWatches(t, 1)
	testfs.WriteFile(t, filepath.Join(ls.proj, "dir", "a.txt"), "changed after the revocation\n")
	testfs.WriteFile(t, filepath.Join(ls.proj, "other", "b.txt"), "changed\n")
	ls.awaitListenUpdate(t, kept, b)
	if got := updates(ls.host); !slices.Equal(got, []string{a, b}) {
		t.Errorf("updates %q: a change under the revoked grant was announced", got)
	}
}
