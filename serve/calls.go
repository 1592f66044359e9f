// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// listPage is how many entries one corridor List asks for; a listing
// follows its cursor to the end.
const listPage = 1000

// errBothHeadAndTail is read_text_file's refusal of head and tail together,
// in the reference's words.
var errBothHeadAndTail = errors.New("Cannot specify both head and tail parameters simultaneously")

// runTool runs one decoded tool call as caller's requests to the corridor
// and builds its result. A refusal or failure of the corridor is returned
// as the error; a failure the reference reports in its own words
// (edit_file's no-match, both head and tail) is an isError result.
//
// params are the call's arguments as sent, the params of its requests (the
// policy sees them without content).
func (s *Session) runTool(ctx context.Context, caller corridor.Caller, args any, params json.RawMessage) (ToolResult, error) {
	switch a := args.(type) {
	case ReadTextArgs:
		if a.Head != 0 && a.Tail != 0 {
			return ErrorResult(errBothHeadAndTail.Error()), nil
		}
		data, err := s.readWhole(ctx, caller, a.Path, params)
		if err != nil {
			return ToolResult{}, err
		}
		text := DecodeText(data)
		switch {
		case a.Head != 0:
			text, err = HeadText(bytes.NewReader(data), a.Head)
		case a.Tail != 0:
			text, err = TailText(bytes.NewReader(data), int64(len(data)), a.Tail)
		}
		if err != nil {
			return ToolResult{}, errcode.Wrap(errcode.IOError, "reading the text", err)
		}
		return TextResult(text), nil
	case ReadMultipleArgs:
		// The files together are held to the whole-file limit: a file over
		// what those before it left is refused in its place.
		reads := make([]FileRead, len(a.Paths))
		left := s.wholeFileLimit()
		for n, p := range a.Paths {
			reads[n].Path = p
			one, _ := json.Marshal(map[string]string{"path": p})
			data, _, err := s.readWithTag(ctx, caller, p, one, left)
			if err != nil {
				reads[n].Err = refusalText(err)
				continue
			}
			left -= int64(len(data))
			reads[n].Content = DecodeText(data)
		}
		return TextResult(MultipleFilesText(reads)), nil
	case WriteArgs:
		if _, err := consented(ctx, s, caller, "write", []string{a.Path}, func() (corridor.WriteResult, error) {
			return s.cfg.Corridor.Write(ctx, caller, corridor.WriteRequest{Path: a.Path, Data: []byte(a.Content),
				Create: true, Final: true, Params: params})
		}); err != nil {
			return ToolResult{}, err
		}
		return TextResult(WriteText(a.Path)), nil
	case EditArgs:
		return s.edit(ctx, caller, a, params)
	case ListWithSizesArgs:
		entries, _, err := s.listAll(ctx, caller, a.Path, false, true, params)
		if err != nil {
			return ToolResult{}, err
		}
		return TextResult(ListingWithSizesText(listingEntries(entries), a.SortBy)), nil
	case TreeArgs:
		entries, _, err := s.listAll(ctx, caller, a.Path, true, false, params)
		if err != nil {
			return ToolResult{}, err
		}
		tree, err := BuildTree(walkLister(entries), a.ExcludePatterns)
		if err != nil {
			return ToolResult{}, errcode.Wrap(errcode.IOError, "directory tree", err)
		}
		return TextResult(TreeText(tree)), nil
	case SearchArgs:
		entries, dir, err := s.listAll(ctx, caller, a.Path, true, false, params)
		if err != nil {
			return ToolResult{}, err
		}
		matches, err := SearchMatches(walkLister(entries), a.Pattern, a.ExcludePatterns)
		if err != nil {
			return ToolResult{}, errcode.Wrap(errcode.IOError, "search", err)
		}
		matches = s.withoutUnresolvedLinks(ctx, caller, entries, dir, matches)
		base := s.hostPath(dir)
		for n, rel := range matches {
			matches[n] = path.Join(base, rel)
		}
		return TextResult(SearchText(matches)), nil
	case MoveArgs:
		_, err := consented(ctx, s, caller, "write", []string{a.Source, a.Destination}, func() (corridor.RenameResult, error) {
			return s.cfg.Corridor.Rename(ctx, caller, corridor.RenameRequest{OldPath: a.Source, NewPath: a.Destination, Params: params})
		})
		if err != nil {
			if isErrno(err, "EEXIST") || isErrno(err, "ENOTEMPTY") {
				return ErrorResult(DestinationExistsText(s.requestedHostPath(a.Destination))), nil
			}
			return ToolResult{}, err
		}
		return TextResult(MoveText(a.Source, a.Destination)), nil
	case NoArgs:
		return TextResult(AllowedDirectoriesText(s.servedRoots(ctx).Dirs())), nil
	case PathArgs:
		return s.runPathTool(ctx, caller, a, params)
	}
	return ToolResult{}, errcode.New(errcode.InvalidParams, "tool "+caller.Tool+" is not served")
}

