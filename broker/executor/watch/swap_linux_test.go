//go:build linux

package watch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// The swapper: this test binary, run again with swapperEnv set, runs
// TestSwapperProcess only, which exchanges the two entries named by
// swapperA and swapperB (a directory and a link out of the root) with
// renameat2(RENAME_EXCHANGE) until its stdin closes: twice in a row (the
// link stands at swapperA for a moment), then it sleeps swapperPause (a
// duration; none when empty) and starts again. It ends with the directory
// at swapperA and prints "swaps N".
const (
	swapperEnv   = "FSBROKER_WATCH_SWAPPER"
	swapperA     = "FSBROKER_WATCH_SWAP_A"
	swapperB     = "FSBROKER_WATCH_SWAP_B"
	swapperPause = "FSBROKER_WATCH_SWAP_PAUSE"
)

func TestSwapperProcess(t *testing.T) {
	if os.Getenv(swapperEnv) == "" {
		t.Skip("run by the swap attack tests only")
	}
	a, b := os.Getenv(swapperA), os.Getenv(swapperB)
	var pause time.Duration
	if p := os.Getenv(swapperPause); p != "" {
		var err error
		if pause, err = time.ParseDuration(p); err != nil {
			fmt.Fprintln(os.Stderr, "swapper:", err)
			os.Exit(1)
		}
	}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	fmt.Println("ready")
	n := 0
	for running := true; running; {
		select {
		case <-stop:
			running = false
		default:
		}
		for range 2 {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				fmt.Fprintln(os.Stderr, "swapper:", err)
				os.Exit(1)
			}
			n++
		}
		// A spin, not a sleep: a sleep this short takes a millisecond.
		for start := time.Now(); time.Since(start) < pause; {
		}
	}
	fmt.Printf("swaps %d\n", n)
	os.Exit(0)
}

// startSwapper starts the swapper on a and b, pausing between pairs of
// exchanges; the returned function stops it and returns how many exchanges
// it made.
func startSwapper(t *testing.T, a, b string, pause time.Duration) (stop func() int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSwapperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), swapperEnv+"=1", swapperA+"="+a, swapperB+"="+b, swapperPause+"="+pause.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the swapper did not start: %q, stderr %q", lines.Text(), stderr.String())
	}
	stopped := false
	swaps := 0
	stop = func() int {
		if stopped {
			return swaps
		}
		stopped = true
		_ = stdin.Close()
		var last string
		for lines.Scan() {
			last = lines.Text()
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the swapper: %v, stderr %q", err, stderr.String())
		}
		if _, err := fmt.Sscanf(last, "swaps %d", &swaps); err != nil {
			t.Fatalf("the swapper said %q", last)
		}
		return swaps
	}
	t.Cleanup(func() { stop() })
	return stop
}

// swapAttackTime bounds each attack. The code before issue 15 (a watch
// added by host path, its identity checked after) lost to it within about
// a second on a loaded two-core machine; a passing run takes all of it.
const swapAttackTime = 4 * time.Second

// TestSwapAttackSecondProcess: another process swaps root/sub, a directory,
// with root/alt, a link to a directory outside the root, in a loop, while
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
		// alt appear, and each directory that appears is walked. The
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
			if err := os.Symlink(outside, f.abs("alt")); err != nil {
				t.Fatal(err)
			}
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

			stopSwapper := startSwapper(t, f.abs("sub"), f.abs("alt"), mode.pause)
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
			swaps := stopSwapper()
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
