// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package executor performs file operations inside roots, and only there.
// Every operation goes through an os.Root handle (one per root, held for the
// process's lifetime, and checked when opened to be the directory the root
// was resolved as), so "..", absolute links and links out of the root are
// refused by the kernel-facing code, not by string checks. On Linux,
// resolution and reads of paths with no link on them take a fast path
// instead: openat2(2) relative to a descriptor of the root with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, where the kernel refuses the same
// things (and every link, which sends the path back to os.Root). It knows
// nothing of JSON-RPC or policy: the broker resolves a path here, decides on
// the result, and then asks for the operation.
//
// Guarantees:
//   - Resolve follows symbolic links step by step through the root handle and
//     refuses any link that leaves the root, so the caller decides on the real
//     target (the canonical path).
//   - Before an operation acts on what was decided, it checks that it is still
//     the same object (device and inode); otherwise CONCURRENCY_CONFLICT.
//   - A root whose path names another directory than the one it was resolved
//     as (replaced after start-up, by a link or otherwise) is refused with
//     PERMISSION_DENIED, never followed; a reload resolves it again.
//   - Changes never act by a path resolved again after the checks: a rename
//     moves an entry between the two parent directory handles it checked
//     (renameat; only where there is none, as on Windows, a rename across two
//     directories goes by path from the root), and missing parents are made
//     one level at a time through the handle of the level above, never
//     through a link.
//   - A recursive delete removes the entries it was decided on (the listing
//     given to Delete) and nothing else: it verifies through directory
//     handles that the tree holds exactly those objects, then removes them
//     bottom-up by name, a directory only once empty, so an entry moved in
//     meanwhile is never removed (on Windows, the tree as it is then).
//   - With the operator's roots known (WithRoots), nothing is made, written,
//     deleted or renamed in or beneath a root's directory reached through
//     another root's path (a nested root moved into its outer root, found
//     going up from the directory changed), and a root's directory is never
//     renamed, replaced or deleted, whatever its path.
//   - FIFOs, sockets and devices are never opened.
//   - Writes replace files atomically (temporary file in the same directory,
//     fsync, rename, fsync of the directory) under an exclusive lock that
//     several broker processes sharing a state directory respect.
package executor

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// DefaultLockWait is how long an operation waits for a lock before it fails
// with CONCURRENCY_CONFLICT.
const DefaultLockWait = 5 * time.Second

// maxLinkHops bounds the symbolic links followed while resolving one path.
const maxLinkHops = 40

// Option configures an Executor.
type Option func(*Executor)

// WithLockWait sets how long an operation waits for a lock.
func WithLockWait(d time.Duration) Option {
	return func(x *Executor) {
		if d > 0 {
			x.lockWait = d
		}
	}
}

// WithLockWaits has waited hear of every operation that waited for a lock
// another operation held, in this process or another: how long it waited
// for its locks, and the error it got instead of them (nil: it got them).
// An operation that got every lock at once is not told of. waited runs on
// the operation's goroutine and must return at once (the process's
// metrics).
func WithLockWaits(waited func(d time.Duration, err error)) Option {
	return func(x *Executor) { x.lockWaited = waited }
}

// WithLogger sets the logger.
func WithLogger(l hclog.Logger) Option { return func(x *Executor) { x.log = l } }

// WithRoots tells the executor the operator's roots: current returns them as
// they are now (it is called on each check, so a config reload is seen).
// Then nothing is made, written, deleted or renamed through one root's path
// in or beneath a directory that is another root's, found by its device and
// inode (a
// read-only root nested in a writable one stays read-only even when its
// directory is moved or linked into the outer one), and no root's directory
// is renamed, replaced or deleted, however it is reached. Without it the
// executor knows only the root of each request.
func WithRoots(current func() *roots.Set) Option {
	return func(x *Executor) {
		if current != nil {
			x.roots = current
		}
	}
}

// Executor performs confined file operations. It is safe for concurrent use.
type Executor struct {
	lockDir  string
	lockWait time.Duration
	log      hclog.Logger
	locks    *lockTable
	// lockWaited hears of the waits for locks (WithLockWaits); nil: nobody.
	lockWaited func(d time.Duration, err error)

	// cursorAEAD seals listing cursors under a key of this process.
	cursorAEAD cipher.AEAD
	// epoch starts the executor's own clock (see now).
	epoch time.Time
	// snaps keeps the sorted names of large directories between the pages
	// of their listings.
	snaps snapCache

	// roots returns the operator's roots (WithRoots); nil when not known.
	roots func() *roots.Set

	// noFast turns the Linux fast paths off (see fastRoot), so that tests
	// can run every check through the portable paths too.
	noFast bool

	mu      sync.RWMutex
	handles map[rootKey]*rootHandle // never closed before Close
}

