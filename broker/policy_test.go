// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
	"github.com/fsbroker/fsbroker/schema"
)

// checkedDecider passes every request to the real policy engine and holds
// every policy input the session builds to schema/policy-input.json.
type checkedDecider struct {
	engine.Decider
	t *testing.T
	v *schema.Validator

	mu     sync.Mutex
	inputs int
}

func (d *checkedDecider) check(in *decision.Input) {
	b, err := json.Marshal(in)
	if err != nil {
		d.t.Error(err)
		return
	}
	if err := d.v.ValidatePolicyInput(b); err != nil {
		d.t.Errorf("policy input breaks its contract: %v\n%s", err, b)
	}
	d.mu.Lock()
	d.inputs++
	d.mu.Unlock()
}

func (d *checkedDecider) Decide(ctx context.Context, in *decision.Input) decision.Verdict {
	d.check(in)
	return d.Decider.Decide(ctx, in)
}

func (d *checkedDecider) Consentable(ctx context.Context, in *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	batch := *in
	batch.Operation, batch.Entries = "consent", entries
	d.check(&batch)
	return d.Decider.Consentable(ctx, in, entries)
}

func (d *checkedDecider) Carried(ctx context.Context, in *decision.Input, entries []decision.InputPath) decision.Verdict {
	batch := *in
	batch.Entries = entries
	d.check(&batch)
	return d.Decider.Carried(ctx, in, entries)
}

func (d *checkedDecider) Visible(ctx context.Context, in *decision.Input, entries []decision.InputPath) (map[string]bool, error) {
	batch := *in
	batch.Operation, batch.Entries = "visible", entries
	d.check(&batch)
	return d.Decider.Visible(ctx, in, entries)
}

