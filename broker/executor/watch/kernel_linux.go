// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// kernel is the process's inotify instance, used directly rather than
// through fsnotify: fsnotify adds a watch by a path and keys it by that path
// string, so a watch added by a directory's /proc/self/fd/N name would be
// known by a name whose descriptor number is reused as soon as it is closed
// (events still queued for a removed watch would then be taken for another
// directory's), and a second Add of that name for another directory would
// fold the two watches into one. Here each watch is known by its watch
// descriptor, which inotify gives per directory (inode) and allocates
// cyclically, so it does not come back for another directory while events
// of the old one can still be queued.
//
// A watch is added only on a directory already opened through its root
// without following links (a handle), by the handle's /proc/self/fd name:
// the kernel resolves that name to the open directory itself, so no path is
// looked up again and a link swapped in meanwhile is never followed.
type kernel struct {
	file *os.File // the inotify descriptor, non-blocking: Read waits in the poller
	fd   int
	sink func(kernelEvent)
	fail func(error)
	done chan struct{} // closed when the reader ends

	mu     sync.Mutex // keeps fd from being closed during add and remove
	closed bool
}

// inotifyMask is what every watch asks for: changes of entries, and the
// directory's own removal or move.
const inotifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newKernel creates the inotify instance and starts reading it: events go to
// sink, and lost events (a queue overflow, a read error) to fail.
func newKernel(sink func(kernelEvent), fail func(error)) (*kernel, error) {
	// Without /proc no watch can be added on an open directory, and none
	// is added by path.
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return nil, fmt.Errorf("watches are added through /proc/self/fd, which is missing (/proc not mounted?): %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	k := &kernel{file: os.NewFile(uintptr(fd), "inotify"), fd: fd, sink: sink, fail: fail, done: make(chan struct{})}
	go k.read()
	return k, nil
}

// add watches the directory d is open on and returns the watch's key (the
// same key for a directory already watched).
func (k *kernel) add(d *handle) (watchKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return 0, errClosed
	}
	wd, err := retryEINTR(func() (int, error) { return unix.InotifyAddWatch(k.fd, d.procPath(), inotifyMask) })
	if err != nil {
		return 0, fmt.Errorf("inotify_add_watch: %w", err)
	}
	return watchKey(wd), nil
}

// remove ends a watch. A watch the kernel already ended (its directory was
// deleted) is no error.
func (k *kernel) remove(key watchKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	if _, err := unix.InotifyRmWatch(k.fd, uint32(key)); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("inotify_rm_watch: %w", err)
	}
	return nil
}

// close closes the instance and waits for the reader to end.
func (k *kernel) close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	err := k.file.Close()
	k.mu.Unlock()
	<-k.done
	if err != nil {
		return fmt.Errorf("close the inotify instance: %w", err)
	}
	return nil
}

// read hands every event to sink until the instance is closed.
func (k *kernel) read() {
	defer close(k.done)
	buf := make([]byte, 64<<10) // room for at least one event with the longest name
	for {
		n, err := k.file.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			k.fail(fmt.Errorf("read inotify events: %w", err))
			continue
		}
		k.parse(buf[:n])
	}
}

// parse turns a read's worth of inotify_event records into kernel events.
func (k *kernel) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		nameLen := int(binary.NativeEndian.Uint32(b[12:]))
		end := unix.SizeofInotifyEvent + nameLen
		if end > len(b) {
			k.fail(errors.New("a truncated inotify event"))
			return
		}
		name := b[unix.SizeofInotifyEvent:end]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		b = b[end:]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			k.fail(errOverflow)
			continue
		}
		if ev, ok := inotifyEvent(watchKey(wd), mask, string(name)); ok {
			k.sink(ev)
		}
	}
}

// inotifyEvent maps one inotify event to a kernel event; false for those
// the Hub has no use for (IN_IGNORED: the watch ended).
func inotifyEvent(key watchKey, mask uint32, name string) (kernelEvent, bool) {
	var o op
	if name == "" {
		// The watched directory itself.
		if mask&(unix.IN_DELETE_SELF|unix.IN_UNMOUNT) != 0 {
			o |= opRemove
		}
		if mask&unix.IN_MOVE_SELF != 0 {
			o |= opRename
		}
	} else {
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			o |= opCreate
		}
		if mask&unix.IN_MODIFY != 0 {
			o |= opWrite
		}
		if mask&unix.IN_DELETE != 0 {
			o |= opRemove
		}
		if mask&unix.IN_MOVED_FROM != 0 {
			o |= opRename
		}
	}
	return kernelEvent{key: key, name: name, op: o}, o != 0
}
