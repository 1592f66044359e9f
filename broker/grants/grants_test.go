// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
)

// t0 is a fixed instant; tests pass their own clock.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// testRoot is the root the tests' grants are given under.
var testRoot = grants.Root{Path: "/home/user/proj", Dev: 2049, Ino: 1311233}

func open(t testing.TB, dir string, opts ...grants.Option) *grants.Store {
	t.Helper()
	s, err := grants.Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clock is a settable clock for WithClock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func grant(t testing.TB, s *grants.Store, server string, gs ...grants.Grant) []grants.Grant {
	t.Helper()
	out, err := s.Grant(server, gs...)
	if err != nil {
		t.Fatalf("Grant(%q): %v", server, err)
	}
	return out
}

func list(t testing.TB, s *grants.Store, server string) []grants.Grant {
	t.Helper()
	gs, err := s.List(server)
	if err != nil {
		t.Fatalf("List(%q): %v", server, err)
	}
	return gs
}

func revoke(t testing.TB, s *grants.Store, f grants.RevokeFilter) []grants.Grant {
	t.Helper()
	gs, err := s.Revoke(f)
	if err != nil {
		t.Fatalf("Revoke(%+v): %v", f, err)
	}
	return gs
}

func covers(t testing.TB, s *grants.Store, server string, access grants.Access, p string, now time.Time) bool {
	t.Helper()
	_, ok, err := s.Covers(server, access, p, testRoot, now)
	if err != nil {
		t.Fatalf("Covers(%q, %s, %q): %v", server, access, p, err)
	}
	return ok
}

func read(p string) grants.Grant {
	return grants.Grant{Access: grants.Read, Path: p, Root: testRoot, By: grants.ByPrompt}
}

func write(p string) grants.Grant {
	return grants.Grant{Access: grants.Write, Path: p, Root: testRoot, By: grants.ByPrompt}
}

func until(g grants.Grant, t time.Time) grants.Grant { g.Expires = t; return g }

func paths(gs []grants.Grant) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = string(g.Access) + ":" + g.Path
	}
	return out
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", grants.DirName)
	open(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: mode %v, want a directory 0700", dir, fi.Mode())
	}
}