// rootKey identifies a root's handles: its directory and the identity it had
// when it was resolved. A config reload that finds another directory at a
// root's path (a fresh identity) gets handles of its own, checked against
// that identity: the reload re-pins the root.
type rootKey struct {
	path string
	id   roots.FileID
}

// rootHandle is what the executor holds open for one root.
type rootHandle struct {
	// root confines every path-based operation to the root.
	root *os.Root
	// info describes the root directory as it was when opened, when known.
	// Only its identity (device, inode, type) is ever used from it: the
	// handle holds that very directory, so its identity cannot change.
	info      Info
	infoKnown bool
	// fast is a raw descriptor of the same directory for the Linux fast
	// paths of Resolve and Read; nil (off) elsewhere, or when unusable.
	fast *fastRoot
}

// rootInfo returns the root directory's info for its identity: the one
// taken when the handle was opened, else a fresh lstat.
func (rh *rootHandle) rootInfo() (Info, error) {
	if rh.infoKnown {
		return rh.info, nil
	}
	fi, err := rh.root.Lstat(".")
	if err != nil {
		return Info{}, mapOSError(err, "the root cannot be read")
	}
	return infoOf(fi), nil
}

// New returns an executor whose cross-process locks live under
// stateDir/locks (created with mode 0700).
func New(stateDir string, opts ...Option) (*Executor, error) {
	lockDir := filepath.Join(stateDir, "locks")
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	x := &Executor{
		lockDir:    lockDir,
		lockWait:   DefaultLockWait,
		log:        hclog.NewNullLogger(),
		locks:      newLockTable(),
		handles:    make(map[rootKey]*rootHandle),
		cursorAEAD: aead,
		epoch:      time.Now(),
		snaps:      newSnapCache(),
	}
	for _, o := range opts {
		o(x)
	}
	return x, nil
}

// Close releases the root handles and the listing snapshots.
func (x *Executor) Close() error {
	x.snaps.close()
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for dir, rh := range x.handles {
		errs = append(errs, rh.fast.close(), rh.root.Close())
		delete(x.handles, dir)
	}
	return errors.Join(errs...)
}

// handle returns the os.Root handle of r, opening it on first use.
func (x *Executor) handle(r roots.Root) (*os.Root, error) {
	rh, err := x.rootHandle(r)
	if err != nil {
		return nil, err
	}
	return rh.root, nil
}

