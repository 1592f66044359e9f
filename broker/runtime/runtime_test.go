// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/leakcheck"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// allowPolicy is a policy set of one file that allows every request.
const allowPolicy = "package fsbroker.authz\n\ndecision := {\"allow\": true}\n"

// testConfig is a Config with one read-only root and a state directory,
// both in fresh temporary directories, and the built-in policies.
func testConfig(t *testing.T) Config {
	t.Helper()
	base := testfs.RealDir(t, t.TempDir())
	root := testfs.RealDir(t, filepath.Join(base, "project"))
	return Config{
		StateDir: filepath.Join(base, "state"),
		Roots:    []roots.Spec{{Path: root, Mount: "project", Origin: "--root " + root}},
	}
}

// TestOpenClosesWhatItOpenedOnEveryFailure makes each step of Open fail in
// turn, with real failures (a state directory that is a file, a policy set
// that does not compile, a bundle that is not one, ...), and checks that
// Open returns the error and leaves no file, goroutine or lock open: the
// same state directory, repaired, opens and closes again. (The file
// watcher, which fails only when the kernel refuses an inotify instance,
// is not made to fail.)
func TestOpenClosesWhatItOpenedOnEveryFailure(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, cfg *Config) (repair func())
		want   string
	}{
		{"a root that does not exist", func(t *testing.T, cfg *Config) func() {
			cfg.Roots = append(cfg.Roots, roots.Spec{Path: filepath.Join(cfg.StateDir, "..", "missing"), Origin: "--root missing"})
			return func() { cfg.Roots = cfg.Roots[:1] }
		}, "--root missing"},
		{"a root over the state directory", func(t *testing.T, cfg *Config) func() {
			cfg.Roots = append(cfg.Roots, roots.Spec{Path: filepath.Dir(cfg.StateDir), Mount: "all", Origin: "--root all"})
			return func() { cfg.Roots = cfg.Roots[:1] }
		}, "lies inside the root --root all"},
		{"the host's preflight check", func(t *testing.T, cfg *Config) func() {
			cfg.Preflight = func() error { return errors.New("no server command") }
			return func() { cfg.Preflight = nil }
		}, "no server command"},
		{"a state directory that is a file", func(t *testing.T, cfg *Config) func() {
			testfs.WriteFile(t, cfg.StateDir, "")
			return func() { mustRemove(t, cfg.StateDir) }
		}, "--state-dir"},
		{"a usage directory that is a file", func(t *testing.T, cfg *Config) func() {
			testfs.RealDir(t, cfg.StateDir)
			testfs.WriteFile(t, filepath.Join(cfg.StateDir, "usage"), "")
			return func() { mustRemove(t, filepath.Join(cfg.StateDir, "usage")) }
		}, "--state-dir"},
		{"a witness inside the state directory, after one that opened", func(t *testing.T, cfg *Config) func() {
			outside := testfs.RealDir(t, t.TempDir())
			cfg.Audit.Witnesses = []string{"file:" + filepath.Join(outside, "w1"), "file:" + filepath.Join(cfg.StateDir, "w2")}
			return func() { cfg.Audit.Witnesses = cfg.Audit.Witnesses[:1] }
		}, "the witness file is inside the state directory"},
		{"a witness that cannot be opened", func(t *testing.T, cfg *Config) func() {
			outside := testfs.RealDir(t, t.TempDir())
			cfg.Audit.Witnesses = []string{"file:" + filepath.Join(outside, "w1"), "file:" + filepath.Join(outside, "no-such-dir", "w2")}
			return func() { cfg.Audit.Witnesses = cfg.Audit.Witnesses[:1] }
		}, "--audit-witness"},
		{"a policy directory that does not compile", func(t *testing.T, cfg *Config) func() {
			dir := testfs.RealDir(t, t.TempDir())
			testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), "package fsbroker.authz\n\ndecision := {\n")
			cfg.Policies.Dir = dir
			return func() { testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), allowPolicy) }
		}, "policies ("},
		{"a policy directory that does not exist", func(t *testing.T, cfg *Config) func() {
			dir := filepath.Join(testfs.RealDir(t, t.TempDir()), "policies")
			cfg.Policies.Dir = dir
			return func() { testfs.RealDir(t, dir); testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), allowPolicy) }
		}, "policies"},
		{"a bundle that is not one", func(t *testing.T, cfg *Config) func() {
			dir := testfs.RealDir(t, t.TempDir())
			cfg.Policies.Bundle = filepath.Join(dir, "bundle.tar.gz")
			testfs.WriteFile(t, cfg.Policies.Bundle, "not a bundle")
			return func() { cfg.Policies.Bundle = "" }
		}, "policies ("},
		{"a bundle key that cannot be read", func(t *testing.T, cfg *Config) func() {
			dir := testfs.RealDir(t, t.TempDir())
			cfg.Policies.Bundle = filepath.Join(dir, "bundle.tar.gz")
			cfg.Policies.BundleKey = filepath.Join(dir, "missing.pem")
			return func() { cfg.Policies.Bundle, cfg.Policies.BundleKey = "", "" }
		}, "--bundle-key"},
		{"an audit directory that is a file", func(t *testing.T, cfg *Config) func() {
			cfg.Audit.Dir = filepath.Join(testfs.RealDir(t, t.TempDir()), "audit")
			testfs.WriteFile(t, cfg.Audit.Dir, "")
			return func() { mustRemove(t, cfg.Audit.Dir) }
		}, "--audit"},
		{"a decision log naming no service", func(t *testing.T, cfg *Config) func() {
			cfg.OPA = json.RawMessage(`{"decision_logs": {"service": "nowhere"}}`)
			cfg.ConfigFile = "fsbroker.yaml"
			return func() { cfg.OPA = nil }
		}, "fsbroker.yaml: /opa"},
		{"a lock directory that is a file", func(t *testing.T, cfg *Config) func() {
			testfs.RealDir(t, cfg.StateDir)
			testfs.WriteFile(t, filepath.Join(cfg.StateDir, "locks"), "")
			return func() { mustRemove(t, filepath.Join(cfg.StateDir, "locks")) }
		}, "--state-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			repair := tc.break_(t, &cfg)
			before := leakcheck.Take(t)
			rt, err := Open(context.Background(), cfg, hclog.NewNullLogger())
			if err == nil {
				_ = rt.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			before.Settle(t)
			// Nothing holds the state directory: repaired, it opens again.
			repair()
			rt, err = Open(context.Background(), cfg, hclog.NewNullLogger())
			if err != nil {
				t.Fatalf("repaired, Open: %v", err)
			}
			if err := rt.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			before.Settle(t)
		})
	}
}

