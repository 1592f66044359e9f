package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// Limits are the configurable bounds of docs/protocol.md section 6 that the
// session enforces.
type Limits struct {
	// MaxReadBytes is the largest length a files/read may ask for.
	MaxReadBytes int64
	// MaxWriteBytes is the largest decoded content of one files/write.
	MaxWriteBytes int64
	// OperationTimeout is each operation's deadline.
	OperationTimeout time.Duration
	// StageIdle is how long a staged write waits for its next chunk.
	StageIdle time.Duration
}

// Default limits (docs/protocol.md section 6).
const (
	DefaultReadLength       = 1 << 20
	DefaultMaxReadBytes     = 16 << 20
	DefaultMaxWriteBytes    = 16 << 20
	DefaultOperationTimeout = 60 * time.Second
	DefaultStageIdle        = 60 * time.Second
)

// DefaultLimits returns the limits of docs/protocol.md section 6.
func DefaultLimits() Limits {
	return Limits{
		MaxReadBytes:     DefaultMaxReadBytes,
		MaxWriteBytes:    DefaultMaxWriteBytes,
		OperationTimeout: DefaultOperationTimeout,
		StageIdle:        DefaultStageIdle,
	}
}

// WithExecutor enables the files/* methods, performed by x (shared by every
// session of the process).
func WithExecutor(x *executor.Executor) Option { return func(s *Session) { s.exec = x } }

// WithDecider sets the decision stage. A session built without it, or with a
// nil d, refuses every request with PERMISSION_DENIED and shows no root: the
// library fails closed.
func WithDecider(d Decider) Option { return func(s *Session) { s.decider = d } }

// WithLimits sets the session's limits; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(s *Session) {
		d := DefaultLimits()
		if l.MaxReadBytes > 0 {
			d.MaxReadBytes = l.MaxReadBytes
		}
		if l.MaxWriteBytes > 0 {
			d.MaxWriteBytes = l.MaxWriteBytes
		}
		if l.OperationTimeout > 0 {
			d.OperationTimeout = l.OperationTimeout
		}
		if l.StageIdle > 0 {
			d.StageIdle = l.StageIdle
		}
		s.limits = d
	}
}

// fileMethods adds the files/* methods to the table when an executor is set.
func (s *Session) fileMethods(m map[string]method) {
	if s.exec == nil {
		return
	}
	m["files/read"] = method{audited: true, handle: s.filesRead}
	m["files/write"] = method{audited: true, handle: s.filesWrite}
	m["files/list"] = method{audited: true, handle: s.filesList}
	m["files/create"] = method{audited: true, handle: s.filesCreate}
	m["files/delete"] = method{audited: true, handle: s.filesDelete}
	m["files/rename"] = method{audited: true, handle: s.filesRename}
	m["files/consent"] = method{handle: s.filesConsent}
	if s.hub != nil {
		m["files/watch"] = method{audited: true, handle: s.filesWatch}
		m["files/unwatch"] = method{handle: s.filesUnwatch}
	}
}

// decodeParams decodes validated params into v. What the schema lets through
// but Go cannot hold (an integer written 1e300) is INVALID_PARAMS.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		pointer := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			pointer = "/" + te.Field
		}
		return errcode.New(errcode.InvalidParams, "params cannot be decoded").
			With("errors", []map[string]string{{"pointer": pointer, "message": "value out of range for this field"}})
	}
	return nil
}

// resolve canonicalizes and resolves one path parameter. A link can lead
// into a nested root; the resolved path is then resolved again under that
// root, so that the deepest root's settings always apply.
func (s *Session) resolve(ctx context.Context, raw string, follow bool) (executor.Target, error) {
	set := s.roots()
	p, err := canon.Parse(set, raw)
	if err != nil {
		return executor.Target{}, err
	}
	for seg := range strings.SplitSeq(p.Rel, "/") {
		if executor.IsTempName(seg) {
			// The broker's own temporary files are hidden from listings and
			// watches; a server may not name them (a hidden channel).
			return executor.Target{}, errcode.New(errcode.InvalidPath, "names starting with "+executor.TempPrefix+" are reserved")
		}
	}
	t, err := s.exec.Resolve(ctx, p, follow)
	if err != nil {
		return executor.Target{}, err
	}
	if r := canon.Reroot(set, t.Path); r.Root != t.Path.Root {
		return s.exec.Resolve(ctx, r, follow)
	}
	return t, nil
}

