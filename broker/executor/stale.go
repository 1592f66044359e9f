package executor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/fsbroker/fsbroker/broker/roots"
)

// RemoveStaleTemps walks a root and removes the temporary files that a broker
// process which no longer runs left behind (a crash between creating and
// renaming one). Files of live processes, this one included, are kept. The
// walk goes through the root handle and never follows links. It returns how
// many files were removed.
func (x *Executor) RemoveStaleTemps(ctx context.Context, r roots.Root) (int, error) {
	h, err := x.handle(r)
	if err != nil {
		return 0, err
	}
	removed := 0
	err = fs.WalkDir(h.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return nil // unreadable directories are skipped, not fatal
		}
		if d.IsDir() || !IsTempName(d.Name()) || tempOwnerAlive(d.Name()) {
			return nil
		}
		if err := h.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			x.log.Warn("cannot remove a stale temporary file", "root", r.Mount, "error", err)
			return nil
		}
		removed++
		return nil
	})
	return removed, err
}

// tempOwnerAlive reports whether the process named in a temporary file's
// name still runs. A name it cannot read counts as alive (kept).
func tempOwnerAlive(name string) bool {
	rest := strings.TrimPrefix(name, TempPrefix)
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return true
	}
	if pid == os.Getpid() {
		return true
	}
	return processAlive(pid)
}
