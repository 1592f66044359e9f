// Package watch watches files and directory trees for the broker's
// files/watch (PROTOCOL.md section 5), on top of fsnotify.
//
// A Hub owns one fsnotify.Watcher for the whole process (inotify instances
// are scarce: 128 per user by default) and dispatches its events to
// subscriptions. A directory watched by several subscriptions is added to the
// watcher once and counted. Recursion is built here: a subscription walks its
// tree, adds a watch per directory, adds watches for directories created
// later, and rescans every tree when events were lost (queue overflow).
//
// Confinement: directories are read only through an os.Root handle opened on
// the root's directory (one per root, kept by the Hub), never following
// symbolic links; a link to a directory is an entry, not a subtree. fsnotify
// needs absolute paths, so after each watch is added the directory the kernel
// resolved is checked to be the one the root handle saw (same device and
// inode), and the watch is dropped otherwise.
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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// defaultCoalesce is the default coalescing window: PROTOCOL.md allows at
// most one event per path per 100 ms.
const defaultCoalesce = 100 * time.Millisecond

// queueLimit bounds the events received from fsnotify and not yet handled.
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

// Hub owns one fsnotify.Watcher and dispatches its events to subscriptions.
// It is safe for concurrent use. Every emit function of its subscriptions is
// called from one goroutine of the Hub.
type Hub struct {
	log      hclog.Logger
	coalesce time.Duration
	w        *fsnotify.Watcher

	// Test hooks, set only by unexported options before the goroutines
	// start: dropEvent discards raw events, beforeAdd runs between the
	// root handle's Lstat of a directory and the watcher's Add of it.
	dropEvent func(name string) bool
	beforeAdd func(abs string)

	// The queue between the goroutine that reads the watcher and the one
	// that handles its events, so that the watcher never waits for h.mu.
	qmu   sync.Mutex
	queue []queued
	lost  bool
	wake  chan struct{}

	mu      sync.Mutex
	closed  bool
	roots   map[string]*os.Root        // by root directory
	dirs    map[string]*hubDir         // watched directories, by absolute path
	subs    map[*Subscription]struct{} // open subscriptions
	windows []*window                  // open coalescing windows, by deadline

	done      chan struct{}
	runDone   chan struct{}
	pumpDone  chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// queued is one item from the watcher: an event or an error.
type queued struct {
	ev  fsnotify.Event
	err error
}

// hubDir is a directory in the watcher, with the subscriptions that hold it
// and the directory's path inside each one's root (roots may nest).
type hubDir struct {
	subs map[*Subscription]string
}

// ref is one subscription's hold on a watched directory.
type ref struct {
	s   *Subscription
	rel string
}

// NewHub creates the process's watcher and starts dispatching. Errors are
// *errcode.Error: QUOTA_EXCEEDED when the system limit on inotify instances
// is reached, IO_ERROR otherwise.
func NewHub(opts ...Option) (*Hub, error) {
	h := &Hub{
		log:      hclog.NewNullLogger(),
		coalesce: defaultCoalesce,
		wake:     make(chan struct{}, 1),
		roots:    make(map[string]*os.Root),
		dirs:     make(map[string]*hubDir),
		subs:     make(map[*Subscription]struct{}),
		done:     make(chan struct{}),
		runDone:  make(chan struct{}),
		pumpDone: make(chan struct{}),
	}
	for _, o := range opts {
		o(h)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		if errors.Is(err, syscall.EMFILE) {
			return nil, errcode.Wrap(errcode.QuotaExceeded,
				"the system limit on file watchers (fs.inotify.max_user_instances) or open files is reached", err)
		}
		return nil, errcode.Wrap(errcode.IOError, "the file watcher cannot be created", err)
	}
	h.w = w
	go h.pump()
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
		if err := h.w.Close(); err != nil {
			h.closeErr = fmt.Errorf("close the file watcher: %w", err)
		}
		<-h.pumpDone

		h.mu.Lock()
		defer h.mu.Unlock()
		for s := range subs {
			s.dead = true
		}
		for path, r := range h.roots {
			if err := r.Close(); err != nil && h.closeErr == nil {
				h.closeErr = fmt.Errorf("close a root handle: %w", err)
			}
			delete(h.roots, path)
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
	target    canon.Path
	recursive bool
	file      bool   // the target is not a directory: its parent is watched
	name      string // the target's name in its parent, when file
	top       string // Rel of the directory watched first: the target, or its parent
	kinds     kindSet
	emit      func(Event)

	// Guarded by h.mu.
	dirs    map[string]*dirState // watched directories, by Rel
	pending map[string]*window   // open windows, by Rel
	gone    bool                 // the target (or its parent) vanished: silent
	dead    bool                 // closed: no window of it is emitted

	emitMu sync.Mutex // held while emit runs
	closed bool       // guarded by emitMu
}

// dirState is a directory that a subscription watches and the entries it
// knows in it.
type dirState struct {
	abs     string
	id      fileID
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
// call Close.
//
// Errors are *errcode.Error: FILE_NOT_FOUND when the target is missing,
// QUOTA_EXCEEDED when the system limit on watches is reached, INVALID_PARAMS
// for an unknown kind, CONCURRENCY_CONFLICT when the target changed while
// the watch was set up, IO_ERROR otherwise.
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
	defer h.mu.Unlock()
	if h.closed {
		return nil, errcode.New(errcode.IOError, "the file watcher is closed")
	}
	root, err := h.rootHandle(target.Root.Path)
	if err != nil {
		return nil, mapError(err, "the root cannot be opened")
	}
	fi, err := root.Lstat(dotRel(target.Rel))
	if err != nil {
		return nil, mapError(err, "the path cannot be watched")
	}
	s := &Subscription{
		h:         h,
		target:    target,
		recursive: recursive,
		top:       target.Rel,
		kinds:     ks,
		emit:      emit,
		dirs:      make(map[string]*dirState),
		pending:   make(map[string]*window),
	}
	switch {
	case fi.IsDir():
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, errcode.New(errcode.ConcurrencyConflict, "the path changed while the watch was set up")
	default:
		parent, name := target.Parent()
		s.file, s.recursive, s.top, s.name = true, false, parent.Rel, name
	}
	now := time.Now()
	if err := h.scan(s, s.top, false, now); err != nil {
		h.releaseAll(s)
		if errors.Is(err, errSwapped) {
			return nil, errcode.Wrap(errcode.ConcurrencyConflict, "the path changed while the watch was set up", err)
		}
		return nil, mapError(err, "the path cannot be watched")
	}
	h.subs[s] = struct{}{}
	return s, nil
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
}

// rootHandle returns the Hub's handle on a root directory, opening it once.
func (h *Hub) rootHandle(dir string) (*os.Root, error) {
	if r, ok := h.roots[dir]; ok {
		return r, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open root: %w", err)
	}
	h.roots[dir] = r
	return r, nil
}

// pump moves the watcher's events and errors into the queue. It never
// waits for h.mu, so the watcher never waits for the dispatcher.
func (h *Hub) pump() {
	defer close(h.pumpDone)
	events, errs := h.w.Events, h.w.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if h.dropEvent != nil && h.dropEvent(ev.Name) {
				continue
			}
			h.enqueue(queued{ev: ev})
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			h.enqueue(queued{err: err})
		}
	}
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
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// injectError hands err to the dispatcher as if the watcher had reported it
// (for tests of the rescan).
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
		h.rescanAll(now)
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

// handle applies one watcher event to the subscriptions that watch its
// directory, and to those whose top directory it names.
func (h *Hub) handle(ev fsnotify.Event, now time.Time) {
	op := ev.Op &^ fsnotify.Chmod
	if op == 0 {
		return
	}
	name := ev.Name
	if hd := h.dirs[name]; hd != nil {
		for _, r := range hd.refs() {
			if r.rel == r.s.top {
				h.topEvent(r.s, op, now)
			}
		}
	}
	i := strings.LastIndexByte(name, filepath.Separator)
	if i < 0 {
		return
	}
	dir, base := name[:i], name[i+1:]
	if dir == "" {
		dir = string(filepath.Separator)
	}
	if !validName(base) || executor.IsTempName(base) {
		return
	}
	hd := h.dirs[dir]
	if hd == nil {
		return
	}
	for _, r := range hd.refs() {
		h.entryEvent(r.s, r.rel, base, op, now)
	}
}

// refs returns the holders of a watched directory, copied so that handlers
// may change the table.
func (hd *hubDir) refs() []ref {
	out := make([]ref, 0, len(hd.subs))
	for s, rel := range hd.subs {
		out = append(out, ref{s: s, rel: rel})
	}
	return out
}

// topEvent handles an event that names a subscription's top directory
// itself: removed or renamed away, or replaced (a Create of its name for
// another directory), the subscription's target is gone.
func (h *Hub) topEvent(s *Subscription, op fsnotify.Op, now time.Time) {
	if s.gone || s.dead {
		return
	}
	if op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename) {
		h.topGone(s, now)
		return
	}
	if op.Has(fsnotify.Create) {
		d := s.dirs[s.top]
		fi, err := h.roots[s.target.Root.Path].Lstat(dotRel(s.top))
		if d == nil || err != nil || !fi.IsDir() || !sameID(d.id, fileIDOf(fi)) {
			h.topGone(s, now)
		}
	}
}

