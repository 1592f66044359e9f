// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package testfs holds the tests' helpers for real files and directories
// (in a test's t.TempDir(), as a rule): one copy for every package that
// needs them. Only tests import it; the broker never does.
package testfs

import (
	"os"
	"path/filepath"
	"testing"
)

// RealDir creates dir (and its parents) and returns its symlink-resolved
// absolute path, as the broker's roots and state directory are compared.
func RealDir(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// WriteFile writes content to path in place (truncate and write, mode 0644
// when it creates the file).
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
