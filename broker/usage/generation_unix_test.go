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
