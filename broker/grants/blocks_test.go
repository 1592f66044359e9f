// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
)

func block(t testing.TB, s *grants.Store, b grants.Block) grants.Block {
	t.Helper()
	if b.By == "" {
		b.By = "test"
	}
	out, added, err := s.Block(b)
	if err != nil || !added {
		t.Fatalf("Block(%+v) = added %v, %v", b, added, err)
	}
	return out
}

func blocked(t testing.TB, s *grants.Store, server, p string) bool {
	t.Helper()
	_, ok, err := s.Blocked(server, p)
	if err != nil {
		t.Fatalf("Blocked(%q, %q): %v", server, p, err)
	}
	return ok
}

func restore(t testing.TB, s *grants.Store, f grants.RevokeFilter) []string {
	t.Helper()
	bs, err := s.Restore(f)
	if err != nil {
		t.Fatalf("Restore(%+v): %v", f, err)
	}
	var out []string
	for _, b := range bs {
		out = append(out, b.Server+":"+b.Path)
	}
	return out
}

// fileVersion is the version member of a file.
func fileVersion(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version int `json:"version"`
	}
	// The file's JSON object: a version 4 file may have appended records
	// after it.
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&f); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return f.Version
}

// A block covers its path and beneath it at a segment boundary, for its
// server only; one for every server applies to servers the store never saw;
// blocks survive a new Store (a restart), and a Restore lifts them.
func TestBlocks(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithClock(func() time.Time { return t0 }), grants.WithMaxStale(0)) // sees r's changes at once
	b := block(t, s, grants.Block{Server: "notes", Path: "proj/dir", Root: testRoot, By: "grants revoke by ann"})
	if b.ID == "" || !b.Blocked.Equal(t0) || b.Root != testRoot {
		t.Fatalf("stored block %+v", b)
	}
	for p, want := range map[string]bool{"proj/dir": true, "proj/dir/a/b": true, "proj/dirx": false, "proj": false, "proj/x": false} {
		if got := blocked(t, s, "notes", p); got != want {
			t.Errorf("notes %s: blocked %v, want %v", p, got, want)
		}
	}
	if blocked(t, s, "other", "proj/dir") {
		t.Error("a block of notes applies to another server")
	}
	// The same path again: the block there stays.
	again, added, err := s.Block(grants.Block{Server: "notes", Path: "proj/dir", By: "someone else"})
	if err != nil || added || again.ID != b.ID || again.By != "grants revoke by ann" {
		t.Fatalf("a second block on one path: %+v, added %v, %v", again, added, err)
	}
	// A server's file holding blocks is version 4, with its grants kept.
	grant(t, s, "notes", read("docs"))
	if v := fileVersion(t, s.Path("notes")); v != grants.FormatVersion {
		t.Errorf("a server's file with blocks is version %d, want %d", v, grants.FormatVersion)
	}

	// Every server, every path: a server never seen is blocked too.
	all := block(t, s, grants.Block{Server: grants.AllServers})
	if !all.EveryServer() || !blocked(t, s, "never-seen", "docs/a") {
		t.Fatalf("a block of every path for every server: %+v", all)
	}
	if v := fileVersion(t, s.Path(grants.AllServers)); v != 3 {
		t.Errorf("the every-server file is version %d", v)
	}
	// Blocks are not grants: List and ListAll show grants only, and no
	// server is listed for the every-server file.
	if gs, err := s.ListAll(); err != nil || len(gs) != 1 {
		t.Fatalf("ListAll = %+v, %v", gs, err)
	}

	// A restart sees them.
	r := open(t, dir)
	if !blocked(t, r, "notes", "proj/dir/x") || !blocked(t, r, "anyone", "x") {
		t.Fatal("blocks are not seen by a new Store")
	}
	bs, err := r.ListBlocks()
	if err != nil || len(bs) != 2 || bs[0].Server != grants.AllServers || bs[1].ID != b.ID {
		t.Fatalf("ListBlocks = %+v, %v", bs, err)
	}
	if of, err := r.BlocksOf("notes"); err != nil || len(of) != 2 {
		t.Fatalf("BlocksOf(notes) = %+v, %v", of, err)
	}
	if of, err := r.BlocksOf("other"); err != nil || len(of) != 1 || !of[0].EveryServer() {
		t.Fatalf("BlocksOf(other) = %+v, %v", of, err)
	}

	// Restore by server does not lift a block for every server; by path not
	// a broader block (every path).
	if got := restore(t, r, grants.RevokeFilter{Server: "notes", Path: "proj"}); len(got) != 1 || got[0] != "notes:proj/dir" {
		t.Fatalf("restore notes proj = %q", got)
	}
	if v := fileVersion(t, s.Path("notes")); v != grants.FormatVersion {
		t.Errorf("a server's file without blocks is version %d, want %d", v, grants.FormatVersion)
	}
	if got := restore(t, r, grants.RevokeFilter{Path: "docs"}); len(got) != 0 {
		t.Fatalf("restore --path docs lifted %q (only a block on every path is there)", got)
	}
	if !blocked(t, s, "notes", "proj/dir") {
		t.Fatal("the block for every server was lifted by a restore of the server's")
	}
	if got := restore(t, r, grants.RevokeFilter{ID: all.ID}); len(got) != 1 || got[0] != ":" {
		t.Fatalf("restore --id = %q", got)
	}
	if _, err := os.Stat(s.Path(grants.AllServers)); !os.IsNotExist(err) {
		t.Errorf("the every-server file is left without blocks: %v", err)
	}
	if blocked(t, s, "notes", "proj/dir") {
		t.Fatal("still blocked after every block was lifted")
	}
	if !covers(t, s, "notes", grants.Read, "docs/x", t0) {
		t.Fatal("the grant kept in the server's file was lost")
	}

	// All.
	block(t, s, grants.Block{Server: "a", Path: "p"})
	block(t, s, grants.Block{Server: grants.AllServers, Path: "q"})
	if got := restore(t, s, grants.RevokeFilter{All: true}); len(got) != 2 {
		t.Fatalf("restore --all = %q", got)
	}
}

