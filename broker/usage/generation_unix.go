// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package usage

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// generationSize is the length of the generation file: generationSlots
// 64-bit counters, one page.
const generationSize = generationSlots * 8

// mapGeneration opens (creating it) the directory's generation file and
// maps its counter shared, so that every process on the directory sees
// every other's increments in memory, without a system call. Only a regular
// file of this process's user with no other name is mapped: the open follows
// no symbolic link (one planted at the name would have the broker grow and
// write the file it leads to), opens no FIFO or device for good (nothing
// blocks, no terminal becomes the broker's), and a file another user owns,
// who could put the counters back after an Add, is refused.
func mapGeneration(path string) (*generation, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the generation file: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat the generation file: %w", os.NewSyscallError("fstat", err))
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("the generation file %s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("the generation file %s belongs to user %d, not to this process's %d", path, st.Uid, os.Geteuid())
	case st.Nlink != 1:
		return nil, fmt.Errorf("the generation file %s has %d links, want 1", path, st.Nlink)
	}
	if st.Size < generationSize {
		// Growing it is harmless when another process did so first: a
		// truncate to the same length changes nothing.
		if err := f.Truncate(generationSize); err != nil {
			return nil, fmt.Errorf("size the generation file: %w", err)
		}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, generationSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the generation file: %w", err)
	}
	return &generation{mem: b, counters: (*[generationSlots]uint64)(unsafe.Pointer(&b[0]))}, nil
}

// generation is the shared counters, mapped: aligned uint64s in one page, so
// the atomic operations hold across processes.
type generation struct {
	mem      []byte
	counters *[generationSlots]uint64
}

// load is the counter of slot; ok is false when the mapped page cannot be
// read (faultSafe).
func (g *generation) load(slot int) (n uint64, ok bool) {
	defer faultSafe(&ok)()
	return atomic.LoadUint64(&g.counters[slot]), true
}

// bump increments the counter of slot and returns its new value; ok is
// false when the mapped page cannot be written (faultSafe).
func (g *generation) bump(slot int) (n uint64, ok bool) {
	defer faultSafe(&ok)()
	return atomic.AddUint64(&g.counters[slot], 1), true
}

// faultSafe makes a fault on the mapped file (SIGBUS: the generation file
// was shrunk under the mapping, by hand or by another program) a panic of
// this goroutine that the returned function, deferred, recovers, setting
// *ok false: the Store then checks its counts with a stat, as where the
// file cannot be mapped, instead of the broker crashing.
func faultSafe(ok *bool) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		if recover() != nil {
			*ok = false
		}
		debug.SetPanicOnFault(old)
	}
}

func (g *generation) unmap() error { return unix.Munmap(g.mem) }
