// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
)

// records returns the appended records of a server's file: the lines after
// its JSON object, and the length of that object and its newline.
func records(t *testing.T, path string) (base int, lines []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	base = int(dec.InputOffset()) + 1
	rest := strings.TrimSuffix(string(b[base:]), "\n")
	if rest == "" {
		return base, nil
	}
	return base, strings.Split(rest, "\n")
}

// A new grant is appended to the server's file (one record, not a
// rewrite), and seen by another Store, by a reopened one, and by a real
// second process, which appends too; both Stores see every grant.
func TestAppendedGrantsAreSeenByOthers(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, grants.WithMaxStale(0))
	grant(t, a, "notes", read("proj/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), read("proj/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"))
	base, recs := records(t, a.Path("notes"))
	if len(recs) != 0 {
		t.Fatalf("the first write has records: %q", recs)
	}
	grant(t, a, "notes", read("proj/c"))
	base2, recs := records(t, a.Path("notes"))
	if base2 != base || len(recs) != 1 || !strings.Contains(recs[0], `"proj/c"`) {
		t.Fatalf("a new grant was not appended as one record: base %d (was %d), records %q", base2, base, recs)
	}
	b := open(t, dir, grants.WithMaxStale(0))
	want := []string{"read:proj/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "read:proj/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "read:proj/c"}
	if got := paths(list(t, b, "notes")); !reflect.DeepEqual(got, want) {
		t.Fatalf("another Store lists %q, want %q", got, want)
	}

	h := startHelper(t, dir, "notes")
	h.Send("grant proj/d")
	h.Expect("done")
	if _, recs := records(t, a.Path("notes")); len(recs) != 2 {
		t.Fatalf("the other process did not append: %q", recs)
	}
	want = append(want, "read:proj/d")
	grant(t, a, "notes", read("proj/e"))
	want = append(want, "read:proj/e")
	for name, s := range map[string]*grants.Store{"a": a, "b": b, "reopened": open(t, dir)} {
		if got := paths(list(t, s, "notes")); !reflect.DeepEqual(got, want) {
			t.Errorf("%s lists %q, want %q", name, got, want)
		}
		if !covers(t, s, "notes", grants.Read, "proj/d", time.Now()) || !covers(t, s, "notes", grants.Read, "proj/e", time.Now()) {
			t.Errorf("%s: the appended grants do not cover", name)
		}
	}
}

// A revocation by a real second process between two appends of this Store
// is never undone: neither on disk nor in this Store's cache, with the
// default staleness (the cache in use) and no Watch.
func TestRevocationBetweenAppendsIsNeverUndone(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	grant(t, s, "notes", read("proj/keep-the-file-long-enough-to-append-to"))
	h := startHelper(t, dir, "notes")
	for i := range 5 {
		p := fmt.Sprintf("proj/r%d", i)
		grant(t, s, "notes", read(p)) // appended
		if !covers(t, s, "notes", grants.Read, p, time.Now()) {
			t.Fatal("the grant does not cover")
		}
		h.Send("revoke " + p)
		h.Line() // start
		h.Expect("done 1")
		grant(t, s, "notes", read(fmt.Sprintf("proj/n%d", i))) // the next append
		if covers(t, s, "notes", grants.Read, p, time.Now()) {
			t.Fatalf("round %d: the revoked grant covers again after this Store's next append", i)
		}
		if covers(t, open(t, dir), "notes", grants.Read, p, time.Now()) {
			t.Fatalf("round %d: the revoked grant is back on disk", i)
		}
	}
}

// A file cut at any byte of its last record (a crash mid-append) grants
// nothing the complete records do not, and loses none of them: the cut
// record is ignored. The next Grant rewrites the file rather than append
// after the cut, so nothing is lost then either.
func TestTornLastRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	grant(t, s, "notes", read("proj/base-one-with-a-long-name-to-leave-room"), read("proj/base-two-with-a-long-name-to-leave-room"))
	grant(t, s, "notes", read("proj/first"))
	grant(t, s, "notes", read("proj/last"))
	path := s.Path("notes")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := records(t, path)
	if len(recs) != 2 {
		t.Fatalf("want 2 records, got %q", recs)
	}
	before := []string{"read:proj/base-one-with-a-long-name-to-leave-room", "read:proj/base-two-with-a-long-name-to-leave-room", "read:proj/first"}
	lastStart := len(full) - len(recs[1]) - 1
	for cut := lastStart; cut <= len(full); cut++ {
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r := open(t, dir, grants.WithMaxStale(0))
		want := before
		if cut == len(full) {
			want = append(want[:len(want):len(want)], "read:proj/last")
		}
		gs, err := r.List("notes")
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(full), err)
		}
		if got := paths(gs); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d of %d: %q, want %q", cut, len(full), got, want)
		}
		if cut < len(full) && covers(t, r, "notes", grants.Read, "proj/last", time.Now()) {
			t.Fatalf("cut at %d: the cut record covers", cut)
		}
		if cut == len(full)-1 || cut == lastStart+len(recs[1])/2 {
			grant(t, r, "notes", read("proj/after"))
			if got, want := paths(list(t, open(t, dir), "notes")), append([]string{"read:proj/after"}, want...); !reflect.DeepEqual(got, want) {
				t.Fatalf("a grant after the cut at %d: %q, want %q", cut, got, want)
			}
		}
		r.Close()
	}
}

