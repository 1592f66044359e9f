// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package grants_test

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/grants"
)

// Related returns exactly the grants on a path, above it or beneath it, at
// a segment boundary, each once, in List's order.
func TestRelated(t *testing.T) {
	s := open(t, t.TempDir())
	grant(t, s, "srv",
		read("proj"), write("proj/dir"), read("proj/dir"), read("proj/dir/a"), read("proj/dir/a/b.txt"),
		read("proj/dirx"), read("proj/dir-y/c"), read("proj/di"), read("proj/other/d"), read("other"), read("other/dir"))
	grant(t, s, "another", read("proj/dir/a"))
	cases := []struct {
		paths []string
		want  []string
	}{
		{[]string{"proj/dir/a/b.txt"}, []string{"read:proj", "read:proj/dir", "write:proj/dir", "read:proj/dir/a", "read:proj/dir/a/b.txt"}},
		{[]string{"proj/dir"}, []string{"read:proj", "read:proj/dir", "write:proj/dir", "read:proj/dir/a", "read:proj/dir/a/b.txt"}},
		{[]string{"proj/dir/zzz"}, []string{"read:proj", "read:proj/dir", "write:proj/dir"}},
		{[]string{"proj/dirx/q"}, []string{"read:proj", "read:proj/dirx"}},
		{[]string{"nothere/x"}, []string{}},
		{[]string{"other"}, []string{"read:other", "read:other/dir"}},
		// Two paths: the union, each grant once, in List's order.
		{[]string{"proj/dir/a", "proj/dir/a/b.txt", "other/dir"}, []string{"read:other", "read:other/dir", "read:proj", "read:proj/dir", "write:proj/dir", "read:proj/dir/a", "read:proj/dir/a/b.txt"}},
		{[]string{}, []string{}},
	}
	for _, c := range cases {
		gs, err := s.Related("srv", c.paths...)
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(gs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Related(%q) = %q, want %q", c.paths, got, c.want)
		}
		for _, g := range gs {
			if g.Server != "srv" || g.ID == "" {
				t.Errorf("Related(%q) returned %+v", c.paths, g)
			}
		}
	}
	if _, err := s.Related("srv", "proj/../x"); err == nil {
		t.Error("Related accepted a path that is not canonical")
	}
	// Beneath a mount is every grant of that mount, as List has them.
	all := list(t, s, "srv")
	gs, err := s.Related("srv", "proj", "other")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gs, all) {
		t.Errorf("Related of every mount:\n%+v\nList:\n%+v", gs, all)
	}
}

// A change another Store (another process) made to the file is never lost
// to this Store's cache when it writes: not even one that a stat of the
// length and modification time cannot see (the same length, the
// modification time put back). Replaced as every fsbroker writer replaces
// it (a rename: a new inode, which the Store, holding the old one open,
// tells apart), the change is seen at once; written in place (which no
// fsbroker writer does; only a process that can write the grants directory,
// and so controls the grants anyway), the Store's append never writes over
// it, and the Store sees it when it next reads the file whole, within ten
// times its staleness bound.
func TestWriteAfterAnotherStoresChangeKeepsIt(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("inPlace=%v", inPlace), func(t *testing.T) {
			dir := t.TempDir()
			maxStale := grants.DefaultMaxStale // the cache is in use
			if inPlace {
				maxStale = 20 * time.Millisecond
			}
			a := open(t, dir, grants.WithMaxStale(maxStale))
			grant(t, a, "srv", read("proj/aa"), read("proj/keep"))
			if !covers(t, a, "srv", grants.Read, "proj/aa", time.Now()) {
				t.Fatal("the grant does not cover")
			}
			path := a.Path("srv")
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Another process swaps the grant on proj/aa for one on proj/bb:
			// the same length, the modification time restored.
			after := bytes.Replace(before, []byte(`"proj/aa"`), []byte(`"proj/bb"`), 1)
			target := path
			if !inPlace {
				target = path + ".other"
			}
			if err := os.WriteFile(target, after, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(target, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			if !inPlace {
				if err := os.Rename(target, path); err != nil {
					t.Fatal(err)
				}
			}
			if fi2, err := os.Stat(path); err != nil || fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
				t.Fatalf("the test could not keep the stamp: %v, %v", fi2, err)
			}

			grant(t, a, "srv", read("proj/cc"))
			want := []string{"read:proj/bb", "read:proj/cc", "read:proj/keep"}
			if !inPlace {
				if got := paths(list(t, a, "srv")); !reflect.DeepEqual(got, want) {
					t.Fatalf("after a's write: %q, want %q (a wrote back the grant the other process removed)", got, want)
				}
				if covers(t, a, "srv", grants.Read, "proj/aa", time.Now()) {
					t.Fatal("the grant the other process removed covers again")
				}
			}
			fresh := open(t, dir)
			if got := paths(list(t, fresh, "srv")); !reflect.DeepEqual(got, want) {
				t.Fatalf("on disk: %q, want %q", got, want)
			}
			if inPlace {
				// a keeps appending grants of its own meanwhile (as
				// --consent auto does), which must not keep it from
				// reading the file whole.
				for i, end := 0, time.Now().Add(10*maxStale+10*time.Millisecond); time.Now().Before(end); i++ {
					p := fmt.Sprintf("proj/more%03d", i)
					grant(t, a, "srv", read(p))
					want = append(want, "read:"+p)
					time.Sleep(maxStale / 4)
				}
				got := paths(list(t, a, "srv"))
				if !slices.Contains(got, "read:proj/bb") || slices.Contains(got, "read:proj/aa") {
					t.Fatalf("a, ten staleness bounds later, still appending: %q", got)
				}
			}
		})
	}
}

// A revocation by a real second process takes effect within PROTOCOL.md's
// second for a Store that keeps writing grants of its own meanwhile (as
// --consent auto does on every first read): its own writes neither hide the
// revocation nor undo it, with or without a Watch.
func TestRevokeInAnotherProcessWhileGranting(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watched), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir) // DefaultMaxStale
			if watched {
				watch(t, s)
			}
			h := startHelper(t, dir, "notes")
			for i := range 3 {
				p := fmt.Sprintf("proj/r%d", i)
				grant(t, s, "notes", write(p))
				stop := make(chan struct{})
				done := make(chan error, 1)
				go func() { // the session goes on granting other files
					n := 0
					for {
						select {
						case <-stop:
							done <- nil
							return
						default:
						}
						if _, err := s.Grant("notes", read(fmt.Sprintf("proj/files%d/f%d", i, n))); err != nil {
							done <- err
							return
						}
						n++
					}
				}()
				h.Send("revoke " + p)
				ns, err := strconv.ParseInt(strings.TrimPrefix(h.Line(), "start "), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				h.Expect("done 1")
				seen := eventually(t, "the revocation is seen", func() bool { return !covers(t, s, "notes", grants.Read, p+"/x", time.Now()) })
				if lat := seen.Sub(time.Unix(0, ns)); lat > time.Second {
					t.Logf("note: the revocation took %v (loaded machine?)", lat)
				}
				// It stays revoked while the writes go on, and on disk.
				time.Sleep(50 * time.Millisecond)
				close(stop)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if covers(t, s, "notes", grants.Read, p+"/x", time.Now()) {
					t.Fatal("a later write of this Store brought the revoked grant back")
				}
				if gs, err := open(t, dir).Related("notes", p); err != nil || len(gs) != 0 {
					t.Fatalf("on disk after the writes: %v, %v", gs, err)
				}
			}
		})
	}
}
