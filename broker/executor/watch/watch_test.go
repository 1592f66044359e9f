// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// withDropEvent discards the watcher's events for which drop is true, as
// a kernel queue overflow would.
func withDropEvent(drop func(name string) bool) Option {
	return func(h *Hub) { h.dropEvent = drop }
}

// withBeforeAdd runs hook in a walk, without the Hub's lock, between the
// lookup of directory rel through the root and the adding of its watch.
func withBeforeAdd(hook func(rel string)) Option {
	return func(h *Hub) { h.beforeAdd = hook }
}

// waitLimit bounds every wait for an event. It is an upper bound only: a
// passing test never waits for it.
const waitLimit = 10 * time.Second

// fixture is a root in a temporary directory.
type fixture struct {
	t    testing.TB
	root roots.Root
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: dir, Mount: "proj", Writable: true}})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{t: t, root: set.All()[0]}
}

// path is the canonical path of rel.
func (f fixture) path(rel string) canon.Path { return canon.Path{Root: f.root, Rel: rel} }

// abs is the host path of rel.
func (f fixture) abs(rel string) string { return absPath(f.root.Path, rel) }

func (f fixture) write(rel, content string) {
	f.t.Helper()
	if err := os.WriteFile(f.abs(rel), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) mkdir(rel string) {
	f.t.Helper()
	if err := os.MkdirAll(f.abs(rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) remove(rel string) {
	f.t.Helper()
	if err := os.RemoveAll(f.abs(rel)); err != nil {
		f.t.Fatal(err)
	}
}

func (f fixture) appendTo(rel, content string) {
	f.t.Helper()
	fh, err := os.OpenFile(f.abs(rel), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(content); err != nil {
		f.t.Fatal(err)
	}
}

// atomicWrite replaces rel the way executor.Write does: a temporary file
// in the same directory is created, written, synced, given its mode and
// renamed over the target.
func (f fixture) atomicWrite(rel, content string) {
	f.t.Helper()
	dir, _ := filepath.Split(f.abs(rel))
	tmp := filepath.Join(dir, executor.TempPrefix+"4242-00112233aabbccdd")
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := fh.WriteString(content); err != nil {
		f.t.Fatal(err)
	}
	if err := fh.Chmod(0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		f.t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.abs(rel)); err != nil {
		f.t.Fatal(err)
	}
}

// testCoalesce is the window of the tests' hubs unless a test sets one: wider
// than the default, so that a loaded machine does not split the events of
// one os.WriteFile (create, then write) into two windows.
const testCoalesce = 250 * time.Millisecond

func newHub(t testing.TB, opts ...Option) *Hub {
	t.Helper()
	h, err := NewHub(append([]Option{WithCoalesce(testCoalesce)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// sink collects a subscription's events.
type sink struct {
	ch chan Event
}

func newSink() *sink { return &sink{ch: make(chan Event, 4096)} }

func (k *sink) emit(e Event) { k.ch <- e }

func subscribe(t testing.TB, h *Hub, p canon.Path, recursive bool, kinds ...Kind) (*Subscription, *sink) {
	t.Helper()
	k := newSink()
	s, err := h.Subscribe(p, recursive, kinds, k.emit)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", p.Rel, err)
	}
	t.Cleanup(s.Close)
	return s, k
}

// key names an event for messages and comparisons.
func key(rel string, kind Kind) string { return string(kind) + " " + rel }

func keyOf(e Event) string { return key(e.Path.Rel, e.Kind) }

// until reads events until one is want, and returns the ones before it.
func (k *sink) until(t testing.TB, want string) []Event {
	t.Helper()
	var before []Event
	timeout := time.After(waitLimit)
	for {
		select {
		case e := <-k.ch:
			if keyOf(e) == want {
				return before
			}
			before = append(before, e)
		case <-timeout:
			t.Fatalf("no %q within %v; got %v", want, waitLimit, keys(before))
			return nil
		}
	}
}

// untilAll reads events until every one of want has come, and returns the
// others that came meanwhile.
func (k *sink) untilAll(t testing.TB, want ...string) []Event {
	t.Helper()
	missing := make(map[string]bool, len(want))
	for _, w := range want {
		missing[w] = true
	}
	var others []Event
	timeout := time.After(waitLimit)
	for len(missing) > 0 {
		select {
		case e := <-k.ch:
			if missing[keyOf(e)] {
				delete(missing, keyOf(e))
				continue
			}
			others = append(others, e)
		case <-timeout:
			t.Fatalf("still missing %v within %v; got others %v", missing, waitLimit, keys(others))
		}
	}
	return others
}

// empty fails if an event is waiting.
func (k *sink) empty(t testing.TB, what string) {
	t.Helper()
	select {
	case e := <-k.ch:
		t.Fatalf("%s: unexpected event %q", what, keyOf(e))
	default:
	}
}

func keys(es []Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = keyOf(e)
	}
	return out
}

// watched reports whether a subscription of the Hub watches directory rel.
func watched(h *Hub, rel string) bool { return holders(h, rel) > 0 }

// holders counts the subscriptions that watch directory rel.
func holders(h *Hub, rel string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, hd := range h.dirs {
		for _, r := range hd.subs {
			if r == rel {
				n++
			}
		}
	}
	return n
}

// watchedDir reports whether the Hub watches the directory at host path
// dir (by device and inode), under whatever path.
func watchedDir(t testing.TB, h *Hub, dir string) bool {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := roots.FileIDOf(fi)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.dirs {
		if hd.id == id {
			return true
		}
	}
	return false
}

// pendingLen is the number of open windows of s.
func pendingLen(s *Subscription) int {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return len(s.pending)
}

func TestCreatedModifiedDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true)

	start := time.Now()
	f.write("a.txt", "one")
	if before := k.until(t, key("a.txt", Created)); len(before) > 0 {
		t.Fatalf("events before the creation: %v", keys(before))
	}
	f.appendTo("a.txt", "two")
	if before := k.until(t, key("a.txt", Modified)); len(before) > 0 {
		t.Fatalf("events before the modification: %v", keys(before))
	}
	f.remove("a.txt")
	if before := k.until(t, key("a.txt", Deleted)); len(before) > 0 {
		t.Fatalf("events before the deletion: %v", keys(before))
	}

	// The event's fields: a mount-relative path in the root, a UTC time.
	f.write("b.txt", "x")
	var e Event
	select {
	case e = <-k.ch:
	case <-time.After(waitLimit):
		t.Fatal("no event for b.txt")
	}
	if e.Path != f.path("b.txt") || e.Path.MountPath() != "proj/b.txt" || e.Kind != Created {
		t.Fatalf("event = %+v", e)
	}
	if e.Time.Location() != time.UTC || e.Time.Before(start.Add(-time.Second)) {
		t.Fatalf("event time %v is not a UTC time after the start", e.Time)
	}
}

func TestKindsFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("x.txt", "x")
	f.write("y.txt", "y")
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true, Deleted)

	f.appendTo("x.txt", "more") // Modified: filtered
	f.write("z.txt", "z")       // Created: filtered
	f.remove("y.txt")           // Deleted: reported
	if before := k.until(t, key("y.txt", Deleted)); len(before) > 0 {
		t.Fatalf("filtered kinds were reported: %v", keys(before))
	}
	f.remove("z.txt")
	if before := k.until(t, key("z.txt", Deleted)); len(before) > 0 {
		t.Fatalf("filtered kinds were reported: %v", keys(before))
	}

	if _, err := h.Subscribe(f.path(""), false, []Kind{"renamed"}, func(Event) {}); errcode.Of(err) != errcode.InvalidParams {
		t.Fatalf("unknown kind: err = %v, want INVALID_PARAMS", err)
	}
}

func TestFileTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("dir")
	f.write("dir/f.txt", "f")
	f.write("dir/g.txt", "g")
	h := newHub(t)
	_, k := subscribe(t, h, f.path("dir/f.txt"), true)

	f.appendTo("dir/g.txt", "sibling") // another file of the directory
	f.write("dir/new.txt", "sibling")
	f.appendTo("dir/f.txt", "more")
	if before := k.until(t, key("dir/f.txt", Modified)); len(before) > 0 {
		t.Fatalf("siblings were reported: %v", keys(before))
	}
	f.atomicWrite("dir/f.txt", "replaced")
	if before := k.until(t, key("dir/f.txt", Modified)); len(before) > 0 {
		t.Fatalf("events before the atomic write's: %v", keys(before))
	}
	f.remove("dir/f.txt")
	if before := k.until(t, key("dir/f.txt", Deleted)); len(before) > 0 {
		t.Fatalf("events before the deletion: %v", keys(before))
	}
	f.write("dir/f.txt", "again")
	if before := k.until(t, key("dir/f.txt", Created)); len(before) > 0 {
		t.Fatalf("events before the re-creation: %v", keys(before))
	}
}

func TestNewSubdirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true)

	// The file is made right away: it may exist before the directory's
	// watch is added, and must be reported either way.
	f.mkdir("d")
	f.write("d/f.txt", "x")
	if others := k.untilAll(t, key("d", Created), key("d/f.txt", Created)); len(others) > 0 {
		t.Fatalf("other events: %v", keys(others))
	}
	f.appendTo("d/f.txt", "y")
	if before := k.until(t, key("d/f.txt", Modified)); len(before) > 0 {
		t.Fatalf("events before the modification: %v", keys(before))
	}
	f.write("d/g.txt", "z")
	if before := k.until(t, key("d/g.txt", Created)); len(before) > 0 {
		t.Fatalf("events before the creation: %v", keys(before))
	}

	// A whole new tree at once (mkdir -p), with a file at the bottom.
	f.mkdir("x/y/z")
	f.write("x/y/z/f.txt", "deep")
	if others := k.untilAll(t, key("x", Created), key("x/y", Created), key("x/y/z", Created),
		key("x/y/z/f.txt", Created)); len(others) > 0 {
		t.Fatalf("other events: %v", keys(others))
	}
	f.write("x/y/z/later.txt", "later")
	if before := k.until(t, key("x/y/z/later.txt", Created)); len(before) > 0 {
		t.Fatalf("events before the creation: %v", keys(before))
	}
}

