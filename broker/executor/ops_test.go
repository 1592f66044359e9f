// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
)

// ---- Read ----

func TestReadChunks(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "digits.txt", "0123456789")
	f.writeFile(t, "empty", "")
	tg := f.resolve(t, "proj/digits.txt", true)
	cases := []struct {
		off, n int64
		want   string
		eof    bool
	}{
		{0, 4, "0123", false},
		{4, 6, "456789", true},
		{8, 100, "89", true},
		{0, 10, "0123456789", true},
		{0, 0, "", false},
		{9, 0, "", false},
		{10, 5, "", true}, // at the end
		{20, 5, "", true}, // past the end
		{1 << 40, 1, "", true},
	}
	for _, c := range cases {
		for _, utf := range []bool{false, true} {
			res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Offset: c.off, Length: c.n, UTF8: utf})
			if err != nil {
				t.Fatalf("Read(%d, %d): %v", c.off, c.n, err)
			}
			if string(res.Data) != c.want || res.EOF != c.eof || res.Size != 10 {
				t.Errorf("Read(%d, %d, utf8 %v) = %q eof %v size %d, want %q eof %v size 10",
					c.off, c.n, utf, res.Data, res.EOF, res.Size, c.want, c.eof)
			}
		}
	}
	res := f.read(t, "proj/empty")
	if len(res.Data) != 0 || !res.EOF || res.Size != 0 {
		t.Fatalf("empty file: %+v", res)
	}
	_, err := f.x.Read(ctxT(t), f.resolve(t, "proj/missing", true), executor.ReadOptions{Length: 1})
	wantCode(t, err, errcode.FileNotFound, "")
}

// mixedText holds characters of 1, 2, 3 and 4 bytes in every order.
func mixedText() []byte {
	chars := []string{"a", "é", "€", "😀", "z", "ß", "中", "𝄞", "\n", "ñ", "語", "🎉"}
	var b strings.Builder
	for i := 0; i < 40; i++ {
		for j := range chars {
			b.WriteString(chars[(i*7+j*5)%len(chars)])
		}
	}
	return []byte(b.String())
}

// walkUTF8 reads the file in utf-8 chunks of n bytes and checks each chunk:
// valid, never longer than n, ending at a character boundary (so offset +
// length is the start of the next character), and that the chunks
// concatenate to the file. It stops (failing) when a chunk makes no progress.
func walkUTF8(t *testing.T, f *fixture, tg executor.Target, content []byte, n int64) {
	t.Helper()
	var got []byte
	off := int64(0)
	for steps := 0; ; steps++ {
		res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Offset: off, Length: n, UTF8: true})
		if err != nil {
			t.Fatalf("length %d, offset %d: %v", n, off, err)
		}
		// A chunk is at most the length asked for, except that a length
		// shorter than the character at the offset returns that one whole
		// character (so that a reader always advances).
		_, first := utf8.DecodeRune(content[min(off, int64(len(content))):])
		if (int64(len(res.Data)) > n && len(res.Data) != first) || !utf8.Valid(res.Data) {
			t.Fatalf("length %d, offset %d: chunk %q is longer than asked or not valid UTF-8", n, off, res.Data)
		}
		if !bytes.Equal(res.Data, content[off:off+int64(len(res.Data))]) {
			t.Fatalf("length %d, offset %d: chunk %q is not the file's bytes", n, off, res.Data)
		}
		got = append(got, res.Data...)
		off += int64(len(res.Data))
		if off < int64(len(content)) && !utf8.RuneStart(content[off]) {
			t.Fatalf("length %d: offset %d is inside a character", n, off)
		}
		if res.EOF {
			break
		}
		if len(res.Data) == 0 {
			_, size := utf8.DecodeRune(content[off:])
			t.Fatalf("length %d, offset %d: an empty chunk without eof (the next character has %d bytes): "+
				"a client reading with this length never gets further", n, off, size)
		}
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("length %d: the chunks do not concatenate to the file", n)
	}
}

// TestReadUTF8ChunksNeverSplitACharacter walks a file of mixed 1-4 byte
// characters with lengths that can always hold a character.
func TestReadUTF8ChunksNeverSplitACharacter(t *testing.T) {
	f := newFixture(t)
	content := mixedText()
	if err := os.WriteFile(f.host("mixed.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tg := f.resolve(t, "proj/mixed.txt", true)
	for n := int64(utf8.UTFMax); n <= 8; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) { walkUTF8(t, f, tg, content, n) })
	}
}

// TestReadUTF8ShortLengthsMakeProgress walks the same file with lengths 1..3,
// shorter than some of its characters.
func TestReadUTF8ShortLengthsMakeProgress(t *testing.T) {
	f := newFixture(t)
	content := mixedText()
	if err := os.WriteFile(f.host("mixed.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tg := f.resolve(t, "proj/mixed.txt", true)
	for n := int64(1); n < utf8.UTFMax; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) { walkUTF8(t, f, tg, content, n) })
	}
}

// TestReadBadOptions: options outside what the schema allows get an error,
// never a panic (the executor is a public API; the schema is one caller's
// guard).
func TestReadBadOptions(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "f", "0123456789")
	tg := f.resolve(t, "proj/f", true)
	for _, o := range []executor.ReadOptions{{Length: -1}, {Offset: -1, Length: 5}, {Offset: 3, Length: -100}} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Read(%+v) panicked: %v", o, r)
				}
			}()
			_, err = f.x.Read(ctxT(t), tg, o)
		}()
		if err == nil {
			t.Fatalf("Read(%+v) succeeded", o)
		}
		wantKnownCode(t, err, f.tmp)
	}
}

func TestReadInvalidUTF8AndDirectory(t *testing.T) {
	f := newFixture(t)
	bad := []byte("valid \xff\xfe then bad")
	if err := os.WriteFile(f.host("bin.dat"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	tg := f.resolve(t, "proj/bin.dat", true)
	_, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100, UTF8: true})
	e := wantCode(t, err, errcode.IOError, "")
	if !strings.Contains(e.Reason, "base64") {
		t.Errorf("reason %q does not tell to use base64", e.Reason)
	}
	// The valid prefix alone is fine; bytes (base64) are always fine.
	if res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 6, UTF8: true}); err != nil || string(res.Data) != "valid " {
		t.Fatalf("valid prefix: %q %v", res.Data, err)
	}
	res, err := f.x.Read(ctxT(t), tg, executor.ReadOptions{Length: 100})
	if err != nil || !bytes.Equal(res.Data, bad) {
		t.Fatalf("bytes: %q %v", res.Data, err)
	}
	if base64.StdEncoding.EncodeToString(res.Data) == "" {
		t.Fatal("unreachable")
	}

	f.mkdir(t, "dir")
	_, err = f.x.Read(ctxT(t), f.resolve(t, "proj/dir", true), executor.ReadOptions{Length: 10})
	wantCode(t, err, errcode.IOError, "EISDIR")
}

