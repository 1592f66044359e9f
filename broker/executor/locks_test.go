// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// TestLockHeldIsConflict: a lock held past the lock wait is
// CONCURRENCY_CONFLICT for every operation that locks, and nothing changes;
// once released, the same operations succeed.
func TestLockHeldIsConflict(t *testing.T) {
	f := newFixture(t, executor.WithLockWait(100*time.Millisecond))
	f.writeFile(t, "f", "old")
	f.writeFile(t, "g", "g")
	p := f.path(t, "proj/f")
	held := make(chan func())
	go func() { // held by another goroutine, as by another request
		unlock, err := f.x.Lock(context.Background(), p)
		if err != nil {
			t.Error(err)
			close(held)
			return
		}
		held <- unlock
	}()
	unlock, ok := <-held
	if !ok {
		t.FailNow()
	}
	ctx := ctxT(t)
	_, err := f.x.Write(ctx, f.resolve(t, "proj/f", true), []byte("new"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	wantCode(t, f.delete(ctx, f.resolve(t, "proj/f", false), false), errcode.ConcurrencyConflict, "")
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/g", false), f.resolve(t, "proj/f", false), true), errcode.ConcurrencyConflict, "")
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/f", false), f.resolve(t, "proj/h", false), false), errcode.ConcurrencyConflict, "")
	// Create locks the path it creates.
	if err := os.Remove(f.host("f")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.x.Create(ctx, f.resolve(t, "proj/f", false), false, false), errcode.ConcurrencyConflict, "")
	if _, err := os.Lstat(f.host("f")); !os.IsNotExist(err) {
		t.Fatal("a create under a held lock made the file")
	}
	f.writeFile(t, "f", "old")
	noTemps(t, f.dir)
	// Other paths are not blocked.
	f.write(t, "proj/g", "free")
	unlock()
	f.write(t, "proj/f", "new")
	if f.readHost(t, "f") != "new" {
		t.Fatal("write after release")
	}
}

// TestLockDeadlineIsTimeout: when the operation's own deadline passes
// before the lock wait does, the error is TIMEOUT, not a conflict.
func TestLockDeadlineIsTimeout(t *testing.T) {
	f := newFixture(t, executor.WithLockWait(time.Minute))
	f.writeFile(t, "f", "old")
	unlock, err := f.x.Lock(context.Background(), f.path(t, "proj/f"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = f.x.Write(ctx, f.resolve(t, "proj/f", true), []byte("new"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.Timeout, "")
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	_, err = f.x.Lock(ctx2, f.path(t, "proj/f"))
	wantCode(t, err, errcode.Timeout, "")
	noTemps(t, f.dir)
	if f.readHost(t, "f") != "old" {
		t.Fatal("the file changed")
	}
}

// TestLocksAcrossExecutors: two executors sharing a state directory exclude
// each other through the sidecar flock (each has its own in-process table);
// executors with different state directories do not.
func TestLocksAcrossExecutors(t *testing.T) {
	f := newFixture(t, executor.WithLockWait(100*time.Millisecond))
	f.writeFile(t, "f", "old")
	same := newExecutor(t, f.state, executor.WithLockWait(100*time.Millisecond))
	p := f.path(t, "proj/f")
	for _, dir := range []struct{ a, b *executor.Executor }{{f.x, same}, {same, f.x}} {
		unlock, err := dir.a.Lock(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := dir.b.Resolve(context.Background(), p, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dir.b.Write(ctxT(t), tg, []byte("new"), executor.WriteOptions{Create: true})
		e := wantCode(t, err, errcode.ConcurrencyConflict, "")
		if !strings.Contains(e.Reason, "another broker process") {
			t.Errorf("reason %q: the refusal did not come from the flock", e.Reason)
		}
		unlock()
	}
	// A different state directory is another set of locks.
	apart := newExecutor(t, t.TempDir(), executor.WithLockWait(100*time.Millisecond))
	unlock, err := f.x.Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := apart.Resolve(context.Background(), p, true)
	if _, err := apart.Write(ctxT(t), tg, []byte("apart"), executor.WriteOptions{Create: true}); err != nil {
		t.Fatalf("an executor with another state directory was blocked: %v", err)
	}
	unlock()
	// The lock files live in the state directory, never next to the file.
	if ents, err := os.ReadDir(f.state + "/locks"); err != nil || len(ents) == 0 {
		t.Fatalf("no lock files in the state directory: %v", err)
	}
	if names := dirEntries(t, f.dir); len(names) != 1 {
		t.Fatalf("files next to the target: %v", names)
	}
}

// TestLockAcrossProcesses: a lock held by another process (internal/writer
// -hold) blocks this one until that process lets go, and a process that
// dies releases its locks.
func TestLockAcrossProcesses(t *testing.T) {
	bin := writerPath(t)
	f := newFixture(t, executor.WithLockWait(100*time.Millisecond))
	f.writeFile(t, "f", "old")
	for _, end := range []string{"release", "kill"} {
		h := helperproc.Start(t, exec.Command(bin, "-root", f.dir, "-state", f.state, "-file", "f", "-hold"))
		h.Expect("locked")
		_, err := f.x.Write(ctxT(t), f.resolve(t, "proj/f", true), []byte("blocked"), executor.WriteOptions{Create: true})
		wantCode(t, err, errcode.ConcurrencyConflict, "")
		if end == "release" {
			if rest := h.Stop(); len(rest) != 0 {
				t.Fatalf("the writer said %q", rest)
			}
		} else {
			h.Kill()
		}
		f.write(t, "proj/f", end)
		if f.readHost(t, "f") != end {
			t.Fatal("write after the other process let go")
		}
	}
}

// TestRenameCrossedNoDeadlock: two goroutines rename a->b and b->a 200
// times each, concurrently; each rename locks both paths. Errors are
// allowed outcomes (the source is gone, the target exists); a deadlock is
// not. Exactly one of the two names exists at the end.
func TestRenameCrossedNoDeadlock(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "a", "content")
	allowed := func(err error) bool {
		var e *errcode.Error
		if err == nil {
			return true
		}
		if !errors.As(err, &e) {
			return false
		}
		switch e.Code {
		case errcode.FileNotFound, errcode.ConcurrencyConflict:
			return true
		case errcode.IOError:
			return e.Details["errno"] == "EEXIST"
		}
		return false
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var okCount [2]int
	for g, pair := range [][2]string{{"proj/a", "proj/b"}, {"proj/b", "proj/a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				from, err := f.x.Resolve(context.Background(), f.path(t, pair[0]), false)
				if err != nil {
					errs <- err
					return
				}
				to, err := f.x.Resolve(context.Background(), f.path(t, pair[1]), false)
				if err != nil {
					errs <- err
					return
				}
				err = f.x.Rename(context.Background(), from, to, i%2 == 0)
				if !allowed(err) {
					errs <- err
					return
				}
				if err == nil {
					okCount[g]++
				}
				if i%16 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	within(t, 30*time.Second, "400 crossed renames", wg.Wait)
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
	_, errA := os.Lstat(f.host("a"))
	_, errB := os.Lstat(f.host("b"))
	if (errA == nil) == (errB == nil) {
		t.Fatalf("a: %v, b: %v: want exactly one", errA, errB)
	}
	if okCount[0]+okCount[1] == 0 {
		t.Fatal("no rename succeeded")
	}
	t.Logf("renames that succeeded: a->b %d, b->a %d", okCount[0], okCount[1])
}

// TestLockManyPathsAnyOrder: Lock of the same paths in opposite orders from
// many goroutines never deadlocks (locks are taken in sorted order), and
// duplicates in one call are fine.
func TestLockManyPathsAnyOrder(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.path(t, "proj/a"), f.path(t, "proj/b"), f.path(t, "proj/c")
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				var unlock func()
				var err error
				switch (g + i) % 3 {
				case 0:
					unlock, err = f.x.Lock(context.Background(), a, b, c)
				case 1:
					unlock, err = f.x.Lock(context.Background(), c, b, a)
				default:
					unlock, err = f.x.Lock(context.Background(), b, a, c, a)
				}
				if err != nil {
					t.Error(err)
					return
				}
				unlock()
			}
		}()
	}
	within(t, 30*time.Second, "600 multi-path locks", wg.Wait)
}
