// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// The tests of --sandbox run the real binary with the real kernel's
// Landlock: a fake server that opens files itself (the static Go probe of
// broker/sandbox/testdata), the reference filesystem server from npm, and
// a consent program the broker runs; each attack has its control, the same
// run without --sandbox.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/broker/sandbox"
	"github.com/fsbroker/fsbroker/broker/sandbox/sandboxtest"
)

var probe struct {
	once sync.Once
	bin  string
	err  error
}

// probeBin builds the fake server once per test process; the test skips
// where the kernel has no Landlock.
func probeBin(t *testing.T) string {
	t.Helper()
	if sandbox.ABI() < 1 {
		t.Skip("the kernel has no Landlock")
	}
	probe.once.Do(func() {
		dir, err := os.MkdirTemp("", "fsbroker-probe-")
		if err != nil {
			probe.err = err
			return
		}
		probe.bin, probe.err = sandboxtest.BuildProbe(goTool(), dir)
	})
	if probe.err != nil {
		t.Fatal(probe.err)
	}
	return probe.bin
}

// sessionStartDetails are the details of the session_start records in the
// audit directory dir.
func sessionStartDetails(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec struct{ Kind, Detail string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == "session_start" {
				details = append(details, rec.Detail)
			}
		}
		fh.Close()
	}
	return details
}

var probeDone = regexp.MustCompile(`probe done`)

// The probe under wrap --sandbox and connect --sandbox: the kernel refuses
// it (EACCES) outside its roots, writes in the read-only root, its home,
// the state and audit directories, a link out of a root and /tmp; it runs,
// writes its TMPDIR and its writable root, and renames across the writable
// root's directories. session_start says both processes are confined.
// Without --sandbox (the control) every probe succeeds, and wrap says once,
// in the log and in session_start, that the server's own I/O is not confined.
func TestSandboxConfinesTheServer(t *testing.T) {
	bin := probeBin(t)
	for _, tc := range []struct {
		name    string
		cmd     string
		sandbox bool
	}{
		{"wrap", "wrap", true},
		{"wrap-unconfined", "wrap", false},
		{"connect", "connect", true},
		{"connect-unconfined", "connect", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := sandboxtest.NewLayout(t)
			probes, want := l.Probes()
			args := []string{"--root", l.RO, "--root", l.RW + ":rw", "--state-dir", l.State, "--audit", l.Audit}
			if tc.sandbox {
				args = append(args, "--sandbox")
			}
			args = append(args, "--", bin, sandboxtest.Arg(t, probes))
			var p *proc
			if tc.cmd == "wrap" {
				p = startWrap(t, []string{"HOME=" + l.Home}, args...)
				hostInitialize(p, false)
			} else {
				p = startProcEnv(t, exec.Command(brokerBin, withConsent(t, "", append([]string{"connect"}, args...))...), "HOME="+l.Home)
			}
			p.waitLog(probeDone)
			p.waitLogCount("session initialized", 1)
			if tc.cmd == "wrap" {
				p.closeStdin()
			} else {
				p.signal(syscall.SIGTERM)
			}
			if code := p.waitExit(); code != 0 {
				t.Errorf("exit status %d, want 0\n%s", code, p.log())
			}
			got := sandboxtest.Outcomes(p.log())
			details := strings.Join(sessionStartDetails(t, l.Audit), "\n")
			if tc.sandbox {
				sandboxtest.Check(t, "confined", probes, want, got)
				if !strings.Contains(details, "sandbox on: broker confined (Landlock ABI ") ||
					!strings.Contains(details, "; server confined (Landlock ABI ") {
					t.Errorf("session_start details %q: want both confined", details)
				}
			} else {
				sandboxtest.Check(t, "unconfined", probes, nil, got)
			}
			if tc.cmd == "wrap" && !tc.sandbox {
				if n := p.countLog("the server's own file I/O is not confined"); n != 1 {
					t.Errorf("the log says %d times that the server is not confined, want once\n%s", n, p.log())
				}
				if !strings.Contains(details, "sandbox off: the server's own file I/O is not confined") {
					t.Errorf("session_start details %q: want the server not confined", details)
				}
			}
			if entries, _ := os.ReadDir(filepath.Join(l.State, runtime.SandboxDirName)); len(entries) != 0 {
				t.Errorf("the server's temporary directory was left behind: %v", entries)
			}
		})
	}
}

