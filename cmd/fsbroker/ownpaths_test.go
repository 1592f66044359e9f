// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateInsideARootIsRefused: with --root $HOME:rw and the default state
// directory under $HOME (~/.local/state/fsbroker), every command that takes
// roots exits 2 before it touches anything, naming both settings and how to
// fix it; so does a read-only root, and each of the broker's other paths.
func TestStateInsideARootIsRefused(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	home := realDir(t, filepath.Join(base, "home"))
	other := realDir(t, filepath.Join(base, "other"))
	env := []string{"HOME=" + home, "XDG_STATE_HOME="}
	defaultState := filepath.Join(home, ".local", "state", "fsbroker")
	cfg := filepath.Join(home, "fsbroker.yaml")
	writeFile(t, cfg, "version: 1\nroots:\n  - path: "+other+"\n")
	stateCfg := filepath.Join(base, "state.yaml")
	writeFile(t, stateCfg, "version: 1\nstateDir: other/st\nroots:\n  - path: other\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"stdio", []string{"stdio", "--root", home + ":rw"},
			[]string{"the default state directory " + defaultState, "lies inside the root --root " + home + ":rw", "set --state-dir"}},
		{"connect", []string{"connect", "--root", home + ":rw", "--", "sh", "-c", "sleep 5"},
			[]string{"the default state directory", "--root " + home + ":rw"}},
		{"wrap", []string{"wrap", "--root", home + ":rw", "--", "sh", "-c", "sleep 5"},
			[]string{"the default state directory", "--root " + home + ":rw"}},
		{"read-only root", []string{"stdio", "--root", home, "--state-dir", filepath.Join(home, "st")},
			[]string{"--state-dir " + filepath.Join(home, "st"), "--root " + home + " ("}},
		{"audit directory", []string{"stdio", "--root", other, "--state-dir", filepath.Join(base, "st"), "--audit", filepath.Join(other, "trail")},
			[]string{"--audit " + filepath.Join(other, "trail"), "--root " + other}},
		{"policy directory", []string{"stdio", "--root", other, "--state-dir", filepath.Join(base, "st"), "--policies", other},
			[]string{"--policies " + other, "--root " + other}},
		{"config file", []string{"stdio", "--config", cfg, "--root", home, "--state-dir", filepath.Join(base, "st")},
			[]string{"--config " + cfg, "--root " + home}},
		{"state directory from the config file", []string{"stdio", "--config", stateCfg},
			[]string{"config " + stateCfg + ": /stateDir " + filepath.Join(other, "st"), "lies inside the root config " + stateCfg + ": /roots/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runFsbroker(t, env, tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit status %d, stdout %q; want 2 and nothing; stderr:\n%s", code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !os.IsNotExist(err) {
		t.Errorf("a refused start made %s/.local: %v", home, err)
	}
	// The same roots with the state elsewhere start.
	p := startBrokerEnv(t, env, "stdio", "--root", home+":rw", "--state-dir", filepath.Join(base, "state"))
	p.handshake("2025-11-25")
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("with --state-dir outside the root: exit status %d\n%s", code, p.log())
	}
}

// startBrokerEnv is startBroker with more environment variables.
func startBrokerEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, exec.Command(brokerBin, withConsent(t, "", args)...), env...)
}

// TestConfigReloadAddingARootOverTheStateIsRefused: a config edit that adds a
// root holding the state directory is refused and logged, the previous roots
// are kept and the server is not told of a change.
func TestConfigReloadAddingARootOverTheStateIsRefused(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	a := realDir(t, filepath.Join(dir, "a"))
	state := filepath.Join(dir, "var", "state")
	cfg := filepath.Join(dir, "conf", "fsbroker.yaml")
	realDir(t, filepath.Dir(cfg))
	writeFile(t, cfg, configOf(a))
	p := startBroker(t, "", "stdio", "--config", cfg, "--state-dir", state)
	p.handshake("2025-11-25")
	failures := p.countLog("reload failed")
	replaceFile(t, cfg, configOf(a, filepath.Join(dir, "var")))
	p.waitLogCount("reload failed", failures+1)
	if !strings.Contains(p.log(), "--state-dir "+state+" lies inside the root config "+cfg+": /roots/1") {
		t.Errorf("the log does not name the state directory and the new root:\n%s", p.log())
	}
	if m := p.TryAwait(quiet, isListChanged); m != nil {
		t.Errorf("a refused reload sent %s", m.Raw)
	}
	if got := rootPaths(t, p.listRoots("after")); !equalStrings(got, []string{a}) {
		t.Errorf("roots after a refused reload = %q, want the old %q", got, a)
	}
	// The config file's own directory is the broker's too.
	failures = p.countLog("reload failed")
	replaceFile(t, cfg, configOf(a, filepath.Dir(cfg)))
	p.waitLogCount("reload failed", failures+1)
	if !strings.Contains(p.log(), "--config "+cfg+" lies inside the root") {
		t.Errorf("the log does not name the config file:\n%s", p.log())
	}
}

// TestStateBehindABindMountIsRefused: the overlap is found by device and
// inode when a bind mount hides it from the paths: a root that is $HOME
// mounted elsewhere, with the state directory under $HOME; and a root under
// the state directory mounted elsewhere. Run in a mount namespace of its own
// (unshare); skipped where that is not allowed.
func TestStateBehindABindMountIsRefused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare command")
	}
	base := realDir(t, t.TempDir())
	home := realDir(t, filepath.Join(base, "home"))
	view := realDir(t, filepath.Join(base, "view"))
	state := realDir(t, filepath.Join(base, "state"))
	realDir(t, filepath.Join(state, "grants"))
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", "mount --bind "+home+" "+view).CombinedOutput(); err != nil {
		t.Skipf("bind mounts in a user and mount namespace are not allowed here: %v: %s", err, out)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		script := `mount --bind "$1" "$2" && shift 2 && exec "$@"`
		cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, "sh"}, args...)...)
		cmd.Env = append(brokerEnv(), "HOME="+home, "XDG_STATE_HOME=")
		_, stderr, code := runExec(t, cmd)
		return stderr, code
	}
	stderr, code := run(home, view, brokerBin, "stdio", "--root", view+":rw")
	if code != 2 || !strings.Contains(stderr, "the default state directory "+filepath.Join(home, ".local", "state", "fsbroker")) ||
		!strings.Contains(stderr, "--root "+view+":rw") || !strings.Contains(stderr, "by device and inode") {
		t.Errorf("the home directory mounted elsewhere as a root: exit status %d, stderr:\n%s", code, stderr)
	}
	stderr, code = run(state, view, brokerBin, "stdio", "--root", filepath.Join(view, "grants")+":rw", "--state-dir", state)
	if code != 2 || !strings.Contains(stderr, "lies inside --state-dir "+state) || !strings.Contains(stderr, "by device and inode") {
		t.Errorf("the state directory mounted elsewhere, a root in it: exit status %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !os.IsNotExist(err) {
		t.Errorf("a refused start made %s/.local: %v", home, err)
	}
}