// rootHandle returns the handles of r, opening them on first use. A root
// added by a config reload is opened when it is first used. Both handles are
// checked to be the directory r was resolved as (r.ID, where known): a root
// replaced since (by a link to another tree, say) is refused, never
// followed, until a reload resolves it again. A refusal is not kept: the
// root is tried again on its next use.
func (x *Executor) rootHandle(r roots.Root) (*rootHandle, error) {
	key := rootKey{path: r.Path, id: r.ID}
	x.mu.RLock()
	rh, ok := x.handles[key]
	x.mu.RUnlock()
	if ok {
		return rh, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if rh, ok := x.handles[key]; ok {
		return rh, nil
	}
	h, err := os.OpenRoot(r.Path)
	if err != nil {
		if r.ID.Known() && isGoneErr(err) {
			return nil, rootReplaced(r)
		}
		return nil, errcode.Wrap(errcode.IOError, "the root cannot be opened", err)
	}
	rh = &rootHandle{root: h}
	fi, err := h.Lstat(".")
	switch {
	case err == nil:
		rh.info, rh.infoKnown = infoOf(fi), true
	case r.ID.Known():
		_ = h.Close()
		return nil, mapOSError(err, "the root cannot be read")
	}
	if r.ID.Known() && (fileID(rh.info) != r.ID || rh.info.Type != TypeDirectory) {
		_ = h.Close()
		return nil, rootReplaced(r)
	}
	if !x.noFast && rh.infoKnown {
		fr, err := openFastRoot(r.Path, rh.info)
		if errors.Is(err, errRootMoved) {
			// The path named another directory by the second open.
			_ = h.Close()
			return nil, rootReplaced(r)
		}
		if err != nil {
			x.log.Debug("fast paths off for a root", "root", r.Mount, "error", err)
		}
		rh.fast = fr
	}
	x.handles[key] = rh
	return rh, nil
}

// errRootMoved says that a root's path, opened again, named another
// directory than the one its first handle holds.
var errRootMoved = errors.New("executor: the root's path names another directory")

// rootReplaced is the refusal of a root whose directory is no longer the one
// it was resolved as.
func rootReplaced(r roots.Root) error {
	return errcode.New(errcode.PermissionDenied,
		fmt.Sprintf("the root %s was replaced since it was configured (reload the configuration to use the new directory)", r.Mount))
}

// fileID is the identity of info as package roots records it.
func fileID(info Info) roots.FileID { return roots.FileID{Dev: info.Dev, Ino: info.Ino} }

// otherRoot returns the root, other than own, whose directory info
// describes, among the operator's roots (WithRoots). A directory of a root
// reached through another root's path (a nested root moved or linked into
// the outer one) is never changed, entered or moved through there.
func (x *Executor) otherRoot(own roots.Root, info Info) (roots.Root, bool) {
	if x.roots == nil || info.Type != TypeDirectory {
		return roots.Root{}, false
	}
	id := fileID(info)
	if !id.Known() {
		return roots.Root{}, false
	}
	for _, r := range x.roots().All() {
		if r.ID == id && r.Path != own.Path {
			return r, true
		}
	}
	return roots.Root{}, false
}

// nestedIn returns the operator's roots (WithRoots) whose directories were
// beneath own's when they were resolved, with a known identity: the only
// roots whose directories another program can move to another place inside
// own.
func (x *Executor) nestedIn(own roots.Root) []roots.Root {
	if x.roots == nil {
		return nil
	}
	prefix := strings.TrimSuffix(own.Path, string(filepath.Separator)) + string(filepath.Separator)
	var nested []roots.Root
	for _, r := range x.roots().All() {
		if r.ID.Known() && r.Path != own.Path && strings.HasPrefix(r.Path, prefix) {
			nested = append(nested, r)
		}
	}
	return nested
}

// inOtherRoot is the refusal of a directory that is another root's (see
// otherRoot).
func inOtherRoot(r roots.Root) error {
	return errcode.New(errcode.PermissionDenied,
		fmt.Sprintf("a directory on the path is the root %s, which is changed only through its own mount", r.Mount))
}

// Type names of list entries and path info.
const (
	TypeFile      = "file"
	TypeDirectory = "directory"
	TypeSymlink   = "symlink"
	TypeOther     = "other"
)

// Info is what the executor knows of a file system object (from lstat).
type Info struct {
	Type    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	Nlink   uint64
	Dev     uint64
	Ino     uint64
	Ctime   int64 // status change time, in nanoseconds (0 where unknown)
}

func infoOf(fi fs.FileInfo) Info {
	id := identityOf(fi)
	return Info{
		Type:    typeOf(fi.Mode()),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
		Nlink:   id.nlink,
		Dev:     id.dev,
		Ino:     id.ino,
		Ctime:   id.ctime,
	}
}

func typeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDirectory
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	default:
		return TypeOther
	}
}

// sameObject reports whether two infos describe the same file system object:
// same device, inode and type (a freed inode number can come back as another
// kind of object). Where the platform gives no inode numbers, only the type
// is compared.
func sameObject(a, b Info) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Type == b.Type
}

// sameVersion reports whether two infos describe the same object, unchanged:
// sameObject, and the same status change time where the platform gives one.
// A file system hands a freed inode number to the next file it creates, so a
// file replaced twice by renames can come back under the number it was
// resolved with; its change time then differs (it is the new file's creation
// or later), which sameObject alone would miss. A write into the file, a
// chmod or a new link changes it too: all are a change under the operation.
// (Change times have the file system's clock granularity, a few milliseconds
// on some kernels: a number reused within one tick still passes.)
func sameVersion(a, b Info) bool {
	return sameObject(a, b) && (a.Ctime == 0 || b.Ctime == 0 || a.Ctime == b.Ctime)
}

// Target is a resolved path: the canonical path (symbolic links inside the
// root resolved) and what is there now.
type Target struct {
	// Path is the canonical path.
	Path canon.Path
	// Exists is true when something is at Path.
	Exists bool
	// Info describes it (lstat), when Exists.
	Info Info
	// ParentExists is true when Path's parent directory exists (always
	// true when Exists).
	ParentExists bool
	// parent describes the parent directory, when ParentExists; zero in a
	// target ResolveRead kept open (a write given one fails its parent's
	// identity check: CONCURRENCY_CONFLICT).
	parent Info
	// held is the file itself, kept open O_PATH from ResolveRead to
	// Release; nil for any other target.
	held *heldFile
}

// Release closes what the target holds open (ResolveRead); it does nothing
// for other targets, and nothing the second time. Every copy of a target
// shares what it holds: after Release, a Read of any copy looks the path up
// again.
func (t Target) Release() {
	if t.held != nil {
		t.held.release()
	}
}

