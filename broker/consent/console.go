// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// NameConsole names the provider that asks the person at fsbroker console.
const NameConsole = "console"

// QueueDirName is the directory of the console's consent queue in the state
// directory: <state-dir>/consent.
const QueueDirName = "consent"

// The queue's files: request-<id>.json, written by a waiting broker, and
// answer-<id>.json, written by the console (or by the broker itself when it
// stops waiting). Both are created once, never replaced (atomicfile.Create):
// whoever creates the answer first decides the request.
const (
	requestPrefix = "request-"
	answerPrefix  = "answer-"
	queueExt      = ".json"
	queueVersion  = 1
	queueFileMode = 0o600
	queueDirMode  = 0o700
	// idBytes is the size of a request id: 128 random bits.
	idBytes = 16
	// maxQueueFile bounds a request or answer file read.
	maxQueueFile = 1 << 20
	// maxQueuePaths and maxQueuePathBytes bound what a request file may
	// name (PROTOCOL.md section 5 and 3).
	maxQueuePaths     = 100
	maxQueuePathBytes = 4096
	// maxQueueMessage bounds a request's message in bytes: 2000 characters
	// of up to four bytes each.
	maxQueueMessage = 8000
	// maxQueueList bounds a request's roots and removed paths.
	maxQueueList = 1000
	// DefaultConsolePoll is how often a waiting broker looks for its answer.
	DefaultConsolePoll = 100 * time.Millisecond
	// queueGrace is how long past its deadline a request file of a broker
	// that did not remove it (it was killed) is kept before Sweep removes it,
	// and how long an answer without its request is.
	queueGrace = 10 * time.Second
)

var (
	// ErrNoRequest: no consent request with that id is waiting: none was
	// made, its broker stopped waiting (its time limit), or it took its
	// answer already.
	ErrNoRequest = errors.New("consent: no such consent request is waiting")
	// ErrAnswered: the request has an answer already (another page, or the
	// broker withdrew it at its time limit).
	ErrAnswered = errors.New("consent: the consent request was answered already")
	// ErrNotAsked: an answer named a path the request did not ask about.
	ErrNotAsked = errors.New("consent: the answer names a path that was not asked about")
	// ErrUnsafeQueue: the state directory or the queue directory may be
	// written by another user (or is not a directory of this user's), so a
	// request or answer in it could be forged.
	ErrUnsafeQueue = errors.New("consent: the console's queue directory is not private")
)

// QueuedRequest is a consent request waiting in the queue: what a request
// file holds.
type QueuedRequest struct {
	// Version is 1.
	Version int `json:"version"`
	// ID names the request: 32 lowercase hex digits (128 random bits).
	ID string `json:"id"`
	// Created is when the broker put it in the queue (UTC).
	Created time.Time `json:"created"`
	// Deadline is when the broker stops waiting (UTC).
	Deadline time.Time `json:"deadline"`
	// PID is the broker process's id.
	PID int `json:"pid"`
	// Request is the question, as the corridor put it to the provider.
	Request Request `json:"request"`
}

// queuedAnswer is what an answer file holds.
type queuedAnswer struct {
	Version       int       `json:"version"`
	ID            string    `json:"id"`
	ApprovedPaths []string  `json:"approvedPaths"`
	Withdrawn     bool      `json:"withdrawn,omitempty"` // the broker stopped waiting: nothing approved
	Time          time.Time `json:"time"`
}

// Queue is the console's consent queue: a directory in the state directory,
// private to its user, shared by every broker process on the state directory
// and the console. See the package doc's section on the console.
type Queue struct {
	stateDir string
	dir      string
}

// OpenQueue opens the queue of the state directory stateDir, making the
// queue directory (0700, and the state directory, 0700, if missing). It fails,
// wrapping ErrUnsafeQueue, when the state directory is writable by group or
// others or the queue directory is open to them, or either is not this
// user's: another user could then forge requests and answers.
func OpenQueue(stateDir string) (*Queue, error) {
	q := &Queue{stateDir: filepath.Clean(stateDir), dir: filepath.Join(filepath.Clean(stateDir), QueueDirName)}
	if err := os.MkdirAll(q.dir, queueDirMode); err != nil {
		return nil, fmt.Errorf("consent: the console's queue: %w", err)
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	return q, nil
}

// Dir is the queue's directory.
func (q *Queue) Dir() string { return q.dir }

// Check checks, again, that the queue is private (OpenQueue's check).
func (q *Queue) Check() error {
	if err := checkPrivate(q.stateDir, q.dir); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsafeQueue, err)
	}
	return nil
}

