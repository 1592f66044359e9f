// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// consentFixture is a session whose roots are not pre-approved, with the
// default policies, a real grant store, an audit trail and a watch hub.
type consentFixture struct {
	*filesFixture
	store  *grants.Store
	trail  *testTrail
	inputs *inputRecorder
}

// inputRecorder is the real engine's decider, keeping the last policy input
// it decided on for each method.
type inputRecorder struct {
	engine.Decider
	mu   sync.Mutex
	last map[string]*decision.Input
}

// Decide implements decision.Decider.
func (d *inputRecorder) Decide(ctx context.Context, in *decision.Input) decision.Verdict {
	d.mu.Lock()
	d.last[in.Method] = in
	d.mu.Unlock()
	return d.Decider.Decide(ctx, in)
}

// lastInput returns the last policy input decided on for method.
func (f *consentFixture) lastInput(method string) *decision.Input {
	f.t.Helper()
	f.inputs.mu.Lock()
	defer f.inputs.mu.Unlock()
	in := f.inputs.last[method]
	if in == nil {
		f.t.Fatalf("no %s was decided", method)
	}
	return in
}

// rootsListInput sends roots/list and returns its policy input.
func (f *consentFixture) rootsListInput() *decision.Input {
	f.t.Helper()
	f.call("roots/list", map[string]any{})
	return f.lastInput("roots/list")
}

// startConsent starts a session over ro (read-only) and rw (writable) roots,
// neither pre-approved, asking provider for consent and keeping grants in
// store (a new one when nil).
func startConsent(t *testing.T, provider consent.Provider, store *grants.Store) *consentFixture {
	t.Helper()
	return startConsentIn(t, t.TempDir(), provider, store)
}

// startConsentIn is startConsent with the roots in base (made, or used as
// they are when they exist).
func startConsentIn(t *testing.T, base string, provider consent.Provider, store *grants.Store) *consentFixture {
	t.Helper()
	return startConsentRoots(t, base, provider, store, false)
}

