package executor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// ListOptions shape a listing.
type ListOptions struct {
	Recursive     bool
	IncludeHidden bool
	// MaxDepth bounds the recursion: 0 lists the directory's own entries
	// only, 1 their children too, and so on; negative means no bound.
	MaxDepth int
	// Limit is the most entries returned (at least 1).
	Limit int
	// Cursor continues a previous listing (its NextCursor).
	Cursor string
}

// Entry is one listed file system object. Links are reported as links: the
// size and time are the link's own (lstat), never its target's.
type Entry struct {
	Path     canon.Path
	Name     string
	Type     string
	Size     int64
	Modified time.Time
}

// ListResult is one page of a listing.
type ListResult struct {
	Entries    []Entry
	NextCursor string // empty on the last page
}

// List returns the entries under the directory at t, sorted by path segment
// by segment (a directory's entries come right after it). The broker's
// temporary files never appear; hidden entries (names starting with ".")
// appear only with IncludeHidden, and hidden directories are only descended
// then. Links are reported, never followed. The cursor is the last path
// returned, so a page stays correct when entries are added or removed
// between pages.
func (x *Executor) List(ctx context.Context, t Target, o ListOptions) (ListResult, error) {
	if err := deadline(ctx); err != nil {
		return ListResult{}, err
	}
	switch {
	case !t.Exists:
		return ListResult{}, errcode.New(errcode.FileNotFound, "the directory does not exist")
	case t.Info.Type != TypeDirectory:
		return ListResult{}, errcode.New(errcode.IOError, "the path is not a directory").With("errno", "ENOTDIR")
	}
	after, err := x.decodeCursor(o.Cursor)
	if err != nil {
		return ListResult{}, err
	}
	if o.Limit < 1 {
		o.Limit = 1
	}
	if !o.Recursive {
		o.MaxDepth = 0
	}
	h, err := x.handle(t.Path.Root)
	if err != nil {
		return ListResult{}, err
	}
	w := &walker{x: x, ctx: ctx, o: o, after: after, base: t.Path}
	rootDir, err := x.openDir(h, t.Path, t.Info)
	if err != nil {
		return ListResult{}, err
	}
	defer rootDir.Close()
	if err := w.walk(rootDir, nil, 0); err != nil && !errors.Is(err, errPageFull) {
		return ListResult{}, err
	}
	res := ListResult{Entries: w.out}
	if len(w.out) > o.Limit {
		res.Entries = w.out[:o.Limit]
		res.NextCursor = x.encodeCursor(relSegs(res.Entries[o.Limit-1].Path, t.Path))
	}
	return res, nil
}

// errPageFull stops the walk once a page and one more entry are collected.
var errPageFull = errors.New("page full")

type walker struct {
	x     *Executor
	ctx   context.Context
	o     ListOptions
	after []string // the cursor: segments below the listed directory
	base  canon.Path
	out   []Entry
}

// walk lists dir (at segments below the listed directory) depth first, in
// name order, skipping everything up to and including the cursor.
func (w *walker) walk(dir *os.Root, at []string, depth int) error {
	if err := deadline(w.ctx); err != nil {
		return err
	}
	d, err := dir.Open(joinPath(at))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && len(at) > 0 {
			return nil // removed while listing
		}
		return mapOSError(err, "the directory cannot be read")
	}
	ents, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return mapOSError(err, "the directory cannot be read")
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		name := e.Name()
		if IsTempName(name) || (!w.o.IncludeHidden && strings.HasPrefix(name, ".")) {
			continue
		}
		segs := append(append(make([]string, 0, len(at)+1), at...), name)
		pos := comparePaths(segs, w.after)
		within := len(w.after) > len(segs) && slices.Equal(w.after[:len(segs)], segs)
		if pos < 0 && !within {
			continue // before the cursor, subtree included
		}
		// The cursor's own entry and its ancestors were returned already;
		// what lies below them may not have been.
		if pos > 0 && !within {
			info, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return mapOSError(err, "an entry cannot be read")
			}
			w.out = append(w.out, Entry{
				Path:     canon.Path{Root: w.base.Root, Rel: joinRel(w.base.Rel, segs)},
				Name:     name,
				Type:     typeOf(info.Mode()),
				Size:     info.Size(),
				Modified: info.ModTime().UTC(),
			})
			if len(w.out) > w.o.Limit {
				return errPageFull
			}
		}
		if e.IsDir() && (w.o.MaxDepth < 0 || depth < w.o.MaxDepth) {
			if err := w.walk(dir, segs, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// comparePaths orders paths segment by segment.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func joinPath(segs []string) string {
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "/")
}

func joinRel(base string, segs []string) string {
	if base == "" {
		return strings.Join(segs, "/")
	}
	return base + "/" + strings.Join(segs, "/")
}

// relSegs returns the segments of p below dir.
func relSegs(p, dir canon.Path) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(p.Rel, dir.Rel), "/")
	return strings.Split(rel, "/")
}

// cursorVersion starts every cursor, so that the format can change.
const cursorVersion = "1\x00"

// encodeCursor seals the last path of a page. The cursor is opaque to the
// server: it is encrypted and authenticated under a key of this process, so
// that it never reveals the name of an entry the policy hid from the page,
// and a forged or altered cursor is refused.
func (x *Executor) encodeCursor(segs []string) string {
	nonce := make([]byte, x.cursorAEAD.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "" // no cursor: the listing ends here rather than leak
	}
	sealed := x.cursorAEAD.Seal(nonce, nonce, []byte(cursorVersion+strings.Join(segs, "/")), nil)
	return base64.RawURLEncoding.EncodeToString(sealed)
}

// decodeCursor opens a cursor; one this process did not make is
// INVALID_PARAMS.
func (x *Executor) decodeCursor(c string) ([]string, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	var plain []byte
	if err == nil && len(b) > x.cursorAEAD.NonceSize() {
		n := x.cursorAEAD.NonceSize()
		plain, err = x.cursorAEAD.Open(nil, b[:n], b[n:], nil)
	} else if err == nil {
		err = errors.New("short cursor")
	}
	rest, ok := strings.CutPrefix(string(plain), cursorVersion)
	if err != nil || !ok || rest == "" {
		return nil, errcode.New(errcode.InvalidParams, "the cursor is not one this broker returned").
			With("errors", []map[string]string{{"pointer": "/cursor", "message": "not a cursor returned by files/list"}})
	}
	return strings.Split(rest, "/"), nil
}