// runPathTool runs the tools whose only argument is a path.
func (s *Session) runPathTool(ctx context.Context, caller corridor.Caller, a PathArgs, params []byte) (ToolResult, error) {
	switch caller.Tool {
	case ToolListDirectory:
		entries, _, err := s.listAll(ctx, caller, a.Path, false, false, params)
		if err != nil {
			return ToolResult{}, err
		}
		return TextResult(ListingText(listingEntries(entries))), nil
	case ToolCreateDirectory:
		_, err := consented(ctx, s, caller, "write", []string{a.Path}, func() (string, error) {
			return s.cfg.Corridor.Create(ctx, caller, corridor.CreateRequest{Path: a.Path, Directory: true, Parents: true, Params: params})
		})
		if err != nil && !(isErrno(err, "EEXIST") && s.isDirectory(ctx, caller, a.Path, params)) {
			return ToolResult{}, err
		}
		return TextResult(CreateDirectoryText(a.Path)), nil
	case ToolReadMediaFile:
		data, err := s.readWhole(ctx, caller, a.Path, params)
		if err != nil {
			return ToolResult{}, err
		}
		return MediaResult(s.requestedHostPath(a.Path), data), nil
	case ToolGetFileInfo:
		st, err := consented(ctx, s, caller, "read", []string{a.Path}, func() (corridor.StatResult, error) {
			return s.cfg.Corridor.Stat(ctx, caller, corridor.StatRequest{Path: a.Path, Params: params})
		})
		if err != nil {
			return ToolResult{}, err
		}
		return TextResult(FileInfoText(fileInfoOf(st))), nil
	}
	return ToolResult{}, errcode.New(errcode.InvalidParams, "tool "+caller.Tool+" is not served")
}

// edit is edit_file: the file read whole, the edits applied, the diff
// returned, and unless dryRun the new text written if the file is still the
// one read (its etag).
func (s *Session) edit(ctx context.Context, caller corridor.Caller, a EditArgs, params []byte) (ToolResult, error) {
	data, etag, err := s.readWithTag(ctx, caller, a.Path, params, s.wholeFileLimit())
	if err != nil {
		return ToolResult{}, err
	}
	original, modified, err := ApplyEdits(DecodeText(data), a.Edits)
	var noMatch *EditNoMatchError
	if errors.As(err, &noMatch) {
		return ErrorResult(noMatch.Error()), nil
	}
	if err != nil {
		return ToolResult{}, errcode.Wrap(errcode.IOError, "applying the edits", err)
	}
	text := EditDiffText(s.requestedHostPath(a.Path), original, modified)
	if !a.DryRun {
		if _, err := consented(ctx, s, caller, "write", []string{a.Path}, func() (corridor.WriteResult, error) {
			return s.cfg.Corridor.Write(ctx, caller, corridor.WriteRequest{Path: a.Path, Data: []byte(modified),
				IfMatch: etag, Final: true, Params: params})
		}); err != nil {
			return ToolResult{}, err
		}
	}
	return TextResult(text), nil
}

