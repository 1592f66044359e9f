// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/canon"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// fixture is a real root over a temporary directory, a second root next to
// it, a directory outside every root, and an executor whose state directory
// is a temporary directory of its own:
//
//	<tmp>/proj     mount "proj" (writable)
//	<tmp>/other    mount "other"
//	<tmp>/outside  no root: links point here, and it must stay untouched
type fixture struct {
	tmp     string // symlink-resolved
	dir     string // <tmp>/proj
	other   string // <tmp>/other
	outside string // <tmp>/outside
	state   string
	set     *roots.Set
	root    roots.Root
	x       *executor.Executor
}

func newFixture(tb testing.TB, opts ...executor.Option) *fixture {
	tb.Helper()
	tmp, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{
		tmp:     tmp,
		dir:     filepath.Join(tmp, "proj"),
		other:   filepath.Join(tmp, "other"),
		outside: filepath.Join(tmp, "outside"),
		state:   tb.TempDir(),
	}
	for _, d := range []string{f.dir, f.other, f.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	f.set, err = roots.New([]roots.Spec{{Path: f.dir, Writable: true}, {Path: f.other, Writable: true}})
	if err != nil {
		tb.Fatal(err)
	}
	f.root, _ = f.set.ByMount("proj")
	// The executor knows the fixture's roots as the broker's would, through
	// f.set (a test that changes it is a config reload).
	f.x = newExecutor(tb, f.state, append([]executor.Option{executor.WithRoots(func() *roots.Set { return f.set })}, opts...)...)
	return f
}

// newNestedFixture is newFixture with one more root, read-only, nested in
// the writable "proj": <tmp>/proj/x/sub, mount "sub".
func newNestedFixture(tb testing.TB, opts ...executor.Option) *fixture {
	tb.Helper()
	f := newFixture(tb, opts...)
	f.mkdir(tb, "x/sub")
	set, err := roots.New([]roots.Spec{{Path: f.dir, Writable: true}, {Path: f.other, Writable: true}, {Path: f.host("x/sub")}})
	if err != nil {
		tb.Fatal(err)
	}
	f.set = set
	return f
}

func newExecutor(tb testing.TB, state string, opts ...executor.Option) *executor.Executor {
	tb.Helper()
	x, err := executor.New(state, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = x.Close() })
	return x
}

// path parses a mount-relative path ("proj/a/b").
func (f *fixture) path(tb testing.TB, raw string) canon.Path {
	tb.Helper()
	p, err := canon.Parse(f.set, raw)
	if err != nil {
		tb.Fatalf("canon.Parse(%q): %v", raw, err)
	}
	return p
}

// resolve parses raw and resolves it, failing the test on any error.
func (f *fixture) resolve(tb testing.TB, raw string, follow bool) executor.Target {
	tb.Helper()
	t, err := f.x.Resolve(context.Background(), f.path(tb, raw), follow)
	if err != nil {
		tb.Fatalf("Resolve(%q, %v): %v", raw, follow, err)
	}
	return t
}

// host is the host path of a path inside the "proj" root.
func (f *fixture) host(rel string) string { return filepath.Join(f.dir, filepath.FromSlash(rel)) }

func (f *fixture) writeFile(tb testing.TB, rel, content string) {
	tb.Helper()
	p := f.host(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func (f *fixture) mkdir(tb testing.TB, rel string) {
	tb.Helper()
	if err := os.MkdirAll(f.host(rel), 0o755); err != nil {
		tb.Fatal(err)
	}
}

func (f *fixture) symlink(tb testing.TB, target, rel string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(f.host(rel)), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(target, f.host(rel)); err != nil {
		tb.Fatal(err)
	}
}

func (f *fixture) readHost(tb testing.TB, rel string) string {
	tb.Helper()
	b, err := os.ReadFile(f.host(rel))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// read resolves raw (following links) and reads the whole file as bytes.
func (f *fixture) read(tb testing.TB, raw string) executor.ReadResult {
	tb.Helper()
	res, err := f.x.Read(context.Background(), f.resolve(tb, raw, true), executor.ReadOptions{Length: 1 << 24})
	if err != nil {
		tb.Fatalf("Read(%q): %v", raw, err)
	}
	return res
}

// write resolves raw (following links) and writes data with the defaults of
// files/write (create true).
func (f *fixture) write(tb testing.TB, raw, data string) executor.WriteResult {
	tb.Helper()
	res, err := f.x.Write(context.Background(), f.resolve(tb, raw, true), []byte(data), executor.WriteOptions{Create: true})
	if err != nil {
		tb.Fatalf("Write(%q): %v", raw, err)
	}
	return res
}

// delete deletes tg as the broker does: a recursive delete of a directory
// is given the listing it was decided on (ListSubtree), whose refusal it
// returns.
func (f *fixture) delete(ctx context.Context, tg executor.Target, recursive bool) error {
	var checked []executor.Entry
	if recursive && tg.Exists && tg.Info.Type == executor.TypeDirectory {
		page, err := f.x.ListSubtree(ctx, tg, maxChecked)
		if err != nil {
			return err
		}
		checked = page.Entries
	}
	return f.x.Delete(ctx, tg, recursive, checked)
}

// maxChecked is the most entries the tests check for a recursive delete (the
// broker's limit).
const maxChecked = 10000

// wantCode fails unless err is an *errcode.Error with code; with errno set,
// data.errno must match too. It returns the error for further checks.
func wantCode(tb testing.TB, err error, code errcode.Code, errno string) *errcode.Error {
	tb.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error = %v (%T), want %s %s", err, err, code, errno)
	}
	if e.Code != code {
		tb.Fatalf("error = %v, want code %s %s", err, code, errno)
	}
	if errno != "" && e.Details["errno"] != errno {
		tb.Fatalf("error = %v, details %v: want errno %s", err, e.Details, errno)
	}
	return e
}

// wantKnownCode fails unless err is an *errcode.Error with one of the codes
// of docs/protocol.md section 4, and its reason names no host directory.
func wantKnownCode(tb testing.TB, err error, hostDir string) {
	tb.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not an *errcode.Error", err, err)
	}
	if !slices.Contains(errcode.Codes(), e.Code) {
		tb.Fatalf("error %v has an unknown code %q", err, e.Code)
	}
	if hostDir != "" && strings.Contains(e.Reason, hostDir) {
		tb.Fatalf("reason %q names the host directory %q", e.Reason, hostDir)
	}
}

// temps returns the broker temporary files anywhere under dir.
func temps(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if executor.IsTempName(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func noTemps(tb testing.TB, dir string) {
	tb.Helper()
	if ts := temps(tb, dir); len(ts) > 0 {
		tb.Fatalf("temporary files left behind: %v", ts)
	}
}

// dirEntries lists the names in dir (not recursive).
func dirEntries(tb testing.TB, dir string) []string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// within runs fn in a goroutine and fails the test if it has not returned
// within d: the upper bound that turns a hang into a failure. It never
// asserts a lower bound or a duration.
func within(tb testing.TB, d time.Duration, what string, fn func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%s did not return within %v (it hangs)", what, d)
	}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// hostTree describes every entry under dir (links not followed), by path.
func hostTree(t *testing.T, dir string) map[string]fs.FileInfo {
	t.Helper()
	out := map[string]fs.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fi
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails unless two descriptions of a tree hold the same paths, each
// the same object.
func sameTree(t *testing.T, before, after map[string]fs.FileInfo) {
	t.Helper()
	for p, fi := range before {
		if now, ok := after[p]; !ok || !os.SameFile(fi, now) {
			t.Errorf("%s was removed or replaced", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}