// decide runs the decision stage on a request, with its policy input, and
// writes its decision record. It returns nil when the request may go on, else
// the refusal.
func (s *Session) decide(ctx context.Context, req Request) error {
	if req.Operation == OpWrite {
		if err := s.checkUsage(time.Now()); err != nil {
			return err
		}
	}
	start := time.Now()
	if req.Method != "roots/list" {
		if v := s.checkConsent(req); v != nil {
			req.Input = nil
			return s.recordDecision(ctx, req, *v, time.Since(start))
		}
	}
	req.Input = s.policyInput(req)
	v := s.decider.Decide(ctx, req.Input)
	return s.recordDecision(ctx, req, v, time.Since(start))
}

type readParams struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Offset   int64  `json:"offset"`
	Length   *int64 `json:"length"`
}

// readAttempts bounds how often a read that raced a replace of its file
// (another writer's atomic rename) is resolved and decided again: the reader
// gets the old or the new file, whole (docs/protocol.md section 5, files/read).
const readAttempts = 16

func (s *Session) filesRead(ctx context.Context, params json.RawMessage) (any, error) {
	p := readParams{Encoding: "utf-8"}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	length := min(int64(DefaultReadLength), s.limits.MaxReadBytes)
	if p.Length != nil {
		length = *p.Length
	}
	if length > s.limits.MaxReadBytes {
		return nil, errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("length %d is over the read limit of %d bytes", length, s.limits.MaxReadBytes))
	}
	for attempt := 1; ; attempt++ {
		t, err := s.resolve(ctx, p.Path, true)
		if err != nil {
			return nil, err
		}
		// Each attempt is decided, and its decision recorded, on its own:
		// the file the path names now may be another one (a link, a
		// secret), and the policy must see that one.
		if err := s.decide(ctx, Request{Method: "files/read", Operation: OpRead, Path: t, Requested: p.Path, Params: params, Bytes: length}); err != nil {
			return nil, err
		}
		r, err := s.exec.Read(ctx, t, executor.ReadOptions{Offset: p.Offset, Length: length, UTF8: p.Encoding == "utf-8"})
		if errcode.Of(err) == errcode.ConcurrencyConflict && attempt < readAttempts {
			// The file opened is not the one decided on: it was replaced
			// between the decision and the open.
			continue
		}
		if err != nil {
			return nil, err
		}
		countBytes(ctx, int64(len(r.Data)))
		return &readReply{data: r.Data, encoding: p.Encoding, size: r.Size, offset: p.Offset,
			eof: r.EOF, mimeType: r.MimeType, etag: r.ETag}, nil
	}
}

type writeParams struct {
	Path          string `json:"path"`
	Content       string `json:"content"`
	Encoding      string `json:"encoding"`
	Create        *bool  `json:"create"`
	CreateParents bool   `json:"createParents"`
	IfMatch       string `json:"ifMatch"`
	IfNoneMatch   string `json:"ifNoneMatch"`
	Offset        int64  `json:"offset"`
	Final         *bool  `json:"final"`
}

type writeResult struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ETag    string `json:"etag"`
	Created bool   `json:"created"`
}