// readWhole reads the whole file at p through the corridor, in chunks of
// the read limit, up to the whole-file limit (wholeFileLimit).
func (s *Session) readWhole(ctx context.Context, caller corridor.Caller, p string, params []byte) ([]byte, error) {
	data, _, err := s.readWithTag(ctx, caller, p, params, s.wholeFileLimit())
	return data, err
}

// wholeFileLimit is the most bytes one call reads whole (a file, or the
// files of read_multiple_files together): the corridor's write limit, so
// that what a tool reads whole it could write back whole (edit_file does),
// and a large file in a root never takes the process's memory.
func (s *Session) wholeFileLimit() int64 { return s.cfg.Corridor.Limits().MaxWriteBytes }

// consented runs op, and when the corridor refused it because no grant
// covers its paths, asks the consent provider for them (Corridor.Consent,
// with the access the tool needs) and runs op once more if it approved
// (docs/protocol.md section 8: a tool call on a path no grant covers asks
// the person). Any other outcome is op's. A call that stays refused for
// want of consent is refused in serve's words (noConsentRefusal). On
// protocol 2026-07-28, once the call put a question to its host
// (inputPending), op is not run at all.
func consented[T any](ctx context.Context, s *Session, caller corridor.Caller, access string, paths []string, op func() (T, error)) (T, error) {
	if err := inputPending(ctx); err != nil { // protocol 2026-07-28: a question awaits the host's answer, nothing more runs
		var zero T
		return zero, err
	}
	res, err := op()
	if !refusedForConsent(err) {
		return res, err
	}
	answer, cerr := s.cfg.Corridor.Consent(ctx, caller, corridor.ConsentRequest{
		Message: "The MCP host " + caller.Name + " asks to " + access + " through the " + caller.Tool + " tool.",
		Paths:   paths, Access: access, Resolve: consentResolve(caller.Tool)})
	if cerr == nil && answer.Granted {
		if res, err = op(); !refusedForConsent(err) {
			return res, err
		}
	}
	return res, noConsentRefusal(err, access, answer.Removed)
}

// consentResolve is how the corridor operation behind tool resolves its
// paths, for the consent question to name what it acts on: move_file
// (Rename) and create_directory (Create) act on a link in the last segment
// itself; the tools that read or write a file's content (Read, Write)
// follow it to a file; the others (List, Stat, Watch) follow it to
// whatever it leads to.
func consentResolve(tool string) corridor.ConsentResolve {
	switch tool {
	case ToolMoveFile, ToolCreateDirectory:
		return corridor.ConsentNoFollow
	case ToolReadTextFile, ToolReadFile, ToolReadMediaFile, ToolReadMultipleFiles, ToolWriteFile, ToolEditFile, MethodResourcesRead:
		return corridor.ConsentFollowToFile
	}
	return corridor.ConsentFollow
}

// refusedForConsent reports whether err is the corridor's refusal of a
// request no grant covers.
func refusedForConsent(err error) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.PermissionDenied && strings.HasPrefix(e.Reason, corridor.ReasonNoConsent)
}

// noConsentRefusal is the refusal of a call that stays without consent
// (err, the corridor's, carrying its decision id), in words that mean
// something to a host: the reason consent could not be given for one of
// its paths (removed: never put to the provider, the policy's reasons such
// as "secrets: ..."), else that no grant covers the path and consent was
// not given. (The corridor's reason advises a client-role server to ask
// with files/consent, which a host cannot send.)
func noConsentRefusal(err error, access string, removed []consent.Removed) error {
	var e *errcode.Error
	errors.As(err, &e)
	reason := corridor.ReasonNoConsent + " the path for " + access + " access, and consent was not given"
	if len(removed) > 0 {
		reason = removed[0].Reason
	}
	out := errcode.New(errcode.PermissionDenied, reason)
	out.DecisionID = e.DecisionID
	return out
}

