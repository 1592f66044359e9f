//go:build linux

package sandbox

// These tests confine real processes with the real kernel's Landlock: this
// test binary, started again as the helper (TestMain), confines itself and
// executes a fake server (testdata/probe, built static) that opens files
// itself; the same probes run unconfined are the control. Without Landlock
// they skip, saying so.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	probeBin = filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-o", probeBin, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the probe: %v\n%s", err, out)
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

// Probe is one of the fake server's file operations (testdata/probe).
type Probe struct {
	Name string `json:"name"`
	Op   string `json:"op"`
	Path string `json:"path"`
	To   string `json:"to,omitempty"`
}

// Layout is a set of directories like an operator's: a read-only and a
// writable root, and what lies outside them.
type Layout struct {
	RO, RW, Outside, Home, State, Audit string
	Secret, Link, TmpFile               string
}

func newLayout(t *testing.T) Layout {
	t.Helper()
	base := t.TempDir()
	l := Layout{RO: filepath.Join(base, "ro"), RW: filepath.Join(base, "rw"), Outside: filepath.Join(base, "outside"),
		Home: filepath.Join(base, "home"), State: filepath.Join(base, "state"), Audit: filepath.Join(base, "audit")}
	for _, d := range []string{l.RO, l.RW, filepath.Join(l.RW, "a"), filepath.Join(l.RW, "b"), l.Outside, l.Home, l.State, l.Audit} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.Secret = filepath.Join(l.Outside, "secret")
	l.Link = filepath.Join(l.RO, "link-out")
	l.TmpFile = filepath.Join(os.TempDir(), fmt.Sprintf("sandbox-probe-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
	t.Cleanup(func() { os.Remove(l.TmpFile) })
	for path, content := range map[string]string{filepath.Join(l.RO, "readme"): "read me", l.Secret: "secret",
		filepath.Join(l.RW, "a", "f"): "move me", filepath.Join(l.Home, ".netrc"): "password",
		filepath.Join(l.State, "grants.json"): "{}"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(l.Secret, l.Link); err != nil {
		t.Fatal(err)
	}
	return l
}

// probes are the attacks and the controls, with what a confined server
// gets: "ok" or "EACCES".
func (l Layout) probes() ([]Probe, map[string]string) {
	list := []struct {
		p    Probe
		want string
	}{
		{Probe{"read-ro-root", "read", filepath.Join(l.RO, "readme"), ""}, "ok"},
		{Probe{"list-ro-root", "list", l.RO, ""}, "ok"},
		{Probe{"write-ro-root", "write", filepath.Join(l.RO, "new"), ""}, "EACCES"},
		{Probe{"read-outside", "read", l.Secret, ""}, "EACCES"},
		{Probe{"list-outside", "list", l.Outside, ""}, "EACCES"},
		{Probe{"read-home", "read", filepath.Join(l.Home, ".netrc"), ""}, "EACCES"},
		{Probe{"write-home", "write", filepath.Join(l.Home, ".bashrc"), ""}, "EACCES"},
		{Probe{"read-state", "read", filepath.Join(l.State, "grants.json"), ""}, "EACCES"},
		{Probe{"write-state", "write", filepath.Join(l.State, "grants.json"), ""}, "EACCES"},
		{Probe{"write-audit", "write", filepath.Join(l.Audit, "segment"), ""}, "EACCES"},
		{Probe{"read-link-out", "read", l.Link, ""}, "EACCES"},
		{Probe{"write-tmp", "write", l.TmpFile, ""}, "EACCES"},
		{Probe{"write-tmpdir", "tmpwrite", "", ""}, "ok"},
		{Probe{"write-rw-root", "write", filepath.Join(l.RW, "new"), ""}, "ok"},
		{Probe{"mkdir-rw-root", "mkdir", filepath.Join(l.RW, "a", "sub"), ""}, "ok"},
		{Probe{"rename-across-rw-root", "rename", filepath.Join(l.RW, "a", "f"), filepath.Join(l.RW, "b", "f")}, "ok"},
		{Probe{"exec-system", "exec", "/bin/true", ""}, "ok"},
	}
	probes := make([]Probe, len(list))
	want := map[string]string{}
	for i, e := range list {
		probes[i] = e.p
		want[e.p.Name] = e.want
	}
	return probes, want
}

var probeLine = regexp.MustCompile(`(?m)^probe ([a-z-]+): (.*)$`)

// runProbe runs cmd (the probe, confined or not) with its input closed and
// returns each probe's outcome.
func runProbe(t *testing.T, cmd *exec.Cmd) map[string]string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "probe done") {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	got := map[string]string{}
	for _, m := range probeLine.FindAllStringSubmatch(string(out), -1) {
		got[m[1]] = m[2]
	}
	return got
}

func probeArg(t *testing.T, probes []Probe) string {
	t.Helper()
	b, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// confined returns the command that runs argv under rules through the
// helper, with HOME set to home, and the child (closed at cleanup).
func confined(t *testing.T, rules Rules, home string, argv ...string) (*exec.Cmd, *Child) {
	t.Helper()
	c, err := NewChild(rules, argv)
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
	l := newLayout(t)
	probes, want := l.probes()
	rules := ServerRules(Config{}, []Root{{Path: l.RO}, {Path: l.RW, Writable: true}})
	cmd, child := confined(t, rules, l.Home, probeBin, probeArg(t, probes))
	got := runProbe(t, cmd)
	for _, p := range probes {
		if got[p.Name] != want[p.Name] {
			t.Errorf("confined: probe %s (%s %s) = %q, want %s", p.Name, p.Op, p.Path, got[p.Name], want[p.Name])
		}
	}
	if _, err := os.Stat(filepath.Join(l.RW, "b", "f")); err != nil {
		t.Errorf("the rename in the writable root did not happen: %v", err)
	}
	if entries, err := os.ReadDir(child.TempDir()); err != nil || len(entries) != 1 {
		t.Errorf("the server's TMPDIR %s holds %d entries (%v), want its one file", child.TempDir(), len(entries), err)
	}

	// The control: the same probes, unconfined, all succeed.
	l = newLayout(t)
	probes, _ = l.probes()
	control := exec.Command(probeBin, probeArg(t, probes))
	control.Env = append(os.Environ(), "HOME="+l.Home, "TMPDIR="+t.TempDir())
	got = runProbe(t, control)
	for _, p := range probes {
		if got[p.Name] != "ok" {
			t.Errorf("unconfined: probe %s (%s %s) = %q, want ok", p.Name, p.Op, p.Path, got[p.Name])
		}
	}
}

// The runtimes servers are written for start under the default rules with
// no configuration: python3 and node (from the system's directories), and
// a static Go binary anywhere (its own file is added); each reads a root
// and writes its TMPDIR, and none reads outside.
func TestSandboxRuntimesStartWithDefaults(t *testing.T) {
	needLandlock(t)
	l := newLayout(t)
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
		probes := []Probe{{"read", "read", readme, ""}, {"tmp", "tmpwrite", "", ""}, {"outside", "read", l.Secret, ""}}
		cmd, _ := confined(t, rules, l.Home, probeBin, probeArg(t, probes))
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
	if _, err := NewChild(Rules{}, []string{"no-such-server-anywhere"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("NewChild(no-such-server) = %v, want not found", err)
	}
}