// topGone reports the target deleted (for a file target, when it was known
// to exist), drops every watch of the subscription and makes it silent.
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
}

// entryEvent applies a watcher event for entry name of directory rel.
func (h *Hub) entryEvent(s *Subscription, rel, name string, op fsnotify.Op, now time.Time) {
	if s.gone || s.dead || (s.file && name != s.name) {
		return
	}
	d := s.dirs[rel]
	if d == nil {
		return
	}
	child := joinRel(rel, name)
	if op.Has(fsnotify.Create) {
		h.created(s, d, child, name, now)
	}
	if op.Has(fsnotify.Write) {
		if _, known := d.entries[name]; !known {
			d.entries[name] = entry{}
		}
		// A write shows the file existed: Modified, unless its window
		// opened with its creation.
		h.change(s, child, true, true, now)
	}
	if op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename) {
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
// Modified, and a new directory under a recursive subscription is watched
// and walked, its entries reported Created.
func (h *Hub) created(s *Subscription, d *dirState, child, name string, now time.Time) {
	fi, err := h.roots[s.target.Root.Path].Lstat(child)
	isDir := err == nil && fi.IsDir()
	old, known := d.entries[name]
	if known && old.dir && s.recursive {
		if sd := s.dirs[child]; sd != nil && isDir && sameID(sd.id, fileIDOf(fi)) {
			// The walk of a new directory found it before this event.
			// Scan it again all the same: adding its watch again is cheap
			// and repairs a watch lost to a move during a walk.
			h.touch(s, child, now)
			if err := h.scan(s, child, true, now); err != nil && !isVanished(err) {
				h.log.Warn("a new directory cannot be watched", "error", err)
			}
			return
		}
		h.dropSubtree(s, child, true, now)
	}
	d.entries[name] = entry{dir: isDir}
	h.change(s, child, known, true, now)
	if isDir && s.recursive {
		if err := h.scan(s, child, true, now); err != nil && !isVanished(err) {
			h.log.Warn("a new directory cannot be watched", "error", err)
		}
	}
}

// rescanAll brings every subscription up to date after lost events.
func (h *Hub) rescanAll(now time.Time) {
	for s := range h.subs {
		if s.gone || s.dead {
			continue
		}
		d := s.dirs[s.top]
		fi, err := h.roots[s.target.Root.Path].Lstat(dotRel(s.top))
		if d == nil || err != nil || !fi.IsDir() || !sameID(d.id, fileIDOf(fi)) {
			h.topGone(s, now)
			continue
		}
		h.prune(s, now)
		if err := h.scan(s, s.top, true, now); err != nil {
			if isVanished(err) || errors.Is(err, errSwapped) {
				h.topGone(s, now)
				continue
			}
			h.log.Warn("a watched directory cannot be rescanned", "error", err)
		}
	}
}

// validName reports whether an event's base name can be a path segment.
func validName(name string) bool { return name != "" && name != "." && name != ".." }

// dotRel turns a Rel into a name for the root handle ("." for the root).
func dotRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// joinRel joins a Rel and an entry name.
func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// absPath is the absolute path of rel in the root directory rootDir.
func absPath(rootDir, rel string) string {
	return filepath.Join(rootDir, filepath.FromSlash(rel))
}

// errSwapped: the directory the watcher resolved is not the one the root
// handle saw (a directory was swapped for a link meanwhile).
var errSwapped = errors.New("the directory changed while its watch was added")

// errNotDir: a path expected to be a directory is something else now.
var errNotDir = errors.New("not a directory")

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
	case isVanished(err):
		return errcode.Wrap(errcode.FileNotFound, "the path does not exist", err)
	case isQuota(err):
		return errcode.Wrap(errcode.QuotaExceeded,
			"the system limit on file watches (fs.inotify.max_user_watches) is reached", err)
	default:
		return errcode.Wrap(errcode.IOError, reason, err)
	}
}