// startConsentRoots is startConsentIn with both roots pre-approved by the
// operator when preapproved.
func startConsentRoots(t *testing.T, base string, provider consent.Provider, store *grants.Store, preapproved bool) *consentFixture {
	t.Helper()
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{ro, rw, filepath.Join(ro, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"a.txt": "a", "b.txt": "b", ".env": "SECRET=1", "sub/c.txt": "c"} {
		if err := os.WriteFile(filepath.Join(ro, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := roots.New([]roots.Spec{{Path: ro, Mount: "ro", Preapproved: preapproved},
		{Path: rw, Mount: "rw", Writable: true, Preapproved: preapproved}})
	if err != nil {
		t.Fatal(err)
	}
	if store == nil {
		store = newTestStore(t)
	}
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	trail := openTrail(t)
	inputs := &inputRecorder{Decider: engine.Decider{Engine: e}, last: map[string]*decision.Input{}}
	p := startPeer(t, set, WithExecutor(newTestExecutor(t)), WithDecider(inputs), WithConsent(provider, store),
		WithWatchHub(newTestHub(t), 0), WithAudit(trail.Writer, false))
	p.initialize("2025-11-25")
	return &consentFixture{filesFixture: &filesFixture{peer: p, ro: ro, rw: rw}, store: store, trail: trail, inputs: inputs}
}

func mustParse(t *testing.T, spec string) consent.Provider {
	t.Helper()
	p, err := consent.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// approved returns files/consent's approvedPaths.
func approved(t *testing.T, res map[string]any) []string {
	t.Helper()
	var out []string
	for _, p := range res["approvedPaths"].([]any) {
		out = append(out, p.(string))
	}
	return out
}

func TestNoGrantNoAccess(t *testing.T) {
	f := startConsent(t, mustParse(t, "auto"), nil)
	data := f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
	if !strings.Contains(data["reason"].(string), "no consent grant covers") {
		t.Errorf("reason %q does not name consent", data["reason"])
	}
	f.mustFail("files/list", map[string]any{"path": "ro"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/write", map[string]any{"path": "rw/x.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	if _, err := os.Stat(filepath.Join(f.rw, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("x.txt written without consent: %v", err)
	}
}

func TestConsentAutoNarrowedByPolicyAndRoots(t *testing.T) {
	f := startConsent(t, mustParse(t, "auto"), nil)
	res, _, _ := f.call("files/consent", map[string]any{
		"message": "to index the code",
		// a file, a directory, a secret, a path outside every root, an
		// absolute path inside a root, the same path twice
		"requestedPaths": []string{"ro/a.txt", "ro/sub", "ro/.env", "/etc/passwd", filepath.Join(f.ro, "b.txt"), "ro/a.txt"},
	})
	if got := approved(t, res); res["granted"] != true || !slices.Equal(got, []string{"ro/a.txt", "ro/sub", "ro/b.txt"}) {
		t.Fatalf("consent = %v, want ro/a.txt, ro/sub and ro/b.txt approved", res)
	}
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	f.call("files/read", map[string]any{"path": "ro/sub/c.txt"}) // beneath a granted directory
	f.mustFail("files/read", map[string]any{"path": "ro/.env"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/list", map[string]any{"path": "ro"}, -32002, "PERMISSION_DENIED")
	// A read grant does not allow writing; write access under .git is never granted.
	f.mustFail("files/write", map[string]any{"path": "rw/n.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	res, _, _ = f.call("files/consent", map[string]any{"message": "to save notes", "access": "write",
		"requestedPaths": []string{"rw/notes", "rw/.git/hooks"}})
	if got := approved(t, res); !slices.Equal(got, []string{"rw/notes"}) {
		t.Fatalf("write consent = %v, want rw/notes only", res)
	}
	f.call("files/write", map[string]any{"path": "rw/notes/n.txt", "content": "x", "createParents": true})

	// The trail holds the consent, each grant, and the decisions.
	recs, _ := trailRecords(t, f.trail)
	var consents, grantRecs int
	for _, r := range recs {
		switch r.Kind {
		case audit.KindConsent:
			consents++
		case audit.KindGrant:
			grantRecs++
		}
	}
	if consents != 2 || grantRecs != 4 {
		t.Errorf("%d consent and %d grant records, want 2 and 4", consents, grantRecs)
	}
	// Invalid paths are an error, not a silent refusal.
	f.mustFail("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/a\x00b"}}, -32003, "INVALID_PATH")
}

func TestConsentDenyGrantsNothing(t *testing.T) {
	f := startConsent(t, mustParse(t, "deny"), nil)
	res, _, _ := f.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/a.txt"}})
	if res["granted"] != false || len(res["approvedPaths"].([]any)) != 0 {
		t.Fatalf("deny provider: %v", res)
	}
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
}

func TestConsentCommandProvider(t *testing.T) {
	script := filepath.Join(t.TempDir(), "approve.sh")
	// Approves the first requested path only.
	body := "#!/bin/sh\nread req\nfirst=$(printf '%s' \"$req\" | sed 's/.*\"paths\":\\[\"\\([^\"]*\\)\".*/\\1/')\nprintf '{\"approvedPaths\":[\"%s\"]}' \"$first\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	f := startConsent(t, mustParse(t, "command:"+script), nil)
	res, _, _ := f.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/a.txt", "ro/b.txt"}})
	if got := approved(t, res); !slices.Equal(got, []string{"ro/a.txt"}) {
		t.Fatalf("command provider approved %v, want ro/a.txt", res)
	}
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	f.mustFail("files/read", map[string]any{"path": "ro/b.txt"}, -32002, "PERMISSION_DENIED")
}

// TestGrantsOutliveTheSessionAndExpire: a grant made in one session covers
// the next one (the store is shared); an expired grant covers nothing.
func TestGrantsOutliveTheSessionAndExpire(t *testing.T) {
	store, err := grants.Open(filepath.Join(t.TempDir(), grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	base := t.TempDir()
	first := startConsentIn(t, base, mustParse(t, "auto"), store)
	first.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/a.txt"}})
	second := startConsentIn(t, base, mustParse(t, "deny"), store)
	// A later session on the same roots holds the server's grant.
	if r, _, data := second.call("files/read", map[string]any{"path": "ro/a.txt"}); r == nil {
		t.Fatalf("the grant did not outlive its session: %v", data)
	}

	// A grant given an hour ago that expired a minute ago (written by a
	// store whose clock is an hour behind, as a process an hour ago was).
	past, err := grants.Open(store.Dir(), grants.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	defer past.Close()
	roRoot, _ := second.sess.roots().ByMount("ro")
	if _, err := past.Grant(second.sess.StateKey(), grants.Grant{Access: grants.Read, Path: "ro/b.txt", Root: grants.RootOf(roRoot), Granted: time.Now().Add(-time.Hour),
		Expires: time.Now().Add(-time.Minute), By: "test"}); err != nil {
		t.Fatal(err)
	}
	second.mustFail("files/read", map[string]any{"path": "ro/b.txt"}, -32002, "PERMISSION_DENIED")
}

// TestRevocationEndsWatchesAndNotifies: revoking a grant refuses the next
// request, ends the watches under it and tells the server its roots changed.
func TestRevocationEndsWatchesAndNotifies(t *testing.T) {
	f := startConsent(t, mustParse(t, "auto"), nil)
	f.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/sub", "ro/a.txt"}})
	res, _, _ := f.call("files/watch", map[string]any{"path": "ro/sub", "recursive": true})
	watchID := res["watchId"].(string)
	if _, err := f.store.Revoke(grants.RevokeFilter{Server: f.sess.StateKey(), Path: "ro/sub"}); err != nil {
		t.Fatal(err)
	}
	f.sess.GrantsChanged()
	if n := f.Next(); n.Method != "notifications/roots/list_changed" {
		t.Fatalf("after the revocation got %s, want roots/list_changed", n.Raw)
	}
	f.mustFail("files/read", map[string]any{"path": "ro/sub/c.txt"}, -32002, "PERMISSION_DENIED")
	f.call("files/read", map[string]any{"path": "ro/a.txt"}) // the other grant stands
	f.mustFail("files/unwatch", map[string]any{"watchId": watchID}, -32602, "INVALID_PARAMS")
}

// TestDeclaredNameNeverHoldsAPinnedIDsGrants: a server that declares the name
// an operator pinned for another server holds none of that one's grants.
func TestDeclaredNameNeverHoldsAPinnedIDsGrants(t *testing.T) {
	f := startConsent(t, mustParse(t, "deny"), nil)
	// Grants for a server pinned as "test-server", the name this one declares.
	roRoot, _ := f.sess.roots().ByMount("ro")
	if _, err := f.store.Grant("test-server", grants.Grant{Access: grants.Read, Path: "ro", Root: grants.RootOf(roRoot), Granted: time.Now(), By: "test"}); err != nil {
		t.Fatal(err)
	}
	if key := f.sess.StateKey(); key != DeclaredPrefix+"test-server" {
		t.Fatalf("StateKey = %q", key)
	}
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
}

// TestGrantCountsOnlyUnderItsRoot: a grant approved for the directory a
// mount named (/one/ro) does not cover another directory the operator later
// gives the same mount (/two/ro), nor the same path re-created as another
// directory; it is left out of the policy input there too. It still covers
// the directory it was given for.
func TestGrantCountsOnlyUnderItsRoot(t *testing.T) {
	store, err := grants.Open(filepath.Join(t.TempDir(), grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	one, two := t.TempDir(), t.TempDir()
	first := startConsentIn(t, one, mustParse(t, "auto"), store)
	res, _, _ := first.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro"}})
	if got := approved(t, res); !slices.Equal(got, []string{"ro"}) {
		t.Fatalf("approved %v", got)
	}
	first.call("files/read", map[string]any{"path": "ro/a.txt"})

	other := startConsentIn(t, two, mustParse(t, "deny"), store)
	data := other.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
	if !strings.Contains(data["reason"].(string), corridor.ReasonNoConsent) {
		t.Errorf("reason %q does not name consent", data["reason"])
	}
	other.mustFail("files/list", map[string]any{"path": "ro"}, -32002, "PERMISSION_DENIED")
	if in := other.rootsListInput(); len(in.Grants) != 0 {
		t.Errorf("the policy input under another root holds %+v", in.Grants)
	}

	again := startConsentIn(t, one, mustParse(t, "deny"), store)
	again.call("files/read", map[string]any{"path": "ro/a.txt"})
	if in := again.rootsListInput(); len(in.Grants) != 1 || in.Grants[0].Path != "ro" {
		t.Errorf("the policy input under the same root holds %+v", in.Grants)
	}

	// Another directory made at the same path is another directory (the
	// old one is kept, so that its inode number cannot be reused).
	ro := filepath.Join(one, "ro")
	if err := os.Rename(ro, ro+".old"); err != nil {
		t.Fatal(err)
	}
	recreated := startConsentIn(t, one, mustParse(t, "deny"), store)
	recreated.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
}

// inputGrantPaths are the paths of a request's input.grants.
func inputGrantPaths(in *decision.Input) []string {
	var out []string
	for _, g := range in.Grants {
		out = append(out, g.Access+":"+g.Path)
	}
	return out
}

// TestBlockTakesAwayPreapproval: an operator's block of a path under a
// pre-approved root refuses it for the server, ends the watches under it,
// hides it from listings and change events of the root above, and leaves it
// out of the policy input; a grant given after it covers again; a block of
// every path for every server refuses everything until it is lifted.
func TestBlockTakesAwayPreapproval(t *testing.T) {
	f := startConsentRoots(t, t.TempDir(), mustParse(t, "auto"), nil, true)
	key := f.sess.StateKey()
	f.call("files/read", map[string]any{"path": "ro/sub/c.txt"}) // pre-approved: no consent round
	if got := f.listPaths(map[string]any{"path": "ro", "recursive": true}); !slices.Contains(got, "ro/sub/c.txt") {
		t.Fatalf("listing before the block: %q", got)
	}
	res, _, _ := f.call("files/watch", map[string]any{"path": "ro", "recursive": true})
	outer := res["watchId"].(string)
	res, _, _ = f.call("files/watch", map[string]any{"path": "ro/sub"})
	inner := res["watchId"].(string)

	if _, _, err := f.store.Block(grants.Block{Server: key, Path: "ro/sub", By: "test"}); err != nil {
		t.Fatal(err)
	}
	f.sess.GrantsChanged()
	if n := f.Next(); n.Method != "notifications/roots/list_changed" {
		t.Fatalf("after the block got %s, want roots/list_changed", n.Raw)
	}
	data := f.mustFail("files/read", map[string]any{"path": "ro/sub/c.txt"}, -32002, "PERMISSION_DENIED")
	if !strings.Contains(data["reason"].(string), corridor.ReasonNoConsent) {
		t.Errorf("reason %q does not name consent", data["reason"])
	}
	f.mustFail("files/list", map[string]any{"path": "ro/sub"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/unwatch", map[string]any{"watchId": inner}, -32602, "INVALID_PARAMS")
	f.call("files/read", map[string]any{"path": "ro/a.txt"}) // beside the block
	if got := f.listPaths(map[string]any{"path": "ro", "recursive": true}); slices.Contains(got, "ro/sub") || slices.Contains(got, "ro/sub/c.txt") || !slices.Contains(got, "ro/a.txt") {
		t.Errorf("listing of the root above the block: %q", got)
	}
	// The policy input keeps the pre-approval of ro for a read beside the
	// block (a read under it is refused before the policy: the corridor's
	// TestInputGrantsLeaveBlockedPreapprovalOut holds its input).
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	if got := inputGrantPaths(f.lastInput("files/read")); !slices.Equal(got, []string{"read:ro", "write:rw"}) {
		t.Errorf("input.grants of a read beside the block: %q", got)
	}
	// A change under the block is not reported by the watch of ro; one
	// beside it is.
	if err := os.WriteFile(filepath.Join(f.ro, "sub", "hidden.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the coalescing of the hub
	if err := os.WriteFile(filepath.Join(f.ro, "seen.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.WatchID != outer || c.Path != "ro/seen.txt" {
		t.Fatalf("the first change reported is %+v, want ro/seen.txt of the watch of ro", c)
	}

	// Asking again and being approved: the grant covers, block or not.
	res, _, _ = f.call("files/consent", map[string]any{"message": "m", "requestedPaths": []string{"ro/sub"}})
	if got := approved(t, res); !slices.Equal(got, []string{"ro/sub"}) {
		t.Fatalf("consent = %v", res)
	}
	f.call("files/read", map[string]any{"path": "ro/sub/c.txt"})
	if got := f.listPaths(map[string]any{"path": "ro", "recursive": true}); !slices.Contains(got, "ro/sub/c.txt") {
		t.Errorf("listing after consent was given again: %q", got)
	}

	// Every server, every path: the writable root's pre-approval goes too.
	every, _, err := f.store.Block(grants.Block{Server: grants.AllServers, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	f.mustFail("files/write", map[string]any{"path": "rw/x.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
	f.call("files/read", map[string]any{"path": "ro/sub/c.txt"}) // the grant
	if got := inputGrantPaths(f.rootsListInput()); !slices.Equal(got, []string{"read:ro/sub"}) {
		t.Errorf("input.grants under a block of everything: %q", got)
	}
	if _, err := f.store.Restore(grants.RevokeFilter{ID: every.ID}); err != nil {
		t.Fatal(err)
	}
	f.call("files/write", map[string]any{"path": "rw/x.txt", "content": "x"})
}

// TestUnreadableBlocksBlock: a file of blocks that cannot be read refuses the
// pre-approved roots (fail closed), rather than ignoring the blocks.
func TestUnreadableBlocksBlock(t *testing.T) {
	f := startConsentRoots(t, t.TempDir(), mustParse(t, "deny"), nil, true)
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	if err := os.WriteFile(f.store.Path(grants.AllServers), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.sess.GrantsChanged() // as the store's watcher would, once it saw the file change
	f.Next()               // roots/list_changed
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, code, data := f.call("files/read", map[string]any{"path": "ro/a.txt"})
		if reason, _ := data["reason"].(string); code == -32002 && strings.Contains(reason, "cannot be read") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a corrupt file of blocks did not refuse the pre-approved root: %d %v", code, data)
		}
		time.Sleep(50 * time.Millisecond) // the store's staleness bound
	}
}
