// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

// Package npmtest installs the npm projects that tests run real JavaScript
// peers from (a package.json and the package-lock.json that pins every
// version, in a test's testdata), each with npm ci into a cache directory
// outside the repository, once per lock file. Tests only; the broker never
// imports it.
//
// Without node and npm, or without the registry, a test that needs a
// project skips and says why; with FSBROKER_REQUIRE_INTEROP=1 (as CI sets
// it) it fails instead.
package npmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/testlog"
)

// RequireEnv, set to 1, turns the skips of the tests that need an
// npm project (no node, no npm, no registry) into failures.
const RequireEnv = "FSBROKER_REQUIRE_INTEROP"

// installTimeout bounds one npm ci.
const installTimeout = 3 * time.Minute

// Project is an npm project of a test's testdata and the outcome of installing it,
// shared by the tests of one test process.
type Project struct {
	Src     string // the directory of package.json and package-lock.json, relative to the test's package
	What    string // what the project is, for messages
	MinNode int    // the oldest major version of node its packages run on
	Marker  string // a file under node_modules that a complete install has

	once sync.Once
	node string // the node binary
	dir  string // the install: dir/node_modules, next to copies of package.json and the lock file
	skip string // why the project cannot be installed here (no node, no npm, no registry)
	err  error  // a failure that is this repository's fault
}

// Installed returns the node binary and the directory the project is
// installed in, installing it first when it is missing. The test skips,
// saying why, when node or npm is missing, node is too old or npm ci fails
// (no registry); it fails instead when FSBROKER_REQUIRE_INTEROP=1.
func (p *Project) Installed(t *testing.T) (node, dir string) {
	t.Helper()
	p.once.Do(func() { p.node, p.dir, p.skip, p.err = p.install() })
	if p.err != nil {
		t.Fatalf("%s (%s): %v", p.What, p.Src, p.err)
	}
	if p.skip != "" {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=1, but %s cannot run: %s", RequireEnv, p.What, p.skip)
		}
		t.Skipf("%s not available (set %s=1 to fail instead): %s", p.What, RequireEnv, p.skip)
	}
	return p.node, p.dir
}

// install installs the project's dependencies in
// <cache>/fsbroker-test/<base name of src>-<hash of package.json and the
// lock file> (npm ci into a temporary directory renamed into place, so that
// concurrent test processes never see a half-done install). It returns a
// reason to skip when node or npm is missing, node is too old or npm ci
// fails, and an error for what is wrong in the repository or the cache.
func (p *Project) install() (node, dir, skip string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", "node is not on PATH", nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", "npm is not on PATH", nil
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", fmt.Sprintf("node --version: %v", err), nil
	}
	version := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if err != nil || major < p.MinNode {
		return "", "", fmt.Sprintf("node %s is too old: %s needs %d or later", version, p.What, p.MinNode), nil
	}

	pkg, err := os.ReadFile(filepath.Join(p.Src, "package.json"))
	if err != nil {
		return "", "", "", err
	}
	lock, err := os.ReadFile(filepath.Join(p.Src, "package-lock.json"))
	if err != nil {
		return "", "", "", err
	}

	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "fsbroker-test")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", "", "", fmt.Errorf("cache directory: %w", err)
	}
	depsHash := sha256.New()
	depsHash.Write(pkg)
	depsHash.Write([]byte{0})
	depsHash.Write(lock)
	name := filepath.Base(p.Src) + "-" + hex.EncodeToString(depsHash.Sum(nil))[:16]
	dir = filepath.Join(root, name)
	if p.complete(dir) {
		return node, dir, "", nil
	}
	npmRemoveStaleInstalls(root)
	tmp, err := os.MkdirTemp(root, name+".tmp-")
	if err != nil {
		return "", "", "", fmt.Errorf("cache directory: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename, there is nothing left to remove
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", "", "", fmt.Errorf("cache directory: %w", err)
	}
	for file, content := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, file), content, 0o644); err != nil {
			return "", "", "", fmt.Errorf("cache directory: %w", err)
		}
	}
	if reason := npmCI(npm, tmp); reason != "" {
		return "", "", reason, nil
	}
	if !p.complete(tmp) {
		return "", "", "", fmt.Errorf("npm ci in %s succeeded, but node_modules has no %s", tmp, p.Marker)
	}
	if err := os.Rename(tmp, dir); err != nil && !p.complete(dir) {
		// Not another test process that got there first.
		return "", "", "", fmt.Errorf("install %s: %w (remove %s and retry)", p.Src, err, dir)
	}
	return node, dir, "", nil
}

// complete reports whether dir holds the project's installed dependencies.
func (p *Project) complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(p.Marker)))
	return err == nil
}

// npmRemoveStaleInstalls removes the temporary install directories in root
// that a test process killed during npm ci left behind (an hour old: no
// install takes that long).
func npmRemoveStaleInstalls(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.Contains(e.Name(), ".tmp-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// npmCI runs npm ci in dir, bounded by installTimeout, and returns why it failed
// ("" when it did not).
func npmCI(npm, dir string) string {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund",
		"--prefer-offline", "--loglevel=error", "--fetch-timeout=60000", "--fetch-retries=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	// npm's children go with it when the time is up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out testlog.Lines // npm writes both streams into it
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("npm ci in %s did not finish within %s (registry unreachable?)\n%s", dir, installTimeout, tail(out.String(), 2000))
	case err != nil:
		return fmt.Sprintf("npm ci in %s failed after %s (registry unreachable?): %v\n%s",
			dir, time.Since(start).Round(time.Millisecond), err, tail(out.String(), 2000))
	}
	return ""
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
