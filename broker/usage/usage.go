// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package usage keeps, per server identity and UTC day, the number of bytes
// the server wrote, in files that outlive a session and a broker process and
// that every broker process using the same state directory shares. It is the
// source of the policy input's usage.bytesWrittenToday, which the default
// quota policy compares with max_bytes_per_day: a server cannot reset its
// quota by reconnecting, nor by the broker restarting.
//
// # Files
//
// The store lives in one directory, by convention <state-dir>/usage (see
// DirName), created 0700. Each server identity (input.server.id: an
// arbitrary string) has three kinds of files there, named by the lowercase
// hex SHA-256 of the identity, so that no identity ("../x", "a/b", a very
// long or non-ASCII one) can name a file outside the directory or collide
// with another:
//
//	<sha256>.json        the count: {"server": id, "day": "YYYY-MM-DD", "bytesWritten": n}
//	<sha256>.lock        an empty sidecar lock file, never deleted
//	.tmp-<sha256>.json-* a replacement being written (left over only by a crash)
//
// The identity is stored in the file for a human reading it; Path names the
// file of an identity. "day" is the UTC date the count belongs to. A count
// whose day is before today's UTC date counts as 0: the quota starts again
// at UTC midnight, and the file is rewritten on the server's next write.
//
// A count whose day is after today (the clock went back, or a broker with a
// clock running ahead wrote it) is not reset: it stays in force, and further
// writes add to it under its own day, until the clock passes that day. A
// clock change thus never lowers a quota; at worst a quota is stricter, over
// more than one day, until then. A warning is logged with the file's path;
// an operator who knows a clock ran far ahead removes the file.
//
// # Concurrency
//
// A Store is safe for use by many goroutines, and any number of Stores, in
// one process or in many, may share a directory. Every read and every
// read-modify-write of a count holds the server's sidecar lock (flock(2) on
// Linux, macOS and the BSDs, LockFileEx on Windows; shared to read,
// exclusive to add; the lock is released by the kernel when its process
// dies), so the Adds of every process are serialised and none is lost. A
// new count is written to a temporary file in the same directory, synced,
// renamed over the count, and the directory is synced: a crash at any moment
// leaves the old count or the new one, never a torn file. A leftover
// temporary file is never read; Open removes those whose writer is gone.
//
// # Failure
//
// A count file that cannot be parsed, is larger than 64 KiB, names another
// server, has an invalid day or a negative count is corrupt. Today and Add
// then return an *Error that matches ErrCorrupt (errors.Is) and carries the
// file's path; they never read a bad file as 0, and Add leaves it untouched.
// A file that cannot be read, a lock not obtained within the lock wait
// (WithLockWait), or a write that fails is an *Error too. The broker fails
// closed on any of them: a decision without a trustworthy count denies the
// write. An operator inspects the file named in the error (Error.Path) and
// removes it, which resets that server's count for the day, or restores it.
//
// When Add fails to record n, the Store keeps n in memory for the server
// and the day: later Today results of this Store include it, and the next
// successful Add of the server writes it along. A caller does not retry a
// failed Add (a retry would count n twice). Bytes kept this way are lost if
// the process exits before an Add succeeds.
//
// # Staleness
//
// Today is on the path of every decision and avoids reading the file: it
// keeps the last count read or written in memory, and checks it without a
// system call. On unix the directory holds a generation file (GenerationName,
// one page of 512 counters) that every Store on the directory maps shared
// (mmap(2), MAP_SHARED): each Add increments its server's counter (a slot
// chosen by the identity's hash) while it holds the server's exclusive lock,
// before it replaces the count file, and Today answers from memory only
// while the counter is the one it read, under the server's lock, before it
// last read the file (or the one its own Add set). An Add through any Store
// of any process on the directory is thus visible to every Today that starts
// after that Add returned (and to some that start during it). Two servers
// may share a slot; an Add of one then only makes Today reread the other's
// file.
//
// What does not go through a Store, an operator editing, restoring or
// removing a count file by hand, or a broker of a version before the
// generation file writing to the same directory, does not move the counter:
// TodayVerified, which the broker calls before a write, checks the cached
// count with a stat(2) of the count file as well (below), and Today rereads
// the file when its last read is older than the maximum staleness
// (WithMaxStale, default 1s), so a Today result never misses such a change
// made more than that long before the call. Only a regular file of the
// process's user with one link is mapped, opened without following a
// symbolic link. Where the generation
// file cannot be mapped (another platform, or an error, which is logged),
// Today checks the cached count with one stat(2) of the count file instead
// (file identity, size and modification time; every Add replaces the file,
// so another process's Add changes them), which cannot tell two files apart
// when a replacement reuses the inode number of the cached file and has the
// same size and modification time; the maximum staleness bounds that too.
//
// The generation file should stay a page long while brokers run on the
// directory (the state directory is the broker's own, 0700): shrunk under
// them, the fault of reading it is recovered and the Store checks its
// counts with a stat, as where the file cannot be mapped.
//
// Staleness aside, a decision and the Add after the write are not one atomic
// step: two processes may both decide before either adds, so writes decided
// at the same moment can together exceed a daily limit, by at most those
// writes' bytes.
package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/internal/keyfile"
)