func (q *Queue) requestPath(id string) string {
	return filepath.Join(q.dir, requestPrefix+id+queueExt)
}

func (q *Queue) answerPath(id string) string {
	return filepath.Join(q.dir, answerPrefix+id+queueExt)
}

// newRequestID returns a fresh request id.
func newRequestID() string {
	var b [idBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validRequestID reports whether id has the form of a request id.
func validRequestID(id string) bool {
	if len(id) != 2*idBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// put writes r's request file, once.
func (q *Queue) put(r QueuedRequest) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("consent: encode the request: %w", err)
	}
	if err := atomicfile.Create(q.requestPath(r.ID), b, queueFileMode); err != nil && !errors.Is(err, atomicfile.ErrNotDurable) {
		return fmt.Errorf("consent: queue the request: %w", err)
	}
	return nil
}

// answer creates id's answer file with a, unless one exists (ErrAnswered).
func (q *Queue) answer(a queuedAnswer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("consent: encode the answer: %w", err)
	}
	err = atomicfile.Create(q.answerPath(a.ID), b, queueFileMode)
	switch {
	case errors.Is(err, fs.ErrExist):
		return ErrAnswered
	case err != nil && !errors.Is(err, atomicfile.ErrNotDurable):
		return fmt.Errorf("consent: write the answer: %w", err)
	}
	return nil
}

// readAnswer reads id's answer: nil when there is none yet.
func (q *Queue) readAnswer(id string) (*queuedAnswer, error) {
	b, err := q.readFile(answerPrefix + id + queueExt)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a queuedAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("consent: the answer to %s: %w", id, err)
	}
	if a.Version != queueVersion || a.ID != id {
		return nil, fmt.Errorf("consent: the answer to %s: version %d for %.40q: not an answer to this request", id, a.Version, a.ID)
	}
	return &a, nil
}

// readRequest reads and checks id's request file.
func (q *Queue) readRequest(id string) (QueuedRequest, error) {
	var r QueuedRequest
	b, err := q.readFile(requestPrefix + id + queueExt)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("consent: the request %s: %w", id, err)
	}
	if err := r.check(id); err != nil {
		return r, fmt.Errorf("consent: the request %s: %w", id, err)
	}
	return r, nil
}

