// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

// These tests confine real processes with the real kernel's Landlock: this
// test binary, started again as the helper (TestMain), confines itself and
// executes a fake server (testdata/probe, built static) that opens files
// itself; the same probes run unconfined are the control. Without Landlock
// they skip, saying so.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/sandbox/sandboxtest"
)

var probeBin string // the fake server, a static Go binary

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperCommand {
		err := RunHelper(os.Args[2:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(126)
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if probeBin, err = sandboxtest.BuildProbe("go", dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func needLandlock(t *testing.T) {
	t.Helper()
	if ABI() < 1 {
		t.Skip("the kernel has no Landlock")
	}
}

// runProbe runs cmd (the probe, confined or not) with its input closed and
// returns each probe's outcome.
func runProbe(t *testing.T, cmd *exec.Cmd) map[string]string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "probe done") {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return sandboxtest.Outcomes(string(out))
}

// confined returns the command that runs argv under rules through the
// helper, with HOME set to home, and the child (closed at cleanup).
func confined(t *testing.T, rules Rules, home string, argv ...string) (*exec.Cmd, *Child) {
	t.Helper()
	c, err := NewChild(rules, argv, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	name, args, err := c.Command(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	return cmd, c
}

// A fake server that opens files itself, confined to its roots: the kernel
// refuses it (EACCES) outside its roots, writes in a read-only root, its
// home, the state and audit directories, a link out of a root and /tmp; it
// runs, writes its TMPDIR and its writable root, and moves a file between
// two directories of the writable root. Unconfined, every probe succeeds.
func TestSandboxConfinesAServerThatOpensFilesItself(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	probes, want := l.Probes()
	rules := ServerRules(Config{}, []Root{{Path: l.RO}, {Path: l.RW, Writable: true}})
	cmd, child := confined(t, rules, l.Home, probeBin, sandboxtest.Arg(t, probes))
	sandboxtest.Check(t, "confined", probes, want, runProbe(t, cmd))
	if _, err := os.Stat(filepath.Join(l.RW, "b", "f")); err != nil {
		t.Errorf("the rename in the writable root did not happen: %v", err)
	}
	if entries, err := os.ReadDir(child.TempDir()); err != nil || len(entries) != 1 {
		t.Errorf("the server's TMPDIR %s holds %d entries (%v), want its one file", child.TempDir(), len(entries), err)
	}

	// The control: the same probes, unconfined, all succeed.
	l = sandboxtest.NewLayout(t)
	probes, _ = l.Probes()
	control := exec.Command(probeBin, sandboxtest.Arg(t, probes))
	control.Env = append(os.Environ(), "HOME="+l.Home, "TMPDIR="+t.TempDir())
	sandboxtest.Check(t, "unconfined", probes, nil, runProbe(t, control))
}

// The runtimes servers are written for start under the default rules with
// no configuration: python3 and node (from the system's directories), and
// a static Go binary anywhere (its own file is added); each reads a root
// and writes its TMPDIR, and none reads outside.
func TestSandboxRuntimesStartWithDefaults(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	rules := ServerRules(Config{}, []Root{{Path: l.RO}})
	readme := filepath.Join(l.RO, "readme")
	scripts := map[string][]string{
		"python3": {"-c", `import os, sys, tempfile
print(open(sys.argv[1]).read())
with tempfile.NamedTemporaryFile(dir=None) as f: f.write(b"x")
try:
    open(sys.argv[2]).read()
    print("outside: ok")
except PermissionError:
    print("outside: EACCES")`, readme, l.Secret},
		"node": {"-e", `const fs = require("fs"), os = require("os"), path = require("path");
console.log(fs.readFileSync(process.argv[1], "utf8"));
fs.writeFileSync(path.join(os.tmpdir(), "n"), "x");
try { fs.readFileSync(process.argv[2]); console.log("outside: ok"); }
catch (e) { console.log("outside: " + e.code); }`, readme, l.Secret},
	}
	for name, args := range scripts {
		t.Run(name, func(t *testing.T) {
			path := systemProgram(name)
			if path == "" {
				t.Skipf("no %s in the system's directories", name)
			}
			cmd, _ := confined(t, rules, l.Home, append([]string{path}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "read me") || !strings.Contains(string(out), "outside: EACCES") {
				t.Errorf("%s confined: %v\n%s", name, err, out)
			}
		})
	}
	t.Run("static-go", func(t *testing.T) {
		probes := []sandboxtest.Probe{{Name: "read", Op: "read", Path: readme}, {Name: "tmp", Op: "tmpwrite"},
			{Name: "outside", Op: "read", Path: l.Secret}}
		cmd, _ := confined(t, rules, l.Home, probeBin, sandboxtest.Arg(t, probes))
		got := runProbe(t, cmd)
		if got["read"] != "ok" || got["tmp"] != "ok" || got["outside"] != "EACCES" {
			t.Errorf("static Go binary confined: %v", got)
		}
	})
}

// systemProgram is name in the directories of the default system paths
// (not a version manager's shim in the home directory).
func systemProgram(name string) string {
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() || err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return p
		}
	}
	return ""
}

// A program that cannot be found is the error starting it would give, and
// leaves no temporary directory behind.
func TestNewChildNotFound(t *testing.T) {
	if _, err := NewChild(Rules{}, []string{"no-such-server-anywhere"}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("NewChild(no-such-server) = %v, want not found", err)
	}
}
