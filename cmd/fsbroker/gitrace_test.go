// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Issue 15 review (item 1): the recursive delete of a directory is decided
// again with the entries it holds (no .git may be carried along), but the
// delete itself is os.Root.RemoveAll after that check: another local process
// that moves .git into the directory in between has the broker destroy it.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecursiveDeleteNeverDestroysAGitMovedIn: the test process, a second
// process beside the broker, keeps moving proj/.git into proj/victim and
// back while the server deletes proj/victim recursively, round after round.
// A .git is never destroyed: each delete is refused, or deletes a victim
// without it.
func TestRecursiveDeleteNeverDestroysAGitMovedIn(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	proj := filepath.Join(base, "proj")
	p := startBroker(t, "", "stdio", "--root", proj+":rw", "--state-dir", filepath.Join(base, "state"))
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	p.handshake("2025-11-25")
	git, inVictim := filepath.Join(proj, ".git"), filepath.Join(proj, "victim", ".git")
	deadline := time.Now().Add(5 * time.Second)
	deleted, destroyed := 0, 0
	for round := 0; round < 400 && time.Now().Before(deadline); round++ {
		writeTree(t, proj, map[string]string{".git/HEAD": "ref: refs/heads/main\n", "victim/f.txt": "x"})
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				if os.Rename(git, inVictim) == nil {
					_ = os.Rename(inVictim, git)
				}
			}
		}()
		r := p.Call(round+1, "files/delete", map[string]any{"path": "proj/victim", "recursive": true})
		stop.Store(true)
		<-done
		if r.Error == nil {
			deleted++
		}
		_, errOut := os.Lstat(git)
		_, errIn := os.Lstat(inVictim)
		if errors.Is(errOut, fs.ErrNotExist) && errors.Is(errIn, fs.ErrNotExist) {
			destroyed++
		}
		_ = os.RemoveAll(filepath.Join(proj, "victim"))
	}
	t.Logf("%d deletes done, %d destroyed a .git", deleted, destroyed)
	if deleted == 0 {
		t.Fatal("no delete was done: the test tested nothing")
	}
	if destroyed > 0 {
		t.Fatalf("a recursive delete destroyed a .git moved into the directory after its check, %d times", destroyed)
	}
}
