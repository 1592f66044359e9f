//go:build unix

package main

// The npm projects of testdata that tests run real JavaScript peers from (a
// package.json and the package-lock.json that pins every version): the
// TypeScript SDK server (testdata/ts-server), the MCP Inspector and the
// reference filesystem server (testdata/hosts). Each is installed with
// npm ci into a cache directory outside the repository, once per lock file.
//
// Without node and npm, or without the registry, the tests that need one
// skip and say why; with FSBROKER_REQUIRE_INTEROP=1 (as CI sets it) they
// fail instead.

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
)

// interopRequireEnv, set to 1, turns the skips of the tests that need an
// npm project (no node, no npm, no registry) into failures.
const interopRequireEnv = "FSBROKER_REQUIRE_INTEROP"

// npmTimeout bounds one npm ci.
const npmTimeout = 3 * time.Minute

// npmProject is an npm project of testdata and the outcome of installing it,
// shared by the tests of one test process.
type npmProject struct {
	src     string // the directory of package.json and package-lock.json, relative to this package
	what    string // what the project is, for messages
	minNode int    // the oldest major version of node its packages run on
	marker  string // a file under node_modules that a complete install has

	once sync.Once
	node string // the node binary
	dir  string // the install: dir/node_modules, next to copies of package.json and the lock file
	skip string // why the project cannot be installed here (no node, no npm, no registry)
	err  error  // a failure that is this repository's fault
}

// installed returns the node binary and the directory the project is
// installed in, installing it first when it is missing. The test skips,
// saying why, when node or npm is missing, node is too old or npm ci fails
// (no registry); it fails instead when FSBROKER_REQUIRE_INTEROP=1.
func (p *npmProject) installed(t *testing.T) (node, dir string) {
	t.Helper()
	p.once.Do(func() { p.node, p.dir, p.skip, p.err = p.install() })
	if p.err != nil {
		t.Fatalf("%s (%s): %v", p.what, p.src, p.err)
	}
	if p.skip != "" {
		if os.Getenv(interopRequireEnv) == "1" {
			t.Fatalf("%s=1, but %s cannot run: %s", interopRequireEnv, p.what, p.skip)
		}
		t.Skipf("%s not available (set %s=1 to fail instead): %s", p.what, interopRequireEnv, p.skip)
	}
	return p.node, p.dir
}

// install installs the project's dependencies in
// <cache>/fsbroker-test/<base name of src>-<hash of package.json and the
// lock file> (npm ci into a temporary directory renamed into place, so that
// concurrent test processes never see a half-done install). It returns a
// reason to skip when node or npm is missing, node is too old or npm ci
// fails, and an error for what is wrong in the repository or the cache.
func (p *npmProject) install() (node, dir, skip string, err error) {
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
	if err != nil || major < p.minNode {
		return "", "", fmt.Sprintf("node %s is too old: %s needs %d or later", version, p.what, p.minNode), nil
	}

	pkg, err := os.ReadFile(filepath.Join(p.src, "package.json"))
	if err != nil {
		return "", "", "", err
	}
	lock, err := os.ReadFile(filepath.Join(p.src, "package-lock.json"))
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
	name := filepath.Base(p.src) + "-" + hex.EncodeToString(depsHash.Sum(nil))[:16]
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
		return "", "", "", fmt.Errorf("npm ci in %s succeeded, but node_modules has no %s", tmp, p.marker)
	}
	if err := os.Rename(tmp, dir); err != nil && !p.complete(dir) {
		// Not another test process that got there first.
		return "", "", "", fmt.Errorf("install %s: %w (remove %s and retry)", p.src, err, dir)
	}
	return node, dir, "", nil
}

// complete reports whether dir holds the project's installed dependencies.
func (p *npmProject) complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(p.marker)))
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

// npmCI runs npm ci in dir, bounded by npmTimeout, and returns why it failed
// ("" when it did not).
func npmCI(npm, dir string) string {
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund",
		"--prefer-offline", "--loglevel=error", "--fetch-timeout=60000", "--fetch-retries=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	// npm's children go with it when the time is up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("npm ci in %s did not finish within %s (registry unreachable?)\n%s", dir, npmTimeout, tsTail(out.String(), 2000))
	case err != nil:
		return fmt.Sprintf("npm ci in %s failed after %s (registry unreachable?): %v\n%s",
			dir, time.Since(start).Round(time.Millisecond), err, tsTail(out.String(), 2000))
	}
	return ""
}
