// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command fsbaseline is the raw baseline of fsbroker's end-to-end benchmark
// (bench/fsbench, `make bench`): a minimal program in fsbroker's role on the
// same wire, with none of its work beyond the plain OS calls.
//
// Like `fsbroker stdio`, it is the MCP client side of a session over
// newline-delimited JSON-RPC 2.0 on stdin and stdout: it sends initialize
// (advertising roots.filesystemBrokering), waits for the server's result,
// sends notifications/initialized, and then answers the server's requests:
//
//   - files/read: the whole file or a chunk (offset, length), utf-8 or
//     base64, with the result fields of docs/protocol.md;
//   - files/write: a whole file, replaced atomically (temporary file, fsync,
//     rename, fsync of the directory, as docs/protocol.md requires; -fsync=false
//     leaves the fsyncs out); or in chunks (offset, final false until the
//     last), staged as fsbroker stages them: appended to a temporary file
//     beside the target, which the final chunk syncs and renames over it the
//     same way, so that a chunked write costs what fsbroker's must cost;
//   - files/list: one directory level, sorted, in pages (limit, cursor);
//   - roots/list and ping.
//
// Paths are mount-relative ("mount/rel/path", the mount being the root's base
// name). There is no schema validation, canonicalization beyond a lexical
// check, consent, policy, audit trail or locking, and each request is answered
// on its own goroutine. Staged writes end with the session; unlike fsbroker's
// they do not expire after 60 s without a chunk, and there is no limit on how
// many a session holds. It exists to be measured against; it is not a broker:
// do not point it at anything you would not hand to the server unguarded.
//
// Usage:
//
//	fsbaseline --root DIR[:rw] [--root DIR2] [-fsync=false]
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits and defaults of docs/protocol.md that the baseline keeps too.
const (
	defaultReadLength = 1 << 20  // files/read length when absent
	maxReadLength     = 16 << 20 // a longer length is QUOTA_EXCEEDED
	defaultListLimit  = 1000     // files/list limit when absent
	maxListLimit      = 10000
	maxLine           = 32 << 20 // the message limit
	initializeID      = "fsbaseline-1"
	protocolVersion   = "2025-11-25"
)

func main() {
	var roots rootsFlag
	flag.Var(&roots, "root", "a root `DIR[:rw]`, mounted under its base name (repeatable; read-only without :rw)")
	doSync := flag.Bool("fsync", true, "fsync written files and their directory (files/write), as docs/protocol.md requires")
	tools := flag.Bool("tools", false, "be an MCP filesystem server (tools/call of read_text_file, list_directory, write_file), the baseline of fsbroker serve")
	fromMemory := flag.Bool("from-memory", false, "with --tools: answer read_text_file and list_directory from results prepared in memory before the first request (the harness's floor: no file system call per request)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: fsbaseline [--tools [--from-memory]] --root DIR[:rw] ... [-fsync=false]\n\n"+
			"The raw baseline of bench/fsbench: fsbroker's wire (files/read, files/write, files/list)\n"+
			"over stdio with plain OS calls and no checks; with --tools, the reference filesystem\n"+
			"server's (tools/call), the baseline of fsbroker serve.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if len(roots) == 0 || flag.NArg() > 0 || (*fromMemory && !*tools) {
		flag.Usage()
		os.Exit(2)
	}
	s := &server{roots: map[string]root{}, fsync: *doSync, tools: *tools, out: os.Stdout, stages: map[string]*stagedWrite{}}
	for _, r := range roots {
		if _, dup := s.roots[r.mount]; dup {
			fmt.Fprintf(os.Stderr, "fsbaseline: two roots mounted as %q\n", r.mount)
			os.Exit(2)
		}
		s.roots[r.mount] = r
		s.order = append(s.order, r.mount)
	}
	if *fromMemory {
		prepared, err := prepareResults(s.order, s.roots)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fsbaseline:", err)
			os.Exit(1)
		}
		s.prepared = prepared
	}
	if err := s.serve(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "fsbaseline:", err)
		os.Exit(1)
	}
}

// root is one --root.
type root struct {
	dir   string // absolute, symlinks resolved
	mount string // the first segment of a mount-relative path
	rw    bool
}

// rootsFlag collects the --root flags.
type rootsFlag []root

func (f *rootsFlag) String() string { return fmt.Sprint(*f) }

