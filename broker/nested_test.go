// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/executor/watch"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/internal/testfs"
	"github.com/fsbroker/fsbroker/policies"
)

// nestedFixture is a session over a writable, pre-approved root "app" that
// holds app/x/sub, a read-only root of its own (mount "sub"), with the
// default policies (or data of the test's), a real grant store, no consent
// provider and a watch hub.
type nestedFixture struct {
	*filesFixture
	app, sub string
	subRoot  roots.Root
	store    *grants.Store
}

// startNested starts a nestedFixture; subPreapproved pre-approves the nested
// root, and data, when not empty, replaces the policies' data.json.
func startNested(t *testing.T, subPreapproved bool, data string) *nestedFixture {
	t.Helper()
	app := testfs.RealDir(t, t.TempDir())
	sub := filepath.Join(app, "x", "sub")
	for path, content := range map[string]string{"top.txt": "top", "x/other.txt": "other",
		"x/sub/secret.txt": "nested", "x/sub/deep/more.txt": "more"} {
		p := filepath.Join(app, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := roots.New([]roots.Spec{{Path: app, Mount: "app", Writable: true, Preapproved: true},
		{Path: sub, Mount: "sub", Preapproved: subPreapproved}})
	if err != nil {
		t.Fatal(err)
	}
	src := engine.Source{FS: policies.FS}
	if data != "" {
		dir := t.TempDir()
		if err := os.CopyFS(dir, policies.FS); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		src = engine.Source{Dir: dir}
	}
	e, err := engine.New(context.Background(), src, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	store := newTestStore(t)
	p := startPeer(t, set, WithExecutor(newTestExecutor(t)), WithDecider(engine.Decider{Engine: e}), WithConsent(nil, store),
		WithWatchHub(newTestHub(t, watch.WithCoalesce(50*time.Millisecond)), 0))
	p.initialize("2025-11-25")
	subRoot, _ := set.ByMount("sub")
	return &nestedFixture{filesFixture: &filesFixture{peer: p}, app: app, sub: sub, subRoot: subRoot, store: store}
}

// newTestExecutor is an executor with its state in a directory of the test's.
func newTestExecutor(t *testing.T) *executor.Executor {
	t.Helper()
	x, err := executor.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// newTestHub is a watch hub closed when the test ends.
func newTestHub(t *testing.T, opts ...watch.Option) *watch.Hub {
	t.Helper()
	hub, err := watch.NewHub(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	return hub
}

// newTestStore is a grant store in a directory of the test's.
func newTestStore(t *testing.T) *grants.Store {
	t.Helper()
	store, err := grants.Open(filepath.Join(t.TempDir(), grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// listPaths lists path with params and returns the entries' paths.
func (f *filesFixture) listPaths(params map[string]any) []string {
	f.t.Helper()
	res, code, data := f.call("files/list", params)
	if res == nil {
		f.t.Fatalf("files/list %v: error %d %v", params, code, data)
	}
	var out []string
	for _, e := range res["entries"].([]any) {
		out = append(out, e.(map[string]any)["path"].(string))
	}
	return out
}

// TestNestedRootWithoutConsentIsNotListedThroughItsOuterRoot: the server has
// no consent for the nested root sub, so listing it is refused; a listing of
// the outer root, recursive or of sub's parent, shows nothing of it, not even
// its name. Once a grant covers sub, its own directory is a name in its
// parent there, and still nothing it holds is listed through app.
func TestNestedRootWithoutConsentIsNotListedThroughItsOuterRoot(t *testing.T) {
	f := startNested(t, false, "")
	f.mustFail("files/list", map[string]any{"path": "sub"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/list", map[string]any{"path": "app/x/sub"}, -32002, "PERMISSION_DENIED")
	want := []string{"app/top.txt", "app/x", "app/x/other.txt"}
	if got := f.listPaths(map[string]any{"path": "app", "recursive": true, "includeHidden": true}); !slices.Equal(got, want) {
		t.Errorf("recursive listing of app = %q, want %q", got, want)
	}
	if got := f.listPaths(map[string]any{"path": "app/x"}); !slices.Equal(got, []string{"app/x/other.txt"}) {
		t.Errorf("listing of app/x = %q", got)
	}

	if _, err := f.store.Grant(f.sess.StateKey(), grants.Grant{Access: grants.Read, Path: "sub", Root: grants.RootOf(f.subRoot),
		By: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := f.listPaths(map[string]any{"path": "sub", "recursive": true}); !slices.Equal(got, []string{"sub/deep", "sub/deep/more.txt", "sub/secret.txt"}) {
		t.Errorf("listing of sub with consent = %q", got)
	}
	want = []string{"app/top.txt", "app/x", "app/x/other.txt", "app/x/sub"}
	if got := f.listPaths(map[string]any{"path": "app", "recursive": true}); !slices.Equal(got, want) {
		t.Errorf("recursive listing of app with consent for sub = %q, want %q", got, want)
	}
}

// TestNestedRootDeniedByPolicyIsNotListedThroughItsOuterRoot: a per-server
// deny path on the nested root's mount refuses a listing of it, and a
// recursive listing of the outer root shows none of it either.
func TestNestedRootDeniedByPolicyIsNotListedThroughItsOuterRoot(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "policies", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["fsbroker"]["servers"] = map[string]any{"test-server": map[string]any{"deny_paths": []string{"sub"}}}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	f := startNested(t, true, string(b))
	f.mustFail("files/list", map[string]any{"path": "sub"}, -32002, "PERMISSION_DENIED")
	f.mustFail("files/read", map[string]any{"path": "app/x/sub/secret.txt"}, -32002, "PERMISSION_DENIED")
	want := []string{"app/top.txt", "app/x", "app/x/other.txt"}
	if got := f.listPaths(map[string]any{"path": "app", "recursive": true}); !slices.Equal(got, want) {
		t.Errorf("recursive listing of app = %q, want %q", got, want)
	}
}

// TestNestedRootEventsNeverReachAWatchOfItsOuterRoot: a recursive watch of
// the outer root reports changes in it, and none inside the nested root
// (which the server may not read), whatever the order.
func TestNestedRootEventsNeverReachAWatchOfItsOuterRoot(t *testing.T) {
	f := startNested(t, false, "")
	res, _, data := f.call("files/watch", map[string]any{"path": "app", "recursive": true})
	if res == nil {
		t.Fatalf("files/watch: %v", data)
	}
	// Inside the nested root first: were its events sent, they would come
	// before the outer root's.
	for _, name := range []string{"new.txt", "deep/new.txt"} {
		if err := os.WriteFile(filepath.Join(f.sub, filepath.FromSlash(name)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.sub, "secret.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the coalescing window: the nested events are due first
	if err := os.WriteFile(filepath.Join(f.app, "x", "after.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.Path != "app/x/after.txt" || c.Event != "created" {
		t.Fatalf("first change = %+v, want app/x/after.txt created", c)
	}
}

// TestListingAndWatchNeverReturnPathsThatCannotBeNamedBack: under a root
// with a 255-byte mount, a file whose path from the mount is 4,099 bytes
// (its directory's 4,093), and names canonicalization refuses (a newline, a
// backslash, bytes that are not UTF-8), are never listed nor reported by a
// watch; what is listed can be named back.
func TestListingAndWatchNeverReturnPathsThatCannotBeNamedBack(t *testing.T) {
	dir := testfs.RealDir(t, t.TempDir())
	mount := strings.Repeat("m", 255)
	var segs []string
	for range 38 {
		segs = append(segs, strings.Repeat("a", 100))
	}
	rel := strings.Join(segs, "/") // 3,837 bytes: mount + "/" + rel is 4,093
	deep := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ok.txt", "a\nb", "back\\slash", "bad\xffutf8"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(deep, "f.txt"), nil, 0o644); err != nil { // 4,099 bytes from the mount
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "g"), nil, 0o644); err != nil { // 4,095
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: dir, Mount: mount, Writable: true, Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	f := &filesFixture{peer: startPeer(t, set, WithExecutor(newTestExecutor(t)),
		WithWatchHub(newTestHub(t, watch.WithCoalesce(50*time.Millisecond)), 0))}
	f.initialize("2025-11-25")

	got := f.listPaths(map[string]any{"path": mount, "recursive": true, "limit": 10000})
	if len(got) != 40 { // ok.txt, the 38 directories, g
		t.Errorf("%d entries listed, want 40", len(got))
	}
	for _, p := range got {
		if len(p) > canon.MaxPathBytes {
			t.Errorf("a %d-byte path was listed", len(p))
		}
		if _, err := canon.Parse(set, p); err != nil {
			t.Errorf("listed ...%q, which cannot be named back: %v", tail(p), err)
		}
	}
	deepPath := mount + "/" + rel
	if !slices.Contains(got, deepPath+"/g") || !slices.Contains(got, mount+"/ok.txt") {
		t.Errorf("the listing lacks g or ok.txt")
	}

	res, _, data := f.call("files/watch", map[string]any{"path": deepPath})
	if res == nil {
		t.Fatalf("files/watch of a 4,093-byte path: %v", data)
	}
	if err := os.WriteFile(filepath.Join(deep, "h.txt"), nil, 0o644); err != nil { // 4,099 bytes
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the coalescing window: h.txt's event is due first
	if err := os.WriteFile(filepath.Join(deep, "i"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := f.nextChange(); c.Path != deepPath+"/i" || c.Event != "created" {
		t.Fatalf("first change = ...%q (%d bytes) %s, want .../i created", tail(c.Path), len(c.Path), c.Event)
	}
}

// tail is the end of a long path, for a message.
func tail(p string) string { return p[max(0, len(p)-40):] }