func (s *Session) filesWrite(ctx context.Context, params json.RawMessage) (any, error) {
	p := writeParams{Encoding: "utf-8"}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	data := []byte(p.Content)
	if p.Encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return nil, errcode.New(errcode.InvalidParams, "content is not valid base64").
				With("errors", []map[string]string{{"pointer": "/content", "message": "not valid base64"}})
		}
	}
	if int64(len(data)) > s.limits.MaxWriteBytes {
		return nil, errcode.New(errcode.QuotaExceeded,
			fmt.Sprintf("%d bytes is over the write limit of %d bytes per request", len(data), s.limits.MaxWriteBytes))
	}
	opts := executor.WriteOptions{
		Create:        p.Create == nil || *p.Create,
		CreateParents: p.CreateParents,
		IfMatch:       p.IfMatch,
		IfNoneMatch:   p.IfNoneMatch == "*",
	}
	final := p.Final == nil || *p.Final
	t, err := s.resolve(ctx, p.Path, true)
	if err != nil {
		return nil, err
	}
	if err := s.decide(ctx, Request{Method: "files/write", Operation: OpWrite, Path: t, Requested: p.Path, Params: params, Bytes: int64(len(data))}); err != nil {
		return nil, err
	}
	var r executor.WriteResult
	if p.Offset == 0 && final {
		s.stages.abort(t.Path) // a whole write replaces any staged one
		r, err = s.exec.Write(ctx, t, data, opts)
	} else {
		var done bool
		r, done, err = s.stages.write(ctx, s.exec, t, data, p.Offset, final, opts)
		if err == nil && !done {
			countBytes(ctx, int64(len(data)))
			s.addWritten(time.Now(), int64(len(data)))
			return writeResult{Path: t.Path.MountPath(), Size: r.Size, Created: false}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	countBytes(ctx, int64(len(data)))
	s.addWritten(time.Now(), int64(len(data)))
	return writeResult{Path: r.Path.MountPath(), Size: r.Size, ETag: r.ETag, Created: r.Created}, nil
}

type listParams struct {
	Path          string `json:"path"`
	Recursive     bool   `json:"recursive"`
	IncludeHidden bool   `json:"includeHidden"`
	MaxDepth      *int   `json:"maxDepth"`
	Limit         int    `json:"limit"`
	Cursor        string `json:"cursor"`
}

type listEntry struct {
	Path     string `json:"path"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

type listResult struct {
	Entries    []listEntry `json:"entries"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// defaultListLimit is files/list's default page size.
const defaultListLimit = 1000

func (s *Session) filesList(ctx context.Context, params json.RawMessage) (any, error) {
	p := listParams{Limit: defaultListLimit}
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, p.Path, true)
	if err != nil {
		return nil, err
	}
	req := Request{Method: "files/list", Operation: OpList, Path: t, Requested: p.Path, Params: params}
	if err := s.decide(ctx, req); err != nil {
		return nil, err
	}
	maxDepth := -1
	if p.MaxDepth != nil {
		maxDepth = *p.MaxDepth
	}
	r, err := s.exec.List(ctx, t, executor.ListOptions{Recursive: p.Recursive, IncludeHidden: p.IncludeHidden,
		MaxDepth: maxDepth, Limit: p.Limit, Cursor: p.Cursor})
	if err != nil {
		return nil, err
	}
	r.Entries = s.reportable(ctx, req, r.Entries)
	batch := entryInputPaths(r.Entries)
	visible := s.visibleBatch(ctx, req, batch)
	out := listResult{Entries: make([]listEntry, 0, len(r.Entries)), NextCursor: r.NextCursor}
	times := modifiedTimes(r.Entries)
	for i, e := range r.Entries {
		mp := batch[i].MountPath
		if !visible[mp] {
			continue // hidden entries never leave the broker
		}
		out.Entries = append(out.Entries, listEntry{Path: mp, Name: e.Name, Type: e.Type, Size: e.Size, Modified: times[i]})
	}
	return out, nil
}

// nestedRoot is a root inside another root, with its directory relative to
// the outer root's.
type nestedRoot struct {
	rel  string
	root roots.Root
}

// nestedRoots are the roots held strictly inside one root. A path belongs to
// the deepest root that holds it (docs/protocol.md section 3): a listing or a
// watch of the outer root never reports what a nested root holds, which is
// named, decided and consented under the nested root's own mount.
type nestedRoots []nestedRoot

// nestedIn returns the roots of set strictly inside outer (none, in the
// common case: nothing is allocated then).
func nestedIn(set *roots.Set, outer roots.Root) nestedRoots {
	var out nestedRoots
	prefix := strings.TrimSuffix(filepath.ToSlash(outer.Path), "/") + "/"
	for _, r := range set.All() {
		if p := filepath.ToSlash(r.Path); r.Path != outer.Path && strings.HasPrefix(p, prefix) {
			out = append(out, nestedRoot{rel: p[len(prefix):], root: r})
		}
	}
	return out
}

// of places rel, a path relative to the outer root: inside is true when rel
// lies strictly inside a nested root (at any depth of nesting); otherwise
// own is true when rel is a nested root's directory, and r is that root.
func (ns nestedRoots) of(rel string) (r roots.Root, own, inside bool) {
	for _, n := range ns {
		switch {
		case len(rel) > len(n.rel) && rel[len(n.rel)] == '/' && strings.HasPrefix(rel, n.rel):
			return n.root, false, true
		case rel == n.rel:
			r, own = n.root, true
		}
	}
	return r, own, false
}

// reportable returns the entries of a listing page (all under one root) that
// a listing may report, in their order, dropping: those a block of the
// operator covers and no grant does (unblocked), those whose path the
// server could not name back (canon.Returnable: over 4096 bytes from the
// mount, or a name canonicalization refuses), those inside a root nested in
// the listed one, and a nested root's own directory unless the server could
// list that root itself (nestedRootShown). What is left goes to the policy's
// visibility decision. The executor cannot skip a directory, so a recursive
// listing still walks a nested root and its entries are filtered here: a
// page may come out short, or empty with a nextCursor.
func (s *Session) reportable(ctx context.Context, req Request, entries []executor.Entry) []executor.Entry {
	if len(entries) == 0 {
		return entries
	}
	if entries = s.unblocked(entries); len(entries) == 0 {
		return entries
	}
	ns := nestedIn(s.roots(), entries[0].Path.Root)
	var own []roots.Root // nested roots whose own directory is on the page
	dropped := 0
	for _, e := range entries {
		if !canon.Returnable(e.Path) {
			dropped++
		} else if r, isOwn, inside := ns.of(e.Path.Rel); inside {
			dropped++
		} else if isOwn {
			own = append(own, r)
		}
	}
	if dropped == 0 && len(own) == 0 {
		return entries
	}
	shown := s.nestedRootShown(ctx, req, own)
	out := make([]executor.Entry, 0, len(entries)-dropped)
	unnameable := 0
	for _, e := range entries {
		if !canon.Returnable(e.Path) {
			unnameable++
			continue
		}
		if r, isOwn, inside := ns.of(e.Path.Rel); inside || isOwn && !shown[r.Mount] {
			continue
		}
		out = append(out, e)
	}
	if unnameable > 0 {
		s.log.Debug("entries left out: their paths cannot be named back", "count", unnameable)
	}
	return out
}

// nestedRootShown decides, by mount, which of the nested roots rs a listing or
// a watch of an outer root may show as a name in its parent directory: those
// the server could list itself, decided as the nested root, never as a path
// of the outer one. Its consent must cover reading the nested root
// (pre-approval, or a grant given under it), and the policy's visibility
// decision on the nested root itself (the one roots/list makes) must show
// it.
func (s *Session) nestedRootShown(ctx context.Context, req Request, rs []roots.Root) map[string]bool {
	if len(rs) == 0 {
		return nil
	}
	now := time.Now()
	batch := make([]InputPath, 0, len(rs))
	for _, r := range rs {
		t := executor.Target{Path: canon.Path{Root: r}, Exists: true, Info: executor.Info{Type: executor.TypeDirectory}}
		if ok, err := s.consentCovers(t, grants.Read, now); err != nil || !ok {
			continue // an unreadable grant store covers nothing
		}
		batch = append(batch, NewInputPath(r.Mount, t))
	}
	visible := s.visibleBatch(ctx, req, batch)
	shown := make(map[string]bool, len(batch))
	for _, in := range batch {
		shown[in.Mount] = visible[in.MountPath]
	}
	return shown
}

// modifiedTimes formats the entries' times (RFC 3339, UTC), all carved from
// one string.
func modifiedTimes(entries []executor.Entry) []string {
	buf := make([]byte, 0, len(entries)*len("2006-01-02T15:04:05.999999999Z"))
	ends := make([]int, len(entries))
	for i, e := range entries {
		buf = e.Modified.UTC().AppendFormat(buf, time.RFC3339Nano)
		ends[i] = len(buf)
	}
	all := string(buf)
	out := make([]string, len(entries))
	start := 0
	for i, end := range ends {
		out[i], start = all[start:end], end
	}
	return out
}

type createParams struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Parents bool   `json:"parents"`
}