func (f *rootsFlag) Set(v string) error {
	dir, rw := v, false
	if d, ok := strings.CutSuffix(v, ":rw"); ok {
		dir, rw = d, true
	} else if d, ok := strings.CutSuffix(v, ":ro"); ok {
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	*f = append(*f, root{dir: abs, mount: filepath.Base(abs), rw: rw})
	return nil
}

// server is one session on stdio.
type server struct {
	roots map[string]root
	order []string // mounts, in flag order
	fsync bool
	tools bool // the MCP server side (--tools): the client sends initialize
	// prepared holds, with --from-memory, every read_text_file and
	// list_directory result of the roots by absolute path, made at start.
	prepared map[string]json.RawMessage

	mu  sync.Mutex // serializes whole lines on out
	out io.Writer

	stagesMu sync.Mutex
	stages   map[string]*stagedWrite // chunked writes in progress, by OS path
}

// message is an incoming JSON-RPC message: a request, a notification or a
// response.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// rpcError is a JSON-RPC error with docs/protocol.md's data.code.
type rpcError struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

type errorData struct {
	Code   string `json:"code"`
	Reason string `json:"reason,omitempty"`
	Errno  string `json:"errno,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// fail returns a brokered error with code and reason.
func fail(code string, reason string) *rpcError {
	codes := map[string]int{
		"FILE_NOT_FOUND": -32001, "PERMISSION_DENIED": -32002, "INVALID_PATH": -32003,
		"IO_ERROR": -32004, "CONCURRENCY_CONFLICT": -32006, "QUOTA_EXCEEDED": -32007, "INVALID_PARAMS": -32602, "NOT_INITIALIZED": -32600,
	}
	return &rpcError{Code: codes[code], Message: strings.ToLower(strings.ReplaceAll(code, "_", " ")) + ": " + reason,
		Data: &errorData{Code: code, Reason: reason}}
}

// osError maps an OS error to FILE_NOT_FOUND or IO_ERROR, without its paths.
func osError(err error) *rpcError {
	if errors.Is(err, fs.ErrNotExist) {
		return fail("FILE_NOT_FOUND", "no such file or directory")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	e := fail("IO_ERROR", err.Error())
	return e
}

// send writes v as one line.
func (s *server) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.out.Write(b)
	return err
}

// reply answers the request with id: result, or err when not nil.
func (s *server) reply(id json.RawMessage, result any, err *rpcError) {
	m := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id, Result: result, Error: err}
	if err == nil && result == nil {
		m.Result = struct{}{}
	}
	if e := s.send(m); e != nil {
		fmt.Fprintln(os.Stderr, "fsbaseline: write:", e)
		os.Exit(1)
	}
}

// serve runs the session: the handshake (fsbaseline's initialize, or with
// --tools the client's), then one goroutine per request, until in ends.
func (s *server) serve(in io.Reader) error {
	if !s.tools {
		err := s.send(map[string]any{"jsonrpc": "2.0", "id": initializeID, "method": "initialize", "params": map[string]any{
			"protocolVersion": protocolVersion,
			"clientInfo":      map[string]any{"name": "fsbaseline", "version": "dev"},
			"capabilities":    map[string]any{"roots": map[string]any{"listChanged": true, "filesystemBrokering": true}},
		}})
		if err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	initialized := false
	defer s.abortStages() // after the last request: staged writes end with the session
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			s.reply(json.RawMessage("null"), nil, &rpcError{Code: -32700, Message: "parse error"})
			continue
		}
		isRequest := m.Method != "" && len(m.ID) > 0
		switch {
		case s.tools && isRequest && m.Method == "initialize":
			s.reply(m.ID, initializeResult(m.Params), nil)
			initialized = true
		case !s.tools && m.Method == "" && string(m.ID) == `"`+initializeID+`"`:
			if len(m.Error) > 0 {
				return fmt.Errorf("initialize failed: %s", m.Error)
			}
			if err := s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
				return err
			}
			initialized = true
		case !isRequest:
			// A notification or a stray response: nothing to do.
		case !initialized && m.Method != "ping":
			s.reply(m.ID, nil, fail("NOT_INITIALIZED", "the session is not initialized"))
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				result, err := s.handle(m.Method, m.Params)
				s.reply(m.ID, result, err)
			}()
		}
	}
	return sc.Err()
}

// handle answers one request.
func (s *server) handle(method string, params json.RawMessage) (any, *rpcError) {
	switch method {
	case "ping":
		return struct{}{}, nil
	case "roots/list":
		return s.rootsList(), nil
	case "files/read", "fs.read":
		return s.read(params)
	case "files/write", "fs.write":
		return s.write(params)
	case "files/list", "fs.list":
		return s.list(params)
	case "tools/list":
		if s.tools {
			return toolsList(), nil
		}
	case "tools/call":
		if s.tools {
			return s.callTool(params)
		}
	}
	return nil, &rpcError{Code: -32601, Message: "method not found: " + method}
}

// decode unmarshals params into p.
func decode(params json.RawMessage, p any) *rpcError {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, p); err != nil {
		return fail("INVALID_PARAMS", err.Error())
	}
	return nil
}

// resolve maps a mount-relative path to the root and the OS path.
func (s *server) resolve(path string, write bool) (root, string, *rpcError) {
	if path == "" {
		return root{}, "", fail("INVALID_PATH", "empty path")
	}
	mount, rel, _ := strings.Cut(path, "/")
	r, ok := s.roots[mount]
	if !ok {
		return root{}, "", fail("PERMISSION_DENIED", "not inside a root")
	}
	rel = filepath.Clean(filepath.FromSlash(rel))
	if rel != "." && !filepath.IsLocal(rel) {
		return root{}, "", fail("PERMISSION_DENIED", "outside the root")
	}
	if write && !r.rw {
		return root{}, "", fail("PERMISSION_DENIED", "read-only root")
	}
	return r, filepath.Join(r.dir, rel), nil
}

func (s *server) rootsList() any {
	type entry struct {
		URI  string `json:"uri"`
		Name string `json:"name"`
	}
	roots := []entry{}
	for _, m := range s.order {
		roots = append(roots, entry{URI: "file://" + filepath.ToSlash(s.roots[m].dir), Name: m})
	}
	return map[string]any{"roots": roots}
}

// etag is a cheap content version: size and modification time.
func etag(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.ModTime().UnixNano(), 16) + "-" + strconv.FormatInt(fi.Size(), 16)
}

// mimeType guesses from the extension.
func mimeType(name string) string {
	t := mime.TypeByExtension(filepath.Ext(name))
	if t == "" {
		return "application/octet-stream"
	}
	t, _, _ = strings.Cut(t, ";")
	return t
}

type readParams struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Offset   int64  `json:"offset"`
	Length   *int64 `json:"length"`
}

type readResult struct {
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	Size     int64  `json:"size"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
	EOF      bool   `json:"eof"`
	MimeType string `json:"mimeType"`
	Etag     string `json:"etag"`
}

func (s *server) read(params json.RawMessage) (any, *rpcError) {
	var p readParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.Encoding == "" {
		p.Encoding = "utf-8"
	}
	if p.Encoding != "utf-8" && p.Encoding != "base64" || p.Offset < 0 || p.Length != nil && *p.Length < 0 {
		return nil, fail("INVALID_PARAMS", "bad encoding, offset or length")
	}
	length := int64(defaultReadLength)
	if p.Length != nil {
		length = *p.Length
	}
	if length > maxReadLength {
		return nil, fail("QUOTA_EXCEEDED", "length over the maximum")
	}
	_, name, rerr := s.resolve(p.Path, false)
	if rerr != nil {
		return nil, rerr
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, osError(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, osError(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fail("PERMISSION_DENIED", "not a regular file")
	}
	size := fi.Size()
	off := min(p.Offset, size)
	buf := make([]byte, min(length, size-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, osError(err)
	}
	eof := off+int64(n) >= size
	res := &readResult{Encoding: p.Encoding, Size: size, Offset: off, MimeType: mimeType(name), Etag: etag(fi)}
	if p.Encoding == "base64" {
		res.Content = base64.StdEncoding.EncodeToString(buf)
	} else {
		if !eof {
			// A chunk never ends inside a character.
			for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
				if utf8.RuneStart(buf[i]) {
					if !utf8.FullRune(buf[i:]) {
						buf = buf[:i]
					}
					break
				}
			}
		}
		if !utf8.Valid(buf) {
			return nil, fail("IO_ERROR", "the content is not valid UTF-8: read it with encoding base64")
		}
		res.Content = string(buf)
	}
	res.Length = int64(len(buf))
	res.EOF = off+res.Length >= size
	return res, nil
}

type writeParams struct {
	Path          string `json:"path"`
	Content       string `json:"content"`
	Encoding      string `json:"encoding"`
	Create        *bool  `json:"create"`
	CreateParents bool   `json:"createParents"`
	Offset        int64  `json:"offset"`
	Final         *bool  `json:"final"`
}

type writeResult struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Etag    string `json:"etag"`
	Created bool   `json:"created"`
}

// write answers files/write: a whole write (offset 0, final) replaces the
// file at once; anything else is a chunk of a staged write.
func (s *server) write(params json.RawMessage) (any, *rpcError) {
	var p writeParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.Offset < 0 {
		return nil, fail("INVALID_PARAMS", "negative offset")
	}
	data := []byte(p.Content)
	switch p.Encoding {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return nil, fail("INVALID_PARAMS", "content is not base64")
		}
	default:
		return nil, fail("INVALID_PARAMS", "bad encoding")
	}
	_, name, rerr := s.resolve(p.Path, true)
	if rerr != nil {
		return nil, rerr
	}
	create := p.Create == nil || *p.Create
	if final := p.Final == nil || *p.Final; p.Offset != 0 || !final {
		return s.writeChunk(p.Path, name, data, p.Offset, final, create, p.CreateParents)
	}
	s.dropStage(name) // a whole write replaces any staged one
	tmp, rerr := s.startTemp(name, create, p.CreateParents)
	if rerr != nil {
		return nil, rerr
	}
	if _, err := tmp.Write(data); err != nil {
		discard(tmp)
		return nil, osError(err)
	}
	return s.commit(p.Path, name, tmp, create)
}

// checkTarget applies the conditions of a write to the file at name: it
// returns whether the write creates it, and the mode the new file gets (the
// old one's permission bits, else 0644).
func checkTarget(name string, create bool) (created bool, mode fs.FileMode, _ *rpcError) {
	old, err := os.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return false, 0, fail("FILE_NOT_FOUND", "no such file")
	case errors.Is(err, fs.ErrNotExist):
		return true, 0o644, nil
	case err != nil:
		return false, 0, osError(err)
	case !old.Mode().IsRegular():
		return false, 0, fail("PERMISSION_DENIED", "not a regular file")
	}
	return false, old.Mode().Perm(), nil
}