// DirName is the name of the usage directory inside the broker's state
// directory: Open(filepath.Join(stateDir, usage.DirName)).
const DirName = "usage"

// GenerationName is the name of the generation file in the usage directory
// (see the package documentation, Staleness).
const GenerationName = "generation"

// generationSlots is the number of counters in the generation file.
const generationSlots = 512

// Defaults of the options.
const (
	// DefaultMaxStale is how old a count Today returns can be, at most.
	DefaultMaxStale = time.Second
	// DefaultLockWait is how long Today and Add wait for a server's lock
	// held by another process.
	DefaultLockWait = 10 * time.Second
)

// maxFileSize bounds a count file: an identity of a few hundred bytes takes
// at most a few KiB of JSON.
const maxFileSize = 64 << 10

var (
	// ErrCorrupt is matched by the error of a count file that is not a
	// valid count: it is never read as 0.
	ErrCorrupt = errors.New("corrupt usage file")
	// ErrClosed is returned by a Store after Close.
	ErrClosed = errors.New("usage store is closed")
)

// Error is the error of a Today or an Add. Path is the server's count file,
// for an operator to inspect, restore or remove.
type Error struct {
	Op     string // "today" or "add"
	Server string
	Path   string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("usage: %s for server %q: %s: %v", e.Op, e.Server, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger of warnings (a clock that went back, a
// directory sync that failed, leftover temporary files). The default
// discards them.
func WithLogger(l hclog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithMaxStale bounds how long Today may miss another process's Add
// (DefaultMaxStale); 0 makes every Today read the file.
func WithMaxStale(d time.Duration) Option {
	return func(s *Store) { s.maxStale = max(d, 0) }
}

// WithLockWait sets how long Today and Add wait for a server's lock held by
// another process before they fail (DefaultLockWait).
func WithLockWait(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.lockWait = d
		}
	}
}

// Store is a directory of per-server daily byte counts.
type Store struct {
	dir      *keyfile.Dir
	log      hclog.Logger
	maxStale time.Duration
	lockWait time.Duration

	mu      sync.Mutex
	closed  bool
	servers map[string]*entry

	// genMu keeps gen mapped while a Today or an Add uses it; Close unmaps
	// it and sets it to nil.
	genMu sync.RWMutex
	gen   *generation // nil: each cached count is checked with a stat
}

// entry is one server's count as this Store knows it.
type entry struct {
	server string
	name   string // hex SHA-256 of server
	path   string
	want   string // server as it reads back from JSON (invalid UTF-8 is replaced)

	// io serialises this Store's file access for the server, so that its
	// goroutines queue here rather than poll the cross-process lock.
	io sync.Mutex

	slot int // the entry's counter in the generation file

	mu         sync.Mutex // guards the fields below; never held during I/O
	loaded     bool
	readAt     time.Time // monotonic time of the last read or write of the file
	stamp      stamp     // the file as last read or written
	gen        uint64    // the generation counter before that read, or after that write
	genKnown   bool      // gen was read from the mapped generation file
	rec        record
	err        error // the last read's error, kept with its stamp
	pending    int64 // bytes an Add failed to record
	pendingDay string
	warnedDay  string // the future day last warned about
}

// record is a count file's content; day is "" when there is no file.
type record struct {
	day   string
	bytes int64
}

// stamp identifies a version of a count file without reading it.
type stamp = keyfile.Stamp

// Open opens the store in dir, creating the directory (0700) if needed, and
// removes temporary files left by a crashed writer.
func Open(dir string, opts ...Option) (*Store, error) {
	s := &Store{
		log:      hclog.NewNullLogger(),
		maxStale: DefaultMaxStale,
		lockWait: DefaultLockWait,
		servers:  make(map[string]*entry),
	}
	for _, o := range opts {
		o(s)
	}
	d, err := keyfile.Open(dir, "usage", s.lockWait, s.log)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	s.dir = d
	g, err := mapGeneration(filepath.Join(dir, GenerationName))
	if err != nil {
		s.log.Warn("usage counts are checked with a stat per decision", "error", err)
	}
	s.gen = g
	return s, nil
}

// loadGen reads the counter of slot, if the generation file is mapped.
func (s *Store) loadGen(slot int) (uint64, bool) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	if s.gen == nil {
		return 0, false
	}
	return s.gen.load(slot)
}

// bumpGen increments the counter of slot, if the generation file is mapped,
// and returns its new value.
func (s *Store) bumpGen(slot int) (uint64, bool) {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	if s.gen == nil {
		return 0, false
	}
	return s.gen.bump(slot)
}

// Close releases the Store; its methods return ErrClosed afterwards. Calls
// in progress finish.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.genMu.Lock()
	var uerr error
	if s.gen != nil {
		uerr = s.gen.unmap()
		s.gen = nil
	}
	s.genMu.Unlock()
	if err := s.dir.Close(); err != nil {
		return err
	}
	if uerr != nil {
		return fmt.Errorf("usage: unmap the generation file: %w", uerr)
	}
	return nil
}