// Grants go to disk, come back in order, survive a new Store (a restart),
// and the file holds what the package documentation says.
func TestGrantListRevokeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: t0}
	s := open(t, dir, grants.WithClock(clk.Now))
	if gs := list(t, s, "notes"); len(gs) != 0 {
		t.Fatalf("a new server holds %v", gs)
	}
	if _, err := os.Stat(s.Path("notes")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("List created the grants file: %v", err)
	}
	later := t0.Add(8 * time.Hour)
	got := grant(t, s, "notes", write("proj/docs"), until(read("proj"), later),
		grants.Grant{Access: grants.Read, Path: "data/set", Root: testRoot, By: grants.ByAuto, Granted: t0.Add(-time.Minute)})
	if len(got) != 3 {
		t.Fatalf("Grant returned %d grants, want 3", len(got))
	}
	idRE := regexp.MustCompile(`^[0-9a-f]{24}$`)
	for i, g := range got {
		if !idRE.MatchString(g.ID) || g.Server != "notes" {
			t.Errorf("grant %d: %+v: want a 24-hex ID and the server", i, g)
		}
	}
	if !got[0].Granted.Equal(t0) || !got[2].Granted.Equal(t0.Add(-time.Minute)) || !got[1].Expires.Equal(later) || !got[0].Expires.IsZero() {
		t.Errorf("times as stored: %+v", got)
	}
	want := []string{"read:data/set", "read:proj", "write:proj/docs"}
	if p := paths(list(t, s, "notes")); !slices.Equal(p, want) {
		t.Fatalf("List = %q, want %q", p, want)
	}
	if gs := list(t, s, "other"); len(gs) != 0 {
		t.Fatalf("another server holds %v", gs)
	}

	// The file, as documented.
	b, err := os.ReadFile(s.Path("notes"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version int              `json:"version"`
		Server  string           `json:"server"`
		Grants  []map[string]any `json:"grants"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if f.Version != grants.FormatVersion || f.Server != "notes" || len(f.Grants) != 3 {
		t.Fatalf("file: %s", b)
	}
	wantRoot := map[string]any{"path": testRoot.Path, "dev": float64(testRoot.Dev), "ino": float64(testRoot.Ino)}
	if g := f.Grants[1]; g["path"] != "proj" || g["access"] != "read" || g["by"] != "prompt" || !reflect.DeepEqual(g["root"], wantRoot) ||
		g["granted"] != "2026-03-01T09:00:00Z" || g["expires"] != "2026-03-01T17:00:00Z" || g["id"] != got[1].ID {
		t.Errorf("grant in the file: %v", g)
	}
	if _, ok := f.Grants[2]["expires"]; ok {
		t.Errorf("a grant that never expires has an expires member: %v", f.Grants[2])
	}
	if fi, err := os.Stat(s.Path("notes")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("grants file: %v, %v", fi, err)
	}

	// A restarted broker reads the same grants.
	s2 := open(t, dir, grants.WithClock(clk.Now))
	if l1, l2 := list(t, s, "notes"), list(t, s2, "notes"); !slices.Equal(l1, l2) {
		t.Fatalf("a second Store reads %+v, want %+v", l2, l1)
	}

	// Revoke by ID, by path, then the rest by server: the file goes.
	if r := revoke(t, s2, grants.RevokeFilter{ID: got[0].ID}); len(r) != 1 || r[0] != got[0] {
		t.Fatalf("revoke by ID returned %+v, want %+v", r, got[0])
	}
	if r := revoke(t, s2, grants.RevokeFilter{Server: "notes", Path: "data"}); !slices.Equal(paths(r), []string{"read:data/set"}) {
		t.Fatalf("revoke by path returned %q", paths(r))
	}
	if p := paths(list(t, s2, "notes")); !slices.Equal(p, []string{"read:proj"}) {
		t.Fatalf("after the revocations the second Store lists %q", p)
	}
	// The first Store sees them within the maximum staleness.
	start := time.Now()
	for p := paths(list(t, s, "notes")); !slices.Equal(p, []string{"read:proj"}); p = paths(list(t, s, "notes")) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after the revocations the first Store lists %q", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := revoke(t, s, grants.RevokeFilter{Server: "notes"}); len(r) != 1 {
		t.Fatalf("revoke by server returned %+v", r)
	}
	if _, err := os.Stat(s.Path("notes")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file of a server without grants remains: %v", err)
	}
	if r := revoke(t, s, grants.RevokeFilter{Server: "notes"}); len(r) != 0 {
		t.Fatalf("revoking again returned %+v", r)
	}
}

// Coverage: a grant covers its path and what is beneath it at a segment
// boundary; a mount-only grant covers the root; write implies read.
func TestCovers(t *testing.T) {
	s := open(t, t.TempDir())
	grant(t, s, "srv", read("proj/dir"), write("proj/out"), read("whole"), write("w/x/y"))
	cases := []struct {
		access grants.Access
		path   string
		want   bool
	}{
		{grants.Read, "proj/dir", true},
		{grants.Read, "proj/dir/x", true},
		{grants.Read, "proj/dir/x/y/z.txt", true},
		{grants.Read, "proj/dirx", false},
		{grants.Read, "proj/di", false},
		{grants.Read, "proj", false}, // a grant beneath does not cover its parent
		{grants.Read, "proj/other", false},
		{grants.Write, "proj/dir/x", false}, // read does not imply write
		{grants.Write, "proj/out", true},
		{grants.Write, "proj/out/a", true},
		{grants.Read, "proj/out/a", true}, // write implies read
		{grants.Write, "proj/outx", false},
		{grants.Read, "whole", true}, // the mount alone: the whole root
		{grants.Read, "whole/a/b/c", true},
		{grants.Read, "wholex/a", false},
		{grants.Write, "whole/a", false},
		{grants.Read, "w/x", false},
		{grants.Read, "w/x/y/z", true},
		{grants.Read, "other/proj/dir", false},
	}
	for _, tc := range cases {
		if got := covers(t, s, "srv", tc.access, tc.path, t0); got != tc.want {
			t.Errorf("Covers(%s, %q) = %v, want %v", tc.access, tc.path, got, tc.want)
		}
		if got := covers(t, s, "other", tc.access, tc.path, t0); got {
			t.Errorf("another server is covered for %s %q", tc.access, tc.path)
		}
	}
	// The grant returned is the covering one.
	g, ok, err := s.Covers("srv", grants.Read, "proj/out/a", testRoot, t0)
	if err != nil || !ok || g.Path != "proj/out" || g.Access != grants.Write || g.Server != "srv" {
		t.Errorf("Covers returned %+v, %v, %v", g, ok, err)
	}
	// Paths that are not canonical are refused, never matched by prefix.
	for _, p := range []string{"", "/proj/dir", "proj/dir/", "proj//dir", "proj/dir/../x", "proj/./dir", "proj\\dir", "proj/\x00", "\xff"} {
		if _, ok, err := s.Covers("srv", grants.Read, p, testRoot, t0); ok || !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Covers(%q) = %v, %v; want ErrInvalid", p, ok, err)
		}
	}
	if _, _, err := s.Covers("srv", "execute", "proj/dir", testRoot, t0); !errors.Is(err, grants.ErrInvalid) {
		t.Errorf("Covers with access execute: %v", err)
	}
}

// A grant covers paths only under the root it was given under: a mount
// that names another directory now (another path, or the same path holding
// another inode), or no root at all, is covered by none of it. Grants on
// one path under two roots are two grants; a grant again under the same root
// refreshes the one there.
func TestGrantsAreBoundToTheirRoot(t *testing.T) {
	s := open(t, t.TempDir())
	first := grant(t, s, "srv", write("proj/docs"))[0]
	if first.Root != testRoot {
		t.Fatalf("the grant as stored has root %+v, want %+v", first.Root, testRoot)
	}
	elsewhere := grants.Root{Path: "/two/proj", Dev: testRoot.Dev, Ino: testRoot.Ino + 1}
	recreated := grants.Root{Path: testRoot.Path, Dev: testRoot.Dev, Ino: testRoot.Ino + 7}
	for name, root := range map[string]grants.Root{"same": testRoot, "another directory": elsewhere,
		"the same path, another inode": recreated, "another device": {Path: testRoot.Path, Dev: 7, Ino: testRoot.Ino},
		"no root": {}} {
		_, ok, err := s.Covers("srv", grants.Read, "proj/docs/a.txt", root, t0)
		if err != nil || ok != (name == "same") {
			t.Errorf("%s: Covers = %v, %v", name, ok, err)
		}
	}
	other := grants.Grant{Access: grants.Write, Path: "proj/docs", Root: elsewhere, By: grants.ByPrompt}
	second := grant(t, s, "srv", other)[0]
	if second.ID == first.ID || len(list(t, s, "srv")) != 2 {
		t.Fatalf("a grant under another root replaced the first: %+v", list(t, s, "srv"))
	}
	if g, ok, _ := s.Covers("srv", grants.Write, "proj/docs", elsewhere, t0); !ok || g.ID != second.ID {
		t.Errorf("under the other root Covers = %+v, %v", g, ok)
	}
	if again := grant(t, s, "srv", write("proj/docs"))[0]; again.ID != first.ID {
		t.Errorf("a grant again under the same root got a new ID: %+v", again)
	}
	if n := len(list(t, s, "srv")); n != 2 {
		t.Errorf("%d grants, want 2", n)
	}
}

// A version 1 file (written before grants recorded their root) is read:
// its grants are listed without a root and cover nothing. The next change
// writes the file as version 4, keeping them as they are.
func TestVersion1FileIsReadAndCoversNothing(t *testing.T) {
	s := open(t, t.TempDir())
	v1 := `{"version": 1, "server": "srv", "grants": [` +
		`{"id": "aaaa", "access": "write", "path": "proj", "granted": "2026-01-01T00:00:00Z", "by": "prompt"}]}`
	if err := os.MkdirAll(filepath.Dir(s.Path("srv")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path("srv"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	gs := list(t, s, "srv")
	if len(gs) != 1 || gs[0].ID != "aaaa" || gs[0].Root.Known() {
		t.Fatalf("List of a version 1 file = %+v", gs)
	}
	if covers(t, s, "srv", grants.Read, "proj/a", t0) {
		t.Error("a grant without a root covers a path")
	}
	grant(t, s, "srv", read("proj/b"))
	b, err := os.ReadFile(s.Path("srv"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version int              `json:"version"`
		Grants  []map[string]any `json:"grants"`
	}
	// Rewritten as version 4 (not appended to: an older version has no
	// appended records).
	if err := json.Unmarshal(b, &f); err != nil || f.Version != grants.FormatVersion || len(f.Grants) != 2 {
		t.Fatalf("the file after a change: %v\n%s", err, b)
	}
	for _, g := range f.Grants {
		if _, hasRoot := g["root"]; hasRoot != (g["id"] != "aaaa") {
			t.Errorf("grant %v: root present = %v", g["id"], hasRoot)
		}
	}
	if covers(t, s, "srv", grants.Read, "proj/a", t0) || !covers(t, s, "srv", grants.Read, "proj/b", t0) {
		t.Error("after the rewrite, the old grant covers or the new one does not")
	}
}

// Among covering grants, the one that lasts the longest is returned.
func TestCoversPicksTheLongestLived(t *testing.T) {
	clk := &clock{now: t0}
	s := open(t, t.TempDir(), grants.WithClock(clk.Now))
	gs := grant(t, s, "srv", until(read("p"), t0.Add(time.Hour)), until(write("p/a"), t0.Add(2*time.Hour)), read("p/a/b"))
	g, ok, _ := s.Covers("srv", grants.Read, "p/a/b/c", testRoot, t0)
	if !ok || g.ID != gs[2].ID {
		t.Fatalf("Covers returned %+v, want the grant that never expires", g)
	}
	g, ok, _ = s.Covers("srv", grants.Read, "p/a/x", testRoot, t0)
	if !ok || g.ID != gs[1].ID {
		t.Fatalf("Covers returned %+v, want the write grant (2h)", g)
	}
	g, ok, _ = s.Covers("srv", grants.Read, "p/a/x", testRoot, t0.Add(90*time.Minute))
	if !ok || g.ID != gs[1].ID {
		t.Fatalf("Covers after 90 minutes returned %+v", g)
	}
}

// Expiry: a grant is live up to and including its Expires instant (as
// policies/readonly.rego's grant_live), expired after it.
func TestExpiry(t *testing.T) {
	clk := &clock{now: t0}
	s := open(t, t.TempDir(), grants.WithClock(clk.Now))
	exp := t0.Add(time.Hour)
	grant(t, s, "srv", until(write("proj"), exp), read("keep"))
	for _, tc := range []struct {
		name string
		now  time.Time
		want bool
	}{
		{"before", exp.Add(-time.Second), true},
		{"a nanosecond before", exp.Add(-1), true},
		{"exactly at expiry", exp, true},
		{"a nanosecond after", exp.Add(1), false},
		{"long after", exp.Add(24 * time.Hour), false},
	} {
		if got := covers(t, s, "srv", grants.Read, "proj/a", tc.now); got != tc.want {
			t.Errorf("%s: Covers = %v, want %v", tc.name, got, tc.want)
		}
		if got := covers(t, s, "srv", grants.Write, "proj/a", tc.now); got != tc.want {
			t.Errorf("%s: Covers write = %v, want %v", tc.name, got, tc.want)
		}
	}
	g := grants.Grant{Expires: exp}
	if !g.Live(exp) || g.Live(exp.Add(1)) || !(grants.Grant{}).Live(exp.Add(1000*time.Hour)) {
		t.Error("Grant.Live disagrees with Covers")
	}
	// A grant that expires at or before now cannot be made.
	for _, e := range []time.Time{t0, t0.Add(-time.Second)} {
		if _, err := s.Grant("srv", until(read("x"), e)); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("a grant expiring at %s: %v, want ErrInvalid", e, err)
		}
	}
	// List keeps the expired grant until the next change drops it.
	clk.Set(exp.Add(time.Minute))
	if p := paths(list(t, s, "srv")); !slices.Equal(p, []string{"read:keep", "write:proj"}) {
		t.Fatalf("List = %q", p)
	}
	grant(t, s, "srv", read("new"))
	if p := paths(list(t, s, "srv")); !slices.Equal(p, []string{"read:keep", "read:new"}) {
		t.Fatalf("after a change, List = %q; want the expired grant dropped", p)
	}
}

// Granting a path and access the server holds refreshes that grant.
func TestIdenticalGrantRefreshes(t *testing.T) {
	clk := &clock{now: t0}
	s := open(t, t.TempDir(), grants.WithClock(clk.Now))
	first := grant(t, s, "srv", until(read("proj/a"), t0.Add(time.Hour)))[0]
	clk.Set(t0.Add(30 * time.Minute))
	g := until(read("proj/a"), t0.Add(3*time.Hour))
	g.By = grants.ByCommand
	second := grant(t, s, "srv", g)[0]
	if second.ID != first.ID || !second.Expires.Equal(t0.Add(3*time.Hour)) || !second.Granted.Equal(t0.Add(30*time.Minute)) || second.By != grants.ByCommand {
		t.Fatalf("refresh: first %+v, then %+v", first, second)
	}
	all := list(t, s, "srv")
	if len(all) != 1 || all[0] != second {
		t.Fatalf("List = %+v, want only the refreshed grant", all)
	}
	// The latest decision stands: without an expiry, it never expires.
	third := grant(t, s, "srv", read("proj/a"))[0]
	if third.ID != first.ID || !third.Expires.IsZero() {
		t.Fatalf("refresh without expiry: %+v", third)
	}
	// Another access, or another path, is another grant; duplicates within
	// one call are one.
	out := grant(t, s, "srv", write("proj/a"), read("proj/a/b"), write("proj/a"))
	if out[0].ID != out[2].ID || out[0].ID == first.ID || out[1].ID == first.ID {
		t.Fatalf("Grant returned %+v", out)
	}
	if p := paths(list(t, s, "srv")); !slices.Equal(p, []string{"read:proj/a", "write:proj/a", "read:proj/a/b"}) {
		t.Fatalf("List = %q", p)
	}
}

func TestGrantValidation(t *testing.T) {
	s := open(t, t.TempDir())
	bad := []grants.Grant{
		{Access: "execute", Path: "p", Root: testRoot, By: "prompt"},
		{Access: grants.Read, Path: "p/", Root: testRoot, By: "prompt"},
		{Access: grants.Read, Path: "../p", Root: testRoot, By: "prompt"},
		{Access: grants.Read, Path: "p", Root: testRoot, By: ""},
		{Access: grants.Read, Path: "p", Root: testRoot, By: "a\nb"},
		{Access: grants.Read, Path: "p", Root: testRoot, By: "prompt", ID: "mine"},
		{Access: grants.Read, Path: "p", Root: testRoot, By: "prompt", Server: "someone-else"},
		{Access: grants.Read, Path: strings.Repeat("a", 256), Root: testRoot, By: "prompt"},
		{Access: grants.Read, Path: "p", By: "prompt"},
		{Access: grants.Read, Path: "p", Root: grants.Root{Path: "relative/proj"}, By: "prompt"},
		{Access: grants.Read, Path: "p", Root: grants.Root{Path: "/home/user/../proj"}, By: "prompt"},
		{Access: grants.Read, Path: "p", Root: grants.Root{Path: "/home/a\nb"}, By: "prompt"},
	}
	for _, g := range bad {
		if _, err := s.Grant("srv", read("ok"), g); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Grant(%+v): %v, want ErrInvalid", g, err)
		}
	}
	if gs := list(t, s, "srv"); len(gs) != 0 {
		t.Fatalf("a refused call stored %+v", gs)
	}
	if out, err := s.Grant("srv"); err != nil || out != nil {
		t.Fatalf("Grant of nothing: %v, %v", out, err)
	}
}

// Revocation filters: a path selects grants on it and beneath; a broader
// grant is not narrowed; All stands alone.
func TestRevokeFilter(t *testing.T) {
	s := open(t, t.TempDir())
	grant(t, s, "a", read("proj"), write("proj/dir"), read("proj/dir/sub"), read("proj/dirx"), read("other"))
	grant(t, s, "b", read("proj/dir/x"), read("docs"))

	// A sub-path of a broader grant matches nothing.
	if r := revoke(t, s, grants.RevokeFilter{Server: "a", Path: "proj/dir/sub/deeper"}); len(r) != 0 {
		t.Fatalf("revoking beneath a grant removed %q", paths(r))
	}
	if !covers(t, s, "a", grants.Read, "proj/dir/sub/deeper", t0) {
		t.Fatal("the broader grants no longer cover")
	}
	// A path selects at the segment boundary, across servers when no server
	// is given.
	r := revoke(t, s, grants.RevokeFilter{Path: "proj/dir"})
	want := []string{"a write:proj/dir", "a read:proj/dir/sub", "b read:proj/dir/x"}
	var got []string
	for _, g := range r {
		got = append(got, g.Server+" "+string(g.Access)+":"+g.Path)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("revoke proj/dir removed %q, want %q", got, want)
	}
	if p := paths(list(t, s, "a")); !slices.Equal(p, []string{"read:other", "read:proj", "read:proj/dirx"}) {
		t.Fatalf("a keeps %q", p)
	}
	// Bad filters.
	for _, f := range []grants.RevokeFilter{{}, {All: true, Server: "a"}, {All: true, Path: "proj"}, {Path: "proj/"}, {Path: "/abs"}} {
		if _, err := s.Revoke(f); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Revoke(%+v): %v, want ErrInvalid", f, err)
		}
	}
	// An ID of another server, with a server: nothing.
	bID := list(t, s, "b")[0].ID
	if r := revoke(t, s, grants.RevokeFilter{Server: "a", ID: bID}); len(r) != 0 {
		t.Fatalf("revoke a's grant with b's ID removed %+v", r)
	}
	// All.
	if r := revoke(t, s, grants.RevokeFilter{All: true}); len(r) != 4 {
		t.Fatalf("revoke all removed %q", paths(r))
	}
	if all, err := s.ListAll(); err != nil || len(all) != 0 {
		t.Fatalf("after revoke all: %+v, %v", all, err)
	}
	if des, _ := os.ReadDir(s.Dir()); slices.ContainsFunc(des, func(de os.DirEntry) bool { return strings.HasSuffix(de.Name(), ".json") }) {
		t.Fatal("grants files remain after revoke all")
	}
}

// Server identities of any shape map to hashed file names inside the
// directory, and read back.
func TestWeirdServerIDs(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	weird := []string{"../../etc/passwd", "a/b", "/abs", ".", "..", "con", "NUL", "with space", "tab\there",
		"new\nline", "ctrl\x1b[2J", "é-ünïcødé-名前", strings.Repeat("x", grants.MaxServerBytes), ".tmp-x", "x.json", "x.lock"}
	for i, id := range weird {
		grant(t, s, id, read(fmt.Sprintf("m/%d", i)))
	}
	nameRE := regexp.MustCompile(`^[0-9a-f]{64}\.(json|lock)$`)
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 2*len(weird) {
		t.Errorf("%d files in the directory, want %d", len(des), 2*len(weird))
	}
	for _, de := range des {
		if !nameRE.MatchString(de.Name()) {
			t.Errorf("file name %q", de.Name())
		}
	}
	if fis, _ := os.ReadDir(filepath.Dir(dir)); len(fis) != 1 {
		t.Errorf("files appeared beside the directory: %v", fis)
	}
	s2 := open(t, dir)
	all, err := s2.ListAll()
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, g := range all {
		servers = append(servers, g.Server)
	}
	want := slices.Clone(weird)
	slices.Sort(want)
	if !slices.Equal(servers, want) {
		t.Fatalf("ListAll servers = %q, want %q", servers, want)
	}
	for i, id := range weird {
		if !covers(t, s2, id, grants.Read, fmt.Sprintf("m/%d/f", i), t0) {
			t.Errorf("server %q lost its grant", id)
		}
	}
	for _, id := range []string{"", "\xff\xfe", strings.Repeat("x", grants.MaxServerBytes+1)} {
		if _, err := s.Grant(id, read("m")); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Grant for server %q: %v, want ErrInvalid", id, err)
		}
		if _, _, err := s.Covers(id, grants.Read, "m", testRoot, t0); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Covers for server %q: %v, want ErrInvalid", id, err)
		}
	}
}

// A corrupt file is an error, never "no grants"; changes leave it untouched;
// ListAll and Revoke across servers go on past it.
func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	grant(t, s, "good", read("proj"))
	grant(t, s, "bad", read("proj"))
	good := list(t, s, "good")[0]
	valid, err := os.ReadFile(s.Path("bad"))
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(string(valid), old) {
			t.Fatalf("the file has no %q:\n%s", old, valid)
		}
		return strings.Replace(string(valid), old, new, 1)
	}
	cases := map[string]string{
		"empty":          "",
		"not json":       "not json",
		"truncated":      string(valid[:len(valid)/2]),
		"null":           "null",
		"array":          "[]",
		"trailing data":  string(valid) + "{}\n",
		"no version":     replace(`"version": 4,`, ""),
		"version 2":      replace(`"version": 4`, `"version": 2`),
		"root in v1":     replace(`"version": 4`, `"version": 1`),
		"another server": replace(`"server": "bad"`, `"server": "good"`),
		"unknown member": replace(`"version": 4,`, `"version": 4, "extra": true,`),
		"relative root":  replace(`"path": "/home/user/proj"`, `"path": "home/user/proj"`),
		"root sans inode": replace(`,
        "ino": 1311233`, ``),
		"bad access":      replace(`"access": "read"`, `"access": "all"`),
		"bad path":        replace(`"path": "proj"`, `"path": "proj/../etc"`),
		"no id":           replace(`"id": "`, `"xid": "`),
		"bad time":        replace(`"granted": "`, `"granted": "yesterday`),
		"no grants":       `{"version": 1, "server": "bad"}`,
		"duplicate grant": `{"version":1,"server":"bad","grants":[{"id":"a","access":"read","path":"p","granted":"2026-01-01T00:00:00Z","by":"x"},{"id":"b","access":"read","path":"p","granted":"2026-01-01T00:00:00Z","by":"x"}]}`,
		"duplicate id":    `{"version":1,"server":"bad","grants":[{"id":"a","access":"read","path":"p","granted":"2026-01-01T00:00:00Z","by":"x"},{"id":"a","access":"write","path":"p","granted":"2026-01-01T00:00:00Z","by":"x"}]}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(s.Path("bad"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, ok, err := s.Covers("bad", grants.Read, "proj/x", testRoot, t0)
			var gerr *grants.Error
			if ok || !errors.Is(err, grants.ErrCorrupt) || !errors.As(err, &gerr) || gerr.Path != s.Path("bad") || gerr.Server != "bad" {
				t.Fatalf("Covers: %v, %v; want ErrCorrupt naming the file", ok, err)
			}
			if _, err := s.List("bad"); !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("List: %v", err)
			}
			if _, err := s.Grant("bad", read("more")); !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("Grant: %v", err)
			}
			if _, err := s.Revoke(grants.RevokeFilter{Server: "bad", Path: "proj"}); !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("Revoke: %v", err)
			}
			if b, _ := os.ReadFile(s.Path("bad")); string(b) != content {
				t.Fatalf("the corrupt file was changed to:\n%s", b)
			}
			// The other server is unaffected, in listings too.
			all, err := s.ListAll()
			if !errors.Is(err, grants.ErrCorrupt) || len(all) != 1 || all[0] != good {
				t.Fatalf("ListAll = %+v, %v; want the good grant and ErrCorrupt", all, err)
			}
		})
	}
	// A revocation across servers goes past the corrupt file.
	r, err := s.Revoke(grants.RevokeFilter{Path: "proj"})
	if !errors.Is(err, grants.ErrCorrupt) || len(r) != 1 || r[0] != good {
		t.Fatalf("Revoke across servers: %+v, %v", r, err)
	}
	if !strings.Contains(err.Error(), s.Path("bad")) {
		t.Errorf("the error does not name the corrupt file: %v", err)
	}
	// Removing the file revokes the server's grants, and it works again.
	if err := os.Remove(s.Path("bad")); err != nil {
		t.Fatal(err)
	}
	if covers(t, s, "bad", grants.Read, "proj", t0) {
		t.Fatal("a grant survived the removal of its file")
	}
	grant(t, s, "bad", read("proj"))
}