// readWithTag is readWhole, up to limit bytes, that also returns the file's
// etag; a file replaced between two chunks is a CONCURRENCY_CONFLICT.
func (s *Session) readWithTag(ctx context.Context, caller corridor.Caller, p string, params []byte, limit int64) ([]byte, string, error) {
	type read struct {
		data []byte
		etag string
	}
	r, err := consented(ctx, s, caller, "read", []string{p}, func() (read, error) {
		data, etag, err := s.readChunks(ctx, caller, p, params, limit)
		return read{data, etag}, err
	})
	return r.data, r.etag, err
}

// readChunks reads the file at p whole, a chunk of the read limit at a
// time, and never past limit: a file whose size (as the first chunk, or a
// later one, reports it) is over limit is QUOTA_EXCEEDED, recorded in the
// trail, before more is read. After the first chunk, each asks for what
// remains of the file, up to the read limit; the first asks for the read
// limit, the file's size being unknown before it.
func (s *Session) readChunks(ctx context.Context, caller corridor.Caller, p string, params []byte, limit int64) ([]byte, string, error) {
	var (
		data []byte
		etag string
	)
	length := min(s.cfg.MaxReadBytes, limit)
	for {
		r, err := s.cfg.Corridor.Read(ctx, caller, corridor.ReadRequest{Path: p, Offset: int64(len(data)),
			Length: length, Params: params})
		if err != nil {
			return nil, "", err
		}
		if r.Size > limit {
			return nil, "", s.cfg.Corridor.Refuse(ctx, caller, caller.Tool, p, "", s.overWholeFileLimit(r.Size, limit))
		}
		if etag != "" && r.ETag != etag {
			return nil, "", errcode.New(errcode.ConcurrencyConflict, "the file changed while it was read")
		}
		done := r.EOF || len(r.Data) == 0
		switch {
		case data == nil && done: // the whole file in one chunk: the executor's buffer is the call's own
			return r.Data, r.ETag, nil
		case data == nil:
			data = make([]byte, 0, r.Size)
		}
		etag = r.ETag
		data = append(data, r.Data...)
		if done {
			return data, etag, nil
		}
		length = min(s.cfg.MaxReadBytes, max(r.Size-int64(len(data)), 1))
	}
}

// overWholeFileLimit is the refusal of a whole-file read of a file of size
// bytes, over limit (the whole-file limit, or what the files read before
// it in the same call left of it).
func (s *Session) overWholeFileLimit(size, limit int64) error {
	whole := s.wholeFileLimit()
	if limit < whole {
		return errcode.New(errcode.QuotaExceeded, fmt.Sprintf("a file of %d bytes is over the %d bytes left of the "+
			"limit of %d bytes on what one call reads whole (the write limit)", size, limit, whole))
	}
	return errcode.New(errcode.QuotaExceeded, fmt.Sprintf("a file of %d bytes is over the limit of %d bytes on "+
		"what one call reads whole (the write limit)", size, whole))
}

// listAll lists the directory p through the corridor, every page, and
// returns the entries and the directory's mount-relative path ("" when it
// has no entry to tell it by). Without sizes the entries carry names and
// types only (corridor.ListRequest.TypesOnly: list_directory,
// directory_tree and search_files need no more).
func (s *Session) listAll(ctx context.Context, caller corridor.Caller, p string, recursive, sizes bool, params []byte) ([]corridor.ListEntry, string, error) {
	all, err := consented(ctx, s, caller, "read", []string{p}, func() ([]corridor.ListEntry, error) {
		return s.listPages(ctx, caller, p, recursive, sizes, params)
	})
	return all, listedDir(all), err
}

// listPages lists the directory p, following the cursor to the end (with
// sizes and times, or names and types only).
func (s *Session) listPages(ctx context.Context, caller corridor.Caller, p string, recursive, sizes bool, params []byte) ([]corridor.ListEntry, error) {
	req := corridor.ListRequest{Path: p, Recursive: recursive, IncludeHidden: true, MaxDepth: -1, Limit: listPage, Params: params,
		TypesOnly: !sizes}
	var all []corridor.ListEntry
	for {
		page, err := s.cfg.Corridor.List(ctx, caller, req)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		req.Cursor = page.NextCursor
	}
	return all, nil
}

