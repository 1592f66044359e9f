// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Reading a trail is not verifying it: a [Reader] needs no key and believes what the lines
// say. Anyone who can write the log directory can make a reader show anything; [Verify] is
// what proves the records are the ones the broker wrote.

// ReadError is a line of a trail that is not a record, or a file (or directory) that could not
// be read. Reading goes on after it. It says nothing about tampering: run [Verify] for that.
type ReadError struct {
	// File is the segment file (or the directory).
	File string
	// Line is the 1-based line; 0 for a problem with the file as a whole.
	Line int
	// Err is what is wrong.
	Err error
}

// Error formats the error as "file:line: err".
func (e *ReadError) Error() string {
	return fmt.Sprintf("audit: read %s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the underlying error.
func (e *ReadError) Unwrap() error { return e.Err }

// ErrNotRecord is the Err of a [ReadError] for a complete line that is not a record.
var ErrNotRecord = errors.New("the line is not a record (run fsbroker audit verify)")

// Filter selects records. Each non-zero member must match; the zero Filter matches every
// record except segment headers and checkpoint records, which are only read when Kind names
// them.
type Filter struct {
	// Server matches the record's server exactly.
	Server string
	// Method matches the record's JSON-RPC method exactly (files/write, ...).
	Method string
	// Tool matches the tool a forward record names exactly (forwarded tools/call requests).
	Tool string
	// Kind matches the record's kind exactly.
	Kind Kind
	// Decision is "allow" or "deny": decision records with that outcome; "" for any record.
	Decision string
	// Code matches a decision's code or an outcome's outcome ("ok" or the error code) exactly.
	Code string
	// PathPrefix matches a record with any path equal to it or below it, at a path segment
	// boundary: "/a/b" matches "/a/b" and "/a/b/c", not "/a/bc". A trailing separator is
	// ignored; "/" matches every absolute path.
	PathPrefix string
	// PathDigest matches a record with any path equal to it (with audit.redactPaths, paths are
	// kept as [PathDigest]s).
	PathDigest string
	// Since keeps records at or after it (inclusive); zero for no bound.
	Since time.Time
	// Until keeps records before it (exclusive); zero for no bound.
	Until time.Time
	// SessionID matches the record's session exactly.
	SessionID string
	// DecisionID matches the record's decision id exactly (a decision and its outcome).
	DecisionID string
}

// allKinds are the kinds a Filter may name.
var allKinds = append(slices.Clone(callerKinds), KindSegmentStart, KindCheckpoint, KindRetention)

// Validate reports a filter that cannot match as meant: an unknown kind or decision, a
// malformed path digest, or an empty time range.
func (f *Filter) Validate() error {
	switch {
	case f.Kind != "" && !slices.Contains(allKinds, f.Kind):
		return fmt.Errorf("audit: filter: unknown kind %.32q", f.Kind)
	case f.Decision != "" && f.Decision != "allow" && f.Decision != "deny":
		return fmt.Errorf("audit: filter: decision %.32q: want allow or deny", f.Decision)
	case f.PathDigest != "" && !IsPathDigest(f.PathDigest):
		return fmt.Errorf("audit: filter: path digest %.80q: want %s and 64 hex digits", f.PathDigest, PathDigestPrefix)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since):
		return fmt.Errorf("audit: filter: until (%s) is not after since (%s)", f.Until.Format(time.RFC3339), f.Since.Format(time.RFC3339))
	}
	return nil
}

// Match reports whether r passes the filter.
func (f *Filter) Match(r *Record) bool {
	m := f.prepare()
	return m.match(r)
}

// matcher is a Filter with its bounds formatted once.
type matcher struct {
	f            *Filter
	since, until string // in TimeLayout, "" for no bound
	prefix       string // PathPrefix without trailing separators; "/" stays "/"
}

// prepare formats the filter's bounds for matching many records.
func (f *Filter) prepare() matcher {
	m := matcher{f: f}
	if !f.Since.IsZero() {
		m.since = formatTime(f.Since)
	}
	if !f.Until.IsZero() {
		m.until = formatTime(f.Until)
	}
	if f.PathPrefix != "" {
		m.prefix = strings.TrimRight(f.PathPrefix, "/"+string(filepath.Separator))
		if m.prefix == "" {
			m.prefix = f.PathPrefix[:1]
		}
	}
	return m
}

// match reports whether r passes the filter.
func (m *matcher) match(r *Record) bool {
	f := m.f
	if (r.Kind == KindSegmentStart || r.Kind == KindCheckpoint) && f.Kind != r.Kind {
		return false
	}
	switch {
	case f.Kind != "" && r.Kind != f.Kind,
		f.Server != "" && r.Server != f.Server,
		f.Method != "" && r.Method != f.Method,
		f.Tool != "" && r.Tool != f.Tool,
		f.SessionID != "" && r.SessionID != f.SessionID,
		f.DecisionID != "" && r.DecisionID != f.DecisionID,
		f.Decision != "" && (r.Allow == nil || *r.Allow != (f.Decision == "allow")),
		f.Code != "" && r.Code != f.Code && r.Outcome != f.Code,
		m.since != "" && r.Time < m.since,
		m.until != "" && r.Time >= m.until,
		f.PathDigest != "" && !slices.Contains(r.Paths, f.PathDigest),
		m.prefix != "" && !slices.ContainsFunc(r.Paths, m.underPrefix):
		return false
	}
	return true
}

// underPrefix reports whether p is the prefix path or below it.
func (m *matcher) underPrefix(p string) bool {
	if !strings.HasPrefix(p, m.prefix) {
		return false
	}
	if len(p) == len(m.prefix) || isSeparator(m.prefix[len(m.prefix)-1]) {
		return true
	}
	return isSeparator(p[len(m.prefix)])
}

// isSeparator reports whether c separates path segments: '/' everywhere, and the OS's own.
func isSeparator(c byte) bool { return c == '/' || c == filepath.Separator }

// Entry is a record read from a trail, with where it was found.
type Entry struct {
	// Record is the parsed record; its Mac is the MAC the line claims (not checked).
	Record Record
	// Raw is the line as it is in the file, without its newline.
	Raw []byte
	// File is the segment file.
	File string
	// Line is the 1-based line of the record in File.
	Line int
	// Segment is the segment's id: the file's name without .jsonl.
	Segment string
	// Writer identifies the writer (one broker process) across its rotations: the id of the
	// first segment of its chain that the reader saw, or else of the segment the first one
	// seen names as its predecessor.
	Writer string
}

// Reader reads the records of a segment file, or of a directory of segments (*.jsonl; the
// checkpoint files and checkpoint.pub beside them are not read), in time order.
//
// A Reader needs no key and checks no MAC: reading is not verification, and a trail anyone
// could have edited reads just as well as an intact one. Use [Verify] to know.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	path  string
	dir   bool
	match matcher
	files map[string]*fileState // by path
	// writers maps a segment id to its writer's id (Entry.Writer), from the headers read.
	writers map[string]string
}