// A file that is too large or not a regular file is corrupt.
func TestCorruptShapes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	if err := os.Mkdir(s.Path("dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List("dir"); !errors.Is(err, grants.ErrCorrupt) {
		t.Errorf("a directory as the grants file: %v", err)
	}
	big := `{"version":1,"server":"big","grants":[],"pad":"` + strings.Repeat("x", 33<<20) + `"}`
	if err := os.WriteFile(s.Path("big"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List("big"); !errors.Is(err, grants.ErrCorrupt) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 33 MiB file: %v", err)
	}
}

// A server holds at most the limit of grants.
func TestMaxGrants(t *testing.T) {
	s := open(t, t.TempDir(), grants.WithMaxGrants(3))
	grant(t, s, "srv", read("a"), read("b"))
	if _, err := s.Grant("srv", read("c"), read("d")); !errors.Is(err, grants.ErrTooMany) {
		t.Fatalf("a fourth grant: %v, want ErrTooMany", err)
	}
	grant(t, s, "srv", read("a"), read("c")) // a refresh adds nothing
	if n := len(list(t, s, "srv")); n != 3 {
		t.Fatalf("%d grants, want 3", n)
	}
}

// Leftover temporary files of a crashed writer are never read, and Open
// removes them.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	grant(t, s, "srv", read("p"))
	name := strings.TrimSuffix(filepath.Base(s.Path("srv")), ".json")
	tmp := filepath.Join(dir, ".tmp-"+name+"-123")
	if err := os.WriteFile(tmp, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if all, err := s.ListAll(); err != nil || len(all) != 1 {
		t.Fatalf("ListAll with a leftover: %+v, %v", all, err)
	}
	open(t, dir)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open left %s: %v", tmp, err)
	}
}

