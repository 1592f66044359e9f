//go:build unix

package atomicfile_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

const (
	fsizeEnv = "ATOMICFILE_HELPER_FSIZE"   // the directory TestHelperFSize writes in
	oldText  = "the old content, intact\n" // what a failed write must leave
)

// fsizeLimit is the file size limit of TestHelperFSize's process: smaller
// than what it writes, so that the kernel refuses the write (EFBIG).
const fsizeLimit = 4096

func TestHelperFSize(t *testing.T) {
	dir := os.Getenv(fsizeEnv)
	if dir == "" {
		t.Skip("run by TestFailedWriteLeavesOldAndNoTemp only")
	}
	signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead of killing the process
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: fsizeLimit, Max: fsizeLimit}); err != nil {
		fmt.Fprintln(os.Stderr, "helper: setrlimit:", err)
		os.Exit(2)
	}
	big := make([]byte, 4*fsizeLimit)
	werr := atomicfile.WriteFile(filepath.Join(dir, "state"), big, 0o600)
	cerr := atomicfile.Create(filepath.Join(dir, "new"), big, 0o600)
	fmt.Printf("WriteFile: %v\nCreate: %v\n", werr, cerr)
	if !errors.Is(werr, syscall.EFBIG) || !errors.Is(cerr, syscall.EFBIG) {
		os.Exit(1)
	}
	os.Exit(0)
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFSize$", "-test.count=1")
	cmd.Env = append(os.Environ(), fsizeEnv+"="+dir)
	out, err := cmd.CombinedOutput()
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
