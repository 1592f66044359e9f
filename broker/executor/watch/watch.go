// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package watch watches files and directory trees for the broker's
// files/watch (docs/protocol.md section 5).
//
// A Hub owns one kernel watcher for the whole process (inotify instances are
// scarce: 128 per user by default) and dispatches its events to
// subscriptions. A directory watched by several subscriptions is watched
// once and counted. Recursion is built here: a subscription walks its tree,
// adds a watch per directory, adds watches for directories created later,
// and rescans every tree when events were lost (queue overflow).
//
// Confinement: a root is opened once, checked to be the directory the root
// was resolved to at start-up (roots.Root.ID), and every directory is
// looked up from that handle without following any symbolic link (a link to
// a directory is an entry, not a subtree). On Linux the directory is opened
// (O_PATH, openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, or openat
// with O_NOFOLLOW segment by segment) and its inotify watch is added on that
// open directory through /proc/self/fd, so the watch is on the very
// directory that was opened inside the root, whatever its path names by
// then, and its entries are read from the same handle. Elsewhere (fsnotify,
// which adds watches by path) the directory is opened through an os.Root,
// the watch is added by its host path, and what the path resolves to is
// checked afterwards to be the opened directory: a swap between the two can
// go unnoticed there.
//
// Walks run without the Hub's lock, taking it briefly per directory, so a
// large tree being set up never stalls the other subscriptions; the events
// of a subscription being walked wait and are applied once its walk ends.
//
// Events are coalesced per subscription and path: the first change opens a
// window (100 ms by default) and at its end one event reports the change over
// the window, or nothing when the path was created and removed within it. The
// broker's temporary files (executor.IsTempName) are never reported, and its
// atomic writes (a temporary file renamed over the target) are reported as
// one Modified event for the target.
package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// defaultCoalesce is the default coalescing window: docs/protocol.md allows at
// most one event per path per 100 ms.
const defaultCoalesce = 100 * time.Millisecond

// queueLimit bounds the events received from the kernel watcher and not yet
// handled, and the events a subscription keeps while it is walked.
// Beyond it events are dropped and the trees are rescanned, as on a kernel
// queue overflow.
const queueLimit = 1 << 16

// Kind is the kind of a change.
type Kind string

// The kinds of change of files/watch.
const (
	// Created: the path did not exist before the change and exists after it.
	Created Kind = "created"
	// Modified: the path existed before and after the change.
	Modified Kind = "modified"
	// Deleted: the path existed before the change and is gone after it.
	Deleted Kind = "deleted"
)

// Event is one change, already coalesced.
type Event struct {
	// Path is the canonical path that changed (root and slash-separated Rel).
	Path canon.Path
	// Kind is the change over the coalescing window.
	Kind Kind
	// Time is when the last change folded into the event was seen, in UTC.
	Time time.Time
}

// Option configures a Hub.
type Option func(*Hub)

// WithLogger sets the logger for operational messages (lost events,
// directories that cannot be watched). The default discards them.
func WithLogger(l hclog.Logger) Option {
	return func(h *Hub) {
		if l != nil {
			h.log = l
		}
	}
}

// WithCoalesce sets the coalescing window (default 100 ms): per subscription
// and path, at most one event per window. Zero or less keeps the default.
func WithCoalesce(d time.Duration) Option {
	return func(h *Hub) {
		if d > 0 {
			h.coalesce = d
		}
	}
}

