// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/roots"
)

// fixture is a read-only root "ro" and a writable root "rw", both
// pre-approved, with ro/a.txt, and an executor over them.
type fixture struct {
	ro, rw string
	set    *roots.Set
	exec   *executor.Executor
	caller Caller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{ro: filepath.Join(base, "ro"), rw: filepath.Join(base, "rw"),
		caller: Caller{ID: "test", Name: "test", SessionID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"}}
	for _, d := range []string{f.ro, f.rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.ro, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := roots.New([]roots.Spec{{Path: f.ro, Mount: "ro", Preapproved: true},
		{Path: f.rw, Mount: "rw", Writable: true, Preapproved: true}})
	if err != nil {
		t.Fatal(err)
	}
	f.set = set
	x, err := executor.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	f.exec = x
	return f
}

// corridor returns a corridor over the fixture's roots with opts, closed at
// the test's end.
func (f *fixture) corridor(t *testing.T, opts ...Option) *Corridor {
	t.Helper()
	c := New(append([]Option{WithRoots(func() *roots.Set { return f.set }), WithExecutor(f.exec)}, opts...)...)
	t.Cleanup(c.Close)
	return c
}

// target canonicalizes a path of the fixture.
func (f *fixture) target(t *testing.T, c *Corridor, raw string) executor.Target {
	t.Helper()
	tg, err := c.canonicalize(context.Background(), raw, true)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// tempFiles returns the broker's temporary files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := executor.TempFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}