// fileState is how far a segment file has been read.
type fileState struct {
	off  int64 // just past the last whole line read
	line int   // lines read
	gone bool  // the file shrank: it is no longer read
}

// NewReader returns a reader of the trail at path (a segment file or a directory) that yields
// the records matching f.
func NewReader(path string, f Filter) (*Reader, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	r := &Reader{
		path:    path,
		dir:     fi.IsDir(),
		files:   make(map[string]*fileState),
		writers: make(map[string]string),
	}
	r.match = f.prepare()
	return r, nil
}

// Records returns the records at path (a segment file or a directory of segments) that match
// f, in time order; see [Reader.Entries]. It needs no key: it reads, it does not verify.
func Records(ctx context.Context, path string, f Filter) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		r, err := NewReader(path, f)
		if err != nil {
			yield(Record{}, err)
			return
		}
		for e, err := range r.Entries(ctx) {
			if !yield(e.Record, err) {
				return
			}
		}
	}
}

// Entries yields the matching records appended since the previous call (on the first call,
// every record), merged across segments in time order: by the record's time member, which
// sorts as text, and on equal times by file name, then line. The records of one segment keep
// their order in the file.
//
// A last line without its newline (a torn write, or one being written) is left for the next
// call, never yielded or reported. A complete line that is not a record yields a *ReadError
// wrapping [ErrNotRecord]; a file that cannot be read yields a *ReadError; reading goes on
// after both. Stopping early leaves the records not yielded for the next call. When ctx
// ends, Entries yields an error wrapping ctx's and stops.
//
// Entries holds open only the segments whose time range overlaps the records being merged,
// about one per concurrent writer, however many segments the directory holds.
func (r *Reader) Entries(ctx context.Context) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		pending, ok := r.changed(yield)
		if !ok {
			return
		}
		var open cursorHeap
		stopped := func(c *cursor) {
			// The records read ahead but not yielded are read again next time.
			for _, o := range open {
				if o != c {
					o.unread()
				}
			}
			for _, o := range open {
				o.close()
			}
		}
		for {
			for len(pending) > 0 && (len(open) == 0 || pending[0].first <= open[0].next.Record.Time) {
				c := pending[0]
				pending = pending[1:]
				if err := c.open(); err != nil {
					if !yield(Entry{}, &ReadError{File: c.path, Err: err}) {
						stopped(nil)
						return
					}
					continue
				}
				if !r.advance(ctx, c, yield) {
					c.unread()
					c.close()
					stopped(nil)
					return
				}
				if c.next == nil {
					c.close()
					continue
				}
				heap.Push(&open, c)
			}
			if len(open) == 0 {
				return
			}
			c := open[0]
			if !yield(*c.next, nil) {
				c.next = nil
				stopped(c)
				return
			}
			if !r.advance(ctx, c, yield) {
				stopped(c)
				return
			}
			if c.next == nil {
				heap.Pop(&open)
				c.close()
			} else {
				heap.Fix(&open, 0)
			}
		}
	}
}

