// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/grants"
)

// appendLines appends lines to the file at path as another program would.
func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

// forgedRecord is a valid appended record of server on path p.
func forgedRecord(server string, i int) string {
	return fmt.Sprintf(`{"server": %q, "grant": {"id": "%024x", "access": "read", "path": "p/%x", "granted": "2026-01-01T00:00:00Z", "by": "x"}}`+"\n", server, i, i)
}

// allocatedBy returns how many bytes f allocates (runtime.MemStats.TotalAlloc).
func allocatedBy(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A file holding more grants than the limit, by appended records (which no
// fsbroker writes: a Grant past the limit fails), is corrupt: no Store
// reads, and keeps in memory, more grants than a server may hold.
func TestFileOverTheLimitIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxGrants(5), grants.WithMaxStale(0))
	grant(t, s, "notes", read("proj/a-long-enough-name-to-leave-room-for-records"))
	path := s.Path("notes")
	var lines []string
	for i := range 4 {
		lines = append(lines, forgedRecord("notes", i))
	}
	appendLines(t, path, lines...)
	if n := len(list(t, s, "notes")); n != 5 {
		t.Fatalf("%d grants at the limit, want 5", n)
	}
	appendLines(t, path, forgedRecord("notes", 4))
	if gs, err := s.List("notes"); !errors.Is(err, grants.ErrCorrupt) {
		t.Fatalf("6 grants with a limit of 5: %d grants, %v; want ErrCorrupt", len(gs), err)
	}
}

// A hostile file of the largest size, of records or of one line, is
// refused having allocated a small part of the file: a Store reads at most
// the limit of grants (100 here) and one record's bytes at a time, never the
// appended part whole, nor a value of the JSON object longer than a grant
// at the limits of its members. (It read a 32 MiB file of records as
// 288,000 grants, allocating 588 MB, one of one line allocating 144 MB, and
// one of one value allocating 320 MB.)
func TestHostileFileMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		line func(i int) string
	}{
		{"many records", func(i int) string { return forgedRecord("notes", i) }},
		{"one long line", func(int) string { return "                                " }},
		{"one long value", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, grants.WithMaxGrants(100))
			grant(t, s, "notes", read("proj/a"))
			s.Close()
			var buf bytes.Buffer
			b, err := os.ReadFile(s.Path("notes"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.line == nil { // a grant in the JSON object whose "by" fills the file
				buf.WriteString(`{"version": 4, "server": "notes", "grants": [{"id": "aa", "access": "read", "path": "p", "granted": "2026-01-01T00:00:00Z", "by": "`)
				buf.WriteString(strings.Repeat("x", 32<<20-1024))
				buf.WriteString(`"}], "blocks": []}` + "\n")
			} else {
				buf.Write(b)
				for i := 0; buf.Len() < 32<<20-1024; i++ {
					buf.WriteString(tc.line(i))
				}
				buf.WriteString("\n")
			}
			if err := os.WriteFile(s.Path("notes"), buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			size := buf.Len()
			buf = bytes.Buffer{}
			r := open(t, dir, grants.WithMaxGrants(100))
			var listErr error
			n := allocatedBy(func() { _, listErr = r.List("notes") })
			if !errors.Is(listErr, grants.ErrCorrupt) {
				t.Fatalf("a hostile file of %d bytes: %v, want ErrCorrupt", size, listErr)
			}
			if n > uint64(size/8) {
				t.Fatalf("reading a hostile file of %d bytes allocated %d", size, n)
			}
			t.Logf("a hostile file of %d bytes: allocated %d", size, n)
		})
	}
}

// A record at the limits of its members, each escaped at length, is read:
// the bound on a record's line refuses no grant a Store appends.
func TestLongestRecordIsRead(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, grants.WithMaxStale(0))
	longest := func(mount string) grants.Grant {
		seg := strings.Repeat("<", grants.MaxSegmentBytes)
		p := mount
		for len(p)+1+len(seg) <= grants.MaxPathBytes {
			p += "/" + seg
		}
		root := "/" + strings.Repeat("&", grants.MaxRootBytes-1)
		return grants.Grant{Access: grants.Read, Path: p, Root: grants.Root{Path: root, Dev: 1, Ino: 2}, By: strings.Repeat(">", grants.MaxByBytes)}
	}
	grant(t, s, "notes", longest("one")) // the JSON object: as long as the record, to leave room
	grant(t, s, "notes", longest("two"))
	if _, recs := records(t, s.Path("notes")); len(recs) != 1 || len(recs[0]) < 250<<10 {
		t.Fatalf("want one record of over 250 KiB, got %d", len(recs))
	}
	r := open(t, dir)
	if n := len(list(t, r, "notes")); n != 2 {
		t.Fatalf("%d grants, want 2", n)
	}
}

// A file of blocks of the largest size, a server's or the one for every
// server, is refused having allocated a small part of it: its blocks are
// read one at a time, and no more than the limit (100 here), which no
// fsbroker writes past. (A 32 MiB server's file of blocks was read as
// 470,000 blocks, allocating 307 MB.)
func TestHostileBlocksMemoryIsBounded(t *testing.T) {
	for _, every := range []bool{false, true} {
		t.Run(fmt.Sprintf("every server %v", every), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, grants.WithMaxGrants(100))
			var buf bytes.Buffer
			path := s.Path("notes")
			if every {
				path = s.Path(grants.AllServers)
				buf.WriteString(`{"version": 3, "allServers": true, "blocks": [`)
			} else {
				buf.WriteString(`{"version": 3, "server": "notes", "grants": [], "blocks": [`)
			}
			for i := 0; buf.Len() < 32<<20-1024; i++ {
				if i > 0 {
					buf.WriteString(",")
				}
				fmt.Fprintf(&buf, `{"id": "%x", "path": "p/%x", "blocked": "2026-01-01T00:00:00Z", "by": "x"}`, i, i)
			}
			buf.WriteString("]}\n")
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			size := buf.Len()
			buf = bytes.Buffer{}
			var err error
			n := allocatedBy(func() { _, _, err = s.Blocked("notes", "p/0") })
			if !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("a file of %d bytes of blocks: %v, want ErrCorrupt", size, err)
			}
			if n > uint64(size/8) {
				t.Fatalf("reading a file of %d bytes of blocks allocated %d", size, n)
			}
			t.Logf("a file of %d bytes of blocks: allocated %d", size, n)
		})
	}
}

// The error of a file holding an over-long provider name or grant id
// names its length, not its bytes: it goes to logs and to
// `fsbroker grants list`, and a hostile file would make it megabytes.
func TestOverlongValueIsNotEchoed(t *testing.T) {
	for _, member := range []string{"by", "id"} {
		t.Run(member, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, grants.WithMaxStale(0))
			long := strings.Repeat("x", 1<<20)
			id, by := "aa", "x"
			if member == "by" {
				by = long
			} else {
				id = long
			}
			doc := fmt.Sprintf(`{"version": 4, "server": "notes", "grants": [{"id": %q, "access": "read", "path": "p", "granted": "2026-01-01T00:00:00Z", "by": %q}], "blocks": []}`+"\n", id, by)
			if err := os.WriteFile(s.Path("notes"), []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.List("notes")
			if !errors.Is(err, grants.ErrCorrupt) {
				t.Fatalf("a %s of 1 MiB: %v, want ErrCorrupt", member, err)
			}
			if msg := err.Error(); len(msg) > 1024 {
				t.Fatalf("a %s of 1 MiB: an error of %d bytes: %.200s...", member, len(msg), msg)
			}
		})
	}
}