// listedDir is the mount-relative path of the directory a listing's entries
// were listed from: the shortest parent among them ("" when there is none).
func listedDir(entries []corridor.ListEntry) string {
	dir := ""
	for _, e := range entries {
		if parent := parentOf(e); dir == "" || len(parent) < len(dir) {
			dir = parent
		}
	}
	return dir
}

// parentOf is the mount-relative path of the directory that holds e.
func parentOf(e corridor.ListEntry) string {
	return strings.TrimSuffix(strings.TrimSuffix(e.Path, e.Name), "/")
}

// isDirectory reports whether p is a directory the caller may list.
func (s *Session) isDirectory(ctx context.Context, caller corridor.Caller, p string, params []byte) bool {
	_, err := s.cfg.Corridor.List(ctx, caller, corridor.ListRequest{Path: p, MaxDepth: -1, Limit: 1, Params: params})
	return err == nil
}

// listingEntries are a listing's entries as the listing tools see them: a
// symbolic link is not a directory.
func listingEntries(entries []corridor.ListEntry) []Entry {
	out := make([]Entry, len(entries))
	for n, e := range entries {
		out[n] = Entry{Name: e.Name, IsDir: e.Type == "directory", Size: e.Size}
	}
	return out
}

// walkLister serves a recursive listing to BuildTree and SearchMatches: the
// entries of each directory by its path relative to the listed one.
func walkLister(entries []corridor.ListEntry) Lister {
	dir := listedDir(entries)
	byDir := make(map[string][]Entry)
	for _, e := range entries {
		rel := strings.TrimPrefix(strings.TrimPrefix(parentOf(e), dir), "/")
		byDir[rel] = append(byDir[rel], Entry{Name: e.Name, IsDir: e.Type == "directory", Size: e.Size})
	}
	return func(rel string) ([]Entry, error) { return byDir[rel], nil }
}

// withoutUnresolvedLinks returns a search's matches (relative to the listed
// directory dir) without the symbolic links the reference's validation
// leaves out: each matching link is described through the corridor
// (Corridor.Stat, decided and recorded as a read of the path, links
// followed only inside the root), and a link that leads out of its root,
// dangles, loops or leads to what the host may not read is left out. Other
// entries are kept as they are; matches is reused.
func (s *Session) withoutUnresolvedLinks(ctx context.Context, caller corridor.Caller, entries []corridor.ListEntry, dir string, matches []string) []string {
	links := make(map[string]bool)
	for _, e := range entries {
		if e.Type == "symlink" {
			links[e.Path] = true
		}
	}
	if len(links) == 0 {
		return matches
	}
	kept := matches[:0]
	for _, rel := range matches {
		if p := path.Join(dir, rel); links[p] {
			params, _ := json.Marshal(map[string]string{"path": p})
			if _, err := s.cfg.Corridor.Stat(ctx, caller, corridor.StatRequest{Path: p, Params: params}); err != nil {
				continue
			}
		}
		kept = append(kept, rel)
	}
	return kept
}

// hostPath is the host path of a mount-relative path of the current roots.
func (s *Session) hostPath(mountPath string) string {
	mount, rest, _ := strings.Cut(mountPath, "/")
	r, ok := s.roots().ByMount(mount)
	if !ok {
		return mountPath
	}
	return path.Join(r.Path, rest)
}

// requestedHostPath is the host path a path argument names, as the
// reference shows it in edit_file's diff headers and move_file's refusal:
// an absolute path cleaned, a file:// URI's path, a mount-relative path
// under its root.
func (s *Session) requestedHostPath(p string) string {
	p = strings.TrimPrefix(p, "file://")
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return s.hostPath(path.Clean(p))
}

// isErrno reports whether err is an IO_ERROR with the given errno.
func isErrno(err error, errno string) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.IOError && e.Details["errno"] == errno
}