// ResolveRead is Resolve with links followed, for a read of the target: on
// Linux, when the path has no symbolic link on it and names a regular file,
// it is looked up in one openat2(2) confined to the root (no link followed,
// nothing above the root) that opens it O_PATH (which opens nothing: no FIFO
// or device open), and the object found is kept open until Release, so that
// Read reopens that very object for reading instead of looking the path up
// and checking it again. A target it returns without holding anything (any
// other path, or another platform) is Resolve's. The caller calls Release
// once the read is done or refused: a kept target holds one descriptor.
func (x *Executor) ResolveRead(ctx context.Context, p canon.Path) (Target, error) {
	if err := deadline(ctx); err != nil {
		return Target{}, err
	}
	rh, err := x.rootHandle(p.Root)
	if err != nil {
		return Target{}, err
	}
	if t, ok := rh.fast.resolveHeld(p); ok {
		return t, nil
	}
	if t, ok := rh.fast.resolve(p, true, rh.info); ok {
		return t, nil
	}
	return x.resolveSlow(ctx, rh, p, true)
}

// Resolve finds the canonical path of p, as the kernel would: segment by
// segment, through one open directory handle at a time (so the cost grows
// with the depth, not its square), reading each symbolic link on the way
// and walking its target in place of it; a ".." in a target steps back from
// the directory reached so far. A link with an absolute target, or one whose
// ".." would climb above the root, is refused with PERMISSION_DENIED; so is
// a chain of more than 40 links (IO_ERROR, ELOOP). With follow false a link
// in the last segment is not followed (for delete and rename, which act on
// the link itself). A path below a missing directory or below a file
// resolves to a Target that does not exist. ctx bounds the walk.
//
// On Linux a path with no symbolic link on it is resolved in one lookup
// (fastRoot.resolve), with the same result as the walk; any other is walked.
func (x *Executor) Resolve(ctx context.Context, p canon.Path, follow bool) (Target, error) {
	if err := deadline(ctx); err != nil {
		return Target{}, err
	}
	rh, err := x.rootHandle(p.Root)
	if err != nil {
		return Target{}, err
	}
	if t, ok := rh.fast.resolve(p, follow, rh.info); ok {
		return t, nil
	}
	return x.resolveSlow(ctx, rh, p, follow)
}