// Hub owns one kernel watcher and dispatches its events to subscriptions.
// It is safe for concurrent use. Every emit function of its subscriptions is
// called from one goroutine of the Hub.
type Hub struct {
	log      hclog.Logger
	coalesce time.Duration
	kernel   *kernel

	// Test hooks, set only by unexported options before the goroutines
	// start: dropEvent discards kernel events by entry name ("" for a
	// directory's own), beforeAdd runs in a walk, without the Hub's lock,
	// between the lookup of a directory and the adding of its watch.
	dropEvent func(name string) bool
	beforeAdd func(rel string)

	// The queue between the kernel watcher's reader and the dispatcher, so
	// that the reader never waits for h.mu.
	qmu   sync.Mutex
	queue []queued
	lost  bool
	wake  chan struct{}

	mu      sync.Mutex
	closed  bool
	roots   map[rootKey]*rootDir       // root handles, by directory and identity
	dirs    map[watchKey]*hubDir       // watched directories, by watch
	subs    map[*Subscription]struct{} // open subscriptions, and those being set up
	windows []*window                  // open coalescing windows, by deadline
	walks   sync.WaitGroup             // walks running without h.mu (Close waits for them)

	done      chan struct{}
	runDone   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// rootKey names a root handle: a root resolved again to another directory
// (a configuration reload) gets a handle of its own.
type rootKey struct {
	dir string
	id  roots.FileID
}

// queued is one item from the kernel watcher: an event or an error.
type queued struct {
	ev  kernelEvent
	err error
}

// watchKey names one watch of the kernel watcher (an inotify watch
// descriptor on Linux).
type watchKey int

// op is what a kernel event reports.
type op uint8

const (
	opCreate op = 1 << iota // an entry appeared (created, or moved in)
	opWrite                 // an entry's content changed
	opRemove                // an entry, or the watched directory, was deleted
	opRename                // an entry, or the watched directory, was moved away
)

// kernelEvent is one event of a watched directory: of its entry name, or of
// the directory itself when name is empty.
type kernelEvent struct {
	key  watchKey
	name string
	op   op
}

// kind is the type of an object a lookup found.
type kind uint8

const (
	kindOther kind = iota
	kindDir
	kindLink
)

// hubDir is a directory in the kernel watcher, with the subscriptions that
// hold it and the directory's path inside each one's root (roots may nest).
type hubDir struct {
	id   roots.FileID
	subs map[*Subscription]string
}

// NewHub creates the process's watcher and starts dispatching. Errors are
// *errcode.Error: QUOTA_EXCEEDED when the system limit on inotify instances
// is reached, IO_ERROR otherwise.
func NewHub(opts ...Option) (*Hub, error) {
	h := &Hub{
		log:      hclog.NewNullLogger(),
		coalesce: defaultCoalesce,
		wake:     make(chan struct{}, 1),
		roots:    make(map[rootKey]*rootDir),
		dirs:     make(map[watchKey]*hubDir),
		subs:     make(map[*Subscription]struct{}),
		done:     make(chan struct{}),
		runDone:  make(chan struct{}),
	}
	for _, o := range opts {
		o(h)
	}
	k, err := newKernel(h.received, h.injectError)
	if err != nil {
		if errors.Is(err, syscall.EMFILE) {
			return nil, errcode.Wrap(errcode.QuotaExceeded,
				"the system limit on file watchers (fs.inotify.max_user_instances) or open files is reached", err)
		}
		return nil, errcode.Wrap(errcode.IOError, "the file watcher cannot be created", err)
	}
	h.kernel = k
	go h.run()
	return h, nil
}

// Close ends every subscription (their emit functions are never called
// again once Close returns), stops the watcher and closes the root handles.
// It must not be called from an emit function. It is safe to call twice.
func (h *Hub) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		subs := h.subs
		h.subs = nil
		h.mu.Unlock()

		close(h.done)
		for s := range subs {
			s.emitMu.Lock()
			s.closed = true
			s.emitMu.Unlock()
		}
		<-h.runDone
		// Walks stop at their next directory; the root handles they look
		// up from stay open until then.
		h.walks.Wait()
		if err := h.kernel.close(); err != nil {
			h.closeErr = err
		}

		h.mu.Lock()
		defer h.mu.Unlock()
		for s := range subs {
			s.dead = true
		}
		for key, rd := range h.roots {
			if err := rd.close(); err != nil && h.closeErr == nil {
				h.closeErr = err
			}
			delete(h.roots, key)
		}
		h.dirs = nil
		h.windows = nil
	})
	return h.closeErr
}