func TestNonRecursiveIgnoresGrandchildren(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("d")
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), false)

	f.write("d/grandchild.txt", "x")
	f.mkdir("e")
	if before := k.until(t, key("e", Created)); len(before) > 0 {
		t.Fatalf("grandchildren were reported: %v", keys(before))
	}
	f.write("e/grandchild.txt", "x")
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("grandchildren were reported: %v", keys(before))
	}
	if watched(h, "d") || watched(h, "e") {
		t.Fatal("a non-recursive subscription watches subdirectories")
	}
}

func TestTempFilesNeverReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("target.txt", "old")
	f.mkdir("sub")
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true)

	for _, dir := range []string{"", "sub/"} {
		tmp := dir + executor.TempPrefix + "1-deadbeef"
		f.write(tmp, "staged")
		f.appendTo(tmp, "more")
		f.remove(tmp)
	}
	// Exactly executor.Write over an existing file: one Modified.
	f.atomicWrite("target.txt", "new")
	if before := k.until(t, key("target.txt", Modified)); len(before) > 0 {
		t.Fatalf("temporary files were reported: %v", keys(before))
	}
	// And over a missing file: one Created.
	f.atomicWrite("sub/fresh.txt", "new")
	if before := k.until(t, key("sub/fresh.txt", Created)); len(before) > 0 {
		t.Fatalf("events before the creation: %v", keys(before))
	}
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("more than one event per atomic write: %v", keys(before))
	}
}

func TestChmodNotReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("f.txt", "x")
	f.mkdir("d")
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true)

	if err := os.Chmod(f.abs("f.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.abs("d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.abs("f.txt"), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("attribute changes were reported: %v", keys(before))
	}
}

func TestBurstIsCoalesced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("f.txt", "")
	h := newHub(t, WithCoalesce(defaultCoalesce))
	_, k := subscribe(t, h, f.path(""), true)

	fh, err := os.OpenFile(f.abs("f.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 50
	for i := range writes {
		if _, err := fmt.Fprintf(fh, "line %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	f.write("sentinel.txt", "s")
	before := k.until(t, key("sentinel.txt", Created))
	if len(before) < 1 || len(before) > 5 {
		t.Fatalf("%d writes gave %d events, want 1..5: %v", writes, len(before), keys(before))
	}
	for _, e := range before {
		if keyOf(e) != key("f.txt", Modified) {
			t.Fatalf("unexpected event %q", keyOf(e))
		}
	}
}

func TestCreatedThenDeletedWithinWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A wide window, so that a loaded machine cannot split the pair.
	h := newHub(t, WithCoalesce(time.Second))
	_, k := subscribe(t, h, f.path(""), true)

	f.write("brief.txt", "x")
	f.remove("brief.txt")
	f.mkdir("briefdir")
	f.remove("briefdir")
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("a path created and removed within the window was reported: %v", keys(before))
	}
}

func TestSymlinkOutsideIsNotDescended(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.mkdir("sub")
	if err := os.Symlink(outside, f.abs("sub/link")); err != nil {
		t.Fatal(err)
	}
	h := newHub(t)
	_, k := subscribe(t, h, f.path(""), true)

	// A link made later is an entry too, never a subtree.
	if err := os.Symlink(outside, f.abs("link2")); err != nil {
		t.Fatal(err)
	}
	if before := k.until(t, key("link2", Created)); len(before) > 0 {
		t.Fatalf("events before the link's creation: %v", keys(before))
	}
	if err := os.WriteFile(filepath.Join(outside, "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "deep", "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("changes outside the root were reported: %v", keys(before))
	}
	if watchedDir(t, h, outside) || watchedDir(t, h, filepath.Join(outside, "deep")) {
		t.Error("a directory outside the root is watched")
	}
}

func TestSwappedDirectoryIsNotWatched(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.mkdir("sub/inner")
	var once sync.Once
	swap := func(rel string) {
		if rel != "sub" {
			return
		}
		// Between the lookup through the root and the adding of the
		// watch, the directory becomes a link out of the root.
		once.Do(func() {
			if err := os.Rename(f.abs("sub"), f.abs("moved")); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(outside, f.abs("sub")); err != nil {
				t.Error(err)
			}
		})
	}
	h := newHub(t, withBeforeAdd(swap))
	_, k := subscribe(t, h, f.path(""), true)

	if watchedDir(t, h, outside) {
		t.Fatal("the directory outside the root is watched")
	}
	if err := os.WriteFile(filepath.Join(outside, "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.write("sentinel.txt", "s")
	for _, e := range k.until(t, key("sentinel.txt", Created)) {
		// The directory's own entries, read through its handle, are gone
		// from sub/ once it is a link; nothing is ever found there.
		if strings.HasPrefix(e.Path.Rel, "sub/") && e.Kind != Deleted {
			t.Fatalf("a change outside the root was reported: %q", keyOf(e))
		}
	}
	// Once the root's events are in, sub is the link and is not watched;
	// the directory its watch was added on is watched where it is now.
	if watched(h, "sub") || watchedDir(t, h, outside) {
		t.Fatal("the swapped directory is watched")
	}
	// The swapped-in link is a plain entry; the moved directory is inside
	// the root and is watched like any new directory.
	f.write("moved/inner/f.txt", "x")
	for _, e := range k.until(t, key("moved/inner/f.txt", Created)) {
		// The directory's own entries, read through its handle, are gone
		// from sub/ once it is a link; nothing is ever found there.
		if strings.HasPrefix(e.Path.Rel, "sub/") && e.Kind != Deleted {
			t.Fatalf("a change outside the root was reported: %q", keyOf(e))
		}
	}

	// A swapped target fails the subscription.
	f.mkdir("top")
	h2 := newHub(t, withBeforeAdd(func(rel string) {
		if rel == "top" {
			_ = os.Remove(f.abs("top"))
			_ = os.Symlink(outside, f.abs("top"))
		}
	}))
	_, err = h2.Subscribe(f.path("top"), true, nil, func(Event) {})
	if errcode.Of(err) != errcode.ConcurrencyConflict {
		t.Fatalf("swapped target: err = %v, want CONCURRENCY_CONFLICT", err)
	}
	if watched(h2, "top") || watchedDir(t, h2, outside) {
		t.Fatal("the swapped target is watched")
	}
}

func TestDirectoryMovedWithinTree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("a/b")
	f.write("a/b/f.txt", "f")
	f.mkdir("dst")
	var dropping atomic.Bool
	h := newHub(t, withDropEvent(func(name string) bool {
		return dropping.Load() && !strings.HasSuffix(name, "sentinel.txt")
	}))
	_, k := subscribe(t, h, f.path(""), true)

	// Seen as it happens: the old paths are deleted, the new ones created,
	// and the moved directories are watched under their new paths.
	if err := os.Rename(f.abs("a"), f.abs("c")); err != nil {
		t.Fatal(err)
	}
	if others := k.untilAll(t, key("a", Deleted), key("a/b", Deleted), key("a/b/f.txt", Deleted),
		key("c", Created), key("c/b", Created), key("c/b/f.txt", Created)); len(others) > 0 {
		t.Fatalf("other events: %v", keys(others))
	}
	f.write("c/b/g.txt", "g")
	if before := k.until(t, key("c/b/g.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}

	// Lost, then found by the rescan: the same, into another directory.
	dropping.Store(true)
	if err := os.Rename(f.abs("c/b"), f.abs("dst/b2")); err != nil {
		t.Fatal(err)
	}
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("lost events were reported: %v", keys(before))
	}
	dropping.Store(false)
	h.injectError(errOverflow)
	if others := k.untilAll(t, key("c/b", Deleted), key("c/b/f.txt", Deleted), key("c/b/g.txt", Deleted),
		key("dst/b2", Created), key("dst/b2/f.txt", Created), key("dst/b2/g.txt", Created)); len(others) > 0 {
		t.Fatalf("other events: %v", keys(others))
	}
	f.write("dst/b2/h.txt", "h")
	if before := k.until(t, key("dst/b2/h.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}
	if watched(h, "c/b") || !watched(h, "dst/b2") {
		t.Fatal("the moved directory is watched under its old path")
	}
}

func TestOverlappingSubscriptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("d")
	h := newHub(t)
	_, all := subscribe(t, h, f.path(""), true)
	sd, part := subscribe(t, h, f.path("d"), true)

	f.write("d/f.txt", "x")
	if before := all.until(t, key("d/f.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}
	if before := part.until(t, key("d/f.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}
	if n := holders(h, "d"); n != 2 {
		t.Fatalf("the shared directory has %d holders, want 2", n)
	}

	sd.Close()
	sd.Close() // twice is fine
	f.write("d/g.txt", "x")
	if before := all.until(t, key("d/g.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}
	part.empty(t, "after its Close")
	if !watched(h, "d") {
		t.Fatal("closing one subscription removed the other's watch")
	}
}

func TestCloseDropsPendingEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHub(t)
	closing, gone := subscribe(t, h, f.path(""), true)
	_, witness := subscribe(t, h, f.path(""), true)

	f.write("x.txt", "x")
	deadline := time.Now().Add(waitLimit)
	for pendingLen(closing) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the change never opened a window")
		}
		time.Sleep(time.Millisecond)
	}
	closing.Close() // the window for x.txt is still open
	f.write("sentinel.txt", "s")
	witness.untilAll(t, key("x.txt", Created), key("sentinel.txt", Created))
	gone.empty(t, "after Close")
}

func TestHubClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, err := NewHub()
	if err != nil {
		t.Fatal(err)
	}
	_, k1 := subscribe(t, h, f.path(""), true)
	s2, k2 := subscribe(t, h, f.path(""), false)
	f.write("pending.txt", "x") // may be in a window when the Hub closes
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s2.Close() // after the Hub's Close: fine
	if _, err := h.Subscribe(f.path(""), true, nil, func(Event) {}); err == nil {
		t.Fatal("Subscribe on a closed Hub succeeded")
	}

	// Anything already emitted came before Close returned; drain it.
	for len(k1.ch) > 0 {
		<-k1.ch
	}
	for len(k2.ch) > 0 {
		<-k2.ch
	}
	f.write("after.txt", "x")
	h2 := newHub(t)
	_, witness := subscribe(t, h2, f.path(""), true)
	f.write("sentinel.txt", "s")
	witness.until(t, key("sentinel.txt", Created))
	k1.empty(t, "after the Hub's Close")
	k2.empty(t, "after the Hub's Close")
}

func TestOverflowRescan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.write("keep.txt", "k")
	f.write("gone.txt", "g")
	f.mkdir("olddir/sub")
	f.write("olddir/sub/inner.txt", "i")
	var dropping atomic.Bool
	h := newHub(t, withDropEvent(func(name string) bool {
		return dropping.Load() && !strings.HasSuffix(name, "sentinel.txt")
	}))
	_, k := subscribe(t, h, f.path(""), true)

	// These changes are lost, as in a kernel queue overflow.
	dropping.Store(true)
	f.write("new.txt", "n")
	f.remove("gone.txt")
	f.mkdir("newdir")
	f.write("newdir/f.txt", "f")
	f.remove("olddir")
	f.write("sentinel.txt", "s")
	if before := k.until(t, key("sentinel.txt", Created)); len(before) > 0 {
		t.Fatalf("lost events were reported: %v", keys(before))
	}
	dropping.Store(false)

	h.injectError(errOverflow)
	others := k.untilAll(t,
		key("new.txt", Created),
		key("gone.txt", Deleted),
		key("newdir", Created),
		key("newdir/f.txt", Created),
		key("olddir", Deleted),
		key("olddir/sub", Deleted),
		key("olddir/sub/inner.txt", Deleted),
	)
	if len(others) > 0 {
		t.Fatalf("the rescan reported more: %v", keys(others))
	}
	if !watched(h, "newdir") {
		t.Fatal("the rescan did not watch the new directory")
	}
	if watched(h, "olddir") || watched(h, "olddir/sub") {
		t.Fatal("the rescan kept the vanished directories' watches")
	}
	f.write("newdir/later.txt", "l")
	if before := k.until(t, key("newdir/later.txt", Created)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}
}

func TestDeleteWatchedDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mkdir("w/s")
	f.write("w/a.txt", "a")
	f.write("w/s/b.txt", "b")
	f.mkdir("v")
	h := newHub(t)
	_, k := subscribe(t, h, f.path("w"), true)
	_, kv := subscribe(t, h, f.path("v"), false)
	_, witness := subscribe(t, h, f.path(""), false)

	f.remove("w")
	for _, e := range k.until(t, key("w", Deleted)) {
		if e.Kind != Deleted {
			t.Fatalf("unexpected event %q", keyOf(e))
		}
	}
	// Renamed away counts as deleted too.
	if err := os.Rename(f.abs("v"), f.abs("v2")); err != nil {
		t.Fatal(err)
	}
	if before := kv.until(t, key("v", Deleted)); len(before) > 0 {
		t.Fatalf("unexpected events: %v", keys(before))
	}

	// The subscriptions stay open but silent, even for a new directory of
	// the same name.
	f.mkdir("w")
	f.write("w/c.txt", "c")
	f.mkdir("v")
	f.write("v/c.txt", "c")
	f.write("sentinel.txt", "s")
	witness.until(t, key("sentinel.txt", Created))
	k.empty(t, "after the target's deletion")
	kv.empty(t, "after the target's deletion")
	if watched(h, "w") || watched(h, "w/s") || watched(h, "v2") {
		t.Fatal("a deleted target's watches were kept")
	}
}

func TestSubscribeErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHub(t)
	_, err := h.Subscribe(f.path("missing/file.txt"), false, nil, func(Event) {})
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.FileNotFound {
		t.Fatalf("missing target: err = %v, want FILE_NOT_FOUND", err)
	}
	if strings.Contains(ce.Reason, f.root.Path) {
		t.Fatalf("the reason names a host path: %q", ce.Reason)
	}
	if _, err := h.Subscribe(f.path(""), false, nil, nil); errcode.Of(err) != errcode.InvalidParams {
		t.Fatalf("nil emit: err = %v", err)
	}

	// The system watch limit (ENOSPC from inotify_add_watch) and other
	// errors, as the watcher returns them.
	quota := mapError(fmt.Errorf("add a watch: %w", syscall.ENOSPC), "the path cannot be watched")
	if !errors.As(quota, &ce) || ce.Code != errcode.QuotaExceeded || !strings.Contains(ce.Reason, "max_user_watches") {
		t.Fatalf("ENOSPC: %v", quota)
	}
	other := mapError(&os.PathError{Op: "open", Path: f.root.Path, Err: syscall.EACCES}, "the path cannot be watched")
	if !errors.As(other, &ce) || ce.Code != errcode.IOError || strings.Contains(ce.Reason, f.root.Path) {
		t.Fatalf("EACCES: %v", other)
	}
}

func BenchmarkSubscribe10kDirs(b *testing.B) {
	f := newFixture(b)
	const top, per = 100, 99 // 100 + 100*99 = 10,000 directories below the root
	for i := range top {
		for j := range per {
			f.mkdir(fmt.Sprintf("d%03d/e%03d", i, j))
		}
	}
	h := newHub(b)
	b.ReportAllocs()
	var closing time.Duration
	n := 0
	for b.Loop() {
		s, err := h.Subscribe(f.path(""), true, nil, func(Event) {})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		start := time.Now()
		s.Close()
		closing += time.Since(start)
		n++
		b.StartTimer()
	}
	b.ReportMetric(float64(closing.Milliseconds())/float64(n), "close-ms/op")
	h.mu.Lock()
	left := len(h.dirs)
	h.mu.Unlock()
	if left != 0 {
		b.Fatalf("%d watches left after Close", left)
	}
}

// TestReplacedRootIsRefused: a root directory replaced after it was
// resolved (moved away, and a link to another tree or another directory
// put in its place) is refused when the Hub first opens it, with an error
// naming the mount, and nothing is watched. A root the Hub opened before
// the replacement stays the directory it opened.
func TestReplacedRootIsRefused(t *testing.T) {
	t.Parallel()
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	replace := func(t *testing.T, f fixture, with func(dir string) error) string {
		t.Helper()
		moved := f.root.Path + ".moved"
		if err := os.Rename(f.root.Path, moved); err != nil {
			t.Fatal(err)
		}
		if err := with(f.root.Path); err != nil {
			t.Fatal(err)
		}
		return moved
	}
	replacements := map[string]func(dir string) error{
		"link to another tree": func(dir string) error { return os.Symlink(outside, dir) },
		"another directory": func(dir string) error {
			return os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		},
	}
	for name, with := range replacements {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.mkdir("sub")
			replace(t, f, with)
			h := newHub(t)
			for _, rel := range []string{"", "sub"} {
				_, err := h.Subscribe(f.path(rel), true, nil, func(Event) {})
				var ce *errcode.Error
				if !errors.As(err, &ce) || ce.Code != errcode.IOError || !strings.Contains(ce.Reason, `"proj"`) {
					t.Fatalf("Subscribe(%q) of a replaced root: err = %v, want IO_ERROR naming the mount", rel, err)
				}
				if strings.Contains(ce.Reason, f.root.Path) {
					t.Fatalf("the reason names a host path: %q", ce.Reason)
				}
			}
			h.mu.Lock()
			n := len(h.dirs)
			h.mu.Unlock()
			if n != 0 || watchedDir(t, h, outside) {
				t.Fatalf("%d directories are watched in a replaced root", n)
			}
		})
	}

	t.Run("opened before", func(t *testing.T) {
		f := newFixture(t)
		h := newHub(t)
		_, first := subscribe(t, h, f.path(""), false) // opens the root's handle
		moved := replace(t, f, replacements["link to another tree"])
		// Moved away, the first watch's target is gone; once that is
		// seen, no event of the move is left for the next watch.
		first.until(t, key("", Deleted))
		_, k := subscribe(t, h, f.path(""), false)
		if err := os.WriteFile(filepath.Join(outside, "outside.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(moved, "inside.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if before := k.until(t, key("inside.txt", Created)); len(before) > 0 {
			t.Fatalf("events of another tree: %v", keys(before))
		}
		if watchedDir(t, h, outside) {
			t.Fatal("the tree the root's path leads to now is watched")
		}
	})
}

// makeDeep makes a chain of depth directories named "d" below directory
// rel of f, each through its parent's handle (the host path of the deepest
// is near the system's path limit), and returns the Rel of the deepest and
// an os.Root on it.
func makeDeep(t *testing.T, f fixture, rel string, depth int) (string, *os.Root) {
	t.Helper()
	f.mkdir(rel)
	cur, err := os.OpenRoot(f.abs(rel))
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := cur.Mkdir("d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := cur.OpenRoot("d")
		if err != nil {
			t.Fatal(err)
		}
		_ = cur.Close()
		cur = next
	}
	t.Cleanup(func() { _ = cur.Close() })
	return rel + strings.Repeat("/d", depth), cur
}

// TestDeepSetupLeavesOtherWatchesRunning: while a recursive watch of a
// 2,000-deep tree is being set up (held halfway by a hook in its walk),
// another subscription's event is delivered and another Subscribe returns;
// the deep watch then completes and reports a change at the bottom.
func TestDeepSetupLeavesOtherWatchesRunning(t *testing.T) {
	t.Parallel()
	const depth = 2000
	f := newFixture(t)
	f.mkdir("other")
	f.mkdir("third")
	deepest, bottom := makeDeep(t, f, "deep", depth)
	holdAt := "deep" + strings.Repeat("/d", depth/2)

	reached, release := make(chan struct{}), make(chan struct{})
	var reachOnce, releaseOnce sync.Once
	h := newHub(t, withBeforeAdd(func(rel string) {
		if rel == holdAt {
			reachOnce.Do(func() { close(reached) })
			<-release
		}
	}))
	_, other := subscribe(t, h, f.path("other"), false)
	// Runs first among the cleanups, even when the test fails: a Close
	// before it could wait for the held walk.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	type result struct {
		s   *Subscription
		err error
	}
	deepDone := make(chan result, 1)
	deepSink := newSink()
	go func() {
		s, err := h.Subscribe(f.path("deep"), true, nil, deepSink.emit)
		deepDone <- result{s, err}
	}()
	select {
	case <-reached:
	case r := <-deepDone:
		t.Fatalf("the deep setup ended before its hold: %v", r.err)
	case <-time.After(waitLimit):
		t.Fatal("the deep setup never reached its hold")
	}

	// The deep setup is held: the others go on.
	f.write("other/f.txt", "x")
	other.until(t, key("other/f.txt", Created))
	thirdDone := make(chan error, 1)
	go func() {
		s, err := h.Subscribe(f.path("third"), false, nil, func(Event) {})
		if err == nil {
			s.Close()
		}
		thirdDone <- err
	}()
	select {
	case err := <-thirdDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("another Subscribe waited for the deep setup")
	}
	select {
	case <-deepDone:
		t.Fatal("the deep setup ended while held")
	default:
	}

	releaseOnce.Do(func() { close(release) })
	var r result
	select {
	case r = <-deepDone:
	case <-time.After(waitLimit):
		t.Fatal("the deep setup did not end")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(r.s.Close)
	if !watched(h, deepest) {
		t.Fatal("the deepest directory is not watched")
	}
	if err := bottom.WriteFile("f.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	deepSink.until(t, key(deepest+"/f.txt", Created))
}

// TestCloseDuringWalk: a subscription closed while the walk of a directory
// created after it is held (a hook, without the Hub's lock) closes at once,
// and the walk, let go, adds no watch and reports nothing.
func TestCloseDuringWalk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reached, release := make(chan struct{}), make(chan struct{})
	var reachOnce, releaseOnce sync.Once
	h := newHub(t, withBeforeAdd(func(rel string) {
		if rel == "new" {
			reachOnce.Do(func() { close(reached) })
			<-release
		}
	}))
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	k := newSink()
	s, err := h.Subscribe(f.path(""), true, nil, k.emit)
	if err != nil {
		t.Fatal(err)
	}
	f.mkdir("new")
	select {
	case <-reached:
	case <-time.After(waitLimit):
		t.Fatal("the new directory was never walked")
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("Close waited for the held walk")
	}
	releaseOnce.Do(func() { close(release) })
	deadline := time.Now().Add(waitLimit)
	for {
		h.mu.Lock()
		left, walking := len(h.dirs), s.walking
		h.mu.Unlock()
		if left == 0 && !walking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches left after Close (walking: %v)", left, walking)
		}
		time.Sleep(time.Millisecond)
	}
	f.write("new/f.txt", "x")
	_, witness := subscribe(t, h, f.path(""), false)
	f.write("sentinel.txt", "s")
	witness.until(t, key("sentinel.txt", Created))
	k.empty(t, "after Close")
}
