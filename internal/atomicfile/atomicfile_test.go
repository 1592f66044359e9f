// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package atomicfile_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// readFile returns the content of path, failing the test on an error.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantContent fails the test unless the file at path holds want.
func wantContent(t *testing.T, path, want, after string) {
	t.Helper()
	if got := readFile(t, path); got != want {
		t.Fatalf("after %s, %s holds %q, want %q", after, filepath.Base(path), got, want)
	}
}

// noTemps fails the test if a temporary file is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), atomicfile.TempPrefix) {
			t.Errorf("a temporary file is left: %s", de.Name())
		}
	}
}

// TestWriteFile: a file is created, then replaced, each time with the mode
// asked for exactly, and no temporary file stays.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for i, perm := range []fs.FileMode{0o666, 0o640, 0o600} {
		content := fmt.Sprintf("version %d\n", i)
		if err := atomicfile.WriteFile(path, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		wantContent(t, path, content, fmt.Sprintf("version %d", i))
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != perm {
			t.Errorf("version %d: mode %v, want %v", i, fi.Mode().Perm(), perm)
		}
	}
	noTemps(t, dir)

	d, err := atomicfile.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("state.json", []byte("through the directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantContent(t, path, "through the directory\n", "Dir.WriteFile")
	noTemps(t, dir)
}

// TestWriteFileWithoutFsync: without fsyncs, a file is still created and
// replaced whole, with the mode asked for, and no temporary file stays.
func TestWriteFileWithoutFsync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "segment.ckpt")
	for i, perm := range []fs.FileMode{0o644, 0o600} {
		content := fmt.Sprintf("checkpoint %d\n", i)
		if err := atomicfile.WriteFile(path, []byte(content), perm, atomicfile.WithoutFsync()); err != nil {
			t.Fatal(err)
		}
		wantContent(t, path, content, fmt.Sprintf("checkpoint %d", i))
		if fi, err := os.Stat(path); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != perm {
			t.Errorf("checkpoint %d: %v, %v; want mode %v", i, fi, err, perm)
		}
	}
	noTemps(t, dir)
	if err := atomicfile.WriteFile(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600, atomicfile.WithoutFsync()); err == nil {
		t.Fatal("WriteFile in a missing directory: no error")
	}
}

// TestCreate: a file is created once; a second Create finds it (fs.ErrExist)
// and leaves it as it is; no temporary file stays either way.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "since")
	if err := atomicfile.Create(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.Create(path, []byte("second\n"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	wantContent(t, path, "first\n", "a second Create")
	noTemps(t, dir)
}

// TestFailedRenameLeavesOldAndNoTemp: a replacement that cannot be renamed
// into place (the name is a directory with a file in it) is an error (not
// ErrNotDurable), leaves what was there and removes its temporary file; so
// does a Create whose directory does not exist.
func TestFailedRenameLeavesOldAndNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "inside"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.WriteFile(path, []byte("new"), 0o600)
	if err == nil || errors.Is(err, atomicfile.ErrNotDurable) {
		t.Fatalf("WriteFile over a directory: %v, want a failure", err)
	}
	wantContent(t, filepath.Join(path, "inside"), "old", "a failed WriteFile")
	noTemps(t, dir)

	if err := atomicfile.Create(filepath.Join(dir, "missing", "since"), []byte("x"), 0o600); err == nil || errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create in a missing directory: %v, want a failure", err)
	}
	noTemps(t, dir)
}

// The helper processes: this test binary, re-executed to play a role
// (helperproc). roles holds every platform's; a platform's file adds its
// own (fsize_unix_test.go).
var roles = helperproc.Roles{"writer": writerRole}

func TestMain(m *testing.M) { os.Exit(helperproc.Run(m, roles)) }

// The crash test's helper process, the role "writer": with DIR, SEQ (the
// first version's number), SIZE (a version's size) and SYNC ("fsync", or
// "nofsync" for WriteFile WithoutFsync), it replaces one file with ever newer
// versions and creates a file per version, until it is killed.
const (
	target    = "data.bin" // the file replaced
	created   = "created-" // + the version: the files created
	readyLine = "ready"    // printed after the first version is in place
	fillerLen = 16         // a version's header: its number and its size
	maxSize   = 4 << 20    // at most
)

// version is version seq of size bytes: its number and its size, then
// every byte the value seq.
func version(seq uint64, size int) []byte {
	b := bytes.Repeat([]byte{byte(seq)}, size)
	binary.BigEndian.PutUint64(b, seq)
	binary.BigEndian.PutUint64(b[8:], uint64(size))
	return b
}