// A Store is closed for business after Close.
func TestClosed(t *testing.T) {
	s, err := grants.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	grant(t, s, "srv", read("p"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Covers("srv", grants.Read, "p", testRoot, t0); !errors.Is(err, grants.ErrClosed) {
		t.Errorf("Covers after Close: %v", err)
	}
	if _, err := s.ListAll(); !errors.Is(err, grants.ErrClosed) {
		t.Errorf("ListAll after Close: %v", err)
	}
	if err := s.Watch(t.Context(), nil); !errors.Is(err, grants.ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
}

// Access.Allows and Grant.CoversPath, the rules Covers applies.
func TestAccessAndPathRules(t *testing.T) {
	if !grants.Write.Allows(grants.Read) || !grants.Write.Allows(grants.Write) || !grants.Read.Allows(grants.Read) ||
		grants.Read.Allows(grants.Write) || grants.Write.Allows("x") || grants.Access("x").Allows(grants.Read) {
		t.Error("Access.Allows")
	}
	g := read("a/b")
	for p, want := range map[string]bool{"a/b": true, "a/b/c": true, "a/bc": false, "a": false, "a/b/": true, "b/a/b": false} {
		if got := g.CoversPath(p); got != want {
			t.Errorf("%q covers %q: %v, want %v", g.Path, p, got, want)
		}
	}
	for _, p := range []string{"m", "m/a b/ü", "m/.hidden", "m/..x", strings.Repeat("s", 255)} {
		if err := grants.ValidPath(p); err != nil {
			t.Errorf("ValidPath(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "/", "m/", "/m", "m//a", "m/.", "m/../x", "..", "m\\a", "m/\x7f", "m/\t", strings.Repeat("s", 256),
		strings.Repeat("a/", 2048) + "a"} {
		if err := grants.ValidPath(p); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("ValidPath(%q): %v, want ErrInvalid", p, err)
		}
	}
}