// Path returns the file that holds server's count (which may not exist).
func (s *Store) Path(server string) string {
	return s.dir.DataPath(keyfile.Name(server))
}

// Today returns the bytes server wrote on now's UTC day, by every process
// sharing the directory, as of at most the maximum staleness ago (see the
// package documentation). A missing file is 0; a corrupt or unreadable one
// is an error, never 0.
func (s *Store) Today(server string, now time.Time) (int64, error) {
	return s.today(server, now, false)
}

// TodayVerified is Today, with the cached count also checked with a stat of
// the count file, so that a change made to it by hand (not through a Store)
// is seen at once too: the broker calls it before a write, where the daily
// quota is enforced, and Today on every other decision.
func (s *Store) TodayVerified(server string, now time.Time) (int64, error) {
	return s.today(server, now, true)
}

// today is Today; stat checks a cached count with a stat of its file even
// when the generation counter says it is current.
func (s *Store) today(server string, now time.Time, stat bool) (int64, error) {
	e, err := s.entry(server)
	if err != nil {
		return 0, err
	}
	day, err := dayOf(now)
	if err != nil {
		return 0, e.fail("today", err)
	}
	if n, ok, err := s.cached(e, day, stat); ok {
		return n, err
	}
	e.io.Lock()
	defer e.io.Unlock()
	unlock, err := s.dir.Lock(e.name, false)
	if err != nil {
		return 0, e.fail("today", err)
	}
	defer unlock()
	gen, genKnown := s.loadGen(e.slot) // before the read: a later Add moves it
	rec, st, err := e.read()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.install(rec, st, err)
	e.gen, e.genKnown = gen, genKnown
	if err != nil {
		return 0, e.fail("today", err)
	}
	s.warnFuture(e, day)
	return e.total(day), nil
}