// Subscription is one files/watch: a target and the emit function its
// events go to.
type Subscription struct {
	h         *Hub
	root      *rootDir
	target    canon.Path
	recursive bool
	file      bool   // the target is not a directory: its parent is watched
	name      string // the target's name in its parent, when file
	top       string // Rel of the directory watched first: the target, or its parent
	kinds     kindSet
	emit      func(Event)

	// Guarded by h.mu.
	dirs     map[string]*dirState // watched directories, by Rel
	pending  map[string]*window   // open windows, by Rel
	gone     bool                 // the target (or its parent) vanished: silent
	dead     bool                 // closed: no window of it is emitted
	walking  bool                 // a walk runs without h.mu: events wait in deferred
	deferred []kernelEvent        // events that came during a walk, in order
	rescan   bool                 // rescan the tree once the walk ends

	emitMu sync.Mutex // held while emit runs
	closed bool       // guarded by emitMu
}

// dirState is a directory that a subscription watches and the entries it
// knows in it.
type dirState struct {
	key     watchKey
	id      roots.FileID
	entries map[string]entry
}

// entry is a known directory entry.
type entry struct {
	dir bool
}

// Subscribe starts watching target, a canonical path (links inside the root
// already resolved by the caller). If target is a directory, changes of its
// entries are reported, and with recursive of everything below it,
// directories created later included. If target is anything else, changes
// of that path only are reported. kinds filters the events (nil or empty:
// all three). emit is called from one goroutine of the Hub, never
// concurrently for one subscription; it must not block for long and must not
// call Close. The tree is walked without holding the Hub's lock: other
// subscriptions go on meanwhile.
//
// Errors are *errcode.Error: FILE_NOT_FOUND when the target is missing,
// QUOTA_EXCEEDED when the system limit on watches is reached, INVALID_PARAMS
// for an unknown kind, CONCURRENCY_CONFLICT when the target changed while
// the watch was set up, IO_ERROR when the root is no longer the directory it
// was resolved to (moved or replaced after start-up) and otherwise.
func (h *Hub) Subscribe(target canon.Path, recursive bool, kinds []Kind, emit func(Event)) (*Subscription, error) {
	ks, err := parseKinds(kinds)
	if err != nil {
		return nil, err
	}
	if emit == nil {
		return nil, errcode.New(errcode.InvalidParams, "a watch needs an emit function")
	}
	if !filepath.IsAbs(target.Root.Path) {
		return nil, errcode.New(errcode.InvalidPath, "the path names no root")
	}

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errHubClosed()
	}
	rd, err := h.rootDir(target.Root)
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	h.walks.Add(1)
	h.mu.Unlock()
	defer h.walks.Done()

	s := &Subscription{
		h:         h,
		root:      rd,
		target:    target,
		recursive: recursive,
		top:       target.Rel,
		kinds:     ks,
		emit:      emit,
		dirs:      make(map[string]*dirState),
		pending:   make(map[string]*window),
		walking:   true,
	}
	top, err := s.lookupTop()
	if err != nil {
		return nil, mapError(err, "the path cannot be watched")
	}
	defer top.close()

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errHubClosed()
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()

	err = h.walk(s, s.top, top, false, true)

	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil && h.closed {
		err = errAborted
	}
	if err != nil {
		delete(h.subs, s)
		s.dead = true
		h.releaseAll(s)
		if errors.Is(err, errAborted) {
			return nil, errHubClosed()
		}
		return nil, mapError(err, "the path cannot be watched")
	}
	s.walking = false
	h.flush(s, time.Now())
	h.poke()
	return s, nil
}

// lookupTop opens the directory s watches first: the target, or for a
// target that is not a directory its parent. A link is CONCURRENCY_CONFLICT:
// the caller resolved links, so one there now was swapped in since.
func (s *Subscription) lookupTop() (*handle, error) {
	t, err := s.root.lookup(s.target.Rel)
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case kindDir:
		return t, nil
	case kindLink:
		t.close()
		return nil, errSwapped
	}
	t.close()
	parent, name := s.target.Parent()
	s.file, s.recursive, s.top, s.name = true, false, parent.Rel, name
	p, err := s.root.lookup(parent.Rel)
	if err != nil {
		return nil, err
	}
	if p.kind != kindDir {
		p.close()
		return nil, errSwapped
	}
	return p, nil
}

