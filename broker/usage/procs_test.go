// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package usage_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/fsbroker/fsbroker/broker/usage"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// The helper process: this test binary, re-executed to play a role
// (helperproc), adds to the count of shared-server in DIR at day0 as
// another broker process would, and prints every total it gets, one a
// line:
//
//	adds DIR ADDS GOROUTINES  waits for a line on stdin, then makes ADDS
//	                          Adds on each of GOROUTINES goroutines and
//	                          prints their totals when all are done
//	loop DIR                  prints "ready", then adds 1 until killed,
//	                          printing each total at once
//	step DIR                  for each line N on stdin, adds N and prints
//	                          the total once the Add returned
func TestMain(m *testing.M) {
	os.Exit(helperproc.Run(m, helperproc.Roles{"adds": addsRole, "loop": loopRole, "step": stepRole}))
}

// stepRole adds what the test sends, one Add a line.
func stepRole(args []string) error {
	s, err := openRoleStore(args)
	if err != nil {
		return err
	}
	defer s.Close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.ParseInt(in.Text(), 10, 64)
		if err != nil {
			return err
		}
		total, err := s.Add(helperServer, day0, n)
		if err != nil {
			return err
		}
		fmt.Println(total)
	}
	return in.Err()
}

// openRoleStore opens the store of a role whose only argument is its
// directory.
func openRoleStore(args []string) (*usage.Store, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want DIR, got %q", args)
	}
	return usage.Open(args[0])
}

// helperServer is the server whose count the helpers add to.
const helperServer = "shared-server"

// loopRole adds 1 until killed.
func loopRole(args []string) error {
	s, err := openRoleStore(args)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println("ready")
	for {
		total, err := s.Add(helperServer, day0, 1)
		if err != nil {
			return err
		}
		fmt.Println(total)
	}
}

// addsRole makes ADDS Adds on each of GOROUTINES goroutines once the test
// says go.
func addsRole(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want DIR ADDS GOROUTINES, got %q", args)
	}
	adds, err1 := strconv.Atoi(args[1])
	goroutines, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	s, err := usage.Open(args[0])
	if err != nil {
		return err
	}
	defer s.Close()
	// Start with the parent: wait for its line on stdin.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	var mu sync.Mutex
	var out strings.Builder
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				total, err := s.Add(helperServer, day0, 1)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fmt.Fprintln(&out, total)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	_, err = io.WriteString(os.Stdout, out.String())
	return err
}

// parseTotals parses the totals a helper printed.
func parseTotals(t *testing.T, lines []string) []int64 {
	t.Helper()
	totals := make([]int64, 0, len(lines))
	for _, line := range lines {
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("helper printed %q", line)
		}
		totals = append(totals, n)
	}
	return totals
}

// TestTwoProcesses: two helper processes and this one add to one server's
// count at the same time; every Add returns a distinct total and none is
// lost.
func TestTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	const procs, goroutines, adds = 2, 4, 40
	children := make([]*helperproc.Proc, procs)
	for i := range children {
		children[i] = helperproc.Start(t, helperproc.Command("adds", dir, strconv.Itoa(adds), strconv.Itoa(goroutines)))
	}
	s := open(t, dir)
	// The children have started their Stores by now or shortly; all start
	// adding together.
	for _, c := range children {
		c.Send("go")
	}
	var mu sync.Mutex
	var totals []int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				total, err := s.Add(helperServer, day0, 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				totals = append(totals, total)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, c := range children {
		got := parseTotals(t, c.Stop())
		if len(got) != goroutines*adds {
			t.Fatalf("helper %d reported %d Adds, want %d", i, len(got), goroutines*adds)
		}
		totals = append(totals, got...)
	}
	const want = (procs + 1) * goroutines * adds
	if len(totals) != want {
		t.Fatalf("%d Adds, want %d", len(totals), want)
	}
	checkSequence(t, helperServer, totals)
	if got := today(t, s, helperServer, day0); got != want {
		t.Fatalf("Today is %d, want %d", got, want)
	}
}

