// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// ReadOptions are the chunk to read and how it will be encoded.
type ReadOptions struct {
	Offset int64
	Length int64
	// UTF8 asks for text: the chunk is shortened so that it never ends
	// inside a multi-byte character, and content that is not valid UTF-8 is
	// refused (IO_ERROR: read it as base64).
	UTF8 bool
}

// ReadResult is one chunk of a file.
type ReadResult struct {
	Data     []byte
	Size     int64 // the whole file's size
	EOF      bool  // Offset + len(Data) reached the end
	ETag     string
	MimeType string
}

// Read returns a chunk of the regular file at t. The file opened is checked
// to be the one resolved (same device and inode): CONCURRENCY_CONFLICT
// otherwise. Directories are IO_ERROR (EISDIR); FIFOs, sockets and devices
// are PERMISSION_DENIED and never opened.
func (x *Executor) Read(ctx context.Context, t Target, o ReadOptions) (ReadResult, error) {
	if err := deadline(ctx); err != nil {
		return ReadResult{}, err
	}
	if o.Offset < 0 || o.Length < 0 {
		return ReadResult{}, errcode.New(errcode.InvalidParams, "offset and length must not be negative")
	}
	if err := readable(t); err != nil {
		return ReadResult{}, err
	}
	rh, err := x.rootHandle(t.Path.Root)
	if err != nil {
		return ReadResult{}, err
	}
	f, now, err := openTarget(rh, t)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Close()

	size := now.Size
	n := int64(0)
	if o.Offset < size {
		n = min(o.Length, size-o.Offset)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, o.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return ReadResult{}, mapOSError(err, "the file cannot be read")
	}
	buf = buf[:got]
	eof := o.Offset+int64(got) >= size
	if o.UTF8 {
		if !eof {
			buf = trimPartialRune(buf)
			if len(buf) == 0 && got > 0 {
				// A length shorter than the character at offset: return
				// that whole character, so that a reader always advances.
				whole := make([]byte, utf8.UTFMax)
				n, _ := f.ReadAt(whole, o.Offset)
				buf = whole[:firstRuneLen(whole[:n])]
				eof = o.Offset+int64(len(buf)) >= size
			}
		}
		if !utf8.Valid(buf) {
			return ReadResult{}, errcode.New(errcode.IOError,
				"the content is not valid UTF-8 text; read it with encoding base64")
		}
	}
	return ReadResult{
		Data:     buf,
		Size:     size,
		EOF:      eof && o.Offset+int64(len(buf)) >= size,
		ETag:     ETag(now),
		MimeType: x.mimeType(f, t.Path.Rel, buf, o.Offset),
	}, nil
}

// openTarget opens the regular file resolved as t for reading: the object
// ResolveRead kept, reopened, when t holds one; else by its path, checked
// (openChecked).
func openTarget(rh *rootHandle, t Target) (fileReader, Info, error) {
	if t.held != nil {
		f, info, err := t.held.reopen(t)
		if !errors.Is(err, errNotHeld) {
			return f, info, err
		}
	}
	return openChecked(rh, t)
}

// readable refuses what cannot be read as a file.
func readable(t Target) error {
	switch {
	case !t.Exists:
		return errcode.New(errcode.FileNotFound, "the file does not exist")
	case t.Info.Type == TypeDirectory:
		return errcode.New(errcode.IOError, "the path is a directory; list it with files/list").With("errno", "EISDIR")
	case t.Info.Type != TypeFile:
		return notRegular()
	}
	return nil
}

func notRegular() error {
	return errcode.New(errcode.PermissionDenied, "not a regular file")
}

func conflict(reason string) error {
	return errcode.New(errcode.ConcurrencyConflict, reason)
}

// trimPartialRune drops an incomplete multi-byte character at the end of b,
// so that offset+length is always the start of the next character.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// firstRuneLen is the length of the first character of b (1 for an invalid
// byte, which the UTF-8 check then refuses).
func firstRuneLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	_, n := utf8.DecodeRune(b)
	return n
}

// ETag is the file's version tag: a digest of its device, inode, size,
// modification time and status-change time (nanoseconds). A write through
// the broker always replaces the inode, and any other change of content
// moves the modification and change times (the kernel gives fine-grained
// times to a file whose times have been read since its last change), so the
// tag changes whenever the content does.
func ETag(i Info) string {
	var b [40]byte
	binary.LittleEndian.PutUint64(b[0:], i.Dev)
	binary.LittleEndian.PutUint64(b[8:], i.Ino)
	binary.LittleEndian.PutUint64(b[16:], uint64(i.Size))
	binary.LittleEndian.PutUint64(b[24:], uint64(i.ModTime.UnixNano()))
	binary.LittleEndian.PutUint64(b[32:], uint64(i.Ctime))
	sum := sha256.Sum256(b[:])
	return hex.EncodeToString(sum[:12])
}

// mimeTypes is the extension table, checked before the system's and before
// sniffing, so that common source files get the same type on every machine.
var mimeTypes = map[string]string{
	".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
	".go": "text/x-go", ".py": "text/x-python", ".rs": "text/x-rust", ".c": "text/x-c",
	".h": "text/x-c", ".cc": "text/x-c++", ".cpp": "text/x-c++", ".hpp": "text/x-c++",
	".java": "text/x-java", ".kt": "text/x-kotlin", ".rb": "text/x-ruby", ".php": "text/x-php",
	".sh": "text/x-shellscript", ".bash": "text/x-shellscript", ".zsh": "text/x-shellscript",
	".js": "text/javascript", ".mjs": "text/javascript", ".cjs": "text/javascript",
	".ts": "text/x-typescript", ".tsx": "text/x-typescript", ".jsx": "text/javascript",
	".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".xml": "application/xml", ".html": "text/html",
	".htm": "text/html", ".css": "text/css", ".csv": "text/csv", ".sql": "application/sql",
	".rego": "text/x-rego", ".proto": "text/x-protobuf", ".ini": "text/plain", ".cfg": "text/plain",
	".log": "text/plain", ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg",
	".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp", ".pdf": "application/pdf",
	".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar",
	".wasm": "application/wasm",
}

// mimeType names the content type: by extension, else by sniffing the first
// 512 bytes of the file.
func (x *Executor) mimeType(f io.ReaderAt, rel string, chunk []byte, offset int64) string {
	ext := strings.ToLower(path.Ext(rel))
	if t, ok := mimeTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); ext != "" && t != "" {
		return strings.Split(t, ";")[0]
	}
	head := chunk
	if offset != 0 || len(head) == 0 {
		b := make([]byte, 512)
		n, _ := f.ReadAt(b, 0)
		head = b[:n]
	}
	if len(head) == 0 {
		return "application/octet-stream"
	}
	return strings.Split(http.DetectContentType(head[:min(len(head), 512)]), ";")[0]
}