// checkVersion returns the number of the version b holds, or an error if b
// is not one whole version.
func checkVersion(b []byte) (uint64, error) {
	if len(b) < fillerLen {
		return 0, fmt.Errorf("%d bytes, shorter than a header", len(b))
	}
	seq, size := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	if size != uint64(len(b)) {
		return 0, fmt.Errorf("version %d: %d bytes, want %d", seq, len(b), size)
	}
	for i, c := range b[fillerLen:] {
		if c != byte(seq) {
			return 0, fmt.Errorf("version %d: byte %d is %#x, want %#x", seq, fillerLen+i, c, byte(seq))
		}
	}
	return seq, nil
}

// writerRole is the crash test's helper.
func writerRole(args []string) error {
	if len(args) != 4 || args[3] != "fsync" && args[3] != "nofsync" {
		return fmt.Errorf("want DIR SEQ SIZE fsync|nofsync, got %q", args)
	}
	dir := args[0]
	seq, err1 := strconv.ParseUint(args[1], 10, 64)
	size, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil || size < fillerLen || size > maxSize {
		return fmt.Errorf("bad arguments %q: %v", args, err)
	}
	var opts []atomicfile.Option
	if args[3] == "nofsync" {
		opts = append(opts, atomicfile.WithoutFsync())
	}
	for n := 0; ; n++ {
		v := version(seq, size)
		if err := atomicfile.WriteFile(filepath.Join(dir, target), v, 0o600, opts...); err != nil {
			return err
		}
		if err := atomicfile.Create(filepath.Join(dir, created+strconv.FormatUint(seq, 10)), v, 0o600); err != nil {
			return err
		}
		if n == 0 {
			fmt.Println(readyLine)
		}
		seq++
	}
}

// TestCrashLeavesOldOrNew kills a real process (the role writer, looping
// WriteFile and Create of 1 MiB versions, fsyncs included, and every other
// run WriteFile WithoutFsync, which a crash of the process alone must not
// tear either) at random moments
// with SIGKILL (TerminateProcess on Windows), and checks after each kill
// that the replaced file is one whole version, never torn, and no older
// than at the last check; that every created file is whole; and that
// anything else left is a temporary file of one of them, named so that
// their owner can tell (TempPrefix, the name, a dash).
func TestCrashLeavesOldOrNew(t *testing.T) {
	if testing.Short() {
		t.Skip("kills writers mid-write, a few seconds")
	}
	dir := t.TempDir()
	const size = 1 << 20
	const kills = 16
	var (
		seq       uint64 = 1
		lastSeen  uint64
		advanced  int // kills that found a version newer than the first one of their run
		leftTemps int
	)
	for i := range kills {
		sync := []string{"fsync", "nofsync"}[i%2]
		h := helperproc.Start(t, helperproc.Command("writer", dir, strconv.FormatUint(seq, 10), strconv.Itoa(size), sync))
		h.Expect(readyLine)
		// A random moment, not a timing assertion; Kill fails the test if
		// the helper had ended by itself.
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		h.Kill()

		got, err := checkVersion([]byte(readFile(t, filepath.Join(dir, target))))
		if err != nil {
			t.Fatalf("kill %d: %s is not one whole version: %v", i, target, err)
		}
		if got < lastSeen || got < seq {
			t.Fatalf("kill %d: %s holds version %d, older than version %d seen before or %d written before the kill",
				i, target, got, lastSeen, seq)
		}
		if got > seq {
			advanced++
		}
		lastSeen = got

		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			name, p := de.Name(), filepath.Join(dir, de.Name())
			switch {
			case name == target:
			case strings.HasPrefix(name, created):
				if _, err := checkVersion([]byte(readFile(t, p))); err != nil {
					t.Fatalf("kill %d: %s is not whole: %v", i, name, err)
				}
				if err := os.Remove(p); err != nil { // keeps the directory small
					t.Fatal(err)
				}
			case strings.HasPrefix(name, atomicfile.TempPrefix+target+"-") || strings.HasPrefix(name, atomicfile.TempPrefix+created):
				leftTemps++
				if err := os.Remove(p); err != nil { // what the directory's owner does
					t.Fatal(err)
				}
			default:
				t.Fatalf("kill %d: left in the directory: %s", i, name)
			}
		}
		seq = got + 1
	}
	t.Logf("%d kills: %d found a version written after the first of its run, %d temporary files left by a kill mid-write",
		kills, advanced, leftTemps)
	if advanced == 0 {
		t.Fatal("no kill came after a second version was written: the test proves nothing")
	}
}