// A record that is not a complete, valid grant of the file's server makes
// the file corrupt (no grant at all): one naming another server (a forged
// record), garbage, an empty line, an unknown member, or a grant the file
// holds already. A record after a cut one is not a cut record.
func TestForgedOrMalformedRecordIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	grant(t, s, "notes", read("proj/one-with-a-long-name-to-leave-room-for-records"))
	grant(t, s, "notes", read("proj/two"))
	path := s.Path("notes")
	valid, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := records(t, path)
	if len(recs) != 1 {
		t.Fatalf("want one record, got %q", recs)
	}
	rec := recs[0]
	third := strings.Replace(strings.Replace(rec, `"proj/two"`, `"proj/three"`, 1), `"id": "`, `"id": "f`, 1)
	other := strings.Replace(third, `"server": "notes"`, `"server": "other"`, 1)
	cases := map[string]string{
		"another server":  other + "\n",
		"no server":       strings.Replace(rec, `"server": "notes", `, ``, 1) + "\n",
		"garbage":         "garbage\n",
		"empty line":      "\n",
		"unknown member":  strings.Replace(rec, `{"server"`, `{"extra": 1, "server"`, 1) + "\n",
		"the same grant":  rec + "\n",
		"the same id":     strings.Replace(rec, `"proj/two"`, `"proj/other"`, 1) + "\n",
		"two on a line":   third + third + "\n",
		"after a cut one": third[:len(third)/2] + "\n" + third + "\n",
	}
	if other == third || third == rec {
		t.Fatalf("the test could not rewrite the record %s", rec)
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, append(bytes.Clone(valid), extra...), 0o600); err != nil {
				t.Fatal(err)
			}
			_, ok, err := s.Covers("notes", grants.Read, "proj/two", testRoot, time.Now())
			if ok || !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("Covers: %v, %v; want ErrCorrupt", ok, err)
			}
			if _, err := s.Grant("notes", read("proj/new")); !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("Grant on a corrupt file: %v; want ErrCorrupt", err)
			}
		})
	}
	// The same record, complete, is a grant.
	if err := os.WriteFile(path, append(bytes.Clone(valid), third+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if !covers(t, s, "notes", grants.Read, "proj/three", time.Now()) {
		t.Fatal("a valid record is not a grant")
	}
}

// The file is compacted when its records outgrow its JSON object, and a
// rewrite (here: an expired grant to sweep) keeps exactly the live grants,
// with their IDs, and the blocks.
func TestCompactionKeepsLiveGrantsAndBlocks(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0), grants.WithClock(func() time.Time { return now }))
	short := read("proj/short")
	short.Expires = now.Add(time.Hour)
	grant(t, s, "notes", read("proj/base"), short)
	block(t, s, grants.Block{Server: "notes", Path: "proj/blocked", By: "op"})
	path := s.Path("notes")
	compacted := false
	for i := 0; i < 50 && !compacted; i++ {
		base, before := records(t, path)
		grant(t, s, "notes", read(fmt.Sprintf("proj/g%02d", i)))
		base2, after := records(t, path)
		switch {
		case len(after) == len(before)+1 && base2 == base:
		case len(after) == 0 && base2 > base:
			compacted = true
		default:
			t.Fatalf("grant %d: neither appended nor compacted: %d records then %d, base %d then %d", i, len(before), len(after), base, base2)
		}
	}
	if !compacted {
		t.Fatal("50 appends never compacted the file")
	}
	want := list(t, s, "notes")
	if got := list(t, open(t, dir), "notes"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after compaction, on disk:\n%+v\nwant\n%+v", got, want)
	}
	grant(t, s, "notes", read("proj/appended"))
	if _, recs := records(t, path); len(recs) != 1 {
		t.Fatalf("want one record after the compaction, got %q", recs)
	}

	now = now.Add(2 * time.Hour) // proj/short expires: the next grant sweeps it
	grant(t, s, "notes", read("proj/after-expiry"))
	if _, recs := records(t, path); len(recs) != 0 {
		t.Fatalf("an expired grant to sweep, yet the grant was appended: %q", recs)
	}
	var live []string
	for _, g := range append(want, list(t, s, "notes")...) {
		if g.Path != "proj/short" && !strings.Contains(strings.Join(live, ","), g.ID) {
			live = append(live, g.ID+":"+g.Path)
		}
	}
	var got []string
	for _, g := range list(t, open(t, dir), "notes") {
		got = append(got, g.ID+":"+g.Path)
	}
	if len(got) != len(want) /* -short +appended +after-expiry */ +1 || strings.Contains(strings.Join(got, ","), "proj/short") {
		t.Fatalf("after the sweep: %q", got)
	}
	for _, g := range got {
		if !strings.Contains(strings.Join(live, ","), g) {
			t.Errorf("after the sweep, %s was not held before (or changed its ID)", g)
		}
	}
	if !blocked(t, open(t, dir), "notes", "proj/blocked/x") {
		t.Fatal("a rewrite lost the block")
	}
}

