// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package atomicfile_test

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// oldText is what a failed write must leave.
const oldText = "the old content, intact\n"

func init() { roles["fsize"] = fsizeRole }

// fsizeLimit is the file size limit of the fsize role's process: smaller
// than what it writes, so that the kernel refuses the write (EFBIG).
const fsizeLimit = 4096

// fsizeRole, with DIR as its argument, runs WriteFile and Create of more
// than fsizeLimit bytes in DIR under that file size limit, prints their
// errors, and fails unless both are EFBIG.
func fsizeRole(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want DIR, got %q", args)
	}
	signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead of killing the process
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: fsizeLimit, Max: fsizeLimit}); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	big := make([]byte, 4*fsizeLimit)
	werr := atomicfile.WriteFile(filepath.Join(args[0], "state"), big, 0o600)
	cerr := atomicfile.Create(filepath.Join(args[0], "new"), big, 0o600)
	fmt.Printf("WriteFile: %v\nCreate: %v\n", werr, cerr)
	if !errors.Is(werr, syscall.EFBIG) || !errors.Is(cerr, syscall.EFBIG) {
		return errors.New("the writes did not both fail with EFBIG")
	}
	return nil
}

// TestFailedWriteLeavesOldAndNoTemp runs WriteFile and Create in a process
// whose file size limit the kernel enforces, so that writing the temporary
// file fails: the old file is left whole, no new file appears, and no
// temporary file is left.
func TestFailedWriteLeavesOldAndNoTemp(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(oldText), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helperproc.Command("fsize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("the writes did not fail with EFBIG (%v):\n%s", err, out)
	}
	t.Logf("the helper's failures:\n%s", out)
	wantContent(t, filepath.Join(dir, "state"), oldText, "a failed WriteFile")
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed Create left the file: %v", err)
	}
	noTemps(t, dir)
}