func TestReadMimeType(t *testing.T) {
	f := newFixture(t)
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 64)...)
	files := map[string][]byte{
		"main.go":     []byte("package main\n"),
		"data.JSON":   []byte("{}"),
		"notes.md":    []byte("# x"),
		"image":       png, // no extension: sniffed
		"plain":       []byte("just text\n"),
		"empty":       nil,
		"page.html":   []byte("<html></html>"),
		"policy.rego": []byte("package x"),
	}
	want := map[string]string{
		"main.go":     "text/x-go",
		"data.JSON":   "application/json",
		"notes.md":    "text/markdown",
		"image":       "image/png",
		"plain":       "text/plain",
		"empty":       "application/octet-stream",
		"page.html":   "text/html",
		"policy.rego": "text/x-rego",
	}
	for name, data := range files {
		if err := os.WriteFile(f.host(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		res := f.read(t, "proj/"+name)
		if res.MimeType != want[name] {
			t.Errorf("%s: mimeType %q, want %q", name, res.MimeType, want[name])
		}
	}
	// Sniffing looks at the file's head, not at the chunk.
	res, err := f.x.Read(ctxT(t), f.resolve(t, "proj/image", true), executor.ReadOptions{Offset: 30, Length: 8})
	if err != nil || res.MimeType != "image/png" {
		t.Fatalf("image at offset 30: %q %v", res.MimeType, err)
	}
}

func TestETag(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "f.txt", "version 1")
	e1 := f.read(t, "proj/f.txt").ETag
	if e1 == "" {
		t.Fatal("empty etag")
	}
	for i := 0; i < 3; i++ {
		if e := f.read(t, "proj/f.txt").ETag; e != e1 {
			t.Fatalf("etag changed without a change: %q then %q", e1, e)
		}
	}
	seen := map[string]string{e1: "initial"}
	check := func(what string) string {
		t.Helper()
		e := f.read(t, "proj/f.txt").ETag
		if prev, dup := seen[e]; dup {
			t.Fatalf("etag after %s equals the etag after %s", what, prev)
		}
		seen[e] = what
		return e
	}
	f.write(t, "proj/f.txt", "version 2")
	check("a broker write")
	// Same size, written in place by someone else, right after a read.
	if err := os.WriteFile(f.host("f.txt"), []byte("version 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("an in-place write of the same size")
	if err := os.WriteFile(f.host("f.txt"), []byte("version 4"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a second in-place write of the same size")
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(f.host("f.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	check("chtimes")
	// The same content written by the broker is a new version too (a new
	// inode); the etag never goes back to an old value.
	f.write(t, "proj/f.txt", "version 4")
	check("a broker write of the same content")
}

// TestWriteETagIsTheFilesETag: the etag a write returns is the one a read
// of the result returns, so that it can be sent as ifMatch. (rename(2)
// changes the renamed inode's ctime, which the etag includes: the etag must
// be taken after the rename.)
func TestWriteETagIsTheFilesETag(t *testing.T) {
	f := newFixture(t)
	for _, raw := range []string{"proj/new.txt", "proj/new.txt"} { // created, then replaced
		wr := f.write(t, raw, "content")
		if rd := f.read(t, raw); rd.ETag != wr.ETag {
			t.Fatalf("Write returned etag %q, Read returns %q", wr.ETag, rd.ETag)
		}
		_, err := f.x.Write(ctxT(t), f.resolve(t, raw, true), []byte("next"), executor.WriteOptions{Create: true, IfMatch: wr.ETag})
		if err != nil {
			t.Fatalf("Write with ifMatch = the previous write's etag: %v", err)
		}
	}
}

// ---- Write ----

func TestWriteConditions(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	write := func(raw, data string, o executor.WriteOptions) (executor.WriteResult, error) {
		return f.x.Write(ctx, f.resolve(t, raw, true), []byte(data), o)
	}
	// create false and the file is missing.
	_, err := write("proj/a.txt", "x", executor.WriteOptions{Create: false})
	wantCode(t, err, errcode.FileNotFound, "")
	if _, err := os.Lstat(f.host("a.txt")); !os.IsNotExist(err) {
		t.Fatal("create false created the file")
	}
	// create true.
	res, err := write("proj/a.txt", "one", executor.WriteOptions{Create: true})
	if err != nil || !res.Created || res.Size != 3 || res.Path.Rel != "a.txt" || res.ETag == "" {
		t.Fatalf("create: %+v %v", res, err)
	}
	// create false and the file exists.
	res, err = write("proj/a.txt", "two!", executor.WriteOptions{Create: false})
	if err != nil || res.Created || res.Size != 4 {
		t.Fatalf("replace: %+v %v", res, err)
	}
	// ifNoneMatch.
	_, err = write("proj/a.txt", "x", executor.WriteOptions{Create: true, IfNoneMatch: true})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if _, err := write("proj/b.txt", "b", executor.WriteOptions{Create: true, IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	// ifMatch: the current etag (as read) passes, any other fails.
	cur := f.read(t, "proj/a.txt").ETag
	_, err = write("proj/a.txt", "x", executor.WriteOptions{Create: true, IfMatch: "not-the-etag"})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	_, err = write("proj/missing.txt", "x", executor.WriteOptions{Create: true, IfMatch: cur})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if _, err := write("proj/a.txt", "three", executor.WriteOptions{Create: true, IfMatch: cur}); err != nil {
		t.Fatalf("ifMatch with the current etag: %v", err)
	}
	_, err = write("proj/a.txt", "x", executor.WriteOptions{Create: true, IfMatch: cur})
	wantCode(t, err, errcode.ConcurrencyConflict, "") // stale now
	if got := f.readHost(t, "a.txt"); got != "three" {
		t.Fatalf("a.txt holds %q", got)
	}
	// createParents.
	_, err = write("proj/d1/d2/c.txt", "c", executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.FileNotFound, "")
	if _, err := os.Lstat(f.host("d1")); !os.IsNotExist(err) {
		t.Fatal("a failed write created a parent")
	}
	if _, err := write("proj/d1/d2/c.txt", "c", executor.WriteOptions{Create: true, CreateParents: true}); err != nil {
		t.Fatal(err)
	}
	if f.readHost(t, "d1/d2/c.txt") != "c" {
		t.Fatal("createParents: wrong content")
	}
	// The root and directories.
	_, err = f.x.Write(ctx, f.resolve(t, "proj", true), []byte("x"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.IOError, "EISDIR")
	_, err = write("proj/d1", "x", executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.IOError, "EISDIR")
	noTemps(t, f.dir)
}

func TestWriteDataAndModes(t *testing.T) {
	f := newFixture(t)
	// Exactly the bytes: binary, empty, large.
	big := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 700_001)
	for name, data := range map[string][]byte{"bin": {0, 0xff, '\r', '\n', 0}, "empty": {}, "big": big} {
		res, err := f.x.Write(ctxT(t), f.resolve(t, "proj/"+name, true), data, executor.WriteOptions{Create: true})
		if err != nil || res.Size != int64(len(data)) {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		if got, _ := os.ReadFile(f.host(name)); !bytes.Equal(got, data) {
			t.Fatalf("%s: the file holds other bytes", name)
		}
	}
	// A new file is 0644, whatever the umask.
	old, ok := setUmask(0o077)
	if !ok {
		return // no Unix modes here
	}
	f.write(t, "proj/new", "x")
	setUmask(old)
	if fi, _ := os.Stat(f.host("new")); fi.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", fi.Mode().Perm())
	}
	// An existing file's mode is kept.
	for _, mode := range []os.FileMode{0o600, 0o755, 0o640, 0o444} {
		name := fmt.Sprintf("m%o", mode)
		f.writeFile(t, name, "old")
		if err := os.Chmod(f.host(name), mode); err != nil {
			t.Fatal(err)
		}
		f.write(t, "proj/"+name, "new")
		fi, _ := os.Stat(f.host(name))
		if fi.Mode().Perm() != mode {
			t.Errorf("mode %v after a write, want %v", fi.Mode().Perm(), mode)
		}
		if f.readHost(t, name) != "new" {
			t.Errorf("%s not written", name)
		}
	}
}

// TestWriteHardLink: a write replaces the name it was given; another hard
// link to the old file keeps the old content (the write is a rename, never
// an in-place change).
func TestWriteHardLink(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "a", "old content")
	if err := os.Link(f.host("a"), f.host("b")); err != nil {
		t.Fatal(err)
	}
	tg := f.resolve(t, "proj/a", true)
	if tg.Info.Nlink != 2 {
		t.Fatalf("nlink %d, want 2", tg.Info.Nlink)
	}
	f.write(t, "proj/a", "new content")
	if f.readHost(t, "a") != "new content" || f.readHost(t, "b") != "old content" {
		t.Fatalf("a=%q b=%q", f.readHost(t, "a"), f.readHost(t, "b"))
	}
	if tg := f.resolve(t, "proj/b", true); tg.Info.Nlink != 1 {
		t.Fatalf("b's nlink %d, want 1", tg.Info.Nlink)
	}
}

// TestWriteLeavesNoTempOnFailure: every failure path after the temporary
// file exists removes it.
func TestWriteLeavesNoTempOnFailure(t *testing.T) {
	f := newFixture(t, executor.WithLockWait(50*time.Millisecond))
	f.writeFile(t, "d/f.txt", "old")
	cases := []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"ifMatch changed before commit", func(t *testing.T) error {
			tg := f.resolve(t, "proj/d/f.txt", true)
			o := executor.WriteOptions{Create: true, IfMatch: executor.ETag(tg.Info)}
			st, err := f.x.StartStage(ctxT(t), tg, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append([]byte("new"), 0); err != nil {
				t.Fatal(err)
			}
			if len(temps(t, f.dir)) != 1 {
				t.Fatal("no temporary file while staging")
			}
			if err := os.WriteFile(f.host("d/f.txt"), []byte("changed elsewhere"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = st.Commit(ctxT(t), o)
			return err
		}},
		{"lock held", func(t *testing.T) error {
			unlock, err := f.x.Lock(ctxT(t), f.path(t, "proj/d/f.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			_, err = f.x.Write(ctxT(t), f.resolve(t, "proj/d/f.txt", true), []byte("x"), executor.WriteOptions{Create: true})
			return err
		}},
		{"deadline while waiting for the lock", func(t *testing.T) error {
			unlock, err := f.x.Lock(ctxT(t), f.path(t, "proj/d/f.txt"))
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			x := newExecutor(t, f.state, executor.WithLockWait(10*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			_, err = x.Write(ctx, f.resolve(t, "proj/d/f.txt", true), []byte("x"), executor.WriteOptions{Create: true})
			return err
		}},
		{"parent directory replaced", func(t *testing.T) error {
			tg := f.resolve(t, "proj/d/f.txt", true)
			st, err := f.x.StartStage(ctxT(t), tg, executor.WriteOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append([]byte("new"), 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.host("d"), f.host("d.moved")); err != nil {
				t.Fatal(err)
			}
			f.writeFile(t, "d/f.txt", "another directory")
			_, err = st.Commit(ctxT(t), executor.WriteOptions{Create: true})
			if f.readHost(t, "d.moved/f.txt") != "changed elsewhere" || f.readHost(t, "d/f.txt") != "another directory" {
				t.Fatal("a write into a replaced directory changed a file")
			}
			if err := os.RemoveAll(f.host("d")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.host("d.moved"), f.host("d")); err != nil {
				t.Fatal(err)
			}
			return err
		}},
		{"target became a directory", func(t *testing.T) error {
			tg := f.resolve(t, "proj/d/g", true)
			st, err := f.x.StartStage(ctxT(t), tg, executor.WriteOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Append([]byte("new"), 0); err != nil {
				t.Fatal(err)
			}
			f.mkdir(t, "d/g/sub")
			_, err = st.Commit(ctxT(t), executor.WriteOptions{Create: true})
			return err
		}},
		{"target created before commit (ifNoneMatch)", func(t *testing.T) error {
			o := executor.WriteOptions{Create: true, IfNoneMatch: true}
			st, err := f.x.StartStage(ctxT(t), f.resolve(t, "proj/d/h", true), o)
			if err != nil {
				t.Fatal(err)
			}
			f.writeFile(t, "d/h", "first")
			_, err = st.Commit(ctxT(t), o)
			if f.readHost(t, "d/h") != "first" {
				t.Fatal("ifNoneMatch replaced a file created meanwhile")
			}
			return err
		}},
		{"cancelled context", func(t *testing.T) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := f.x.Write(ctx, f.resolve(t, "proj/d/f.txt", true), []byte("x"), executor.WriteOptions{Create: true})
			return err
		}},
	}
	// A target that appeared (even as a directory) after the decision is a
	// conflict: nobody decided on it.
	want := []errcode.Code{errcode.ConcurrencyConflict, errcode.ConcurrencyConflict, errcode.Timeout,
		errcode.ConcurrencyConflict, errcode.ConcurrencyConflict, errcode.ConcurrencyConflict, errcode.Timeout}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(t)
			wantCode(t, err, want[i], "")
			noTemps(t, f.dir)
		})
	}
	if f.readHost(t, "d/f.txt") != "changed elsewhere" {
		t.Fatalf("d/f.txt holds %q", f.readHost(t, "d/f.txt"))
	}
}

// ---- staged writes ----

func TestStagedWrite(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "big.bin", "old")
	tg := f.resolve(t, "proj/big.bin", true)
	o := executor.WriteOptions{Create: true, IfMatch: f.read(t, "proj/big.bin").ETag}
	st, err := f.x.StartStage(ctxT(t), tg, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if st.Target().Rel != "big.bin" {
		t.Fatalf("stage target %q", st.Target().Rel)
	}
	var want []byte
	for i := 0; i < 5; i++ {
		chunk := bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
		// A wrong offset is refused and says how much is staged.
		for _, bad := range []int64{st.Size() + 1, st.Size() - 1, 0} {
			if bad == st.Size() || bad < 0 {
				continue
			}
			e := wantCode(t, st.Append(chunk, bad), errcode.ConcurrencyConflict, "")
			if e.Details["staged"] != st.Size() {
				t.Fatalf("detail staged = %v, want %d", e.Details["staged"], st.Size())
			}
		}
		if err := st.Append(chunk, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
		if st.Size() != int64(len(want)) {
			t.Fatalf("Size %d, want %d", st.Size(), len(want))
		}
		// The target is untouched until Commit.
		if f.readHost(t, "big.bin") != "old" {
			t.Fatal("the target changed before Commit")
		}
		if n := len(temps(t, f.dir)); n != 1 {
			t.Fatalf("%d temporary files while staging, want 1", n)
		}
	}
	res, err := st.Commit(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.host("big.bin")); !bytes.Equal(got, want) || res.Size != int64(len(want)) || res.Created {
		t.Fatalf("after Commit: %d bytes, result %+v", len(got), res)
	}
	noTemps(t, f.dir)
	// The stage has ended.
	wantCode(t, st.Append([]byte("x"), st.Size()), errcode.ConcurrencyConflict, "")
	_, err = st.Commit(ctxT(t), o)
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	st.Abort() // harmless
}

func TestStagedWriteAbort(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "f", "old")
	for _, raw := range []string{"proj/f", "proj/newfile"} {
		st, err := f.x.StartStage(ctxT(t), f.resolve(t, raw, true), executor.WriteOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Append([]byte("staged"), 0); err != nil {
			t.Fatal(err)
		}
		st.Abort()
		st.Abort()
		noTemps(t, f.dir)
		wantCode(t, st.Append([]byte("x"), 6), errcode.ConcurrencyConflict, "")
	}
	if f.readHost(t, "f") != "old" {
		t.Fatal("Abort changed the target")
	}
	if _, err := os.Lstat(f.host("newfile")); !os.IsNotExist(err) {
		t.Fatal("Abort created the target")
	}
}

// TestStagedWriteIfMatchAtCommit: the conditions are checked again at
// Commit, against the file as it is then.
func TestStagedWriteIfMatchAtCommit(t *testing.T) {
	f := newFixture(t)
	f.writeFile(t, "f", "v1")
	tg := f.resolve(t, "proj/f", true)
	o := executor.WriteOptions{Create: true, IfMatch: f.read(t, "proj/f").ETag}
	st, err := f.x.StartStage(ctxT(t), tg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append([]byte("staged"), 0); err != nil {
		t.Fatal(err)
	}
	f.write(t, "proj/f", "v2 by another request")
	_, err = st.Commit(ctxT(t), o)
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if f.readHost(t, "f") != "v2 by another request" {
		t.Fatal("the conflicting commit replaced the file")
	}
	noTemps(t, f.dir)
	// StartStage itself refuses a stale ifMatch before any data.
	_, err = f.x.StartStage(ctxT(t), f.resolve(t, "proj/f", true), o)
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	noTemps(t, f.dir)
}

// ---- Create ----

func TestCreate(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	create := func(raw string, dir, parents bool) error {
		return f.x.Create(ctx, f.resolve(t, raw, false), dir, parents)
	}
	if err := create("proj/file", false, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(f.host("file")); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Fatalf("file: %v %v", fi, err)
	}
	if err := create("proj/dir", true, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(f.host("dir")); err != nil || !fi.IsDir() {
		t.Fatalf("dir: %v %v", fi, err)
	}
	wantCode(t, create("proj/a/b/c", false, false), errcode.FileNotFound, "")
	wantCode(t, create("proj/a/b/c", true, false), errcode.FileNotFound, "")
	if _, err := os.Lstat(f.host("a")); !os.IsNotExist(err) {
		t.Fatal("a failed create made a parent")
	}
	if err := create("proj/a/b/c", false, true); err != nil {
		t.Fatal(err)
	}
	if err := create("proj/x/y/z", true, true); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(f.host("x/y/z")); err != nil || !fi.IsDir() {
		t.Fatalf("x/y/z: %v %v", fi, err)
	}
	f.symlink(t, "file", "link")
	f.symlink(t, "nowhere", "dangling")
	for _, raw := range []string{"proj/file", "proj/dir", "proj/link", "proj/dangling", "proj/a/b/c"} {
		for _, dir := range []bool{false, true} {
			for _, parents := range []bool{false, true} {
				wantCode(t, create(raw, dir, parents), errcode.IOError, "EEXIST")
			}
		}
	}
	if _, err := os.Lstat(f.host("nowhere")); !os.IsNotExist(err) {
		t.Fatal("create through a dangling link made its target")
	}
	wantCode(t, create("proj", true, false), errcode.IOError, "EEXIST")
	tg, err := f.x.Resolve(context.Background(), f.path(t, "proj/file/x"), false)
	if err != nil || tg.Exists || tg.ParentExists {
		t.Fatalf("below a file: %+v, %v", tg, err)
	}
	wantCode(t, f.x.Create(context.Background(), tg, false, false), errcode.FileNotFound, "")
}

// ---- Delete ----

func TestDelete(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	del := func(raw string, recursive bool) error {
		return f.delete(ctx, f.resolve(t, raw, false), recursive)
	}
	f.writeFile(t, "file", "x")
	f.mkdir(t, "empty")
	f.writeFile(t, "full/a", "a")
	f.writeFile(t, "full/sub/b", "b")
	if err := del("proj/file", false); err != nil {
		t.Fatal(err)
	}
	if err := del("proj/empty", false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, del("proj/full", false), errcode.IOError, "ENOTEMPTY")
	wantCode(t, del("proj/full/sub", false), errcode.IOError, "ENOTEMPTY")
	if f.readHost(t, "full/a") != "a" || f.readHost(t, "full/sub/b") != "b" {
		t.Fatal("a refused delete removed something")
	}
	if err := del("proj/full", true); err != nil {
		t.Fatal(err)
	}
	if names := dirEntries(t, f.dir); len(names) != 0 {
		t.Fatalf("left in the root: %v", names)
	}
	wantCode(t, del("proj/missing", false), errcode.FileNotFound, "")
	wantCode(t, del("proj/missing/deeper", true), errcode.FileNotFound, "")
	wantCode(t, del("proj", true), errcode.PermissionDenied, "")
	wantCode(t, del("proj", false), errcode.PermissionDenied, "")
	if _, err := os.Stat(f.dir); err != nil {
		t.Fatal("the root was deleted")
	}
	// The file changed between resolution and delete.
	f.writeFile(t, "g", "decided")
	tg := f.resolve(t, "proj/g", false)
	if err := os.Rename(f.host("g"), f.host("g.old")); err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, "g", "another")
	wantCode(t, f.delete(ctx, tg, false), errcode.ConcurrencyConflict, "")
	if f.readHost(t, "g") != "another" {
		t.Fatal("a conflicting delete removed the new file")
	}
}

// TestDeleteRecursiveNeverLeavesTheRoot: a recursive delete of a tree that
// holds links to an outside directory (absolute and relative), to a
// directory inside the root, and to the root itself removes the links and
// nothing they point at.
func TestDeleteRecursiveNeverLeavesTheRoot(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"a", "b", "sub/c"} {
		p := filepath.Join(f.outside, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("outside"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.writeFile(t, "keep/k", "keep")
	f.writeFile(t, "tree/x", "x")
	f.writeFile(t, "tree/d/y", "y")
	f.symlink(t, f.outside, "tree/abs")
	f.symlink(t, "../../../outside", "tree/d/rel")
	f.symlink(t, "../keep", "tree/in")
	f.symlink(t, "..", "tree/up")
	f.symlink(t, f.outside+"/a", "tree/d/file")
	if err := f.delete(ctxT(t), f.resolve(t, "proj/tree", false), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(f.host("tree")); !os.IsNotExist(err) {
		t.Fatal("the tree survived")
	}
	for _, name := range []string{"a", "b", "sub/c"} {
		if b, err := os.ReadFile(filepath.Join(f.outside, name)); err != nil || string(b) != "outside" {
			t.Fatalf("outside/%s was touched: %q %v", name, b, err)
		}
	}
	if f.readHost(t, "keep/k") != "keep" {
		t.Fatal("a directory inside the root was deleted through a link")
	}
}

// ---- Rename ----

func TestRename(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	ren := func(from, to string, overwrite bool) error {
		return f.x.Rename(ctx, f.resolve(t, from, false), f.resolve(t, to, false), overwrite)
	}
	f.writeFile(t, "a.txt", "a")
	f.writeFile(t, "dir/in.txt", "in")
	f.mkdir(t, "into")
	if err := ren("proj/a.txt", "proj/b.txt", false); err != nil {
		t.Fatal(err)
	}
	if f.readHost(t, "b.txt") != "a" {
		t.Fatal("file rename")
	}
	if err := ren("proj/dir", "proj/dir2", false); err != nil {
		t.Fatal(err)
	}
	if f.readHost(t, "dir2/in.txt") != "in" {
		t.Fatal("directory rename")
	}
	if err := ren("proj/b.txt", "proj/into/b.txt", false); err != nil {
		t.Fatal(err)
	}
	if f.readHost(t, "into/b.txt") != "a" {
		t.Fatal("rename into a directory")
	}
	f.writeFile(t, "c.txt", "c")
	wantCode(t, ren("proj/c.txt", "proj/into/b.txt", false), errcode.IOError, "EEXIST")
	if f.readHost(t, "into/b.txt") != "a" || f.readHost(t, "c.txt") != "c" {
		t.Fatal("a refused rename changed something")
	}
	if err := ren("proj/c.txt", "proj/into/b.txt", true); err != nil {
		t.Fatal(err)
	}
	if f.readHost(t, "into/b.txt") != "c" {
		t.Fatal("overwrite")
	}
	if _, err := os.Lstat(f.host("c.txt")); !os.IsNotExist(err) {
		t.Fatal("the source survived")
	}
	// A link is moved, not its target.
	f.symlink(t, "dir2", "ln")
	if err := ren("proj/ln", "proj/ln2", false); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(f.host("ln2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was not moved as a link")
	}
	if f.readHost(t, "dir2/in.txt") != "in" {
		t.Fatal("the link's target moved")
	}
	// Errors.
	other := f.resolve(t, "other/x", false)
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/into/b.txt", false), other, false), errcode.IOError, "EXDEV")
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj", false), f.resolve(t, "proj/newroot", false), false), errcode.PermissionDenied, "")
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/into/b.txt", false), f.resolve(t, "proj", false), true), errcode.PermissionDenied, "")
	wantCode(t, f.x.Rename(ctx, f.resolve(t, "proj/into", false), f.resolve(t, "other", false), true), errcode.PermissionDenied, "")
	wantCode(t, ren("proj/dir2", "proj/dir2/inside", false), errcode.IOError, "EINVAL") // into itself
	if f.readHost(t, "dir2/in.txt") != "in" {
		t.Fatal("a directory moved into itself")
	}
	wantCode(t, ren("proj/missing", "proj/x", false), errcode.FileNotFound, "")
	wantCode(t, ren("proj/into/b.txt", "proj/nodir/x", false), errcode.FileNotFound, "")
	if f.readHost(t, "into/b.txt") != "c" {
		t.Fatal("a refused rename moved the file")
	}
	if _, err := os.Lstat(filepath.Join(f.other, "x")); !os.IsNotExist(err) {
		t.Fatal("a cross-root rename happened")
	}
}

// TestRenameOverwriteConflictsWhenTheTargetChanged: a rename with overwrite
// replaces only the target it was decided on. A file created at a target
// decided on as missing, another object (a file, a directory) put in the
// place of the target decided on, or that target removed: each is
// CONCURRENCY_CONFLICT, with nothing moved or replaced, as for a write's
// commit.
func TestRenameOverwriteConflictsWhenTheTargetChanged(t *testing.T) {
	changes := map[string]func(t *testing.T, f *fixture){
		"created": func(t *testing.T, f *fixture) { f.writeFile(t, "to.txt", "theirs") },
		"replaced": func(t *testing.T, f *fixture) {
			f.writeFile(t, "theirs", "theirs")
			if err := os.Rename(f.host("theirs"), f.host("to.txt")); err != nil {
				t.Fatal(err)
			}
		},
		"replaced by a directory": func(t *testing.T, f *fixture) {
			if err := os.Remove(f.host("to.txt")); err != nil {
				t.Fatal(err)
			}
			f.mkdir(t, "to.txt")
		},
		"removed": func(t *testing.T, f *fixture) {
			if err := os.Remove(f.host("to.txt")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.writeFile(t, "from.txt", "mine")
			if name != "created" {
				f.writeFile(t, "to.txt", "decided")
			}
			from, to := f.resolve(t, "proj/from.txt", false), f.resolve(t, "proj/to.txt", false)
			change(t, f)
			before := hostTree(t, f.dir)
			wantCode(t, f.x.Rename(ctxT(t), from, to, true), errcode.ConcurrencyConflict, "")
			sameTree(t, before, hostTree(t, f.dir))
		})
	}
	// Unchanged, the target decided on is replaced.
	f := newFixture(t)
	f.writeFile(t, "from.txt", "mine")
	f.writeFile(t, "to.txt", "decided")
	if err := f.x.Rename(ctxT(t), f.resolve(t, "proj/from.txt", false), f.resolve(t, "proj/to.txt", false), true); err != nil {
		t.Fatal(err)
	}
	if got := f.readHost(t, "to.txt"); got != "mine" {
		t.Fatalf("to.txt = %q", got)
	}
}

// ---- List ----

// listAll pages through a listing with limit and returns the paths.
func listAll(t *testing.T, f *fixture, raw string, o executor.ListOptions) []string {
	t.Helper()
	var out []string
	tg := f.resolve(t, raw, true)
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("the listing never ends")
		}
		res, err := f.x.List(ctxT(t), tg, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) > max(o.Limit, 1) {
			t.Fatalf("%d entries on a page with limit %d", len(res.Entries), o.Limit)
		}
		for _, e := range res.Entries {
			out = append(out, e.Path.MountPath())
		}
		if res.NextCursor == "" {
			return out
		}
		if len(res.Entries) == 0 {
			t.Fatal("an empty page with a cursor")
		}
		o.Cursor = res.NextCursor
	}
}

func TestListOrderHiddenDepth(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"a/x", "a/y/deep", "a-b", "b", ".hidden/h", "a/.dot", "Z"} {
		f.writeFile(t, p, "x")
	}
	// Temporary files of the broker, at the top and deeper.
	f.writeFile(t, executor.TempPrefix+"123-abc", "t")
	f.writeFile(t, "a/"+executor.TempPrefix+"456-def", "t")
	f.writeFile(t, ".hidden/"+executor.TempPrefix+"789-0", "t")
	big := 1000
	o := executor.ListOptions{Limit: big}
	if got, want := listAll(t, f, "proj", o), []string{"proj/Z", "proj/a", "proj/a-b", "proj/b"}; !slices.Equal(got, want) {
		t.Errorf("plain: %q, want %q", got, want)
	}
	o.Recursive, o.MaxDepth = true, -1
	if got, want := listAll(t, f, "proj", o), []string{"proj/Z", "proj/a", "proj/a/x", "proj/a/y", "proj/a/y/deep", "proj/a-b", "proj/b"}; !slices.Equal(got, want) {
		t.Errorf("recursive: %q, want %q", got, want)
	}
	o.IncludeHidden = true
	want := []string{"proj/.hidden", "proj/.hidden/h", "proj/Z", "proj/a", "proj/a/.dot", "proj/a/x", "proj/a/y", "proj/a/y/deep", "proj/a-b", "proj/b"}
	if got := listAll(t, f, "proj", o); !slices.Equal(got, want) {
		t.Errorf("hidden: %q, want %q", got, want)
	}
	for depth, want := range map[int][]string{
		0: {"proj/.hidden", "proj/Z", "proj/a", "proj/a-b", "proj/b"},
		1: {"proj/.hidden", "proj/.hidden/h", "proj/Z", "proj/a", "proj/a/.dot", "proj/a/x", "proj/a/y", "proj/a-b", "proj/b"},
		2: want,
	} {
		o.MaxDepth = depth
		if got := listAll(t, f, "proj", o); !slices.Equal(got, want) {
			t.Errorf("maxDepth %d: %q, want %q", depth, got, want)
		}
	}
	// A subdirectory, and a hidden one listed directly.
	if got := listAll(t, f, "proj/a", executor.ListOptions{Limit: big}); !slices.Equal(got, []string{"proj/a/x", "proj/a/y"}) {
		t.Errorf("proj/a: %q", got)
	}
	if got := listAll(t, f, "proj/.hidden", executor.ListOptions{Limit: big}); !slices.Equal(got, []string{"proj/.hidden/h"}) {
		t.Errorf("proj/.hidden: %q", got)
	}
	// Types and the lack of temporary files in the entries themselves.
	res, err := f.x.List(ctxT(t), f.resolve(t, "proj/a", true), executor.ListOptions{Limit: big, IncludeHidden: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Entries {
		if executor.IsTempName(e.Name) {
			t.Errorf("temporary file listed: %s", e.Path.MountPath())
		}
		if e.Name == "y" && e.Type != executor.TypeDirectory || e.Name == "x" && (e.Type != executor.TypeFile || e.Size != 1) {
			t.Errorf("entry %+v", e)
		}
		if e.Modified.IsZero() || e.Modified.Location() != time.UTC {
			t.Errorf("modified %v", e.Modified)
		}
	}
}

// TestListSymlinksAreNeverFollowed: a link to a big file outside the root is
// a "symlink" with the link's own lstat size, and a link to a directory is
// not descended.
func TestListSymlinksAreNeverFollowed(t *testing.T) {
	f := newFixture(t)
	bigOut := filepath.Join(f.outside, "big.bin")
	if err := os.WriteFile(bigOut, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, bigOut, "big")
	f.symlink(t, f.outside, "outdir")
	f.writeFile(t, "real/f", "f")
	f.symlink(t, "real", "indir")
	res, err := f.x.List(ctxT(t), f.resolve(t, "proj", true), executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range res.Entries {
		paths = append(paths, e.Path.Rel)
		switch e.Name {
		case "big", "outdir", "indir":
			target, _ := os.Readlink(f.host(e.Name))
			if e.Type != executor.TypeSymlink || e.Size != int64(len(target)) {
				t.Errorf("%s: type %s size %d, want symlink with the link's own size %d", e.Name, e.Type, e.Size, len(target))
			}
			lfi, _ := os.Lstat(f.host(e.Name))
			if !e.Modified.Equal(lfi.ModTime()) {
				t.Errorf("%s: modified %v is not the link's own %v", e.Name, e.Modified, lfi.ModTime())
			}
		}
	}
	if want := []string{"big", "indir", "outdir", "real", "real/f"}; !slices.Equal(paths, want) {
		t.Fatalf("entries %q, want %q", paths, want)
	}
}

// TestListPagination: every limit from 1 to past the end gives pages that
// concatenate to the full listing.
func TestListPagination(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 25; i++ {
		f.writeFile(t, fmt.Sprintf("f%02d", i), "x")
		f.writeFile(t, fmt.Sprintf("d%02d/inner", i), "x") // not listed: not recursive
	}
	o := executor.ListOptions{Limit: 10_000}
	full := listAll(t, f, "proj", o)
	if len(full) != 50 || !slices.IsSortedFunc(full, compareSegments) {
		t.Fatalf("full listing: %d entries, sorted %v", len(full), slices.IsSortedFunc(full, compareSegments))
	}
	for limit := 1; limit <= len(full)+2; limit++ {
		o.Limit = limit
		if got := listAll(t, f, "proj", o); !slices.Equal(got, full) {
			t.Fatalf("limit %d: %d entries, differs from the full listing", limit, len(got))
		}
	}
	// A cursor of a listing continues in the same directory it came from.
	res, err := f.x.List(ctxT(t), f.resolve(t, "proj", true), executor.ListOptions{Limit: 3})
	if err != nil || res.NextCursor == "" {
		t.Fatalf("%+v %v", res, err)
	}
	// Malformed cursors.
	for _, c := range []string{"garbage!", "AAAA", base64.RawURLEncoding.EncodeToString([]byte("2\x00x")),
		base64.RawURLEncoding.EncodeToString([]byte("1\x00")), "=="} {
		_, err := f.x.List(ctxT(t), f.resolve(t, "proj", true), executor.ListOptions{Limit: 3, Cursor: c})
		wantCode(t, err, errcode.InvalidParams, "")
	}
	// Listing a file, a missing path.
	_, err = f.x.List(ctxT(t), f.resolve(t, "proj/f00", true), executor.ListOptions{Limit: 3})
	wantCode(t, err, errcode.IOError, "ENOTDIR")
	_, err = f.x.List(ctxT(t), f.resolve(t, "proj/nope", true), executor.ListOptions{Limit: 3})
	wantCode(t, err, errcode.FileNotFound, "")
}

// TestListPaginationRecursive: the same over a tree, where pages end on
// directories too.
func TestListPaginationRecursive(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 10; i++ {
		for j := 0; j < 4; j++ {
			f.writeFile(t, fmt.Sprintf("d%d/f%d", i, j), "x")
		}
	}
	f.mkdir(t, "d3/empty") // 11 dirs + 40 files
	o := executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 10_000}
	full := listAll(t, f, "proj", o)
	if len(full) != 51 || !slices.IsSortedFunc(full, compareSegments) {
		t.Fatalf("full listing: %d entries, sorted %v", len(full), slices.IsSortedFunc(full, compareSegments))
	}
	for limit := 1; limit <= len(full)+2; limit++ {
		o.Limit = limit
		if got := listAll(t, f, "proj", o); !slices.Equal(got, full) {
			t.Fatalf("limit %d: %d entries, differs from the full listing of %d", limit, len(got), len(full))
		}
	}
}

func compareSegments(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// TestListPaginationUnderChange: entries added and removed between pages,
// before and after the cursor, at every depth, cause neither duplicates nor
// skips of the entries that existed throughout.
func TestListPaginationUnderChange(t *testing.T) {
	f := newFixture(t)
	var stable []string
	for i := 0; i < 10; i++ {
		for j := 0; j < 4; j++ {
			f.writeFile(t, fmt.Sprintf("d%d/f%d", i, j), "x")
			stable = append(stable, fmt.Sprintf("proj/d%d/f%d", i, j))
		}
		stable = append(stable, fmt.Sprintf("proj/d%d", i))
	}
	for _, limit := range []int{1, 2, 3, 7, 13} {
		for _, recursive := range []bool{false, true} {
			t.Run(fmt.Sprintf("limit %d recursive %v", limit, recursive), func(t *testing.T) {
				if recursive {
				}
				tg := f.resolve(t, "proj", true)
				o := executor.ListOptions{Recursive: recursive, MaxDepth: -1, Limit: limit}
				stable := stable
				if !recursive {
					stable = slices.DeleteFunc(slices.Clone(stable), func(p string) bool { return strings.Count(p, "/") > 1 })
				}
				seen := map[string]int{}
				var transient []string
				for page := 0; ; page++ {
					if page > 5000 {
						t.Fatal("the listing never ends")
					}
					res, err := f.x.List(ctxT(t), tg, o)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range res.Entries {
						seen[e.Path.MountPath()]++
					}
					if res.NextCursor == "" {
						break
					}
					o.Cursor = res.NextCursor
					last := res.Entries[len(res.Entries)-1].Path.Rel
					dir := filepath.Dir(last)
					// Add before and after the cursor, in its directory and at
					// the top; remove what the previous page added.
					for _, rm := range transient {
						if err := os.RemoveAll(f.host(rm)); err != nil {
							t.Fatal(err)
						}
					}
					transient = transient[:0]
					add := [][2]string{ // created, then removed after the next page
						{fmt.Sprintf("0before%03d", page), fmt.Sprintf("0before%03d", page)},
						{filepath.Join(dir, fmt.Sprintf("0b%03d", page)), filepath.Join(dir, fmt.Sprintf("0b%03d", page))},
						{fmt.Sprintf("0dir%03d/x", page), fmt.Sprintf("0dir%03d", page)},
					}
					// Entries after the cursor are listed when reached, so
					// adding them on every page could keep a listing with a
					// small limit going for ever: add them on some pages only.
					if page%4 == 0 && page < 40 {
						add = append(add, [][2]string{
							{fmt.Sprintf("zafter%03d", page), fmt.Sprintf("zafter%03d", page)},
							{filepath.Join(dir, fmt.Sprintf("~a%03d", page)), filepath.Join(dir, fmt.Sprintf("~a%03d", page))},
							{fmt.Sprintf("zdir%03d/x", page), fmt.Sprintf("zdir%03d", page)},
						}...)
					}
					for _, p := range add {
						f.writeFile(t, p[0], "t")
						transient = append(transient, p[1])
					}
				}
				for p, n := range seen {
					if n > 1 {
						t.Errorf("%s listed %d times", p, n)
					}
				}
				for _, p := range stable {
					if seen[p] != 1 {
						t.Errorf("%s, which existed throughout, listed %d times", p, seen[p])
					}
				}
				for _, rm := range transient {
					_ = os.RemoveAll(f.host(rm))
				}
			})
		}
	}
}

// TestListCursorEntryRemoved: the entry a cursor names (and its directory)
// may be gone by the next page.
func TestListCursorEntryRemoved(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"a/1", "a/2", "b/1", "b/2", "c"} {
		f.writeFile(t, p, "x")
	}
	tg := f.resolve(t, "proj", true)
	o := executor.ListOptions{Recursive: true, MaxDepth: -1, Limit: 3} // a, a/1, a/2
	res, err := f.x.List(ctxT(t), tg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.host("a")); err != nil {
		t.Fatal(err)
	}
	o.Cursor = res.NextCursor
	res, err = f.x.List(ctxT(t), tg, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Entries {
		got = append(got, e.Path.Rel)
	}
	if !slices.Equal(got, []string{"b", "b/1", "b/2"}) {
		t.Fatalf("after the cursor's directory was removed: %q", got)
	}
}

// ---- RemoveStaleTemps ----

func TestRemoveStaleTemps(t *testing.T) {
	f := newFixture(t)
	// A pid that certainly ran and is gone: a child we started and reaped.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.ProcessState.Pid()
	// A live child.
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Process.Kill(); _ = live.Wait() }()

	name := func(pid int, tag string) string { return fmt.Sprintf("%s%d-%s", executor.TempPrefix, pid, tag) }
	stale := []string{name(deadPid, "aa"), "sub/" + name(deadPid, "bb"), ".hidden/deep/" + name(deadPid, "cc")}
	keep := []string{name(os.Getpid(), "self"), name(live.Process.Pid, "child"),
		executor.TempPrefix + "notapid-x", executor.TempPrefix + "0-x", "regular", "sub/" + strconv.Itoa(deadPid)}
	for _, p := range append(append([]string(nil), stale...), keep...) {
		f.writeFile(t, p, "x")
	}
	// A directory named like a temporary file is not a temporary file, and
	// a link to the outside is not followed.
	f.mkdir(t, name(deadPid, "dir"))
	if err := os.WriteFile(filepath.Join(f.outside, name(deadPid, "out")), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.symlink(t, f.outside, "outlink")
	n, err := f.x.RemoveStaleTemps(ctxT(t), f.root)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(stale) {
		t.Errorf("removed %d, want %d", n, len(stale))
	}
	for _, p := range stale {
		if _, err := os.Lstat(f.host(p)); !os.IsNotExist(err) {
			t.Errorf("stale %s survived", p)
		}
	}
	for _, p := range append(keep, name(deadPid, "dir")) {
		if _, err := os.Lstat(f.host(p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.outside, name(deadPid, "out"))); err != nil {
		t.Error("a file outside the root was removed")
	}
	// A staged write of this process survives a sweep.
	st, err := f.x.StartStage(ctxT(t), f.resolve(t, "proj/staged", true), executor.WriteOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if err := st.Append([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.x.RemoveStaleTemps(ctxT(t), f.root); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctxT(t), executor.WriteOptions{Create: true}); err != nil {
		t.Fatalf("a sweep broke a live staged write: %v", err)
	}
	// A cancelled sweep says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.x.RemoveStaleTemps(ctx, f.root); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sweep: %v", err)
	}
}

// TestWriteConflictsWhenExistenceChanged: a write decided on a missing file
// does not replace a file created meanwhile, and one decided on an existing
// file does not recreate it once removed; a replaced existing file is
// simply written (the last writer wins).
func TestWriteConflictsWhenExistenceChanged(t *testing.T) {
	f := newFixture(t)
	missing := f.resolve(t, "proj/new.txt", true)
	f.writeFile(t, "new.txt", "someone else's")
	_, err := f.x.Write(ctxT(t), missing, []byte("mine"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.ConcurrencyConflict, "")
	if got := f.readHost(t, "new.txt"); got != "someone else's" {
		t.Fatalf("the file created meanwhile was replaced: %q", got)
	}

	present := f.resolve(t, "proj/new.txt", true)
	if err := os.Remove(f.host("new.txt")); err != nil {
		t.Fatal(err)
	}
	_, err = f.x.Write(ctxT(t), present, []byte("mine"), executor.WriteOptions{Create: true})
	wantCode(t, err, errcode.ConcurrencyConflict, "")

	f.writeFile(t, "new.txt", "v1")
	decided := f.resolve(t, "proj/new.txt", true)
	f.writeFile(t, "other", "v2")
	if err := os.Rename(f.host("other"), f.host("new.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.x.Write(ctxT(t), decided, []byte("v3"), executor.WriteOptions{Create: true}); err != nil {
		t.Fatalf("a write over a replaced file: %v", err)
	}
	if got := f.readHost(t, "new.txt"); got != "v3" {
		t.Fatalf("content = %q", got)
	}
}