// cached answers Today from memory when the file is the one last read or
// written and that was less than the maximum staleness ago: the generation
// counter has not moved since, and (with stat, or without the generation
// file) the file's stat is unchanged.
func (s *Store) cached(e *entry, day string, stat bool) (n int64, ok bool, err error) {
	e.mu.Lock()
	fresh := e.loaded && time.Since(e.readAt) < s.maxStale
	if fresh && e.genKnown {
		if gen, known := s.loadGen(e.slot); !known || gen != e.gen {
			e.mu.Unlock()
			return 0, false, nil
		}
		if !stat {
			defer e.mu.Unlock()
			if e.err != nil {
				return 0, true, e.fail("today", e.err)
			}
			return e.total(day), true, nil
		}
	}
	e.mu.Unlock()
	if !fresh {
		return 0, false, nil
	}
	st, serr := keyfile.StatStamp(e.path)
	if serr != nil {
		return 0, false, nil // the read reports it
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded || st != e.stamp || time.Since(e.readAt) >= s.maxStale {
		return 0, false, nil
	}
	if e.err != nil {
		return 0, true, e.fail("today", e.err)
	}
	return e.total(day), true, nil
}

// Add adds n bytes to server's count for now's UTC day and returns the new
// count: the total of the day by every process sharing the directory,
// including n. The count is on disk when Add returns without error. On an
// error n is not on disk; the Store keeps it (see the package
// documentation), and the caller does not retry. n must not be negative;
// counts saturate at math.MaxInt64.
func (s *Store) Add(server string, now time.Time, n int64) (int64, error) {
	e, err := s.entry(server)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, e.fail("add", fmt.Errorf("negative byte count %d", n))
	}
	if n == 0 {
		return s.Today(server, now)
	}
	day, err := dayOf(now)
	if err != nil {
		return 0, e.fail("add", err)
	}
	e.io.Lock()
	defer e.io.Unlock()
	total, err := s.add(e, day, n)
	if err != nil {
		e.mu.Lock()
		eff := max(day, e.rec.day) // the day n was meant for
		if e.pendingDay < eff {
			e.pending, e.pendingDay = 0, eff
		}
		e.pending = satAdd(e.pending, n)
		e.mu.Unlock()
		return 0, e.fail("add", err)
	}
	return total, nil
}

// add is Add's read-modify-write, under e.io.
func (s *Store) add(e *entry, day string, n int64) (int64, error) {
	unlock, err := s.dir.Lock(e.name, true)
	if err != nil {
		return 0, err
	}
	defer unlock()
	rec, st, err := e.read()
	e.mu.Lock()
	e.install(rec, st, err)
	pending, pendingDay := e.pending, e.pendingDay
	if err == nil {
		s.warnFuture(e, day)
	}
	e.mu.Unlock()
	if err != nil {
		return 0, err
	}

	newDay, total := day, n
	if rec.day >= day { // today's count, or a later day's (the clock went back)
		newDay, total = rec.day, satAdd(rec.bytes, n)
	}
	if pending > 0 && pendingDay >= newDay {
		total = satAdd(total, pending)
	}
	// Moved before the replace, under the exclusive lock: a Today of
	// another Store that read the old counter rereads from now on, and
	// waits for this lock to do so.
	gen, genKnown := s.bumpGen(e.slot)
	nst, err := s.write(e, record{day: newDay, bytes: total})
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	e.install(record{day: newDay, bytes: total}, nst, nil)
	e.gen, e.genKnown = gen, genKnown
	e.pending, e.pendingDay = 0, ""
	e.mu.Unlock()
	return total, nil
}

// entry returns server's entry, creating it on first use.
func (s *Store) entry(server string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if e := s.servers[server]; e != nil {
		return e, nil
	}
	name := keyfile.Name(server)
	e := &entry{
		server: server,
		name:   name,
		path:   s.dir.DataPath(name),
		want:   roundTrip(server),
		slot:   slotOf(name),
	}
	s.servers[server] = e
	return e, nil
}