// changed lists the segment files that grew since they were last read, in the order to open
// them: by the time of their first unread record. It reports files that cannot be read or
// shrank; it returns false when yield asked to stop.
func (r *Reader) changed(yield func(Entry, error) bool) ([]*cursor, bool) {
	files := []string{r.path}
	if r.dir {
		ents, err := os.ReadDir(r.path)
		if err != nil {
			return nil, yield(Entry{}, &ReadError{File: r.path, Err: err})
		}
		files = files[:0]
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), segmentExt) {
				files = append(files, filepath.Join(r.path, e.Name()))
			}
		}
	}
	var out []*cursor
	for _, p := range files {
		st := r.files[p]
		if st == nil {
			st = &fileState{}
			r.files[p] = st
		}
		if st.gone {
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			delete(r.files, p) // removed since it was listed
			continue
		case err != nil:
			if !yield(Entry{}, &ReadError{File: p, Err: err}) {
				return nil, false
			}
			continue
		case fi.Size() < st.off:
			st.gone = true
			err := fmt.Errorf("the file shrank from %d to %d bytes since it was read; no longer reading it (run fsbroker audit verify)", st.off, fi.Size())
			if !yield(Entry{}, &ReadError{File: p, Err: err}) {
				return nil, false
			}
			continue
		case fi.Size() == st.off:
			continue
		}
		c := &cursor{path: p, segment: strings.TrimSuffix(filepath.Base(p), segmentExt), st: st}
		c.first = peekTime(p, st.off)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *cursor) int {
		return cmp.Or(strings.Compare(a.first, b.first), strings.Compare(a.path, b.path))
	})
	return out, true
}