// resolveSlow is Resolve's walk, segment by segment through the root's
// os.Root handle.
func (x *Executor) resolveSlow(ctx context.Context, rh *rootHandle, p canon.Path, follow bool) (Target, error) {
	h := rh.root
	// The root's identity, for the parent of its entries; its full info is
	// read afresh below when the path is the root itself.
	rootInfo, err := rh.rootInfo()
	if err != nil {
		return Target{}, err
	}
	w := resolveWalk{h: h, root: p.Root, rootInfo: rootInfo}
	defer w.closeDir()

	var todo []string
	if p.Rel != "" {
		todo = strings.Split(p.Rel, "/")
	}
	hops := 0
	for len(todo) > 0 {
		if err := deadline(ctx); err != nil {
			return Target{}, err
		}
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if err := w.up(); err != nil {
				return Target{}, err
			}
			continue
		}
		last := onlyDots(todo)
		dir, err := w.dirHandle()
		if err != nil {
			return Target{}, err
		}
		fi, err := dir.Lstat(name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return Target{}, mapOSError(err, "the path cannot be resolved")
			}
			if slices.Contains(todo, "..") {
				return Target{}, errcode.New(errcode.FileNotFound, "a directory on the path does not exist")
			}
			t := Target{Path: w.path(append([]string{name}, cleanSegs(todo)...)...)}
			if last {
				t.ParentExists, t.parent = true, w.dirInfo()
			}
			return t, nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (!last || follow) {
			if hops++; hops > maxLinkHops {
				return Target{}, errcode.New(errcode.IOError, "too many levels of symbolic links").With("errno", "ELOOP")
			}
			target, err := dir.Readlink(name)
			if err != nil {
				return Target{}, mapOSError(err, "a symbolic link cannot be read")
			}
			target = filepath.ToSlash(target)
			if target == "" || strings.HasPrefix(target, "/") || filepath.IsAbs(target) || filepath.VolumeName(target) != "" {
				return Target{}, errcode.New(errcode.PermissionDenied, "a symbolic link on the path leaves the root")
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if last {
			return Target{Path: w.path(name), Exists: true, Info: infoOf(fi), ParentExists: true, parent: w.dirInfo()}, nil
		}
		if !fi.IsDir() {
			// Nothing can be below a file: the path does not exist. It is
			// told as such only after the decision, so that what lies on
			// the path of a denied request does not leak.
			return Target{Path: w.path(append([]string{name}, cleanSegs(todo)...)...)}, nil
		}
		if err := w.down(name, infoOf(fi)); err != nil {
			return Target{}, err
		}
	}
	// The walk ended on a directory reached through ".." or "." (or the
	// root itself).
	if len(w.done) == 0 {
		// The root itself: its size, times and link count as they are now.
		fi, err := h.Lstat(".")
		if err != nil {
			return Target{}, mapOSError(err, "the root cannot be read")
		}
		now := infoOf(fi)
		return Target{Path: canon.Path{Root: p.Root}, Exists: true, Info: now, ParentExists: true, parent: now}, nil
	}
	parent := rootInfo
	if len(w.infos) > 1 {
		parent = w.infos[len(w.infos)-2]
	}
	return Target{Path: w.path(), Exists: true, Info: w.dirInfo(), ParentExists: true, parent: parent}, nil
}

// resolveWalk is Resolve's position: the real directories walked so far,
// their infos, and an open handle on the last one.
type resolveWalk struct {
	h        *os.Root
	root     roots.Root
	rootInfo Info
	done     []string
	infos    []Info
	dir      *os.Root // handle of done; nil when not open (the root's own handle serves the root)
}

// dirHandle returns a handle on the directory reached so far.
func (w *resolveWalk) dirHandle() (*os.Root, error) {
	if len(w.done) == 0 {
		return w.h, nil
	}
	if w.dir == nil {
		d, err := w.h.OpenRoot(strings.Join(w.done, "/"))
		if err != nil {
			return nil, mapOSError(err, "a directory on the path cannot be opened")
		}
		w.dir = d
	}
	return w.dir, nil
}

// down steps into the subdirectory name of the current directory.
func (w *resolveWalk) down(name string, info Info) error {
	parent, err := w.dirHandle()
	if err != nil {
		return err
	}
	next, err := parent.OpenRoot(name)
	if err != nil {
		return mapOSError(err, "a directory on the path cannot be opened")
	}
	w.closeDir()
	w.dir = next
	w.done = append(w.done, name)
	w.infos = append(w.infos, info)
	return nil
}

// up steps back to the parent directory (a ".." in a link's target).
func (w *resolveWalk) up() error {
	if len(w.done) == 0 {
		return errcode.New(errcode.PermissionDenied, "a symbolic link on the path leaves the root")
	}
	w.closeDir() // reopened from the root when next needed
	w.done = w.done[:len(w.done)-1]
	w.infos = w.infos[:len(w.infos)-1]
	return nil
}

func (w *resolveWalk) closeDir() {
	if w.dir != nil {
		_ = w.dir.Close()
		w.dir = nil
	}
}

func (w *resolveWalk) dirInfo() Info {
	if len(w.infos) == 0 {
		return w.rootInfo
	}
	return w.infos[len(w.infos)-1]
}

// path returns the canonical path of the directory reached, with more
// segments appended.
func (w *resolveWalk) path(more ...string) canon.Path {
	segs := append(append([]string(nil), w.done...), more...)
	return canon.Path{Root: w.root, Rel: strings.Join(segs, "/")}
}

// onlyDots reports whether the segments left name the same object as what
// precedes them ("", ".").
func onlyDots(segs []string) bool {
	for _, s := range segs {
		if s != "" && s != "." {
			return false
		}
	}
	return true
}

// cleanSegs drops empty and "." segments.
func cleanSegs(segs []string) []string {
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// deadline turns an ended context into the operation's error.
func deadline(ctx context.Context) error {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errcode.Wrap(errcode.Timeout, "the operation passed its deadline", err)
	default:
		return errcode.Wrap(errcode.Timeout, "the operation was cancelled", err)
	}
}

// mapOSError turns an OS error into a brokered error. The reason never
// contains a host path: only the caller's words and the errno name.
func mapOSError(err error, reason string) error {
	var e *errcode.Error
	if errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errcode.Wrap(errcode.FileNotFound, "the path does not exist", err)
	case isEscape(err):
		return errcode.Wrap(errcode.PermissionDenied, "the path leaves its root", err)
	}
	out := errcode.Wrap(errcode.IOError, reason, err)
	if name := errnoName(err); name != "" {
		out.With("errno", name)
		out.Reason = reason + " (" + name + ")"
	}
	return out
}

// isEscape reports os.Root's refusal of a path that leaves the root.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
