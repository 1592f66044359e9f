package usage_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/fsbroker/fsbroker/broker/usage"
)

// The helper process: this test binary, re-executed with helperEnv set,
// runs TestHelperProcess only, which adds to a Store as another broker
// process would and prints every total it gets, one a line.
const (
	helperEnv = "FSBROKER_USAGE_HELPER" // "adds" or "loop"
	dirEnv    = "FSBROKER_USAGE_DIR"
	serverEnv = "FSBROKER_USAGE_SERVER"
	nowEnv    = "FSBROKER_USAGE_NOW" // Unix nanoseconds
	addsEnv   = "FSBROKER_USAGE_ADDS"
	goEnv     = "FSBROKER_USAGE_GOROUTINES"
)

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("run by the multi-process tests only")
	}
	if err := helper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helper(mode string) error {
	s, err := usage.Open(os.Getenv(dirEnv))
	if err != nil {
		return err
	}
	defer s.Close()
	ns, err := strconv.ParseInt(os.Getenv(nowEnv), 10, 64)
	if err != nil {
		return err
	}
	now, server := time.Unix(0, ns), os.Getenv(serverEnv)
	if mode == "loop" { // add 1 until killed, reporting each total at once
		fmt.Println("ready")
		for {
			total, err := s.Add(server, now, 1)
			if err != nil {
				return err
			}
			fmt.Println(total)
		}
	}
	adds, _ := strconv.Atoi(os.Getenv(addsEnv))
	goroutines, _ := strconv.Atoi(os.Getenv(goEnv))
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
				total, err := s.Add(server, now, 1)
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

func helperCmd(t *testing.T, mode, dir string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		helperEnv+"="+mode, dirEnv+"="+dir, serverEnv+"=shared-server",
		nowEnv+"="+strconv.FormatInt(day0.UnixNano(), 10))
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = &testWriter{t: t}
	return cmd
}

// testWriter logs a helper's stderr.
type testWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("helper stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func parseTotals(t *testing.T, out string) []int64 {
	t.Helper()
	var totals []int64
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if line == "" || line == "ready" {
			continue
		}
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
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   strings.Builder
	}
	children := make([]*child, procs)
	for i := range children {
		c := &child{cmd: helperCmd(t, "adds", dir,
			addsEnv+"="+strconv.Itoa(adds), goEnv+"="+strconv.Itoa(goroutines))}
		c.cmd.Stdout = &c.out
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	s := open(t, dir)
	// The children have started their Stores by now or shortly; all start
	// adding together.
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var totals []int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				total, err := s.Add("shared-server", day0, 1)
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
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
		got := parseTotals(t, c.out.String())
		if len(got) != goroutines*adds {
			t.Fatalf("helper %d reported %d Adds, want %d", i, len(got), goroutines*adds)
		}
		totals = append(totals, got...)
	}
	const want = (procs + 1) * goroutines * adds
	if len(totals) != want {
		t.Fatalf("%d Adds, want %d", len(totals), want)
	}
	checkSequence(t, "shared-server", totals)
	if got := today(t, s, "shared-server", day0); got != want {
		t.Fatalf("Today is %d, want %d", got, want)
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
		cmd := helperCmd(t, "loop", dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		var out strings.Builder
		for seen := 0; seen < 1+round%5 && sc.Scan(); {
			if sc.Text() != "ready" {
				seen++
			}
			out.WriteString(sc.Text() + "\n")
		}
		time.Sleep(time.Duration(round%4) * 500 * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() { // what it printed before it died
			out.WriteString(sc.Text() + "\n")
		}
		_ = cmd.Wait()
		if totals := parseTotals(t, out.String()); len(totals) > 0 {
			acked = totals[len(totals)-1]
		}

		if des, _ := os.ReadDir(dir); slices.ContainsFunc(des, func(de os.DirEntry) bool { return strings.HasPrefix(de.Name(), ".tmp-") }) {
			leftovers++
		}
		s := open(t, dir, usage.WithMaxStale(0))
		got, err := s.Today("shared-server", day0)
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