// TestOtherProcessSeenAtOnce attacks the cached count: another broker
// process on the same directory writes, and this process's very next Today
// (with a maximum staleness of an hour, so that no reread by age can hide a
// count that is not checked) must include those bytes, or a daily quota
// would be under-counted. Each Add of the other process replaces the file
// with a count of the same length, in the same second, the case a stat by
// size and time alone would miss.
func TestOtherProcessSeenAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, usage.WithMaxStale(time.Hour))
	other := helperproc.Start(t, helperproc.Command("step", dir))
	var want int64
	for i := range 40 {
		// Today caches the count; the other process adds; Today again.
		if got := today(t, s, helperServer, day0); got != want {
			t.Fatalf("step %d: Today is %d, want %d", i, got, want)
		}
		n := int64(1)
		if i == 0 {
			n = 100 // then every count has three digits
		}
		other.Send(strconv.FormatInt(n, 10))
		line := other.Line()
		total, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("helper printed %q", line)
		}
		want += n
		if total != want {
			t.Fatalf("step %d: the other process's Add returned %d, want %d", i, total, want)
		}
		if got := today(t, s, helperServer, day0); got != want {
			t.Fatalf("step %d: after the other process's Add returned, Today is %d, want %d: its write is not counted", i, got, want)
		}
	}
}

// TestKilledWriter: a process killed (SIGKILL on unix) at arbitrary points
// of its Adds leaves a count that is the last total it reported or the one
// after (the Add in flight), never a torn or lost file; its leftover
// temporary files are never read and the next Open removes them.
func TestKilledWriter(t *testing.T) {
	dir := t.TempDir()
	var acked int64
	leftovers, inFlight := 0, 0 // rounds killed mid-write, and after a rename not yet reported
	for round := range 12 {
		h := helperproc.Start(t, helperproc.Command("loop", dir))
		h.Expect("ready")
		var printed []string
		for range 1 + round%5 {
			printed = append(printed, h.Line())
		}
		time.Sleep(time.Duration(round%4) * 500 * time.Microsecond)
		printed = append(printed, h.Kill()...) // what it printed before it died
		if totals := parseTotals(t, printed); len(totals) > 0 {
			acked = totals[len(totals)-1]
		}

		if des, _ := os.ReadDir(dir); slices.ContainsFunc(des, func(de os.DirEntry) bool { return strings.HasPrefix(de.Name(), ".tmp-") }) {
			leftovers++
		}
		s := open(t, dir, usage.WithMaxStale(0))
		got, err := s.Today(helperServer, day0)
		if err != nil {
			t.Fatalf("round %d: after the kill: %v", round, err)
		}
		if got != acked && got != acked+1 {
			t.Fatalf("round %d: the count is %d; the killed process last reported %d", round, got, acked)
		}
		if got == acked+1 {
			inFlight++
		}
		acked = got
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".tmp-") {
				t.Fatalf("round %d: Open left %s", round, de.Name())
			}
		}
		_ = s.Close()
	}
	if acked == 0 {
		t.Fatal("the helper never added")
	}
	t.Logf("12 kills: %d left a temporary file, %d landed an Add not yet reported", leftovers, inFlight)
}

// lockFile takes a count's lock as another process would, and returns its
// release.
func lockFile(t *testing.T, path string) (release func()) {
	t.Helper()
	fl := flock.New(path)
	if err := fl.Lock(); err != nil {
		t.Fatal(err)
	}
	return func() { _ = fl.Unlock() }
}

// TestLockWait: a lock held by another process beyond the lock wait makes
// Today and Add fail (closed), not wait forever.
func TestLockWait(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, usage.WithLockWait(50*time.Millisecond), usage.WithMaxStale(0))
	add(t, s, "srv", day0, 5)
	release := lockFile(t, filepath.Join(dir, strings.TrimSuffix(filepath.Base(s.Path("srv")), ".json")+".lock"))
	start := time.Now()
	if _, err := s.Add("srv", day0, 1); err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("Add under a held lock: %v", err)
	}
	if _, err := s.Today("srv", day0); err == nil {
		t.Fatal("Today under a held lock succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("waited %v", d)
	}
	release()
	// The failed Add's byte is kept and written with the next Add.
	if got := add(t, s, "srv", day0, 1); got != 7 {
		t.Fatalf("Add after the lock was released returned %d, want 7", got)
	}
}