// readFile reads a regular file of the queue, not through a symbolic link,
// of at most maxQueueFile bytes. What it opens is checked again once open
// (another process may have put something else at the name since the
// Lstat), and the open does not wait (openQueueFile: a FIFO put there is
// refused, not waited on).
func (q *Queue) readFile(name string) ([]byte, error) {
	path := filepath.Join(q.dir, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("consent: %s is not a regular file", path)
	}
	root, err := os.OpenRoot(q.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openQueueFile(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxQueueFile || !ownFile(fi) {
		return nil, fmt.Errorf("consent: %s is not a regular file of this user's of at most %d bytes", path, maxQueueFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxQueueFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxQueueFile {
		return nil, fmt.Errorf("consent: %s is longer than %d bytes", path, maxQueueFile)
	}
	return b, nil
}

// remove removes id's files, the request first (the console stops showing
// it), then the answer.
func (q *Queue) remove(id string) {
	_ = os.Remove(q.requestPath(id))
	_ = os.Remove(q.answerPath(id))
}

// check checks a request read from the file of id: its version and id, and
// that what it names is within the protocol's bounds. Nothing it holds is
// trusted beyond that: it is shown, escaped, and an answer approves only
// paths it names, for the broker that waits on it, if any.
func (r *QueuedRequest) check(id string) error {
	req := &r.Request
	switch {
	case r.Version != queueVersion:
		return fmt.Errorf("version %d, want %d", r.Version, queueVersion)
	case r.ID != id:
		return fmt.Errorf("it names the id %.40q", r.ID)
	case req.Server.ID == "" || len(req.Server.ID) > maxQueuePathBytes || !utf8.ValidString(req.Server.ID):
		return errors.New("no valid server identity")
	case len(req.Server.Name) > maxQueuePathBytes || len(req.Server.Version) > maxQueuePathBytes:
		return errors.New("a server name or version too long")
	case req.Access != AccessRead && req.Access != AccessWrite:
		return fmt.Errorf("access %.16q", req.Access)
	case len(req.Paths) == 0 || len(req.Paths) > maxQueuePaths:
		return fmt.Errorf("%d paths, want 1 to %d", len(req.Paths), maxQueuePaths)
	case len(req.Message) > maxQueueMessage:
		return errors.New("a message too long")
	case len(req.Roots) > maxQueueList || len(req.Removed) > maxQueueList:
		return errors.New("too many roots or removed paths")
	}
	for i, p := range req.Paths {
		if p == "" || len(p) > maxQueuePathBytes || !utf8.ValidString(p) || slices.Contains(req.Paths[:i], p) {
			return fmt.Errorf("path %d is empty, too long, not UTF-8 or a repeat", i+1)
		}
	}
	return nil
}

// Pending returns the requests waiting for an answer at now, oldest first:
// those with no answer yet whose deadline has not passed. A request file
// that cannot be read or is malformed is left out, and named in the error.
func (q *Queue) Pending(now time.Time) ([]QueuedRequest, error) {
	des, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("consent: the console's queue: %w", err)
	}
	answered := map[string]bool{}
	for _, de := range des {
		if id, ok := idOf(de.Name(), answerPrefix); ok {
			answered[id] = true
		}
	}
	var (
		out  []QueuedRequest
		errs []error
	)
	for _, de := range des {
		id, ok := idOf(de.Name(), requestPrefix)
		if !ok || answered[id] {
			continue
		}
		r, err := q.readRequest(id)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // answered and removed since it was listed
		case err != nil:
			errs = append(errs, err)
			continue
		case !now.Before(r.Deadline):
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b QueuedRequest) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, errors.Join(errs...)
}

// idOf returns the request id a queue file's name holds after prefix.
func idOf(name, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, queueExt)
	return id, ok && validRequestID(id)
}

// Answer answers the waiting request id at now with the paths approved (a
// subset of its paths; none approves nothing) and returns the request. It
// fails with ErrNoRequest when no such request is waiting (none was made, or
// its deadline passed), ErrNotAsked when approved names a path the request
// did not ask about, and ErrAnswered when the request has an answer already:
// the first answer written stands, whoever wrote it.
func (q *Queue) Answer(id string, approved []string, now time.Time) (QueuedRequest, error) {
	if !validRequestID(id) {
		return QueuedRequest{}, ErrNoRequest
	}
	if err := q.Check(); err != nil {
		return QueuedRequest{}, err
	}
	r, err := q.readRequest(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, ErrNoRequest
	case err != nil:
		return r, err
	}
	if a, err := q.readAnswer(id); err != nil || a != nil {
		return r, ErrAnswered
	}
	if !now.Before(r.Deadline) {
		return r, ErrNoRequest
	}
	paths := []string{}
	for _, p := range approved {
		if !slices.Contains(r.Request.Paths, p) {
			return r, fmt.Errorf("%w: %.200q", ErrNotAsked, p)
		}
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return r, q.answer(queuedAnswer{Version: queueVersion, ID: id, ApprovedPaths: paths, Time: now.UTC()})
}

// Sweep removes what brokers that were killed while waiting left in the
// queue: request files more than 10 s past their deadline, with their
// answers, answers whose request is gone, and temporary files, each older
// than that.
func (q *Queue) Sweep(now time.Time) {
	des, err := os.ReadDir(q.dir)
	if err != nil {
		return
	}
	requests := map[string]bool{}
	for _, de := range des {
		if id, ok := idOf(de.Name(), requestPrefix); ok {
			requests[id] = true
		}
	}
	old := func(de fs.DirEntry) bool {
		fi, err := de.Info()
		return err == nil && now.Sub(fi.ModTime()) > queueGrace
	}
	for _, de := range des {
		name := de.Name()
		if id, ok := idOf(name, requestPrefix); ok {
			r, err := q.readRequest(id)
			if (err == nil && now.Sub(r.Deadline) > queueGrace) || (err != nil && !errors.Is(err, fs.ErrNotExist) && old(de)) {
				q.remove(id)
			}
			continue
		}
		id, isAnswer := idOf(name, answerPrefix)
		if (isAnswer && !requests[id] || strings.HasPrefix(name, atomicfile.TempPrefix)) && old(de) {
			_ = os.Remove(filepath.Join(q.dir, name))
		}
	}
}

// Watch calls fn (from one goroutine, one call at a time) whenever a file
// of the queue is created, changed or removed, by any process, until ctx
// ends. It returns once the watch is in place.
func (q *Queue) Watch(ctx context.Context, fn func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("consent: watch the console's queue: %w", err)
	}
	if err := w.Add(q.dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("consent: watch the console's queue: %w", err)
	}
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				fn()
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				fn() // an overflow: look again
			}
		}
	}()
	return nil
}

