// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// The grants commands are driven as the real binary, on state directories filled through
// the grants package as a broker fills them.

// grantsState is a state directory with grants of two servers, given under the roots proj
// and docs (directories of their own).
type grantsState struct {
	dir   string
	store *grants.Store
	// the roots' directories, by mount
	roots map[string]string
	// the grants, by "server access:path"
	ids map[string]string
}

func newGrantsState(t *testing.T) *grantsState {
	t.Helper()
	gs := &grantsState{dir: t.TempDir(), roots: map[string]string{}, ids: map[string]string{}}
	base := realDir(t, t.TempDir())
	for _, mount := range []string{"proj", "docs"} {
		gs.roots[mount] = filepath.Join(base, mount)
		if err := os.Mkdir(gs.roots[mount], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := grants.Open(filepath.Join(gs.dir, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	gs.store = s
	gs.add(t, "notes", grants.Grant{Access: grants.Write, Path: "proj", By: grants.ByPrompt})
	gs.add(t, "notes", grants.Grant{Access: grants.Read, Path: "docs/public", By: grants.ByAuto, Expires: time.Now().Add(48 * time.Hour)})
	gs.add(t, "indexer", grants.Grant{Access: grants.Read, Path: "proj/src", By: grants.ByPreapproved})
	gs.add(t, "indexer", grants.Grant{Access: grants.Read, Path: "docs", By: "command:/usr/local/bin/ask"})
	return gs
}

// grantRoot is the grants' root of the directory dir, as a broker resolves it.
func grantRoot(t *testing.T, dir string) grants.Root {
	t.Helper()
	set, err := roots.New([]roots.Spec{{Path: dir}})
	if err != nil {
		t.Fatal(err)
	}
	return grants.RootOf(set.All()[0])
}

// add grants g to server under the root of its mount.
func (gs *grantsState) add(t *testing.T, server string, g grants.Grant) {
	t.Helper()
	g.Root = grantRoot(t, gs.roots[g.Mount()])
	out, err := gs.store.Grant(server, g)
	if err != nil {
		t.Fatal(err)
	}
	gs.ids[server+" "+string(g.Access)+":"+g.Path] = out[0].ID
}

// remaining lists the grants left, as "server access:path".
func (gs *grantsState) remaining(t *testing.T) []string {
	t.Helper()
	s, err := grants.Open(filepath.Join(gs.dir, grants.DirName)) // a fresh Store: no cache
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.ListAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range all {
		out = append(out, g.Server+" "+string(g.Access)+":"+g.Path)
	}
	return out
}

func TestGrantsList(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 5 || !regexp.MustCompile(`^SERVER +IDENTITY +ACCESS +PATH +ROOT +GRANTED +EXPIRES +BY +ID$`).MatchString(lines[0]) {
		t.Fatalf("table:\n%s", stdout)
	}
	proj, docs := regexp.QuoteMeta(gs.roots["proj"]), regexp.QuoteMeta(gs.roots["docs"])
	for i, want := range []string{
		`^indexer +pinned +read +docs +` + docs + ` +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +never +command:/usr/local/bin/ask +` + gs.ids["indexer read:docs"] + `$`,
		`^indexer +pinned +read +proj/src +` + proj + ` +\S+ +never +preapproved +` + gs.ids["indexer read:proj/src"] + `$`,
		`^notes +pinned +read +docs/public +` + docs + ` +\S+ +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +auto +` + gs.ids["notes read:docs/public"] + `$`,
		`^notes +pinned +write +proj +` + proj + ` +\S+ +never +prompt +` + gs.ids["notes write:proj"] + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("row %d = %q, want %s", i+1, lines[i+1], want)
		}
	}

	// One server, as JSON.
	stdout, stderr, code = runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir, "--server", "notes", "--json")
	if code != 0 {
		t.Fatalf("list --json: exit status %d; stderr:\n%s", code, stderr)
	}
	var all map[string][]map[string]any
	if err := json.Unmarshal([]byte(stdout), &all); err != nil {
		t.Fatalf("list --json: %v\n%s", err, stdout)
	}
	got := all["grants"]
	if len(all["preapprovals"]) != 0 || len(all["blocks"]) != 0 {
		t.Errorf("list --json without roots or blocks: %s", stdout)
	}
	if len(got) != 2 || got[0]["server"] != "notes" || got[0]["path"] != "docs/public" || got[0]["expires"] == nil ||
		got[0]["expired"] != false || got[1]["access"] != "write" || got[1]["id"] != gs.ids["notes write:proj"] || got[1]["by"] != "prompt" ||
		got[1]["root"].(map[string]any)["path"] != gs.roots["proj"] || got[1]["rootStatus"] != "unchecked" {
		t.Fatalf("list --json:\n%s", stdout)
	}
	if _, ok := got[1]["expires"]; ok {
		t.Errorf("a grant that never expires has expires: %v", got[1])
	}

	// No grants: an empty list, not an error; the directory is not created.
	empty := t.TempDir()
	stdout, stderr, code = runFsbroker(t, nil, "grants", "list", "--state-dir", empty)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no grants") {
		t.Errorf("list of an empty state: exit status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, grants.DirName)); !os.IsNotExist(err) {
		t.Errorf("list created the grants directory: %v", err)
	}
	stdout, _, code = runFsbroker(t, nil, "grants", "list", "--state-dir", empty, "--json")
	if code != 0 || strings.Join(strings.Fields(stdout), "") != `{"grants":[],"preapprovals":[],"blocks":[]}` {
		t.Errorf("list --json of an empty state: exit status %d, stdout %q", code, stdout)
	}
}

// An expired grant is listed as expired; a corrupt file is reported (exit 1) and the rest
// still listed.
func TestGrantsListExpiredAndCorrupt(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	// A grant that expired: written as the broker wrote it before it expired.
	path := gs.store.Path("notes")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"expires": "[^"]+"`)
	if !re.Match(b) {
		t.Fatalf("no expires in\n%s", b)
	}
	writeFile(t, path, re.ReplaceAllString(string(b), `"expires": "2020-01-01T00:00:00Z"`))
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir, "--server", "notes")
	if code != 0 || !strings.Contains(stdout, "2020-01-01T00:00:00Z (expired)") {
		t.Fatalf("exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	writeFile(t, gs.store.Path("indexer"), "{not json")
	stdout, stderr, code = runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(stdout, "notes") || strings.Contains(stdout, "indexer") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, gs.store.Path("indexer")) || !strings.Contains(stderr, "corrupt") || !strings.Contains(stderr, "remove it") {
		t.Errorf("stderr does not name the corrupt file and what to do:\n%s", stderr)
	}
}

// grants list --root and --config: each grant's root is compared with the root its mount
// names in the broker's configuration: the same, changed (another directory, or another
// directory at the same path), or not configured; a grant from a version 1 file, without a
// root, is marked as never counting.
func TestGrantsListMarksChangedRoots(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	moved := filepath.Join(realDir(t, t.TempDir()), "proj")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) []grantJSON {
		t.Helper()
		stdout, stderr, code := runFsbroker(t, nil, append([]string{"grants", "list", "--state-dir", gs.dir, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("grants list %q: exit status %d; stderr:\n%s", args, code, stderr)
		}
		var out listJSON
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return out.Grants
	}
	status := func(out []grantJSON) map[string]string {
		m := map[string]string{}
		for _, g := range out {
			m[g.Server+" "+string(g.Access)+":"+g.Path] = g.RootStatus
		}
		return m
	}
	want := map[string]string{"indexer read:docs": "same", "indexer read:proj/src": "changed",
		"notes read:docs/public": "same", "notes write:proj": "changed"}
	if got := status(list("--root", moved, "--root", gs.roots["docs"])); !reflect.DeepEqual(got, want) {
		t.Errorf("with proj moved: %v, want %v", got, want)
	}
	// The same roots from a config file.
	cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, cfg, "version: 1\nroots:\n  - path: "+moved+"\n  - path: "+gs.roots["docs"]+"\n")
	if got := status(list("--config", cfg)); !reflect.DeepEqual(got, want) {
		t.Errorf("with proj moved, from --config: %v, want %v", got, want)
	}
	want = map[string]string{"indexer read:docs": "unmounted", "indexer read:proj/src": "same",
		"notes read:docs/public": "unmounted", "notes write:proj": "same"}
	if got := status(list("--root", gs.roots["proj"]+":rw")); !reflect.DeepEqual(got, want) {
		t.Errorf("with docs not configured: %v, want %v", got, want)
	}
	// Another directory at the same path.
	if err := os.Rename(gs.roots["proj"], gs.roots["proj"]+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(gs.roots["proj"], 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir, "--root", gs.roots["proj"], "--server", "notes")
	if code != 0 || !strings.Contains(stdout, "another directory at that path now") {
		t.Errorf("after proj was made again: exit status %d, stdout:\n%s", code, stdout)
	}
	// A grant from a version 1 file.
	writeFile(t, gs.store.Path("old"), `{"version": 1, "server": "old", "grants": [`+
		`{"id": "0123", "access": "read", "path": "proj", "granted": "2026-01-01T00:00:00Z", "by": "prompt"}]}`)
	out := list("--server", "old")
	if len(out) != 1 || out[0].RootStatus != "unknown" || out[0].Root.Known() {
		t.Errorf("a version 1 grant: %+v", out)
	}
	stdout, _, _ = runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir, "--server", "old")
	if !strings.Contains(stdout, "granted before grants recorded their root: covers nothing") {
		t.Errorf("a version 1 grant in the table:\n%s", stdout)
	}
	// A root that does not exist is the broker's configuration error.
	if _, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", gs.dir, "--root", filepath.Join(gs.dir, "missing")); code != 2 || !strings.Contains(stderr, "does not exist") {
		t.Errorf("a missing root: exit status %d, stderr:\n%s", code, stderr)
	}
}

// TestGrantsRevoke: revoke removes the grants its selectors match and, unless --id names one
// grant, blocks the pre-approved access they name: --server for each identity it names,
// --path alone for every server, --all everywhere.
func TestGrantsRevoke(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	revoke := func(args ...string) (string, string, int) {
		return runFsbroker(t, nil, append([]string{"grants", "revoke", "--state-dir", gs.dir}, args...)...)
	}

	// A sub-path of a broader grant: no grant matches, the path is blocked for the server (its
	// pinned id and its declared name), and the broader grant, which still covers it, is named:
	// exit status 1.
	stdout, stderr, code := revoke("--server", "notes", "--path", "proj/secret")
	if code != 1 || strings.Contains(stdout, "revoked") || !regexp.MustCompile(`(?m)^notes +pinned +proj/secret +- `).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^notes +declared +proj/secret `).MatchString(stdout) ||
		!strings.Contains(stderr, "--id "+gs.ids["notes write:proj"]) || !strings.Contains(stderr, "cannot be narrowed") {
		t.Fatalf("revoke beneath a grant: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := len(gs.remaining(t)); n != 4 {
		t.Fatalf("%d grants left, want 4", n)
	}
	// The same again: already blocked, still covered.
	if stdout, _, code := revoke("--server", "notes", "--path", "proj/secret"); code != 1 || !strings.Contains(stdout, "already blocked") {
		t.Fatalf("the same revoke again: exit status %d, stdout:\n%s", code, stdout)
	}

	// A path across servers, at the segment boundary (docs/public and docs, not proj), and a
	// block of every server there.
	stdout, stderr, code = revoke("--path", "docs/")
	if code != 0 || !strings.Contains(stdout, "revoked 2 grant(s)") || !strings.Contains(stdout, gs.ids["notes read:docs/public"]) ||
		!strings.Contains(stdout, gs.ids["indexer read:docs"]) || !regexp.MustCompile(`(?m)^\(every server\) +- +docs `).MatchString(stdout) {
		t.Fatalf("revoke --path docs: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if got := gs.remaining(t); !equalStrings(got, []string{"indexer read:proj/src", "notes write:proj"}) {
		t.Fatalf("left: %q", got)
	}

	// By ID: the grant, and no block.
	stdout, stderr, code = revoke("--id", gs.ids["indexer read:proj/src"])
	if code != 0 || strings.Contains(stdout, "block") {
		t.Fatalf("revoke --id: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// Again: nothing.
	if _, stderr, code := revoke("--id", gs.ids["indexer read:proj/src"]); code != 1 || !strings.Contains(stderr, "no grant matches") {
		t.Fatalf("revoke --id again: exit status %d, stderr:\n%s", code, stderr)
	}
	// All: every grant, and every server everywhere.
	stdout, _, code = revoke("--all")
	if code != 0 || !strings.Contains(stdout, "revoked 1 grant(s)") || !regexp.MustCompile(`(?m)^\(every server\) +- +\(every path\) `).MatchString(stdout) {
		t.Fatalf("revoke --all: exit status %d, stdout:\n%s", code, stdout)
	}
	if got := gs.remaining(t); len(got) != 0 {
		t.Fatalf("left after --all: %q", got)
	}
	if stdout, _, code := revoke("--all"); code != 0 || !strings.Contains(stdout, "already blocked") {
		t.Fatalf("revoke --all again: exit status %d, stdout:\n%s", code, stdout)
	}
	// A state directory without grants: --all blocks there; --id finds nothing; a state
	// directory that does not exist is a usage error, not a new one.
	empty := t.TempDir()
	if _, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", empty, "--id", "0123"); code != 1 || !strings.Contains(stderr, "no grant matches") {
		t.Fatalf("revoke --id in an empty state: exit status %d, stderr:\n%s", code, stderr)
	}
	if _, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", empty, "--all"); code != 0 {
		t.Fatalf("revoke --all in an empty state: exit status %d, stderr:\n%s", code, stderr)
	}
	missing := filepath.Join(empty, "no-such-state")
	if _, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", missing, "--all"); code != 2 || !strings.Contains(stderr, missing) {
		t.Fatalf("revoke in a missing state directory: exit status %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("revoke made the missing state directory: %v", err)
	}
}

// TestGrantsListAndRestoreBlocks: list shows the pre-approved roots of --config and the blocks
// (text and JSON; --server shows the server's and every server's); a block records the root
// of its path's mount when the roots are given; restore lifts blocks by server, path, id or
// all, leaves a block for every server to a restore of one server (and names it), and
// restores nothing twice.
func TestGrantsListAndRestoreBlocks(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, cfg, "version: 1\nroots:\n  - path: "+gs.roots["proj"]+"\n    writable: true\n    consent: preapproved\n  - path: "+gs.roots["docs"]+"\n")
	run := func(args ...string) (string, string, int) {
		return runFsbroker(t, nil, append(args, "--state-dir", gs.dir)...)
	}
	if _, stderr, code := run("grants", "revoke", "--server", "indexer", "--path", "proj/src", "--config", cfg); code != 0 {
		t.Fatalf("revoke: exit status %d\n%s", code, stderr)
	}
	// notes's write grant on proj still covers proj/vendor: said, exit status 1.
	if _, stderr, code := run("grants", "revoke", "--path", "proj/vendor", "--config", cfg); code != 1 || !strings.Contains(stderr, gs.ids["notes write:proj"]) {
		t.Fatalf("revoke: exit status %d\n%s", code, stderr)
	}
	list := func(args ...string) listJSON {
		t.Helper()
		stdout, stderr, code := run(append([]string{"grants", "list", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("list %q: exit status %d\n%s", args, code, stderr)
		}
		var out listJSON
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return out
	}
	out := list("--config", cfg)
	if len(out.Preapprovals) != 1 || out.Preapprovals[0] != (preapproval{Mount: "proj", Path: gs.roots["proj"], Access: "write"}) {
		t.Errorf("pre-approvals: %+v", out.Preapprovals)
	}
	blocks := map[string]blockJSON{}
	for _, b := range out.Blocks {
		if !b.EveryServer {
			b.Server = broker.StateKeyOf(b.Server, b.Pinned) // to tell the two apart below
		}
		blocks[b.Server+" "+b.Path] = b
	}
	projRoot := grantRoot(t, gs.roots["proj"])
	if len(blocks) != 3 || !blocks[" proj/vendor"].EveryServer || blocks[" proj/vendor"].Root != projRoot ||
		blocks["indexer proj/src"].Root != projRoot || blocks["declared:indexer proj/src"].ID == "" ||
		!strings.HasPrefix(blocks["indexer proj/src"].By, "fsbroker grants revoke by ") || blocks["indexer proj/src"].Blocked.IsZero() {
		t.Fatalf("blocks: %+v", out.Blocks)
	}
	if len(out.Grants) != 3 || slices.ContainsFunc(out.Grants, func(g grantJSON) bool { return g.Path == "proj/src" }) {
		t.Errorf("grants: %+v, want all but indexer's on proj/src", out.Grants)
	}
	// The server's view: its own and every server's.
	if got := list("--server", "notes").Blocks; len(got) != 1 || !got[0].EveryServer {
		t.Errorf("blocks of notes: %+v", got)
	}
	// The text: the grants table, then the pre-approved roots, then the blocks.
	stdout, _, _ := run("grants", "list", "--config", cfg)
	for _, want := range []string{
		`(?m)^SERVER +IDENTITY +ACCESS +PATH +ROOT +GRANTED +EXPIRES +BY +ID$`,
		`(?m)^pre-approved roots .*:\nMOUNT +ACCESS +ROOT\nproj +write +` + regexp.QuoteMeta(gs.roots["proj"]) + `$`,
		`(?m)^blocks .*:\nSERVER +IDENTITY +PATH +ROOT +BLOCKED +BY +ID$`,
		`(?m)^\(every server\) +- +proj/vendor +` + regexp.QuoteMeta(gs.roots["proj"]) + ` +\S+ +fsbroker grants revoke by .+ +` + blocks[" proj/vendor"].ID + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("list does not match %s:\n%s", want, stdout)
		}
	}

	// Restore: by server (both identities), not the block for every server on a path above
	// what is asked.
	stdout, stderr, code := run("grants", "restore", "--server", "indexer")
	if code != 0 || !strings.Contains(stdout, "lifted 2 block(s)") || !strings.Contains(stderr, "--id "+blocks[" proj/vendor"].ID) {
		t.Fatalf("restore --server: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if got := list().Blocks; len(got) != 1 || got[0].ID != blocks[" proj/vendor"].ID {
		t.Fatalf("after restore --server: %+v", got)
	}
	// A server's restore beneath a block for every server: nothing of its own, and the block
	// that still applies is named.
	_, stderr, code = run("grants", "restore", "--server", "notes", "--path", "proj/vendor/lib")
	if code != 1 || !strings.Contains(stderr, "no block matches") || !strings.Contains(stderr, "--id "+blocks[" proj/vendor"].ID) {
		t.Fatalf("restore beneath a block of every server: exit status %d, stderr:\n%s", code, stderr)
	}
	if stdout, _, code := run("grants", "restore", "--path", "proj"); code != 0 || !strings.Contains(stdout, "lifted 1 block(s)") {
		t.Fatalf("restore --path proj: exit status %d, stdout:\n%s", code, stdout)
	}
	if _, stderr, code := run("grants", "restore", "--all"); code != 1 || !strings.Contains(stderr, "no block matches") {
		t.Fatalf("restore --all of nothing: exit status %d, stderr:\n%s", code, stderr)
	}
	if _, stderr, code := run("grants", "restore", "--all", "--id", "x"); code != 2 || !strings.Contains(stderr, "--all") {
		t.Fatalf("restore --all --id: exit status %d, stderr:\n%s", code, stderr)
	}
}

// A running broker's Store sees a revocation by the command within the second PROTOCOL.md
// allows (logged; asserted with a generous deadline only).
func TestGrantsRevokeReachesARunningStore(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	s, err := grants.Open(filepath.Join(gs.dir, grants.DirName), grants.WithMaxStale(time.Hour)) // the watch alone
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	changed := make(chan time.Time, 16)
	if err := s.Watch(t.Context(), func(server string) {
		if server == "notes" {
			changed <- time.Now()
		}
	}); err != nil {
		t.Fatal(err)
	}
	root := grantRoot(t, gs.roots["proj"])
	if _, ok, err := s.Covers("notes", grants.Write, "proj/a.txt", root, time.Now()); err != nil || !ok {
		t.Fatalf("not covered before: %v", err)
	}
	if _, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", gs.dir, "--server", "notes", "--path", "proj"); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	exited := time.Now()
	select {
	case at := <-changed:
		t.Logf("the Watch reported the revocation %v after the command exited (before it, if negative)", at.Sub(exited))
	case <-time.After(5 * time.Second):
		t.Fatal("the Watch did not report the revocation")
	}
	if _, ok, err := s.Covers("notes", grants.Write, "proj/a.txt", root, time.Now()); err != nil || ok {
		t.Fatalf("still covered after the Watch reported the revocation (err %v)", err)
	}
}

// --config FILE: its stateDir (relative to the file) stands in for --state-dir; the flag wins.
func TestGrantsStateFromConfig(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	cfgDir := t.TempDir()
	rel, err := filepath.Rel(cfgDir, gs.dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "fsbroker.yaml")
	writeFile(t, cfg, "version: 1\nstateDir: "+rel+"\n")
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--config", cfg, "--server", "indexer")
	if code != 0 || !strings.Contains(stdout, gs.ids["indexer read:docs"]) {
		t.Fatalf("list --config: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	other := t.TempDir()
	if stdout, _, code := runFsbroker(t, nil, "grants", "list", "--config", cfg, "--state-dir", other); code != 0 || stdout != "" {
		t.Fatalf("--state-dir does not win over the config: exit status %d, stdout:\n%s", code, stdout)
	}
	if _, _, code := runFsbroker(t, nil, "grants", "revoke", "--config", cfg, "--server", "indexer"); code != 0 {
		t.Fatalf("revoke --config: exit status %d", code)
	}
	if got := gs.remaining(t); !equalStrings(got, []string{"notes read:docs/public", "notes write:proj"}) {
		t.Fatalf("left: %q", got)
	}
	bad := filepath.Join(cfgDir, "bad.yaml")
	writeFile(t, bad, "stateDir: "+rel+"\nstateDirr: x\n")
	if _, stderr, code := runFsbroker(t, nil, "grants", "list", "--config", bad); code != 2 || !strings.Contains(stderr, "stateDirr") {
		t.Fatalf("a config the broker refuses: exit status %d, stderr:\n%s", code, stderr)
	}
}

// Without --state-dir or --config, the default state directory ($XDG_STATE_HOME/fsbroker)
// is used.
func TestGrantsDefaultStateDir(t *testing.T) {
	t.Parallel()
	s, err := grants.Open(filepath.Join(stateHome, "fsbroker", grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const server = "grants-default-state-dir-test"
	out, err := s.Grant(server, grants.Grant{Access: grants.Read, Path: "m/x", Root: grantRoot(t, t.TempDir()), By: grants.ByCommand})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--server", server)
	if code != 0 || !strings.Contains(stdout, out[0].ID) {
		t.Fatalf("exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if stdout, _, code := runFsbroker(t, nil, "grants", "revoke", "--id", out[0].ID); code != 0 || !strings.Contains(stdout, out[0].ID) {
		t.Fatalf("revoke: exit status %d, stdout:\n%s", code, stdout)
	}
}

func TestGrantsUsageErrors(t *testing.T) {
	t.Parallel()
	gs := newGrantsState(t)
	dir := gs.dir
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"grants"}, "give a command"},
		{[]string{"grants", "frob"}, `unknown command "frob"`},
		{[]string{"grants", "revoke", "--state-dir", dir}, "give --server, --path or --id"},
		{[]string{"grants", "revoke", "--state-dir", dir, "--all", "--server", "notes"}, "cannot be combined"},
		{[]string{"grants", "revoke", "--state-dir", dir, "--path", "/abs/path"}, "--path"},
		{[]string{"grants", "revoke", "--state-dir", dir, "--path", "proj/../etc"}, "not canonical"},
		{[]string{"grants", "revoke", "--state-dir", dir, "notes"}, `grants revoke takes no arguments, got ["notes"]`},
		{[]string{"grants", "list", "--state-dir", dir, "--frob"}, "frob"},
		{[]string{"grants", "list", "--state-dir", dir, "--server", "\xff"}, "--server"},
	}
	for _, tc := range cases {
		stdout, stderr, code := runFsbroker(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("fsbroker %q: exit status %d (want 2), stdout %q, stderr:\n%s", tc.args, code, stdout, stderr)
		}
	}
	if got := gs.remaining(t); len(got) != 4 {
		t.Fatalf("a refused command changed the grants: %q left", got)
	}
}

func TestGrantsHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"\n  grants ", " show and take back consent grants"}}, // the column's width follows the longest name
		{[]string{"help", "grants"}, []string{"fsbroker grants COMMAND", "list", "revoke", "restore", "--config FILE"}},
		{[]string{"help", "grants", "list"}, []string{"fsbroker grants list", "-server", "-json", "-state-dir", "-config"}},
		{[]string{"help", "grants", "revoke"}, []string{"fsbroker grants revoke", "-server", "-path", "-id", "-all", "cannot be narrowed", "Exit status"}},
		{[]string{"grants", "help"}, []string{"fsbroker grants COMMAND"}},
	}
	for _, tc := range cases {
		stdout, stderr, code := runFsbroker(t, nil, tc.args...)
		if code != 0 {
			t.Errorf("fsbroker %q: exit status %d; stderr:\n%s", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("fsbroker %q: stdout has no %q:\n%s", tc.args, w, stdout)
			}
		}
	}
	// -h on a subcommand prints its help and flags to stdout and is not an error.
	if stdout, stderr, code := runFsbroker(t, nil, "grants", "revoke", "-h"); code != 0 || !strings.Contains(stdout, "--all") {
		t.Errorf("grants revoke -h: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, stderr, code := runFsbroker(t, nil, "help", "grants", "frob"); code != 2 || !strings.Contains(stderr, "frob") {
		t.Errorf("help grants frob: exit status %d, stderr:\n%s", code, stderr)
	}
}

// TestGrantsRevokeRecordsInTheGivenTrail: --audit DIR puts the revocation's
// record in the trail the brokers were told to use.
func TestGrantsRevokeRecordsInTheGivenTrail(t *testing.T) {
	t.Parallel()
	state, trail := t.TempDir(), filepath.Join(t.TempDir(), "trail")
	st, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Grant("srv", grants.Grant{Access: grants.Read, Path: "proj/a", Root: grantRoot(t, t.TempDir()), Granted: time.Now(), By: "test"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", state, "--audit", trail, "--server", "srv"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	segments, _ := filepath.Glob(filepath.Join(trail, "*.jsonl"))
	var found bool
	for _, f := range segments {
		b, _ := os.ReadFile(f)
		found = found || strings.Contains(string(b), `"method":"grants/revoke"`)
	}
	if !found {
		t.Errorf("no grants/revoke record in %s (segments %q)", trail, segments)
	}
}

// TestGrantsListNamesServersAsTheTrail: grants list names the server of each
// grant as the audit trail names it (the declared name, or the pinned id),
// and says which of the two it is, for both a declared name and a pinned id;
// the name it shows finds the grant's records with audit query --server.
func TestGrantsListNamesServersAsTheTrail(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	for i, extra := range [][]string{nil, {"--server-id", "indexer-prod"}} {
		p := startBroker(t, "", w.args("auto", extra...)...)
		p.handshake("2025-11-25") // declares csPeer
		if granted, _ := csConsent(t, p, 1, "read", []string{"proj/docs", "proj/a.txt"}[i]); !granted {
			t.Fatal("consent was not granted")
		}
		p.closeStdin()
		p.waitExit()
	}

	trailServer := map[string]string{} // grant id -> the server its grant record names
	for _, rec := range trailRecordsOf(t, w.trail(), audit.KindGrant) {
		id, _, _ := strings.Cut(strings.TrimPrefix(rec.Detail, "granted "), " ")
		trailServer[id] = rec.Server
	}
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", w.state)
	if code != 0 {
		t.Fatalf("grants list: exit %d: %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(rows) != 3 || !regexp.MustCompile(`^SERVER +IDENTITY +ACCESS `).MatchString(rows[0]) {
		t.Fatalf("grants list:\n%s", stdout)
	}
	want := map[string]string{csPeer: "declared", "indexer-prod": "pinned"}
	for _, row := range rows[1:] {
		f := strings.Fields(row)
		id := f[len(f)-1]
		if trailServer[id] == "" || f[0] != trailServer[id] || want[f[0]] != f[1] {
			t.Errorf("grants list names the server of %s %q (%s); the trail names it %q; want the same name, %s",
				id, f[0], f[1], trailServer[id], want[trailServer[id]])
		}
		query, _, _ := runFsbroker(t, nil, "audit", "query", "--state-dir", w.state, "--server", f[0], "--kind", "grant")
		if !strings.Contains(query, id) {
			t.Errorf("audit query --server %s does not find the grant %s:\n%s", f[0], id, query)
		}
	}

	var listed listJSON
	stdout, _, _ = runFsbroker(t, nil, "grants", "list", "--state-dir", w.state, "--json")
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
		t.Fatal(err)
	}
	for _, g := range listed.Grants {
		if g.Server != trailServer[g.ID] || g.Pinned != (g.Server == "indexer-prod") {
			t.Errorf("grants list --json: server %q, pinned %v; the trail names it %q", g.Server, g.Pinned, trailServer[g.ID])
		}
	}
}
