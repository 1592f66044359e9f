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
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

var probeBin string // the fake server, a static Go binary

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperCommand {
		err := RunHelper(os.Args[2:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(126)
	}
	if base := os.Getenv(mountsChildEnv); base != "" {
		if err := runMountsChild(base); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
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
// helper, UNIX sockets denied, with HOME set to home, and the child (closed
// at cleanup).
func confined(t *testing.T, rules Rules, home string, argv ...string) (*exec.Cmd, *Child) {
	t.Helper()
	return confinedWith(t, rules, UnixSocketsDeny, home, argv...)
}

// confinedWith is confined, with UNIX sockets as sockets says.
func confinedWith(t *testing.T, rules Rules, sockets UnixSockets, home string, argv ...string) (*exec.Cmd, *Child) {
	t.Helper()
	c, err := NewChild(rules, argv, t.TempDir(), sockets)
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
	if got := l.Received(t); len(got) != 0 {
		t.Errorf("confined, the datagram socket outside got %q from the server", got)
	}
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
	if got := l.Received(t); len(got) != 3 {
		t.Errorf("unconfined, the datagram socket outside got %q, want the three datagrams of the pairs", got)
	}
}

// The UNIX socket filter refuses a pair of datagram sockets (SOCK_DGRAM,
// and SOCK_RAW, which AF_UNIX makes a datagram socket; with or without
// SOCK_NONBLOCK and SOCK_CLOEXEC), whose end can send to any datagram
// socket at a path (journald's, /dev/log, NOTIFY_SOCKET): EACCES, and the
// socket outside gets nothing. Stream and seqpacket pairs are made, and a
// send addressed to that socket does not leave them: a stream end refuses
// an address (EISCONN), a seqpacket end ignores it and sends to its peer
// (checked with the real kernel here, confined and not). Unconfined (the
// control), the datagram pairs reach the socket outside.
func TestSandboxUnixSocketpairs(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	datagram := []string{"dgram", "dgram-flags", "raw", "raw-flags"}
	want := map[string]string{"stream": "EISCONN", "stream-flags": "EISCONN", "seqpacket": "peer", "seqpacket-flags": "peer"}
	var probes []sandboxtest.Probe
	for _, typ := range append(slices.Sorted(maps.Keys(want)), datagram...) {
		probes = append(probes, sandboxtest.Probe{Name: typ, Op: "pair-send", Path: l.DgramSocket, To: typ})
	}
	for _, typ := range datagram {
		want[typ] = "EACCES"
	}
	cmd, _ := confined(t, ServerRules(Config{}, nil), l.Home, probeBin, sandboxtest.Arg(t, probes))
	sandboxtest.Check(t, "confined", probes, want, runProbe(t, cmd))
	if got := l.Received(t); len(got) != 0 {
		t.Errorf("confined, the datagram socket outside got %q", got)
	}

	for _, typ := range datagram {
		want[typ] = "ok"
	}
	sandboxtest.Check(t, "unconfined", probes, want, runProbe(t, exec.Command(probeBin, sandboxtest.Arg(t, probes))))
	if got := l.Received(t); len(got) != 4 {
		t.Errorf("unconfined, the datagram socket outside got %q, want the four datagrams of the datagram pairs", got)
	}
}

// The helper passes the server the three descriptors it was started with
// (stdin, stdout, stderr) and nothing else: a descriptor the broker's host
// left open without close-on-exec, here an open file outside the rules and
// an end of a datagram socket pair (which would send to any datagram socket
// at a path), is closed before the server runs. The server (a real child)
// lists /proc/self/fd; unconfined (the control) it holds both.
func TestSandboxHelperPassesOnNoInheritedDescriptor(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	marker := filepath.Join(l.Outside, "inherited-marker")
	if err := os.WriteFile(marker, []byte("left open by the host"), 0o600); err != nil {
		t.Fatal(err)
	}
	inherited := func(t *testing.T) []*os.File {
		f, err := os.Open(marker)
		if err != nil {
			t.Fatal(err)
		}
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		files := []*os.File{f, os.NewFile(uintptr(fds[0]), "dgram-0"), os.NewFile(uintptr(fds[1]), "dgram-1")}
		t.Cleanup(func() {
			for _, f := range files {
				f.Close()
			}
		})
		return files
	}
	probes := []sandboxtest.Probe{{Name: "fds", Op: "fds"}}

	cmd, _ := confined(t, ServerRules(Config{}, nil), l.Home, probeBin, sandboxtest.Arg(t, probes))
	cmd.ExtraFiles = inherited(t)
	if got := runProbe(t, cmd)["fds"]; strings.Contains(got, marker) || strings.Contains(got, "socket:") {
		t.Errorf("confined, the server holds descriptors it inherited: %s", got)
	}

	control := exec.Command(probeBin, sandboxtest.Arg(t, probes))
	control.ExtraFiles = inherited(t)
	if got := runProbe(t, control)["fds"]; !strings.Contains(got, marker) || !strings.Contains(got, "socket:") {
		t.Errorf("unconfined, the server does not hold the descriptors it was given: %s", got)
	}
}

// The runtimes servers are written for start under the default rules with
// no configuration: python3 and node (from the system's directories), and
// a static Go binary anywhere (its own file is added); each reads a root,
// writes its TMPDIR, runs a child process and resolves a host name (over
// socketpairs and the C library, which the UNIX socket filter leaves them),
// and none reads outside or connects to the UNIX socket outside.
func TestSandboxRuntimesStartWithDefaults(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	rules := ServerRules(Config{}, []Root{{Path: l.RO}})
	readme := filepath.Join(l.RO, "readme")
	scripts := map[string][]string{
		"python3": {"-c", `import os, socket, subprocess, sys, tempfile
print(open(sys.argv[1]).read())
with tempfile.NamedTemporaryFile(dir=None) as f: f.write(b"x")
subprocess.run(["/bin/true"], check=True)
a, b = socket.socketpair(); a.close(); b.close()
socket.getaddrinfo("localhost", 80)
try:
    open(sys.argv[2]).read()
    print("outside: ok")
except PermissionError:
    print("outside: EACCES")
try:
    socket.socket(socket.AF_UNIX).connect(sys.argv[3])
    print("unix: ok")
except PermissionError:
    print("unix: EACCES")`, readme, l.Secret, l.Socket},
		"node": {"-e", `const fs = require("fs"), os = require("os"), path = require("path");
console.log(fs.readFileSync(process.argv[1], "utf8"));
fs.writeFileSync(path.join(os.tmpdir(), "n"), "x");
require("child_process").execFileSync("/bin/true");
try { fs.readFileSync(process.argv[2]); console.log("outside: ok"); }
catch (e) { console.log("outside: " + e.code); }
require("dns").lookup("localhost", () => {
  const s = require("net").connect(process.argv[3]);
  s.on("connect", () => { console.log("unix: ok"); s.destroy(); });
  s.on("error", (e) => console.log("unix: " + e.code));
});`, readme, l.Secret, l.Socket},
	}
	for name, args := range scripts {
		t.Run(name, func(t *testing.T) {
			path := systemProgram(name)
			if path == "" {
				t.Skipf("no %s in the system's directories", name)
			}
			cmd, _ := confined(t, rules, l.Home, append([]string{path}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "read me") || !strings.Contains(string(out), "outside: EACCES") ||
				!strings.Contains(string(out), "unix: EACCES") {
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
	if _, err := NewChild(Rules{}, []string{"no-such-server-anywhere"}, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("NewChild(no-such-server) = %v, want not found", err)
	}
}

// With UNIX sockets allowed (sandbox.unixSockets: allow) the server may
// create them, and only Landlock stands between it and the sockets of
// others: connecting to an abstract socket is refused from ABI 6 (a scope:
// EPERM), by path from ABI 9 (EACCES); on an older kernel it connects,
// which is what UnixSocketsDeny, the default, is for. socketpair works.
func TestSandboxUnixSocketsAllowed(t *testing.T) {
	needLandlock(t)
	l := sandboxtest.NewLayout(t)
	probes := []sandboxtest.Probe{{Name: "path", Op: "unix-connect", Path: l.Socket},
		{Name: "abstract", Op: "unix-abstract", Path: l.AbstractSocket}, {Name: "socketpair", Op: "socketpair"}}
	want := map[string]string{"path": "ok", "abstract": "ok", "socketpair": "ok"}
	if ABI() >= 6 {
		want["abstract"] = "EPERM"
	}
	if ABI() >= 9 {
		want["path"] = "EACCES"
	}
	cmd, _ := confinedWith(t, ServerRules(Config{}, nil), UnixSocketsAllow, l.Home, probeBin, sandboxtest.Arg(t, probes))
	sandboxtest.Check(t, "allowed", probes, want, runProbe(t, cmd))
}

// A server that goes round the filter through another ABI's socket call
// (x32's, on amd64: the same call number with the x32 bit) is ended by the
// filter (SIGSYS) before the kernel runs the call; unconfined, the call
// returns (an error where the kernel has no x32, a socket where it has).
func TestSandboxUnixSocketFilterEndsAnotherABI(t *testing.T) {
	needLandlock(t)
	if goruntime.GOARCH != "amd64" {
		t.Skip("the x32 ABI is amd64's")
	}
	probes := []sandboxtest.Probe{{Name: "x32-socket", Op: "x32-socket"}}
	cmd, _ := confined(t, ServerRules(Config{}, nil), t.TempDir(), probeBin, sandboxtest.Arg(t, probes))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS || strings.Contains(string(out), "probe x32-socket:") {
		t.Errorf("confined, the x32 socket call: %v\n%s\nwant the probe ended by SIGSYS", err, out)
	}
	control := exec.Command(probeBin, sandboxtest.Arg(t, probes))
	if got := runProbe(t, control)["x32-socket"]; got == "" {
		t.Error("unconfined, the x32 socket call did not return")
	}
}

// Where close_range(2) cannot mark descriptors close-on-exec (a kernel
// before 5.11), markCloseOnExec marks each one /proc/self/fd lists: a
// descriptor opened here without close-on-exec is marked, stdin is not.
func TestMarkCloseOnExec(t *testing.T) {
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "f"), syscall.O_RDWR|syscall.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	flags := func(fd int) int {
		t.Helper()
		f, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if flags(fd)&unix.FD_CLOEXEC != 0 {
		t.Fatal("the descriptor is close-on-exec before the test")
	}
	stdin := flags(0)
	if err := markCloseOnExec(); err != nil {
		t.Fatal(err)
	}
	if flags(fd)&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d is not close-on-exec", fd)
	}
	if flags(0) != stdin {
		t.Errorf("stdin's flags changed")
	}
}