// Console asks the person at fsbroker console (--consent console): it puts
// the request in the state directory's queue and waits for the answer the
// console writes, up to its time limit.
type Console struct {
	queue   *Queue
	timeout time.Duration
	poll    time.Duration
}

// NewConsole returns the console provider of the state directory stateDir,
// opening its queue (OpenQueue: a queue open to other users is an error);
// WithTimeout bounds the wait for the person (DefaultTimeout).
func NewConsole(stateDir string, opts ...Option) (*Console, error) {
	q, err := OpenQueue(stateDir)
	if err != nil {
		return nil, err
	}
	o := newOptions(opts)
	return &Console{queue: q, timeout: o.timeout, poll: DefaultConsolePoll}, nil
}

// Ask puts req in the queue and returns the paths the person approves at
// the console. No answer within the time limit (no console running, or
// nobody at it) approves nothing and returns an error; so does a queue that
// is not private.
func (c *Console) Ask(ctx context.Context, req Request) (Decision, error) {
	d := Decision{Provider: NameConsole}
	req, err := req.normalize()
	if err != nil {
		return d, err
	}
	if len(req.Paths) == 0 {
		return d, nil
	}
	if err := c.queue.Check(); err != nil {
		return d, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	now := time.Now().UTC()
	deadline, _ := ctx.Deadline()
	if req.Roots == nil {
		req.Roots = []Root{}
	}
	if req.Removed == nil {
		req.Removed = []Removed{}
	}
	id := newRequestID()
	if err := c.queue.put(QueuedRequest{Version: queueVersion, ID: id, Created: now, Deadline: deadline.UTC(),
		PID: os.Getpid(), Request: req}); err != nil {
		return d, err
	}
	defer c.queue.remove(id)
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	for {
		if err := c.queue.Check(); err != nil {
			return d, err // opened to others while waiting: no answer in it counts
		}
		a, err := c.queue.readAnswer(id)
		if err != nil {
			return d, err // a malformed answer approves nothing
		}
		if a != nil {
			return c.decided(d, req, a)
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		// The broker withdraws the request by writing its answer: an
		// answer of the person's written first stands.
		err = c.queue.answer(queuedAnswer{Version: queueVersion, ID: id, ApprovedPaths: []string{}, Withdrawn: true, Time: time.Now().UTC()})
		if errors.Is(err, ErrAnswered) {
			if a, err := c.queue.readAnswer(id); err == nil && a != nil {
				return c.decided(d, req, a)
			}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return d, fmt.Errorf("consent console: no answer within the time limit (is fsbroker console running on this state directory?): %w", ctx.Err())
		}
		return d, fmt.Errorf("consent console: the request was withdrawn: %w", ctx.Err())
	}
}

// decided turns an answer into the decision: the requested paths it
// approves; a withdrawn answer approves nothing.
func (c *Console) decided(d Decision, req Request, a *queuedAnswer) (Decision, error) {
	if a.Withdrawn {
		return d, errors.New("consent console: the request was withdrawn")
	}
	d.Approved = keep(req.Paths, a.ApprovedPaths)
	return d, nil
}

var _ Provider = (*Console)(nil)