// Close stops the subscription: once Close returns, emit is never called
// again, pending coalesced events included. It must not be called from emit.
// It is safe to call twice, and after the Hub's Close.
func (s *Subscription) Close() {
	s.emitMu.Lock()
	already := s.closed
	s.closed = true
	s.emitMu.Unlock()
	if already {
		return
	}
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	s.dead = true
	h.releaseAll(s)
	clear(s.pending)
	s.deferred = nil
}

// rootDir returns the Hub's handle on the root r, opening it on first use
// and checking that it is still the directory r was resolved to (device and
// inode, where the platform has them): a root moved or replaced since, by a
// link to another tree say, is refused, never followed. h.mu is held.
func (h *Hub) rootDir(r roots.Root) (*rootDir, error) {
	key := rootKey{dir: r.Path, id: r.ID}
	if rd, ok := h.roots[key]; ok {
		return rd, nil
	}
	rd, id, err := openRootDir(r.Path)
	if err == nil && !sameID(r.ID, id) {
		err = errors.New("another directory is there now")
		if cerr := rd.close(); cerr != nil {
			h.log.Debug("cannot close a root handle", "error", cerr)
		}
	}
	if err != nil {
		return nil, errcode.Wrap(errcode.IOError, fmt.Sprintf(
			"the root %q is no longer the directory it was resolved to (moved, removed or replaced since); it cannot be watched",
			r.Mount), err)
	}
	h.roots[key] = rd
	return rd, nil
}

// received takes an event from the kernel watcher's reader.
func (h *Hub) received(ev kernelEvent) {
	if h.dropEvent != nil && h.dropEvent(ev.name) {
		return
	}
	h.enqueue(queued{ev: ev})
}

// enqueue adds one item for the dispatcher, or marks events as lost when
// the queue is full.
func (h *Hub) enqueue(q queued) {
	h.qmu.Lock()
	if len(h.queue) >= queueLimit {
		h.lost = true
	} else {
		h.queue = append(h.queue, q)
	}
	h.qmu.Unlock()
	h.poke()
}

// poke wakes the dispatcher: items are queued, or windows were opened
// outside it (by a walk).
func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// injectError hands err to the dispatcher as if the watcher had reported it:
// events were lost, and the trees are rescanned.
func (h *Hub) injectError(err error) { h.enqueue(queued{err: err}) }

// delivery is one event for one subscription.
type delivery struct {
	s  *Subscription
	ev Event
}

// run is the dispatcher: it handles queued events, closes due windows and
// calls the emit functions, outside h.mu.
func (h *Hub) run() {
	defer close(h.runDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-h.wake:
		case <-timer.C:
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return
		}
		h.drain()
		now := time.Now()
		due := h.popDue(now)
		if len(h.windows) > 0 {
			timer.Reset(h.windows[0].deadline.Sub(now))
		} else {
			timer.Stop()
		}
		h.mu.Unlock()
		h.deliver(due)
	}
}

// drain handles what the queue holds now. Items that arrive meanwhile wait
// for the next round, so that a steady stream cannot hold windows open.
// h.mu is held.
func (h *Hub) drain() {
	h.qmu.Lock()
	items, lost := h.queue, h.lost
	h.queue, h.lost = nil, false
	h.qmu.Unlock()
	if len(items) == 0 && !lost {
		return
	}
	now := time.Now()
	rescan := lost
	if lost {
		h.log.Warn("file watch events were lost (dispatch queue full); rescanning the watched trees")
	}
	for _, it := range items {
		if it.err != nil {
			h.log.Warn("the file watcher reported an error; rescanning the watched trees", "error", it.err)
			rescan = true
			continue
		}
		h.handle(it.ev, now)
	}
	if rescan {
		h.rescanAll()
	}
}

// deliver calls the emit functions of open subscriptions.
func (h *Hub) deliver(ds []delivery) {
	for _, d := range ds {
		d.s.emitMu.Lock()
		if !d.s.closed {
			d.s.emit(d.ev)
		}
		d.s.emitMu.Unlock()
	}
}