// The broker confines itself: what it runs (its consent program, which
// inherits its confinement) cannot read a file outside the broker's own
// paths, while the broker still serves its root. The program approves the
// path asked for only when it cannot read the secret; unconfined (the
// control) it can, and approves nothing.
//
// It runs the test binary's broker (built with cgo when the tests run with
// -race: go-landlock's psx then wraps every pthread_create) and the broker
// as make build and the releases build it, without cgo (psx then uses the Go
// runtime's AllThreadsSyscall): both must confine every thread.
func TestSandboxBrokerConfinesItself(t *testing.T) {
	probeBin(t) // Landlock, or skip
	static := staticBrokerBin(t)
	for _, run := range []struct {
		name, bin string
		confined  bool
	}{
		{"confined", brokerBin, true}, {"unconfined", brokerBin, false},
		{"static-confined", static, true}, {"static-unconfined", static, false},
	} {
		confined := run.confined
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			l := sandboxtest.NewLayout(t)
			script := csScript(t, t.TempDir(), "ask.sh", `read -r req
if cat '`+l.Secret+`' >/dev/null 2>&1; then echo '{"approvedPaths": []}'
else echo '{"approvedPaths": ["ro/readme"]}'; fi
`)
			args := []string{"stdio", "--consent", "command:" + script, "--root", l.RO, "--state-dir", l.State, "--audit", l.Audit}
			if confined {
				args = append(args, "--sandbox")
			}
			p := startProc(t, exec.Command(run.bin, withConsent(t, "", args)...))
			p.handshake("2025-11-25")
			granted, _ := csConsent(t, p, 1, "read", "ro/readme")
			if granted != confined {
				t.Fatalf("the consent program could read %s: %v, want %v\n%s", l.Secret, !granted, !confined, p.log())
			}
			if confined {
				csRead(t, p, 2, "ro/readme", "read me")
			}
			p.closeStdin()
			if code := p.waitExit(); code != 0 {
				t.Errorf("exit status %d, want 0\n%s", code, p.log())
			}
		})
	}
}

// The reference filesystem server, started with / as its directory under
// wrap --sandbox --root DIR, and told no root (the host's roots cover none
// of fsbroker's, so it keeps /): it reads in DIR, and the kernel refuses
// it a secret outside. Unconfined (the control), it reads the secret.
func TestSandboxWrapReferenceServer(t *testing.T) {
	probeBin(t) // Landlock, or skip
	node, deps := hostsDocDeps.Installed(t)
	server := filepath.Join(deps, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	for _, confined := range []bool{true, false} {
		t.Run(map[bool]string{true: "confined", false: "unconfined"}[confined], func(t *testing.T) {
			t.Parallel()
			l := sandboxtest.NewLayout(t)
			cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
			// The npm install lies in the cache directory, outside the
			// default system paths: the sandbox section adds it.
			writeFile(t, cfg, "sandbox:\n  read: ["+deps+"]\n")
			args := []string{"--config", cfg, "--root", l.RO, "--state-dir", l.State}
			if confined {
				args = append(args, "--sandbox")
			}
			p := startWrap(t, []string{"HOME=" + l.Home}, append(args, "--", node, server, "/")...)
			hostInitialize(p, true)
			p.Send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
			rl := p.Await("roots/list from fsbroker", isRootsRequest)
			p.Send(map[string]any{"jsonrpc": "2.0", "id": rl.ID, "result": rootsOf(t.TempDir())})
			read := func(id int, path string) string {
				r := p.Call(id, "tools/call", map[string]any{"name": "read_text_file", "arguments": map[string]any{"path": path}})
				return r.Raw
			}
			if got := read(10, filepath.Join(l.RO, "readme")); !strings.Contains(got, "read me") {
				t.Errorf("read in the root: %s", got)
			}
			got := read(11, l.Secret)
			switch {
			case confined && (strings.Contains(got, `"secret"`) || !strings.Contains(got, "EACCES")):
				t.Errorf("the confined server read outside its root: %s", got)
			case !confined && !strings.Contains(got, `"text":"secret"`):
				t.Errorf("control: the unconfined server did not read the secret: %s", got)
			}
			p.closeStdin()
			p.waitExit()
		})
	}
}

// staticBroker is fsbroker built as make build and the releases build it:
// without cgo (and without the race detector, which needs cgo), once per
// test process.
var staticBroker struct {
	once sync.Once
	path string
	err  error
}

// staticBrokerBin returns the path of staticBroker, building it first.
func staticBrokerBin(t *testing.T) string {
	t.Helper()
	staticBroker.once.Do(func() {
		staticBroker.path = filepath.Join(filepath.Dir(brokerBin), "fsbroker-static")
		cmd := exec.Command(goTool(), "build", "-buildvcs=auto", "-o", staticBroker.path, "github.com/fsbroker/fsbroker/cmd/fsbroker")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			staticBroker.err = fmt.Errorf("go build without cgo: %v\n%s", err, out)
		}
	})
	if staticBroker.err != nil {
		t.Fatal(staticBroker.err)
	}
	return staticBroker.path
}