func (s *Session) filesCreate(ctx context.Context, params json.RawMessage) (any, error) {
	var p createParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, p.Path, false)
	if err != nil {
		return nil, err
	}
	if err := s.decide(ctx, Request{Method: "files/create", Operation: OpCreate, Path: t, Requested: p.Path, Params: params}); err != nil {
		return nil, err
	}
	if err := s.exec.Create(ctx, t, p.Type == "directory", p.Parents); err != nil {
		return nil, err
	}
	return map[string]any{"path": t.Path.MountPath(), "type": p.Type, "created": true}, nil
}

type deleteParams struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

func (s *Session) filesDelete(ctx context.Context, params json.RawMessage) (any, error) {
	var p deleteParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, p.Path, false)
	if err != nil {
		return nil, err
	}
	if err := s.decide(ctx, Request{Method: "files/delete", Operation: OpDelete, Path: t, Requested: p.Path, Params: params}); err != nil {
		return nil, err
	}
	checked, err := s.guardSubtree(ctx, t, Request{Method: "files/delete", Operation: OpDelete, Path: t, Requested: p.Path,
		Params: params})
	if err != nil {
		return nil, err
	}
	// A recursive delete removes the entries decided on, and only those.
	if err := s.exec.Delete(ctx, t, p.Recursive, checked); err != nil {
		return nil, err
	}
	return map[string]any{"path": t.Path.MountPath(), "deleted": true}, nil
}