// TestDefaultPoliciesOverTheWire runs requests through the real engine with
// the built-in policies: each default rule allows and denies what it should.
func TestDefaultPoliciesOverTheWire(t *testing.T) {
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	v, err := schema.New()
	if err != nil {
		t.Fatal(err)
	}
	d := &checkedDecider{Decider: engine.Decider{Engine: e}, t: t, v: v}
	f := startFiles(t, WithDecider(d))
	for _, p := range []string{filepath.Join(f.rw, ".ssh"), filepath.Join(f.rw, "docs")} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	if r, _, _ := f.call("files/read", map[string]any{"path": "ro/a.txt"}); r == nil {
		t.Error("a plain read was denied")
	}
	data := f.mustFail("files/read", map[string]any{"path": "ro/.env"}, -32002, "PERMISSION_DENIED")
	if reason, _ := data["reason"].(string); !strings.Contains(reason, "secret") || data["policyRevision"] == "" {
		t.Errorf("secret read denial: %v", data)
	}
	f.mustFail("files/write", map[string]any{"path": "ro/b.txt", "content": "x"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/write", map[string]any{"path": "rw/.ssh/id_rsa", "content": "x"}, -32002, "PERMISSION_DENIED")
	if r, _, _ := f.call("files/write", map[string]any{"path": "rw/docs/notes.md", "content": "# notes"}); r == nil {
		t.Error("a write in the writable root was denied")
	}
	// A directory's rename and recursive delete: the decision on what they
	// carry along (Decider.Carried) gets a checked input too.
	carriedBefore := d.inputs
	if r, _, _ := f.call("files/rename", map[string]any{"oldPath": "rw/docs", "newPath": "rw/docs2"}); r == nil {
		t.Error("a directory's rename in the writable root was denied")
	}
	if r, _, _ := f.call("files/delete", map[string]any{"path": "rw/docs2", "recursive": true}); r == nil {
		t.Error("a recursive delete in the writable root was denied")
	}
	// The rename: a decision on the source and one on the target, then the
	// visibility and the carried decision of the source's entries; the
	// delete: a decision, then the same two.
	if n := d.inputs - carriedBefore; n != 7 {
		t.Errorf("%d policy inputs checked for a rename and a delete of a directory, want 7", n)
	}
	// The listing hides the secret even when hidden files are asked for.
	res, _, _ := f.call("files/list", map[string]any{"path": "ro", "includeHidden": true})
	for _, e := range res["entries"].([]any) {
		if name := e.(map[string]any)["name"]; name == ".env" {
			t.Error("the listing shows .env")
		}
	}
	if r, _, _ := f.call("roots/list", nil); len(r["roots"].([]any)) != 2 {
		t.Errorf("roots/list = %v", r)
	}
	if d.inputs < 8 {
		t.Errorf("only %d policy inputs were checked", d.inputs)
	}
}

// TestPolicyDeciderFailsClosed: a decision that cannot be made denies.
func TestPolicyDeciderFailsClosed(t *testing.T) {
	dir := t.TempDir()
	rego := "package fsbroker.authz\n\ndecision := {\"allow\": true, \"code\": \"\", \"reasons\": [], \"obligations\": {}} if {\n\tinput.bytes / 0 > 1\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Source{Dir: dir}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	f := startFiles(t, WithDecider(engine.Decider{Engine: e}))
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
}

// startPolicyFiles is startFiles with the real engine and default policies.
func startPolicyFiles(t *testing.T) *filesFixture {
	t.Helper()
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	hub, err := watch.NewHub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	return startFiles(t, WithDecider(engine.Decider{Engine: e}), WithWatchHub(hub, 0))
}

// TestReviewAttacks holds the fixes of a security review: each case was an
// attack that worked.
func TestReviewAttacks(t *testing.T) {
	f := startPolicyFiles(t)
	mk := func(rel, content string) {
		p := filepath.Join(f.rw, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("app/.git/config", "url=https://user:TOKEN@example")
	mk("app/.ssh/id_rsa", "KEY")
	mk("app/main.go", "package main")
	mk("plain/a.txt", "a")

	// A cursor never names an entry the policy hid from the page.
	cursor, pages := "", 0
	for i := 0; i < 20; i++ {
		params := map[string]any{"path": "rw", "recursive": true, "includeHidden": true, "limit": 1}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, code, data := f.call("files/list", params)
		if res == nil {
			t.Fatalf("page %d: error %d %v", i, code, data)
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.StdEncoding} {
			if b, err := enc.DecodeString(next); err == nil && (strings.Contains(string(b), ".ssh") || strings.Contains(string(b), ".git")) {
				t.Fatalf("a cursor reveals a hidden name: %q", b)
			}
		}
		cursor = next
		pages++
	}
	if pages < 3 {
		t.Fatalf("only %d pages: the listing did not walk the tree", pages)
	}
	// A directory holding a secret can be neither moved (to read it) nor
	// deleted wholesale.
	f.mustFail("files/read", map[string]any{"path": "rw/app/.git/config"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/rename", map[string]any{"oldPath": "rw/app/.git", "newPath": "rw/app/g"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/rename", map[string]any{"oldPath": "rw/app", "newPath": "rw/app2"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/delete", map[string]any{"path": "rw/app", "recursive": true}, -32002, "PERMISSION_DENIED")
	if b, err := os.ReadFile(filepath.Join(f.rw, "app", ".ssh", "id_rsa")); err != nil || string(b) != "KEY" {
		t.Errorf("the secret was touched: %q %v", b, err)
	}
	// A directory without secrets still moves and deletes.
	if r, _, _ := f.call("files/rename", map[string]any{"oldPath": "rw/plain", "newPath": "rw/plain2"}); r == nil {
		t.Error("renaming a plain directory was refused")
	}
	if r, _, _ := f.call("files/delete", map[string]any{"path": "rw/plain2", "recursive": true}); r == nil {
		t.Error("deleting a plain directory was refused")
	}
	// Existence of a denied path does not leak through watch or a path below it.
	f.mustFail("files/watch", map[string]any{"path": "rw/missing.pem"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/read", map[string]any{"path": "rw/app/.ssh/id_rsa/x"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/read", map[string]any{"path": "rw/app/main.go/x"}, -32001, "FILE_NOT_FOUND")
	// The broker's temporary-file names are reserved (they are invisible).
	f.mustFail("files/write", map[string]any{"path": "rw/" + executor.TempPrefix + "1-x", "content": "x"}, -32003, "INVALID_PATH")
	// Staged writes are bounded per session.
	for i := 0; i < corridor.MaxStagedWrites; i++ {
		if r, _, _ := f.call("files/write", map[string]any{"path": fmt.Sprintf("rw/s%d", i), "content": "x", "final": false}); r == nil {
			t.Fatalf("staged write %d refused", i)
		}
	}
	f.mustFail("files/write", map[string]any{"path": "rw/one-more", "content": "x", "final": false}, -32007, "QUOTA_EXCEEDED")
}

// TestNestedRootCannotBeMovedOrDeletedThroughTheOuterRoot: moving or deleting
// a directory of the outer root that holds another root is refused.
func TestNestedRootCannotBeMovedOrDeletedThroughTheOuterRoot(t *testing.T) {
	f, _, inner := startNestedRoots(t, "n", "x/ro", "ro")
	if err := os.WriteFile(filepath.Join(inner, "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustFail("files/rename", map[string]any{"oldPath": "n/x", "newPath": "n/y"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/delete", map[string]any{"path": "n/x", "recursive": true}, -32002, "PERMISSION_DENIED")
	if b, _ := os.ReadFile(filepath.Join(inner, "keep.txt")); string(b) != "keep" {
		t.Errorf("the inner root was touched")
	}
}

// TestRootsListShowsOnlyWhatPolicyLetsTheServerSee: a root the policy hides
// is left out of roots/list.
func TestRootsListShowsOnlyWhatPolicyLetsTheServerSee(t *testing.T) {
	dir := t.TempDir()
	rego := `package fsbroker.authz

decision := {"allow": true, "code": "", "reasons": [], "obligations": {}}

visible contains e.mountPath if {
	some e in input.entries
	e.mount != "rw"
}
`
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Source{Dir: dir}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	f := startFiles(t, WithDecider(engine.Decider{Engine: e}))
	res, _, _ := f.call("roots/list", nil)
	got := res["roots"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["name"] != "ro" {
		t.Errorf("roots/list = %v, want only ro", got)
	}
}