// Invalid blocks are refused; a corrupt every-server file blocks nothing
// silently: Blocked fails for every server.
func TestBlockValidationAndCorruption(t *testing.T) {
	s := open(t, t.TempDir())
	for _, b := range []grants.Block{
		{Server: "s", By: ""},
		{Server: "s", Path: "/abs", By: "x"},
		{Server: "s", Root: testRoot, By: "x"},
		{Server: "s", Path: "p", Root: grants.Root{Path: "rel"}, By: "x"},
		{ID: "given", Server: "s", By: "x"},
	} {
		if _, _, err := s.Block(b); !errors.Is(err, grants.ErrInvalid) {
			t.Errorf("Block(%+v) = %v, want ErrInvalid", b, err)
		}
	}
	if err := os.WriteFile(s.Path(grants.AllServers), []byte(`{"version": 3, "server": "x", "grants": [], "blocks": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Blocked("anyone", "p"); !errors.Is(err, grants.ErrCorrupt) {
		t.Fatalf("Blocked with a corrupt every-server file = %v, want ErrCorrupt", err)
	}
	if _, err := s.ListBlocks(); !errors.Is(err, grants.ErrCorrupt) || !strings.Contains(err.Error(), s.Path(grants.AllServers)) {
		t.Fatalf("ListBlocks = %v, want an error naming the file", err)
	}
	// A version 2 file with blocks, and a version 3 file without, are corrupt.
	for _, body := range []string{
		`{"version": 2, "server": "v", "grants": [], "blocks": []}`,
		`{"version": 3, "server": "v", "grants": []}`,
		`{"version": 3, "server": "v", "grants": [], "blocks": [{"id": "b1", "blocked": "2026-01-01T00:00:00Z", "by": "x"}, {"id": "b2", "blocked": "2026-01-01T00:00:00Z", "by": "x"}]}`,
	} {
		if err := os.WriteFile(s.Path("v"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		fresh := open(t, s.Dir())
		if _, _, err := fresh.Blocked("v", "p"); !errors.Is(err, grants.ErrCorrupt) {
			t.Errorf("%s: Blocked = %v, want ErrCorrupt", body, err)
		}
	}
}

// A block for every server made by another process reaches a Store through
// its Watch (reported as AnyServer), and so does its restore.
func TestBlockInAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(time.Hour)) // the Watch alone
	if blocked(t, s, "notes", "proj/x") {
		t.Fatal("blocked before any block")
	}
	w := watch(t, s)
	h := startHelper(t, dir, "notes")
	h.Send("block proj")
	ns, err := strconv.ParseInt(strings.TrimPrefix(h.Line(), "start "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	w.await(t, grants.AnyServer)
	if !blocked(t, s, "notes", "proj/x") {
		t.Fatal("after the Watch reported the block, the path is not blocked")
	}
	t.Logf("a block by another process, seen through Watch after %v", time.Since(time.Unix(0, ns)))
	h.Expect("done")
	w.drain()
	h.Send("restore proj")
	h.Expect("done 1")
	w.await(t, grants.AnyServer)
	if blocked(t, s, "notes", "proj/x") {
		t.Fatal("still blocked after the Watch reported the restore")
	}
}