type renameParams struct {
	OldPath   string `json:"oldPath"`
	NewPath   string `json:"newPath"`
	Overwrite bool   `json:"overwrite"`
}

func (s *Session) filesRename(ctx context.Context, params json.RawMessage) (any, error) {
	var p renameParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	from, err := s.resolve(ctx, p.OldPath, false)
	if err != nil {
		return nil, err
	}
	to, err := s.resolve(ctx, p.NewPath, false)
	if err != nil {
		return nil, err
	}
	// Both paths are decided on: the source as a rename, the target as a
	// write.
	if err := s.decide(ctx, Request{Method: "files/rename", Operation: OpRename, Path: from, Requested: p.OldPath,
		NewPath: &to, NewRequested: p.NewPath, Params: params}); err != nil {
		return nil, err
	}
	if err := s.decide(ctx, Request{Method: "files/rename", Operation: OpWrite, Path: to, Requested: p.NewPath, Params: params}); err != nil {
		return nil, err
	}
	if _, err := s.guardSubtree(ctx, from, Request{Method: "files/rename", Operation: OpRename, Path: from,
		Requested: p.OldPath, NewPath: &to, NewRequested: p.NewPath, Params: params}); err != nil {
		return nil, err
	}
	if _, err := s.guardSubtree(ctx, to, Request{Method: "files/rename", Operation: OpWrite, Path: to,
		Requested: p.NewPath, Params: params}); err != nil {
		return nil, err
	}
	if err := s.exec.Rename(ctx, from, to, p.Overwrite); err != nil {
		return nil, err
	}
	return map[string]any{"oldPath": from.Path.MountPath(), "newPath": to.Path.MountPath()}, nil
}

// visible decides, in one batch, which entries the server may see (by
// mountPath; none when the decision fails).
func (s *Session) visible(ctx context.Context, req Request, entries []executor.Entry) map[string]bool {
	return s.visibleBatch(ctx, req, entryInputPaths(entries))
}

// visibleBatch decides on entries described for the policy: the mountPaths
// of those the server may see. A decider that fails shows nothing (it logged
// why).
func (s *Session) visibleBatch(ctx context.Context, req Request, batch []InputPath) map[string]bool {
	if len(batch) == 0 {
		return map[string]bool{}
	}
	req.Input = s.policyInput(req)
	vis, err := s.decider.Visible(ctx, req.Input, batch)
	if err != nil || vis == nil {
		return map[string]bool{}
	}
	return vis
}