// startTemp checks the conditions of a write to name and opens the
// temporary file beside it that will replace it.
func (s *server) startTemp(name string, create, createParents bool) (*os.File, *rpcError) {
	if _, _, rerr := checkTarget(name, create); rerr != nil {
		return nil, rerr
	}
	dir := filepath.Dir(name)
	if createParents {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, osError(err)
		}
	}
	tmp, err := os.CreateTemp(dir, ".fsbaseline-*")
	if err != nil {
		return nil, osError(err)
	}
	return tmp, nil
}

// discard closes and removes a temporary file that will not be committed.
func discard(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
}

// commit replaces the file at name (path as the request named it) with tmp,
// which holds the whole new content, atomically: the old file's mode, fsync,
// rename, fsync of the directory. tmp is closed, and removed on failure.
func (s *server) commit(path, name string, tmp *os.File, create bool) (any, *rpcError) {
	created, mode, rerr := checkTarget(name, create)
	if rerr != nil {
		discard(tmp)
		return nil, rerr
	}
	if err := tmp.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		discard(tmp)
		return nil, osError(err)
	}
	if s.fsync {
		if err := tmp.Sync(); err != nil {
			discard(tmp)
			return nil, osError(err)
		}
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return nil, osError(err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		os.Remove(tmp.Name())
		return nil, osError(err)
	}
	if s.fsync && runtime.GOOS != "windows" {
		if d, err := os.Open(filepath.Dir(name)); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return nil, osError(err)
			}
		}
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, osError(err)
	}
	return &writeResult{Path: path, Size: fi.Size(), Etag: etag(fi), Created: created}, nil
}

