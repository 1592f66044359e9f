// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// flockRetry is how often a held cross-process lock is tried again.
const flockRetry = 2 * time.Millisecond

// lockTable is the in-process front of the cross-process locks: one
// exclusive lock per key, waitable with a deadline.
type lockTable struct {
	mu   sync.Mutex
	keys map[string]*keyLock
}

type keyLock struct {
	slot chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters; the entry is dropped at zero
}

func newLockTable() *lockTable { return &lockTable{keys: make(map[string]*keyLock)} }

// acquire takes key's lock, waiting until ctx ends; since is when it began
// to wait, zero when it did not.
func (lt *lockTable) acquire(ctx context.Context, key string) (release func(), since time.Time, err error) {
	lt.mu.Lock()
	kl := lt.keys[key]
	if kl == nil {
		kl = &keyLock{slot: make(chan struct{}, 1)}
		lt.keys[key] = kl
	}
	kl.refs++
	lt.mu.Unlock()
	drop := func() {
		lt.mu.Lock()
		if kl.refs--; kl.refs == 0 {
			delete(lt.keys, key)
		}
		lt.mu.Unlock()
	}
	release = func() { <-kl.slot; drop() }
	select {
	case kl.slot <- struct{}{}:
		return release, time.Time{}, nil
	default: // held: wait for it
	}
	since = time.Now()
	select {
	case kl.slot <- struct{}{}:
		return release, since, nil
	case <-ctx.Done():
		drop()
		return nil, since, ctx.Err()
	}
}

// lockBucket names the lock of a canonical path: the first 16 bits of a
// SHA-256 of its root's directory and its path inside the root. Paths share
// 65,536 lock files, so the state directory stays bounded however many
// paths a server touches; two paths in one bucket only wait for each other.
func lockBucket(p canon.Path) string {
	sum := sha256.Sum256([]byte(p.Root.Path + "\x00" + p.Rel))
	return hex.EncodeToString(sum[:2])
}

// lock takes the exclusive locks of paths, by bucket in sorted order so that
// two operations never deadlock: first the in-process lock, then a flock on
// a sidecar file in the state directory, named by the bucket and never
// deleted (an atomic write replaces the target's inode,
// so the target itself cannot carry the lock). A lock not obtained within
// the lock wait is CONCURRENCY_CONFLICT; an operation whose own deadline
// passes first is TIMEOUT.
func (x *Executor) lock(ctx context.Context, paths ...canon.Path) (unlock func(), err error) {
	keys := make([]string, 0, len(paths))
	for _, p := range paths {
		keys = append(keys, lockBucket(p))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)

	waitCtx, cancel := context.WithTimeout(ctx, x.lockWait)
	defer cancel()
	var (
		releases []func()
		waited   time.Duration // how long the locks were waited for
	)
	unlockAll := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	for _, key := range keys {
		release, since, err := x.lockOne(waitCtx, key)
		if !since.IsZero() {
			waited += time.Since(since)
		}
		if err != nil {
			unlockAll()
			if ctx.Err() != nil {
				err = deadline(ctx)
			}
			x.toldLockWait(waited, err)
			return nil, err
		}
		releases = append(releases, release)
	}
	x.toldLockWait(waited, nil)
	return unlockAll, nil
}

// toldLockWait tells WithLockWaits' function of a wait for locks, if there
// was one.
func (x *Executor) toldLockWait(waited time.Duration, err error) {
	if waited > 0 && x.lockWaited != nil {
		x.lockWaited(waited, err)
	}
}

// lockOne takes the lock of key: in this process, then the flock. since is
// when it began to wait for one that was held, zero when it did not.
func (x *Executor) lockOne(ctx context.Context, key string) (release func(), since time.Time, err error) {
	releaseLocal, since, err := x.locks.acquire(ctx, key)
	if err != nil {
		return nil, since, errcode.Wrap(errcode.ConcurrencyConflict, "the file is locked by another operation", err)
	}
	fl := flock.New(filepath.Join(x.lockDir, key+".lock"))
	ok, err := fl.TryLock()
	if err == nil && !ok { // another process holds it: wait for it
		if since.IsZero() {
			since = time.Now()
		}
		ok, err = fl.TryLockContext(ctx, flockRetry)
	}
	if !ok || err != nil {
		_ = fl.Close()
		releaseLocal()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return nil, since, errcode.Wrap(errcode.IOError, "the lock file cannot be used", err)
		}
		return nil, since, errcode.New(errcode.ConcurrencyConflict, "the file is locked by another broker process")
	}
	return func() {
		if err := fl.Unlock(); err != nil {
			x.log.Warn("cannot release a lock", "error", err)
		}
		_ = fl.Close()
		releaseLocal()
	}, since, nil
}
