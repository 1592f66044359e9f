// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// consentCorridor is a corridor over one writable root "proj" that is not
// pre-approved (what `fsbroker serve --root DIR:rw --consent auto` serves),
// with the real engine and the built-in policies, a grant store on a state
// directory, and the files given (mount-relative, "proj/..."; a name ending
// in "/" is a directory). The store is opened with opts.
func consentCorridor(t testing.TB, opts []grants.Option, files ...string) (*Corridor, *grants.Store, grants.Root, Caller) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "proj")
	for _, f := range append([]string{"proj/"}, files...) {
		p := filepath.Join(base, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if f[len(f)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := roots.New([]roots.Spec{{Path: root, Mount: "proj", Writable: true}})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	x, err := executor.New(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	store, err := grants.Open(filepath.Join(state, grants.DirName), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	trail, _ := audittest.Open(t, audit.WithSync(audit.SyncBatch))
	c := New(WithRoots(func() *roots.Set { return set }), WithExecutor(x), WithDecider(engine.Decider{Engine: e}),
		WithAudit(trail, false), WithConsent(nil, store))
	t.Cleanup(c.Close)
	r, _ := set.ByMount("proj")
	return c, store, grants.RootOf(r), Caller{ID: "srv", Name: "srv", SessionID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"}
}

// grantPaths lists a policy input's grants as "access:path".
func grantPaths(in *decision.Input) []string {
	out := []string{}
	for _, g := range in.Grants {
		out = append(out, g.Access+":"+g.Path)
	}
	return out
}

// TestInputGrantsAreThoseOfTheRequest: input.grants holds the caller's
// grants on a path of the request, on a directory above one or beneath one
// (docs/policy.md), at a segment boundary, and no other: for a read, a
// listing, a rename (both paths), files/consent (its requested paths) and
// roots/list (every grant).
func TestInputGrantsAreThoseOfTheRequest(t *testing.T) {
	c, store, root, caller := consentCorridor(t, nil, "proj/d/e/f.txt", "proj/d/g.txt", "proj/dx/h.txt", "proj/other/o.txt", "proj/n/")
	give := func(access grants.Access, p string) {
		if _, err := store.Grant(caller.StateKey(), grants.Grant{Access: access, Path: p, Root: root, By: grants.ByAuto}); err != nil {
			t.Fatal(err)
		}
	}
	give(grants.Write, "proj/d")
	give(grants.Read, "proj/d/e/f.txt")
	give(grants.Read, "proj/dx/h.txt")
	give(grants.Read, "proj/other")
	give(grants.Read, "proj/d/e")
	ctx := context.Background()
	target := func(raw string) executor.Target {
		t.Helper()
		tg, err := c.canonicalize(ctx, raw, true)
		must(t, err)
		return tg
	}

	cases := []struct {
		name string
		req  request
		want []string
	}{
		{"read of a file", request{method: "files/read", operation: decision.OpRead, path: target("proj/d/e/f.txt")},
			[]string{"write:proj/d", "read:proj/d/e", "read:proj/d/e/f.txt"}},
		{"read beside a grant's prefix", request{method: "files/read", operation: decision.OpRead, path: target("proj/dx/h.txt")},
			[]string{"read:proj/dx/h.txt"}},
		{"listing of a directory", request{method: "files/list", operation: decision.OpList, path: target("proj/d")},
			[]string{"write:proj/d", "read:proj/d/e", "read:proj/d/e/f.txt"}},
		{"listing of the mount", request{method: "files/list", operation: decision.OpList, path: target("proj")},
			[]string{"write:proj/d", "read:proj/d/e", "read:proj/d/e/f.txt", "read:proj/dx/h.txt", "read:proj/other"}},
		{"read with no grant", request{method: "files/list", operation: decision.OpList, path: target("proj/n")}, []string{}},
		{"rename", func() request {
			np := target("proj/other/new.txt")
			return request{method: "files/rename", operation: decision.OpRename, path: target("proj/d/g.txt"), newPath: &np}
		}(), []string{"write:proj/d", "read:proj/other"}},
		{"roots/list", request{method: methodRootsList, operation: decision.OpList},
			[]string{"write:proj/d", "read:proj/d/e", "read:proj/d/e/f.txt", "read:proj/dx/h.txt", "read:proj/other"}},
	}
	for _, tc := range cases {
		if got := grantPaths(c.policyInput(ctx, caller, tc.req)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: input.grants %q, want %q", tc.name, got, tc.want)
		}
	}
	in := c.policyInputFor(ctx, caller, request{method: "files/consent", operation: decision.OpConsent}, []string{"proj/other/o.txt", "proj/n"})
	if got, want := grantPaths(in), []string{"read:proj/other"}; !slices.Equal(got, want) {
		t.Errorf("files/consent: input.grants %q, want %q", got, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnrelatedGrantWidensNothing attacks the narrowed input through the
// whole corridor with the built-in policies: among many grants of the
// server, none lets a request through that a grant on its own path, or
// above it, would not: not a grant on a name that only starts like the path
// ("proj/a" for "proj/ab.txt"), not a read grant for a write, not a grant on
// a directory beneath the one renamed onto, not a write grant on the
// source of a rename for its target elsewhere; and what is granted still
// passes.
func TestUnrelatedGrantWidensNothing(t *testing.T) {
	c, store, root, caller := consentCorridor(t, nil, "proj/a", "proj/ab.txt", "proj/w/x.txt", "proj/r/y.txt", "proj/dst/deep/z.txt", "proj/free.txt")
	var gs []grants.Grant
	for _, p := range []string{"proj/a", "proj/r", "proj/w", "proj/dst/deep"} {
		access := grants.Read
		if p == "proj/w" || p == "proj/dst/deep" {
			access = grants.Write
		}
		gs = append(gs, grants.Grant{Access: access, Path: p, Root: root, By: grants.ByAuto})
	}
	for i := range 200 { // grants elsewhere, as a long --consent auto session leaves them
		gs = append(gs, grants.Grant{Access: grants.Write, Path: "proj/many/f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Root: root, By: grants.ByAuto})
	}
	if _, err := store.Grant(caller.StateKey(), gs...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	denied := func(what string, err error) {
		t.Helper()
		if errcode.Of(err) != errcode.PermissionDenied {
			t.Errorf("%s: %v, want PERMISSION_DENIED", what, err)
		}
	}
	_, err := c.Read(ctx, caller, ReadRequest{Path: "proj/ab.txt", Length: -1, UTF8: true})
	denied("read of proj/ab.txt with a grant on proj/a", err)
	_, err = c.Read(ctx, caller, ReadRequest{Path: "proj/free.txt", Length: -1, UTF8: true})
	denied("read of an ungranted file", err)
	_, err = c.Write(ctx, caller, WriteRequest{Path: "proj/r/y.txt", Data: []byte("x"), Create: true})
	denied("write under a read grant", err)
	_, err = c.Write(ctx, caller, WriteRequest{Path: "proj/dst/new.txt", Data: []byte("x"), Create: true})
	denied("write above a write grant", err)
	_, err = c.Rename(ctx, caller, RenameRequest{OldPath: "proj/w/x.txt", NewPath: "proj/r/moved.txt"})
	denied("rename from a write grant into a read grant", err)
	_, err = c.Rename(ctx, caller, RenameRequest{OldPath: "proj/w/x.txt", NewPath: "proj/dst/moved.txt"})
	denied("rename onto the directory above a write grant", err)
	_, err = c.Delete(ctx, caller, DeleteRequest{Path: "proj/dst", Recursive: true})
	denied("delete of the directory above a write grant", err)

	if _, err := c.Read(ctx, caller, ReadRequest{Path: "proj/a", Length: -1, UTF8: true}); err != nil {
		t.Errorf("read of proj/a under its grant: %v", err)
	}
	if _, err := c.Read(ctx, caller, ReadRequest{Path: "proj/r/y.txt", Length: -1, UTF8: true}); err != nil {
		t.Errorf("read under a read grant: %v", err)
	}
	if _, err := c.Rename(ctx, caller, RenameRequest{OldPath: "proj/w/x.txt", NewPath: "proj/dst/deep/moved.txt"}); err != nil {
		t.Errorf("rename between two write grants: %v", err)
	}
}

// TestRevocationByAnotherStoreReachesTheInput: a grant revoked through a
// second Store on the same state directory (as `fsbroker grants revoke`
// does, from another process) leaves the policy input, and the request is
// refused, within PROTOCOL.md's second, while this corridor's store keeps
// writing grants of its own (--consent auto on other files).
func TestRevocationByAnotherStoreReachesTheInput(t *testing.T) {
	c, store, root, caller := consentCorridor(t, nil, "proj/keep/k.txt", "proj/gone/g.txt")
	// Another grant stays: the file is rewritten by the revocation, not removed.
	if _, err := store.Grant(caller.StateKey(), grants.Grant{Access: grants.Read, Path: "proj/gone", Root: root, By: grants.ByAuto},
		grants.Grant{Access: grants.Read, Path: "proj/keep/k.txt", Root: root, By: grants.ByAuto}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Read(ctx, caller, ReadRequest{Path: "proj/gone/g.txt", Length: -1, UTF8: true}); err != nil {
		t.Fatal(err)
	}
	other, err := grants.Open(store.Dir())
	must(t, err)
	defer other.Close()
	if _, err := other.Revoke(grants.RevokeFilter{Server: caller.StateKey(), Path: "proj/gone"}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for i := 0; ; i++ {
		if _, err := store.Grant(caller.StateKey(), grants.Grant{Access: grants.Read, Path: "proj/keep/f" + string(rune('a'+i%26)),
			Root: root, By: grants.ByAuto}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Read(ctx, caller, ReadRequest{Path: "proj/gone/g.txt", Length: -1, UTF8: true})
		in := c.policyInput(ctx, caller, request{method: "files/read", operation: decision.OpRead, path: func() executor.Target {
			tg, err := c.canonicalize(ctx, "proj/gone/g.txt", true)
			must(t, err)
			return tg
		}()})
		if errcode.Of(err) == errcode.PermissionDenied && len(in.Grants) == 0 {
			break
		}
		if time.Since(revoked) > 5*time.Second {
			t.Fatalf("the revocation is not seen after %v: read %v, input.grants %q", time.Since(revoked), err, grantPaths(in))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(revoked); d > time.Second {
		t.Logf("note: the revocation took %v (loaded machine?)", d)
	}
	if gs, err := other.List(caller.StateKey()); err != nil || slices.ContainsFunc(gs, func(g grants.Grant) bool { return g.Path == "proj/gone" }) {
		t.Fatalf("the revoked grant is back on disk: %v, %v", gs, err)
	}
}