// handle hands one kernel event to the subscriptions that hold its
// directory; those being walked keep it for later. h.mu is held.
func (h *Hub) handle(ev kernelEvent, now time.Time) {
	if ev.name != "" && (!validName(ev.name) || executor.IsTempName(ev.name)) {
		return
	}
	hd := h.dirs[ev.key]
	if hd == nil {
		return
	}
	for _, s := range hd.holders() {
		if !s.walking {
			h.apply(s, ev, now)
			continue
		}
		if len(s.deferred) >= queueLimit {
			s.rescan = true
		} else {
			s.deferred = append(s.deferred, ev)
		}
	}
}

// holders returns the subscriptions that hold a watched directory, copied
// so that handlers may change the table.
func (hd *hubDir) holders() []*Subscription {
	out := make([]*Subscription, 0, len(hd.subs))
	for s := range hd.subs {
		out = append(out, s)
	}
	return out
}

// apply applies one kernel event to s: to the directory s holds its watch
// for, as that is now. h.mu is held.
func (h *Hub) apply(s *Subscription, ev kernelEvent, now time.Time) {
	if s.gone || s.dead {
		return
	}
	hd := h.dirs[ev.key]
	if hd == nil {
		return
	}
	rel, ok := hd.subs[s]
	if !ok {
		return
	}
	if ev.name == "" {
		if rel == s.top {
			h.topEvent(s, ev.op, now)
		}
		return
	}
	h.entryEvent(s, rel, ev.name, ev.op, now)
}

// flush applies the events that came while s was walked, until one starts
// another walk, and then a rescan that was asked for meanwhile. h.mu is
// held.
func (h *Hub) flush(s *Subscription, now time.Time) {
	for !s.walking && len(s.deferred) > 0 {
		ev := s.deferred[0]
		s.deferred = s.deferred[1:]
		h.apply(s, ev, now)
	}
	if len(s.deferred) == 0 {
		s.deferred = nil
	}
	if s.gone || s.dead {
		s.deferred, s.rescan = nil, false
		return
	}
	if !s.walking && s.rescan {
		s.rescan = false
		h.startWalk(s, s.top, true)
	}
}

// topEvent handles an event of a subscription's top directory itself:
// removed or moved away, the subscription's target is gone; created again
// (a path watcher's report of its name), it is gone unless it is still the
// same directory. h.mu is held.
func (h *Hub) topEvent(s *Subscription, o op, now time.Time) {
	if o&(opRemove|opRename) != 0 {
		h.topGone(s, now)
		return
	}
	if o&opCreate != 0 && !h.topSame(s) {
		h.topGone(s, now)
	}
}

// topSame reports whether the top directory of s is still the one it
// watches. h.mu is held.
func (h *Hub) topSame(s *Subscription) bool {
	d := s.dirs[s.top]
	t, err := s.root.lookup(s.top)
	if err != nil {
		return false
	}
	defer t.close()
	return d != nil && t.kind == kindDir && sameID(d.id, t.id)
}

// topGone reports the target deleted (for a file target, when it was known
// to exist), drops every watch of the subscription and makes it silent.
// h.mu is held.
func (h *Hub) topGone(s *Subscription, now time.Time) {
	if s.gone {
		return
	}
	s.gone = true
	if s.file {
		if d := s.dirs[s.top]; d != nil {
			if _, ok := d.entries[s.name]; ok {
				h.change(s, s.target.Rel, true, false, now)
			}
		}
	} else {
		h.change(s, s.top, true, false, now)
	}
	h.releaseAll(s)
	s.deferred, s.rescan = nil, false
}

// entryEvent applies a kernel event of entry name of directory rel.
// h.mu is held.
func (h *Hub) entryEvent(s *Subscription, rel, name string, o op, now time.Time) {
	if s.file && name != s.name {
		return
	}
	d := s.dirs[rel]
	if d == nil {
		return
	}
	child := joinRel(rel, name)
	if o&opCreate != 0 {
		h.created(s, d, child, name, now)
	}
	if o&opWrite != 0 {
		if _, known := d.entries[name]; !known {
			d.entries[name] = entry{}
		}
		// A write shows the file existed: Modified, unless its window
		// opened with its creation.
		h.change(s, child, true, true, now)
	}
	if o&(opRemove|opRename) != 0 {
		old, known := d.entries[name]
		if !known {
			h.change(s, child, false, false, now)
			return
		}
		delete(d.entries, name)
		if old.dir {
			h.dropSubtree(s, child, true, now)
		}
		h.change(s, child, true, false, now)
	}
}

