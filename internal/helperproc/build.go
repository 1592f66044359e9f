// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package helperproc

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// The programs Build built, once per test binary, in one temporary
// directory that Run removes after the tests.
var (
	builtMu  sync.Mutex
	built    = map[string]string{} // the binary, by package path
	builtDir string
)

// Build returns the helper program of package pkg (an import path of a
// main package of this module), built on first use, with the race detector
// when the tests run with it. It skips the test only when no go command is
// on PATH; a build that fails fails the test.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the helper programs")
	}
	if builtDir == "" {
		if builtDir, err = os.MkdirTemp("", "fsbroker-helpers-"); err != nil {
			t.Fatal(err)
		}
	}
	// Numbered: two packages may end in the same name.
	bin := filepath.Join(builtDir, strconv.Itoa(len(built))+"-"+path.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command(goTool, append(args, pkg)...).CombinedOutput(); err != nil {
		t.Fatalf("go build of the helper %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// removeBuilt removes what Build built.
func removeBuilt() {
	builtMu.Lock()
	defer builtMu.Unlock()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
		builtDir, built = "", map[string]string{}
	}
}
