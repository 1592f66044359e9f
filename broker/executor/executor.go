// Package executor performs file operations inside roots, and only there.
// Every operation goes through an os.Root handle (one per root, held for the
// process's lifetime), so "..", absolute links and links out of the root are
// refused by the kernel-facing code, not by string checks. It knows nothing of
// JSON-RPC or policy: the broker resolves a path here, decides on the result,
// and then asks for the operation.
//
// Guarantees:
//   - Resolve follows symbolic links step by step through the root handle and
//     refuses any link that leaves the root, so the caller decides on the real
//     target (the canonical path).
//   - Before an operation acts on what was decided, it checks that it is still
//     the same object (device and inode); otherwise CONCURRENCY_CONFLICT.
//   - FIFOs, sockets and devices are never opened.
//   - Writes replace files atomically (temporary file in the same directory,
//     fsync, rename, fsync of the directory) under an exclusive lock that
//     several broker processes sharing a state directory respect.
package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// WithLogger sets the logger.
func WithLogger(l hclog.Logger) Option { return func(x *Executor) { x.log = l } }

// Executor performs confined file operations. It is safe for concurrent use.
type Executor struct {
	lockDir  string
	lockWait time.Duration
	log      hclog.Logger
	locks    *lockTable

	mu      sync.Mutex
	handles map[string]*os.Root // by root directory; never closed before Close
}

// New returns an executor whose cross-process locks live under
// stateDir/locks (created with mode 0700).
func New(stateDir string, opts ...Option) (*Executor, error) {
	lockDir := filepath.Join(stateDir, "locks")
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	x := &Executor{
		lockDir:  lockDir,
		lockWait: DefaultLockWait,
		log:      hclog.NewNullLogger(),
		locks:    newLockTable(),
		handles:  make(map[string]*os.Root),
	}
	for _, o := range opts {
		o(x)
	}
	return x, nil
}

// Close releases the root handles.
func (x *Executor) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for dir, h := range x.handles {
		errs = append(errs, h.Close())
		delete(x.handles, dir)
	}
	return errors.Join(errs...)
}

// handle returns the root handle of r, opening it on first use. A root
// added by a config reload is opened when it is first used.
func (x *Executor) handle(r roots.Root) (*os.Root, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if h, ok := x.handles[r.Path]; ok {
		return h, nil
	}
	h, err := os.OpenRoot(r.Path)
	if err != nil {
		return nil, errcode.Wrap(errcode.IOError, "the root cannot be opened", err)
	}
	x.handles[r.Path] = h
	return h, nil
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

// sameObject reports whether two infos describe the same file system object.
// Where the platform gives no inode numbers, it compares nothing and says yes.
func sameObject(a, b Info) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino
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
	// parent describes the parent directory, when ParentExists.
	parent Info
}

// Resolve finds the canonical path of p: each symbolic link on the way is
// read through the root handle and applied lexically; a link with an
// absolute target or one that climbs above the root is refused with
// PERMISSION_DENIED, as is a chain of more than 40 links. With follow false
// a link in the last segment is not followed (for delete and rename, which
// act on the link itself). A path below a missing directory resolves to a
// Target that does not exist; a path below a file is FILE_NOT_FOUND.
func (x *Executor) Resolve(p canon.Path, follow bool) (Target, error) {
	h, err := x.handle(p.Root)
	if err != nil {
		return Target{}, err
	}
	rootInfo, err := h.Lstat(".")
	if err != nil {
		return Target{}, mapOSError(err, "the root cannot be read")
	}
	if p.Rel == "" {
		ri := infoOf(rootInfo)
		return Target{Path: p, Exists: true, Info: ri, ParentExists: true, parent: ri}, nil
	}
	segs := strings.Split(p.Rel, "/")
	var done []string
	parent := infoOf(rootInfo)
	hops := 0
	for i := 0; i < len(segs); i++ {
		rel := joinSegs(done, segs[i])
		fi, err := h.Lstat(rel)
		last := i == len(segs)-1
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				t := Target{Path: canon.Path{Root: p.Root, Rel: strings.Join(append(append([]string(nil), done...), segs[i:]...), "/")}}
				if last {
					t.ParentExists, t.parent = true, parent
				}
				return t, nil
			}
			return Target{}, mapOSError(err, "the path cannot be resolved")
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (!last || follow) {
			hops++
			if hops > maxLinkHops {
				return Target{}, errcode.New(errcode.IOError, "too many levels of symbolic links").With("errno", "ELOOP")
			}
			target, err := h.Readlink(rel)
			if err != nil {
				return Target{}, mapOSError(err, "a symbolic link cannot be read")
			}
			next, ok := applyLink(done, target)
			if !ok {
				return Target{}, errcode.New(errcode.PermissionDenied, "a symbolic link on the path leaves the root")
			}
			segs = append(next, segs[i+1:]...)
			done, i, parent = nil, -1, infoOf(rootInfo)
			if len(segs) == 0 { // the link points at the root itself
				ri := infoOf(rootInfo)
				return Target{Path: canon.Path{Root: p.Root}, Exists: true, Info: ri, ParentExists: true, parent: ri}, nil
			}
			continue
		}
		if last {
			return Target{Path: canon.Path{Root: p.Root, Rel: rel}, Exists: true, Info: infoOf(fi),
				ParentExists: true, parent: parent}, nil
		}
		if !fi.IsDir() {
			return Target{}, errcode.New(errcode.FileNotFound, "a parent of the path is not a directory").With("errno", "ENOTDIR")
		}
		parent = infoOf(fi)
		done = append(done, segs[i])
	}
	panic("unreachable")
}

// applyLink returns the segments that a link in directory dir with the given
// target names, or false when the target is absolute or climbs above the
// root.
func applyLink(dir []string, target string) ([]string, bool) {
	target = filepath.ToSlash(target)
	if target == "" || strings.HasPrefix(target, "/") || filepath.IsAbs(target) || filepath.VolumeName(target) != "" {
		return nil, false
	}
	out := append([]string(nil), dir...)
	for _, s := range strings.Split(target, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) == 0 {
				return nil, false
			}
			out = out[:len(out)-1]
		default:
			out = append(out, s)
		}
	}
	return out, true
}

func joinSegs(done []string, name string) string {
	if len(done) == 0 {
		return name
	}
	return strings.Join(done, "/") + "/" + name
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
