// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// lockWaits records what executor.WithLockWaits tells.
type lockWaits struct {
	mu    sync.Mutex
	waits []lockWait
}

type lockWait struct {
	d    time.Duration
	code errcode.Code // "" when the locks were got
}

func (l *lockWaits) waited(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = append(l.waits, lockWait{d: d, code: errcode.Of(err)})
}

func (l *lockWaits) take() []lockWait {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.waits
	l.waits = nil
	return out
}

// TestLockWaitsAreTold: an operation that gets its locks at once is not
// told of; one that waits for a lock held in this process, or by another
// process (the flock), is told how long it waited and how it ended: a
// conflict when the lock wait ran out, nothing when it got the lock.
func TestLockWaitsAreTold(t *testing.T) {
	var seen lockWaits
	f := newFixture(t, executor.WithLockWait(100*time.Millisecond), executor.WithLockWaits(seen.waited))
	f.writeFile(t, "f", "old")
	writeWith := func(x *executor.Executor) error {
		_, err := x.Write(ctxT(t), f.resolve(t, "proj/f", true), []byte("new"), executor.WriteOptions{Create: true})
		return err
	}
	write := func() error { return writeWith(f.x) }
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if got := seen.take(); len(got) != 0 {
		t.Fatalf("an operation that did not wait was told of: %+v", got)
	}

	unlock, err := f.x.Lock(context.Background(), f.path(t, "proj/f"))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, write(), errcode.ConcurrencyConflict, "")
	unlock()
	if got := seen.take(); len(got) != 1 || got[0].code != errcode.ConcurrencyConflict || got[0].d <= 0 {
		t.Fatalf("a wait for a lock held in the process was told as %+v, want one conflict that took time", got)
	}

	h := helperproc.Start(t, exec.Command(writerPath(t), "-root", f.dir, "-state", f.state, "-file", "f", "-hold"))
	h.Expect("locked")
	wantCode(t, write(), errcode.ConcurrencyConflict, "")
	if rest := h.Stop(); len(rest) != 0 {
		t.Fatalf("the writer said %q", rest)
	}
	if got := seen.take(); len(got) != 1 || got[0].code != errcode.ConcurrencyConflict || got[0].d <= 0 {
		t.Fatalf("a wait for another process's flock was told as %+v, want one conflict that took time", got)
	}

	// A wait that ends with the lock: released while the writer (another
	// executor on the state directory, waiting up to a minute) waits; it
	// must have begun to wait: tried again with longer holds, a few times.
	patient := newExecutor(t, f.state, executor.WithLockWait(time.Minute), executor.WithLockWaits(seen.waited))
	for hold := 20 * time.Millisecond; ; hold *= 2 {
		unlock, err := f.x.Lock(context.Background(), f.path(t, "proj/f"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- writeWith(patient) }()
		time.Sleep(hold)
		unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := seen.take()
		if len(got) == 1 && got[0].code == "" && got[0].d > 0 {
			break
		}
		if len(got) != 0 || hold > 2*time.Second {
			t.Fatalf("a wait that got the lock was told as %+v, want one without an error", got)
		}
	}
}