// stagedWrite is a chunked files/write in progress: its chunks appended to a
// temporary file beside the target, which the final chunk commits.
type stagedWrite struct {
	mu     sync.Mutex
	tmp    *os.File
	size   int64 // bytes staged so far
	create bool  // the first chunk's condition, checked again at commit
	ended  bool  // committed or discarded
}

// writeChunk handles a chunk of a staged write, as fsbroker does: offset 0
// starts one (replacing any staged one for the path), a later chunk must
// continue one at exactly the bytes staged so far, and the final chunk
// commits it. A chunk before the final one answers the bytes staged so far
// and no etag.
func (s *server) writeChunk(path, name string, data []byte, offset int64, final, create, createParents bool) (any, *rpcError) {
	if offset == 0 {
		s.dropStage(name)
		tmp, rerr := s.startTemp(name, create, createParents)
		if rerr != nil {
			return nil, rerr
		}
		s.stagesMu.Lock()
		s.stages[name] = &stagedWrite{tmp: tmp, create: create}
		s.stagesMu.Unlock()
	}
	s.stagesMu.Lock()
	sw := s.stages[name]
	s.stagesMu.Unlock()
	if sw == nil {
		return nil, fail("CONCURRENCY_CONFLICT", fmt.Sprintf("offset %d does not follow a staged write: none is in progress for this path", offset))
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	switch {
	case sw.ended:
		return nil, fail("CONCURRENCY_CONFLICT", "the staged write has ended")
	case offset != sw.size:
		return nil, fail("CONCURRENCY_CONFLICT", fmt.Sprintf("offset %d does not follow the %d bytes staged so far", offset, sw.size))
	}
	if _, err := sw.tmp.Write(data); err != nil {
		s.endStage(name, sw)
		discard(sw.tmp)
		return nil, osError(err)
	}
	sw.size += int64(len(data))
	if !final {
		return &writeResult{Path: path, Size: sw.size}, nil
	}
	s.endStage(name, sw)
	return s.commit(path, name, sw.tmp, sw.create)
}

// endStage takes sw, locked by the caller, out of the table and marks it
// ended.
func (s *server) endStage(name string, sw *stagedWrite) {
	sw.ended = true
	s.stagesMu.Lock()
	if s.stages[name] == sw {
		delete(s.stages, name)
	}
	s.stagesMu.Unlock()
}

// dropStage discards the staged write of name, if any.
func (s *server) dropStage(name string) {
	s.stagesMu.Lock()
	sw := s.stages[name]
	delete(s.stages, name)
	s.stagesMu.Unlock()
	if sw != nil {
		sw.mu.Lock()
		if !sw.ended {
			sw.ended = true
			discard(sw.tmp)
		}
		sw.mu.Unlock()
	}
}

// abortStages discards every staged write (the session's end).
func (s *server) abortStages() {
	s.stagesMu.Lock()
	names := make([]string, 0, len(s.stages))
	for name := range s.stages {
		names = append(names, name)
	}
	s.stagesMu.Unlock()
	for _, name := range names {
		s.dropStage(name)
	}
}

type listParams struct {
	Path          string `json:"path"`
	Recursive     bool   `json:"recursive"`
	IncludeHidden bool   `json:"includeHidden"`
	Limit         int    `json:"limit"`
	Cursor        string `json:"cursor"`
}

type listEntry struct {
	Path     string    `json:"path"`
	Name     string    `json:"name"`
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

type listResult struct {
	Entries    []listEntry `json:"entries"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// list lists one directory level: the names after the cursor (the last name
// of the previous page), sorted, up to limit, each with an lstat.
func (s *server) list(params json.RawMessage) (any, *rpcError) {
	var p listParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.Recursive {
		return nil, fail("IO_ERROR", "recursive listings are not implemented by the baseline")
	}
	if p.Limit == 0 {
		p.Limit = defaultListLimit
	}
	if p.Limit < 1 || p.Limit > maxListLimit {
		return nil, fail("INVALID_PARAMS", "limit out of range")
	}
	_, name, rerr := s.resolve(p.Path, false)
	if rerr != nil {
		return nil, rerr
	}
	d, err := os.Open(name)
	if err != nil {
		return nil, osError(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, osError(err)
	}
	kept := names[:0]
	for _, n := range names {
		if (p.IncludeHidden || !strings.HasPrefix(n, ".")) && n > p.Cursor && !strings.HasPrefix(n, ".fsbaseline-") {
			kept = append(kept, n)
		}
	}
	slices.Sort(kept)
	res := &listResult{Entries: make([]listEntry, 0, min(len(kept), p.Limit))}
	if len(kept) > p.Limit {
		kept = kept[:p.Limit]
		res.NextCursor = kept[len(kept)-1]
	}
	prefix := strings.TrimSuffix(p.Path, "/") + "/"
	for _, n := range kept {
		fi, err := os.Lstat(filepath.Join(name, n))
		if err != nil {
			continue // gone since the directory was read
		}
		e := listEntry{Path: prefix + n, Name: n, Type: "other", Modified: fi.ModTime().UTC()}
		switch {
		case fi.Mode().IsRegular():
			e.Type, e.Size = "file", fi.Size()
		case fi.IsDir():
			e.Type = "directory"
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
		}
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}