func (e *entry) fail(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == e.path {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return &Error{Op: op, Server: e.server, Path: e.path, Err: err}
}

// slotOf is the generation counter of a server, from its file name (hex
// SHA-256).
func slotOf(name string) int {
	n, _ := strconv.ParseUint(name[:8], 16, 32) // a Name is 64 hex digits
	return int(n % generationSlots)
}

// install records what a read or a write found, under e.mu; the caller sets
// the generation.
func (e *entry) install(rec record, st stamp, err error) {
	e.loaded, e.readAt, e.stamp, e.err = true, time.Now(), st, err
	e.genKnown = false
	if err == nil {
		e.rec = rec
	}
}

// total is the count of day from the entry's record, under e.mu.
func (e *entry) total(day string) int64 {
	var n int64
	if e.rec.day != "" && e.rec.day >= day {
		n = e.rec.bytes
	}
	if e.pending > 0 && e.pendingDay >= day {
		n = satAdd(n, e.pending)
	}
	return n
}

// warnFuture logs, once per day found, a count file dated after today,
// under e.mu.
func (s *Store) warnFuture(e *entry, day string) {
	if e.rec.day > day && e.warnedDay != e.rec.day {
		e.warnedDay = e.rec.day
		s.log.Warn("a usage file is dated after today (UTC): the clock went back or ran ahead; its count stays in force until that day passes",
			"server", e.server, "path", e.path, "file_day", e.rec.day, "today", day)
	}
}

// read reads the count file, under the server's lock. A missing file is
// the zero record.
func (e *entry) read() (record, stamp, error) {
	f, err := os.Open(e.path)
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, stamp{}, nil
	}
	if err != nil {
		return record{}, stamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return record{}, stamp{}, err
	}
	st := keyfile.StampOf(fi)
	if !fi.Mode().IsRegular() {
		return record{}, st, fmt.Errorf("%w: not a regular file", ErrCorrupt)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return record{}, st, err
	}
	if len(b) > maxFileSize {
		return record{}, st, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, maxFileSize)
	}
	rec, err := e.parse(b)
	return rec, st, err
}

// fileIn is a count file as read: every field must be present.
type fileIn struct {
	Server       *string `json:"server"`
	Day          *string `json:"day"`
	BytesWritten *int64  `json:"bytesWritten"`
}

// fileOut is a count file as written.
type fileOut struct {
	Server       string `json:"server"`
	Day          string `json:"day"`
	BytesWritten int64  `json:"bytesWritten"`
}

func (e *entry) parse(b []byte) (record, error) {
	var in fileIn
	if err := json.Unmarshal(b, &in); err != nil {
		return record{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case in.Server == nil || in.Day == nil || in.BytesWritten == nil:
		return record{}, fmt.Errorf(`%w: "server", "day" and "bytesWritten" are required`, ErrCorrupt)
	case *in.Server != e.want:
		return record{}, fmt.Errorf("%w: it holds the count of server %q", ErrCorrupt, *in.Server)
	case !validDay(*in.Day):
		return record{}, fmt.Errorf("%w: day %q is not a date YYYY-MM-DD", ErrCorrupt, *in.Day)
	case *in.BytesWritten < 0:
		return record{}, fmt.Errorf("%w: negative bytesWritten %d", ErrCorrupt, *in.BytesWritten)
	}
	return record{day: *in.Day, bytes: *in.BytesWritten}, nil
}

// write replaces the count file with rec, atomically and durably, under
// the server's exclusive lock, and returns the new file's stamp.
func (s *Store) write(e *entry, rec record) (stamp, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fileOut{Server: e.server, Day: rec.day, BytesWritten: rec.bytes}); err != nil {
		return stamp{}, err
	}
	return s.dir.Replace(e.name, buf.Bytes())
}

// dayOf is now's UTC date, YYYY-MM-DD; such dates order as strings.
func dayOf(now time.Time) (string, error) {
	if now.IsZero() {
		return "", errors.New("no time given (the zero time)")
	}
	t := now.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return "", fmt.Errorf("the time %s is out of range", t.Format(time.RFC3339))
	}
	return t.Format(time.DateOnly), nil
}

func validDay(s string) bool {
	t, err := time.Parse(time.DateOnly, s)
	return err == nil && t.Year() >= 1 && t.Format(time.DateOnly) == s
}

// roundTrip returns s as JSON reads it back: encoding/json replaces invalid
// UTF-8.
func roundTrip(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