// entryInputPaths describes listed entries for the visibility decision: each
// entry's mountPath and canonical path are carved from one string each for
// the whole batch (a listing's entries share their root).
func entryInputPaths(entries []executor.Entry) []InputPath {
	batch := make([]InputPath, len(entries))
	if len(entries) == 0 {
		return batch
	}
	mountLen, canonLen := 0, 0
	for _, e := range entries {
		mountLen += len(e.Path.Root.Mount) + 1 + len(e.Path.Rel)
		canonLen += canonicalLen(e.Path)
	}
	mounts := make([]byte, 0, mountLen)
	canons := make([]byte, 0, canonLen)
	for _, e := range entries {
		mounts = append(mounts, e.Path.Root.Mount...)
		if e.Path.Rel != "" {
			mounts = append(append(mounts, '/'), e.Path.Rel...)
		}
		canons = appendCanonical(canons, e.Path)
	}
	allMounts, allCanons := string(mounts), string(canons)
	m, c := 0, 0
	for i, e := range entries {
		ml := len(e.Path.Root.Mount)
		if e.Path.Rel != "" {
			ml += 1 + len(e.Path.Rel)
		}
		cl := canonicalLen(e.Path)
		mp := allMounts[m : m+ml]
		batch[i] = InputPath{Requested: mp, Canonical: allCanons[c : c+cl], Root: e.Path.Root.Path,
			Mount: e.Path.Root.Mount, Relative: e.Path.Rel, MountPath: mp, Writable: e.Path.Root.Writable,
			Exists: true, Type: e.Type, Size: max(e.Size, 0), Hidden: isHidden(e.Path.Rel)}
		m, c = m+ml, c+cl
	}
	return batch
}

// appendCanonical appends the host path of p: its root's directory, then its
// relative path.
func appendCanonical(b []byte, p canon.Path) []byte {
	b = append(b, p.Root.Path...)
	if p.Rel != "" {
		if !strings.HasSuffix(p.Root.Path, "/") {
			b = append(b, '/')
		}
		b = append(b, p.Rel...)
	}
	return b
}

// canonicalLen is the length appendCanonical appends.
func canonicalLen(p canon.Path) int {
	n := len(p.Root.Path)
	if p.Rel != "" {
		if !strings.HasSuffix(p.Root.Path, "/") {
			n++
		}
		n += len(p.Rel)
	}
	return n
}

// maxGuardedEntries bounds the subtree a recursive delete or a rename of a
// directory may carry along: every entry in it is checked.
const maxGuardedEntries = 10000

// guardSubtree protects what a directory operation would carry along without
// its own decision: a delete or rename of a directory acts on everything
// below it, so it is refused when the directory holds another root (whose
// own settings would be bypassed; by its path, and by its directory's
// identity wherever another program moved it), or any entry the policy hides from this
// server (a secret would otherwise be moved to where it can be read, or
// destroyed), or more entries than can be checked, or when the policy
// refuses the operation on those entries as a whole (Decider.Carried: with
// the default policies, a directory holding a .git below it); that verdict
// is recorded as a decision. It returns the entries checked (none when t is
// not a directory): a recursive delete removes those and nothing else.
func (s *Session) guardSubtree(ctx context.Context, t executor.Target, req Request) ([]executor.Entry, error) {
	if !t.Exists || t.Info.Type != executor.TypeDirectory {
		return nil, nil
	}
	dir := t.Path.Root.Path
	if t.Path.Rel != "" {
		dir = strings.TrimSuffix(dir, "/") + "/" + t.Path.Rel
	}
	for _, r := range s.roots().All() {
		if r.Path != t.Path.Root.Path && strings.HasPrefix(r.Path+"/", dir+"/") {
			return nil, errcode.New(errcode.PermissionDenied, "the directory holds another root, "+r.Mount)
		}
	}
	page, err := s.exec.ListSubtree(ctx, t, maxGuardedEntries)
	if err != nil {
		return nil, err
	}
	if page.NextCursor != "" {
		return nil, errcode.New(errcode.PermissionDenied,
			fmt.Sprintf("the directory holds more than %d entries, too many to check", maxGuardedEntries))
	}
	batch := entryInputPaths(page.Entries)
	visible := s.visibleBatch(ctx, req, batch)
	for _, e := range page.Entries {
		if !visible[e.Path.MountPath()] {
			return nil, errcode.New(errcode.PermissionDenied, "the directory holds entries this server may not see")
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	start := time.Now()
	req.Input = s.policyInput(req)
	if err := s.recordDecision(ctx, req, s.decider.Carried(ctx, req.Input, batch), time.Since(start)); err != nil {
		return nil, err
	}
	return page.Entries, nil
}
