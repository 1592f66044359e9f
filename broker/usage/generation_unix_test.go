// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package usage_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/usage"
)

// TestShrunkGenerationFileIsNotACrash attacks the mapped generation file:
// another program truncates it under two running Stores. Reading or bumping
// a counter then faults (SIGBUS), which without the recovery kills the
// broker; with it, both Stores fall back to checking the count file and
// still see each other's writes at once.
func TestShrunkGenerationFileIsNotACrash(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, usage.WithMaxStale(time.Hour))
	b := open(t, dir, usage.WithMaxStale(time.Hour))
	want := add(t, a, "srv", day0, 7)
	if got := today(t, b, "srv", day0); got != want {
		t.Fatalf("before the truncation Today is %d, want %d", got, want)
	}
	if err := os.Truncate(filepath.Join(dir, usage.GenerationName), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		want = add(t, a, "srv", day0, int64(i+1))
		if got := today(t, b, "srv", day0); got != want {
			t.Fatalf("after the truncation, Add #%d: the other Store reads %d, want %d", i, got, want)
		}
	}
}

// TestPlantedGenerationLinkIsNotFollowed attacks the generation file's open:
// a symbolic link planted at its name, to a file of the broker's user
// elsewhere. Following it, the Store would grow that file to a page and
// write its counters into it; the link must be refused (the Store then
// checks its counts with a stat) and the file left as it was.
func TestPlantedGenerationLinkIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "notes.txt")
	const content = "the broker must not write here\n"
	if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, usage.GenerationName)); err != nil {
		t.Fatal(err)
	}
	a := open(t, dir, usage.WithMaxStale(time.Hour))
	b := open(t, dir, usage.WithMaxStale(time.Hour))
	today(t, b, "srv", day0)
	for i := range 3 {
		want := add(t, a, "srv", day0, int64(i+1))
		if got := today(t, b, "srv", day0); got != want {
			t.Fatalf("Add #%d: the other Store reads %d, want %d", i, got, want)
		}
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != content {
		t.Fatalf("the link's target now holds %d bytes (%v), want its %d unchanged", len(got), err, len(content))
	}
}

// TestOtherUsersGenerationFileIsNotTrusted attacks the counters through a
// generation file another user owns (planted where the state directory is
// not the broker's alone): that user puts a counter back after another
// Store's Add, so that a Store answering from memory would miss the Add and
// under-count the quota. Such a file must not be mapped. It needs root, to
// give the file to another user.
func TestOtherUsersGenerationFileIsNotTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	dir := t.TempDir()
	gen := filepath.Join(dir, usage.GenerationName)
	if err := os.WriteFile(gen, make([]byte, 4096), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(gen, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	a := open(t, dir, usage.WithMaxStale(time.Hour))
	b := open(t, dir, usage.WithMaxStale(time.Hour))
	before := today(t, a, "srv", day0)
	saved, err := os.ReadFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	want := add(t, b, "srv", day0, 1000)
	if err := os.WriteFile(gen, saved, 0o666); err != nil { // the other user puts the counters back
		t.Fatal(err)
	}
	if got := today(t, a, "srv", day0); got != want {
		t.Fatalf("after the other Store's Add, Today is %d (it was %d), want %d", got, before, want)
	}
}
