// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor/internal/swaptest"
)

// swapAttackTime bounds each attack. The code before issue 15 (a watch
// added by host path, its identity checked after) lost to it within about
// a second on a loaded two-core machine; a passing run takes all of it.
const swapAttackTime = 4 * time.Second

// TestSwapAttackSecondProcess: another process (the executor's swapper, in
// mode exchange) swaps root/sub, a directory, with root/sub.link, a link to
// a directory outside the root, in a loop, while
// sub is watched (non-recursively, again and again), or while the root is
// watched recursively (every directory that appears in it is walked and
// watched). Meanwhile a file outside is written over and over. No watch may
// ever land on the outside directory, even for a moment: that file is
// never reported. A sentinel in a witness directory of the root, written
// last, comes after every event before it, so when it is seen any escape
// has shown.
func TestSwapAttackSecondProcess(t *testing.T) {
	const recursiveWatches = 8
	for _, mode := range []struct {
		name  string
		pause time.Duration // between pairs of exchanges
	}{
		// Subscribe after Subscribe on sub.
		{"target", 0},
		// One recursive watch of the root: each exchange makes sub and
		// sub.link appear, and each directory that appears is walked. The
		// pause lets the watch keep up with the swaps.
		{"recursive", 250 * time.Microsecond},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t)
			outside, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			f.mkdir("sub")
			f.mkdir("witness")
			probe := filepath.Join(outside, "probe-0")
			if err := os.WriteFile(probe, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHub(t, WithCoalesce(time.Millisecond))
			_, witness := subscribe(t, h, f.path("witness"), false, Created)

			var escaped atomic.Value // the first event of the outside file
			catch := func(e Event) {
				if strings.HasPrefix(filepath.Base(e.Path.Rel), "probe-") {
					escaped.CompareAndSwap(nil, keyOf(e))
				}
			}
			var subs []*Subscription
			t.Cleanup(func() {
				for _, s := range subs {
					s.Close()
				}
			})

			sw := swaptest.Start(t, "-mode", "exchange", "-name", f.abs("sub"), "-target", outside, "-pause", mode.pause.String())
			// The writer never sleeps: an escape may last only until the
			// next walk of sub, well under a millisecond.
			pf, err := os.OpenFile(probe, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pf.Close()
			writing := make(chan struct{})
			writes := make(chan int)
			go func() {
				n := 0
				for {
					select {
					case <-writing:
						writes <- n
						return
					default:
					}
					if _, err := pf.WriteAt([]byte("x"), 0); err != nil {
						t.Error(err)
					}
					n++
				}
			}()

			attempts, refused := 0, map[errcode.Code]int{}
			deadline := time.Now().Add(swapAttackTime)
			if mode.name == "recursive" {
				// Several watches of the root: each walks sub anew when it
				// appears, so more walks meet a swap.
				for range recursiveWatches {
					s, err := h.Subscribe(f.path(""), true, nil, catch)
					if err != nil {
						t.Fatal(err)
					}
					subs = append(subs, s)
				}
				for time.Now().Before(deadline) && escaped.Load() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			} else {
				for time.Now().Before(deadline) && escaped.Load() == nil {
					attempts++
					s, err := h.Subscribe(f.path("sub"), false, nil, catch)
					if err != nil {
						var ce *errcode.Error
						if !errors.As(err, &ce) {
							t.Fatalf("Subscribe: %v", err)
						}
						refused[ce.Code]++
						continue
					}
					subs = append(subs, s)
				}
			}
			swaps := sw.Stop()
			close(writing)
			written := <-writes
			f.write("witness/sentinel", "")
			witness.until(t, key("witness/sentinel", Created))
			t.Logf("%d exchanges, %d writes outside, %d subscriptions (refused: %v)", swaps, written, attempts, refused)
			if e := escaped.Load(); e != nil {
				t.Fatalf("a file outside the root was reported: %q", e)
			}
			if watchedDir(t, h, outside) {
				t.Fatal("the directory outside the root is watched")
			}
			if swaps == 0 || written == 0 {
				t.Fatal("the attack did not run")
			}
		})
	}
}
