// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package sandboxtest holds what the sandbox tests share: the fake server
// that opens files itself (broker/sandbox/testdata/probe, built as a static
// Go binary), and a layout of directories like an operator's with the
// probes that attack it and what a confined server must get.
package sandboxtest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BuildProbe builds the fake server, static (CGO_ENABLED=0), as dir/probe
// with the go command goTool.
func BuildProbe(goTool, dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("sandboxtest: cannot locate the probe's source")
	}
	src := filepath.Join(filepath.Dir(file), "..", "testdata", "probe")
	out := filepath.Join(dir, "probe")
	cmd := exec.Command(goTool, "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the probe: %v\n%s", err, b)
	}
	return out, nil
}

// Probe is one of the fake server's file operations (see testdata/probe).
type Probe struct {
	Name string `json:"name"`
	Op   string `json:"op"`
	Path string `json:"path"`
	To   string `json:"to,omitempty"`
}

// Layout is a set of directories like an operator's: a read-only root
// (holding a link to a secret outside), a writable root with two
// directories, and what lies outside the roots: a secret, a home, a state
// and an audit directory, a file name in the system's /tmp, and three UNIX
// sockets (the test's, as the session bus, an SSH agent or the system log
// would be): two listening, one at a path outside the roots and one in the
// abstract namespace, and a datagram socket at a path outside the roots.
type Layout struct {
	RO, RW, Outside, Home, State, Audit string
	Secret, Link, TmpFile               string
	Socket, AbstractSocket              string // a path; a name in the abstract namespace (without its leading NUL)
	// DgramSocket is the path of a datagram socket outside the roots, as
	// /dev/log or journald's socket; Received reads what it got.
	DgramSocket string
	dgram       *net.UnixConn
}

// NewLayout makes a layout in t's temporary directories.
func NewLayout(t testing.TB) Layout {
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
	// A short directory of its own: a socket's path has at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "fsb-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	l.Socket = filepath.Join(sockDir, "agent.sock")
	l.AbstractSocket = fmt.Sprintf("fsbroker-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, addr := range []string{l.Socket, "@" + l.AbstractSocket} {
		ln, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	l.DgramSocket = filepath.Join(sockDir, "log.sock")
	if l.dgram, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: l.DgramSocket, Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.dgram.Close() })
	return l
}

// Received returns the datagrams the socket at DgramSocket has got so far
// (waiting for none).
func (l Layout) Received(t testing.TB) []string {
	t.Helper()
	var got []string
	buf := make([]byte, 1<<16)
	for {
		if err := l.dgram.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := l.dgram.Read(buf)
		if err != nil {
			return got
		}
		got = append(got, string(buf[:n]))
	}
}

// Probes are the attacks and the controls, with what a confined server
// under the default rules (UNIX sockets denied) gets: "ok" or "EACCES"
// (unconfined, every one is "ok").
func (l Layout) Probes() ([]Probe, map[string]string) {
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
		{Probe{"connect-unix-path", "unix-connect", l.Socket, ""}, "EACCES"},
		{Probe{"connect-unix-abstract", "unix-abstract", l.AbstractSocket, ""}, "EACCES"},
		{Probe{"socketpair", "socketpair", "", ""}, "ok"},
		// A datagram pair's end sends to any datagram socket at a path, which
		// Landlock checks only from ABI 9; SOCK_RAW is SOCK_DGRAM to AF_UNIX.
		{Probe{"pair-dgram-sendto", "pair-send", l.DgramSocket, "dgram"}, "EACCES"},
		{Probe{"pair-dgram-flags-sendto", "pair-send", l.DgramSocket, "dgram-flags"}, "EACCES"},
		{Probe{"pair-raw-sendto", "pair-send", l.DgramSocket, "raw"}, "EACCES"},
	}
	probes := make([]Probe, len(list))
	want := map[string]string{}
	for i, e := range list {
		probes[i] = e.p
		want[e.p.Name] = e.want
	}
	return probes, want
}

// Arg is the probe's argument for probes.
func Arg(t testing.TB, probes []Probe) string {
	t.Helper()
	b, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// probeLine is one outcome the probe prints, wherever it appears in a
// line (fsbroker's log puts its prefix first).
var probeLine = regexp.MustCompile(`(?m)probe ([a-z0-9-]+): (.*)$`)

// Outcomes reads the probe's outcomes from its output, by probe name.
func Outcomes(out string) map[string]string {
	got := map[string]string{}
	for _, m := range probeLine.FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2]
	}
	return got
}

// Check reports every probe whose outcome is not want's (confined) or not
// "ok" (unconfined, want nil).
func Check(t testing.TB, what string, probes []Probe, want, got map[string]string) {
	t.Helper()
	for _, p := range probes {
		w := "ok"
		if want != nil {
			w = want[p.Name]
		}
		if got[p.Name] != w {
			t.Errorf("%s: probe %s (%s %s) = %q, want %s", what, p.Name, p.Op, p.Path, got[p.Name], w)
		}
	}
}