// TestOpenErrorsAreConfigErrors: a setting that cannot be used is a
// *ConfigError (cmd/fsbroker exits 2 with it).
func TestOpenErrorsAreConfigErrors(t *testing.T) {
	cfg := testConfig(t)
	testfs.WriteFile(t, cfg.StateDir, "")
	_, err := Open(context.Background(), cfg, nil)
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		t.Fatalf("error %v (%T), want a *ConfigError", err, err)
	}
}

// TestReloadRoots: Reload takes the roots ReloadRoots gives; roots that
// cannot be used (one over the state directory) leave the previous ones.
func TestReloadRoots(t *testing.T) {
	cfg := testConfig(t)
	first := cfg.Roots
	other := testfs.RealDir(t, filepath.Join(filepath.Dir(cfg.StateDir), "other"))
	next := first
	cfg.ReloadRoots = func() ([]roots.Spec, error) { return next, nil }
	rt, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	next = append(first, roots.Spec{Path: other, Mount: "other", Origin: "--root other"})
	if err := rt.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := rt.Roots().Len(); got != 2 {
		t.Fatalf("after a reload adding a root: %d roots, want 2", got)
	}
	next = append(first, roots.Spec{Path: filepath.Dir(cfg.StateDir), Mount: "all", Origin: "--root all"})
	err = rt.Reload(context.Background())
	var cerr *ConfigError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "lies inside the root --root all") {
		t.Fatalf("Reload with a root over the state directory: %v, want a *ConfigError naming it", err)
	}
	if got := rt.Roots().Len(); got != 2 {
		t.Errorf("after a refused reload: %d roots, want the previous 2", got)
	}
}

// TestReloadPolicies: Reload loads an edited policy directory, and a set
// that does not compile leaves the previous one deciding; both are
// recorded in the audit trail.
func TestReloadPolicies(t *testing.T) {
	cfg := testConfig(t)
	dir := testfs.RealDir(t, t.TempDir())
	testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), allowPolicy)
	cfg.Policies.Dir = dir
	rt, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := rt.engine.Revision()
	testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), allowPolicy+"\n# edited\n")
	if err := rt.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	edited := rt.engine.Revision()
	if edited == before {
		t.Errorf("revision %s unchanged after an edit", edited)
	}
	testfs.WriteFile(t, filepath.Join(dir, "authz.rego"), "package fsbroker.authz\n\ndecision := {\n")
	if err := rt.Reload(context.Background()); err == nil {
		t.Error("Reload of a set that does not compile: no error")
	}
	if got := rt.engine.Revision(); got != edited {
		t.Errorf("revision %s after a failed reload, want the previous %s", got, edited)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	kinds := map[audit.Kind]int{}
	for rec, err := range audit.Records(context.Background(), cfg.Audit.DirIn(cfg.StateDir), audit.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		kinds[rec.Kind]++
	}
	if kinds[audit.KindPolicyReload] != 1 || kinds[audit.KindPolicyReloadFailed] != 1 {
		t.Errorf("audit records by kind: %v; want one policy_reload and one policy_reload_failed", kinds)
	}
}

// mustRemove removes path.
func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