// created handles a Create of entry name (path child) in d: a new entry is
// Created, an existing one (the broker's atomic write renames over it) is
// Modified, and a new directory under a recursive subscription is walked
// (in the background), its entries reported Created. h.mu is held.
func (h *Hub) created(s *Subscription, d *dirState, child, name string, now time.Time) {
	isDir, id := false, roots.FileID{}
	if c, err := s.root.lookup(child); err == nil {
		isDir, id = c.kind == kindDir, c.id
		c.close()
	}
	old, known := d.entries[name]
	if known && old.dir && s.recursive {
		if sd := s.dirs[child]; sd != nil && isDir && sameID(sd.id, id) {
			// The walk of a new directory found it before this event.
			// Walk it again all the same: adding its watch again is cheap
			// and repairs a watch lost to a move during a walk.
			h.touch(s, child, now)
			h.startWalk(s, child, false)
			return
		}
		h.dropSubtree(s, child, true, now)
	}
	d.entries[name] = entry{dir: isDir}
	h.change(s, child, known, true, now)
	if isDir && s.recursive {
		h.startWalk(s, child, false)
	}
}

// rescanAll brings every subscription up to date after lost events: each
// tree is walked again (in the background), its top checked first.
// h.mu is held.
func (h *Hub) rescanAll() {
	for s := range h.subs {
		switch {
		case s.gone || s.dead:
		case s.walking:
			s.rescan = true
		default:
			h.startWalk(s, s.top, true)
		}
	}
}

// validName reports whether an event's entry name can be a path segment.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
}

// joinRel joins a Rel and an entry name.
func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// within reports whether rel is below (or is) the directory dir.
func within(rel, dir string) bool {
	return dir == "" || rel == dir || strings.HasPrefix(rel, dir+"/")
}

// absPath is the absolute path of rel in the root directory rootDir.
func absPath(rootDir, rel string) string {
	return filepath.Join(rootDir, filepath.FromSlash(rel))
}

// sameID reports whether two identities name the same object; an unknown
// identity matches anything (the check is skipped where unavailable).
func sameID(a, b roots.FileID) bool {
	return a == b || !a.Known() || !b.Known()
}

// errSwapped: what was looked up is not what the path named before (a link
// on the way, or another directory swapped in).
var errSwapped = errors.New("the directory changed while its watch was added")

// errNotDir: a path expected to be a directory is something else now.
var errNotDir = errors.New("not a directory")

// errAborted: a walk stopped because its subscription or the Hub closed.
var errAborted = errors.New("the walk was abandoned: the watch or the watcher closed")

// errClosed: the kernel watcher is closed.
var errClosed = errors.New("the file watcher is closed")

// errOverflow: the kernel's event queue overflowed; events were lost.
var errOverflow = errors.New("the kernel's event queue overflowed")

// errHubClosed is the error of a Subscribe on a closed Hub.
func errHubClosed() error { return errcode.New(errcode.IOError, "the file watcher is closed") }

// isVanished reports whether err means the path is gone or no longer a
// directory.
func isVanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) || errors.Is(err, syscall.ENOTDIR)
}

// isQuota reports whether err is the system limit on watches.
func isQuota(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// mapError turns an OS error into an *errcode.Error. The reason never holds
// a host path; the cause is kept for logs.
func mapError(err error, reason string) error {
	var ce *errcode.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, errSwapped):
		return errcode.Wrap(errcode.ConcurrencyConflict, "the path changed while the watch was set up", err)
	case isVanished(err):
		return errcode.Wrap(errcode.FileNotFound, "the path does not exist", err)
	case isQuota(err):
		return errcode.Wrap(errcode.QuotaExceeded,
			"the system limit on file watches (fs.inotify.max_user_watches) is reached", err)
	default:
		return errcode.Wrap(errcode.IOError, reason, err)
	}
}