// Files of the versions before appended records are read, and rewritten as
// version 4 by the next grant, their grants and blocks kept.
func TestOldVersionFileIsReadAndRewritten(t *testing.T) {
	root := `"root": {"path": "` + testRoot.Path + `", "dev": ` + fmt.Sprint(testRoot.Dev) + `, "ino": ` + fmt.Sprint(testRoot.Ino) + `}`
	g := `{"id": "aaaa", "access": "read", "path": "proj/old", ` + root + `, "granted": "2026-01-01T00:00:00Z", "by": "prompt"}`
	files := map[int]string{
		2: `{"version": 2, "server": "notes", "grants": [` + g + `]}` + "\n",
		3: `{"version": 3, "server": "notes", "grants": [` + g + `], "blocks": [{"id": "bbbb", "path": "proj/blocked", "blocked": "2026-01-01T00:00:00Z", "by": "op"}]}` + "\n",
	}
	for v, content := range files {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, grants.WithMaxStale(0))
			if err := os.WriteFile(s.Path("notes"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if !covers(t, s, "notes", grants.Read, "proj/old/x", time.Now()) {
				t.Fatal("the old file's grant does not cover")
			}
			grant(t, s, "notes", read("proj/new"))
			if got := fileVersion(t, s.Path("notes")); got != grants.FormatVersion {
				t.Fatalf("after a grant, version %d, want %d", got, grants.FormatVersion)
			}
			if _, recs := records(t, s.Path("notes")); len(recs) != 0 {
				t.Fatalf("appended to a version %d file: %q", v, recs)
			}
			r := open(t, dir)
			if got := paths(list(t, r, "notes")); !reflect.DeepEqual(got, []string{"read:proj/new", "read:proj/old"}) {
				t.Fatalf("after the rewrite: %q", got)
			}
			if gs := list(t, r, "notes"); gs[1].ID != "aaaa" {
				t.Errorf("the old grant's ID is %q", gs[1].ID)
			}
			if v == 3 && !blocked(t, r, "notes", "proj/blocked/x") {
				t.Error("the rewrite lost the block")
			}
		})
	}
}

// Two grants on one path, access and root are corrupt even when a grant
// under another root sorts between them.
func TestDuplicateGrantAcrossRootsIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	other := grants.Root{Path: "/other", Dev: 1, Ino: 2}
	g := func(id, root, granted string) string {
		return `{"id": "` + id + `", "access": "read", "path": "proj/a", "root": ` + root + `, "granted": "` + granted + `", "by": "x"}`
	}
	r1 := `{"path": "` + testRoot.Path + `", "dev": ` + fmt.Sprint(testRoot.Dev) + `, "ino": ` + fmt.Sprint(testRoot.Ino) + `}`
	r2 := `{"path": "` + other.Path + `", "dev": 1, "ino": 2}`
	file := `{"version": 4, "server": "notes", "grants": [` + g("a1", r1, "2026-01-01T00:00:00Z") + `, ` + g("a2", r2, "2026-01-02T00:00:00Z") + `, ` +
		g("a3", r1, "2026-01-03T00:00:00Z") + `], "blocks": []}` + "\n"
	if err := os.WriteFile(s.Path("notes"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List("notes"); !errors.Is(err, grants.ErrCorrupt) {
		t.Fatalf("List: %v; want ErrCorrupt", err)
	}
}

// An appended grant's expiry holds as the JSON object's does: read back
// from its record by another Store, it covers up to its expiry and nothing
// after.
func TestAppendedGrantExpires(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	grant(t, s, "notes", read("proj/a-long-enough-name-to-leave-room-for-a-record"))
	exp := time.Now().Add(time.Hour).UTC()
	grant(t, s, "notes", until(read("proj/x"), exp))
	if _, recs := records(t, s.Path("notes")); len(recs) != 1 || !strings.Contains(recs[0], `"expires"`) {
		t.Fatalf("want one record with its expiry, got %q", recs)
	}
	r := open(t, dir)
	if !covers(t, r, "notes", grants.Read, "proj/x", exp) {
		t.Fatal("the appended grant does not cover at its expiry")
	}
	if covers(t, r, "notes", grants.Read, "proj/x", exp.Add(time.Nanosecond)) {
		t.Fatal("the appended grant covers after its expiry")
	}
}