// advance reads c's next matching record into c.next (nil at the end of the file, where a
// partial line is left unread). It yields the ReadErrors it meets and returns false when yield
// asked to stop, or after yielding ctx's error when ctx ended.
func (r *Reader) advance(ctx context.Context, c *cursor, yield func(Entry, error) bool) bool {
	c.next = nil
	for {
		if err := ctx.Err(); err != nil {
			yield(Entry{}, fmt.Errorf("audit: read: %w", err))
			return false
		}
		start, startLine := c.st.off, c.st.line
		raw, n, partial, tooLong, err := readLine(c.br)
		if err != nil {
			return yield(Entry{}, &ReadError{File: c.path, Line: c.st.line + 1, Err: err})
		}
		if n == 0 || partial {
			return true
		}
		c.st.off += int64(n)
		c.st.line++
		if tooLong {
			if !yield(Entry{}, &ReadError{File: c.path, Line: c.st.line, Err: fmt.Errorf("%w: longer than %d bytes", ErrNotRecord, maxLine)}) {
				return false
			}
			continue
		}
		e := parseEntry(c.st.line, raw)
		if !e.parsed {
			if !yield(Entry{}, &ReadError{File: c.path, Line: c.st.line, Err: ErrNotRecord}) {
				return false
			}
			continue
		}
		rec := e.rec
		rec.Mac = e.mac
		if rec.Kind == KindSegmentStart {
			r.noteHeader(c.segment, &rec)
		}
		if !r.match.match(&rec) {
			continue
		}
		c.next = &Entry{
			Record: rec, Raw: raw, File: c.path, Line: c.st.line, Segment: c.segment,
			Writer: cmp.Or(r.writers[c.segment], c.segment),
		}
		c.nextOff, c.nextLine = start, startLine
		return true
	}
}

// noteHeader learns the writer of segment from its header.
func (r *Reader) noteHeader(segment string, h *Record) {
	w := segment
	if h.PrevSegment != "" {
		w = cmp.Or(r.writers[h.PrevSegment], h.PrevSegment)
	}
	r.writers[segment] = w
}

// cursor reads one segment file during one call of Entries.
type cursor struct {
	path    string
	segment string
	st      *fileState
	first   string // the time of the first unread record, "" if unknown
	f       *os.File
	br      *bufio.Reader
	next    *Entry // the next matching record, read ahead
	// nextOff and nextLine are st.off and st.line before next was read.
	nextOff  int64
	nextLine int
}

// open opens the file at the cursor's offset.
func (c *cursor) open() error {
	f, err := os.Open(c.path)
	if err != nil {
		return err
	}
	if _, err := f.Seek(c.st.off, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	c.f, c.br = f, bufio.NewReaderSize(f, 64<<10)
	return nil
}

// close closes the file.
func (c *cursor) close() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

// unread puts back the record read ahead, so that the next call reads it again.
func (c *cursor) unread() {
	if c.next != nil {
		c.st.off, c.st.line = c.nextOff, c.nextLine
		c.next = nil
	}
}

// readLine reads one line from br, returning it without its newline (nil when it is longer
// than maxLine), the bytes it took in the file, whether it lacks its newline (the end of the
// file) and whether it was longer than maxLine.
func readLine(br *bufio.Reader) (raw []byte, n int, partial, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if tooLong || len(raw)+len(chunk) > maxLine+1 {
			tooLong, raw = true, nil
		} else {
			raw = append(raw, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return raw, n, true, tooLong, nil
		case err != nil:
			return nil, 0, false, false, err
		}
		return bytes.TrimSuffix(raw, []byte("\n")), n, false, tooLong, nil
	}
}

// peekTime returns the time member of the line at off in path, "" when there is no whole line
// there or it has no time.
func peekTime(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	raw, _, partial, tooLong, err := readLine(bufio.NewReaderSize(f, 4<<10))
	if err != nil || partial || tooLong {
		return ""
	}
	var t struct {
		Time string `json:"time"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return ""
	}
	return t.Time
}

// cursorHeap orders the open cursors by their next record: time, then file, then line.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	a, b := h[i].next, h[j].next
	return cmp.Or(strings.Compare(a.Record.Time, b.Record.Time), strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line)) < 0
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
