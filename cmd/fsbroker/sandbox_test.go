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
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/fsbroker/fsbroker/broker/runtime"
	"github.com/fsbroker/fsbroker/broker/sandbox"
	"github.com/fsbroker/fsbroker/broker/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
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
					!strings.Contains(details, "; server confined (Landlock ABI ") ||
					!strings.Contains(details, "; the server may not create UNIX sockets") {
					t.Errorf("session_start details %q: want both confined, UNIX sockets denied", details)
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

// noLandlockEnv makes the test binary a wrapper (see init): it hides
// Landlock from what it executes, as a kernel without Landlock would: a
// seccomp filter makes the three Landlock calls fail with ENOSYS.
const noLandlockEnv = "FSBROKER_TEST_NO_LANDLOCK"

func init() {
	if os.Getenv(noLandlockEnv) == "" {
		return
	}
	// The filter and the exec must be on one thread: a filter binds the
	// thread that installs it (and what that thread executes).
	goruntime.LockOSThread()
	err := hideLandlock()
	if err == nil && len(os.Args) > 1 {
		err = syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	}
	fmt.Fprintln(os.Stderr, "no-Landlock wrapper:", err)
	os.Exit(1)
}

// hideLandlock installs, on this thread, a seccomp filter under which
// landlock_create_ruleset, landlock_add_rule and landlock_restrict_self
// (444 to 446 on every architecture) fail with ENOSYS, and every other call
// runs.
func hideLandlock() error {
	const (
		ldAbs    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jge      = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jgt      = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
		ret      = unix.BPF_RET | unix.BPF_K
		first    = unix.SYS_LANDLOCK_CREATE_RULESET
		last     = unix.SYS_LANDLOCK_RESTRICT_SELF
		retAllow = unix.SECCOMP_RET_ALLOW
		retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	filter := []unix.SockFilter{
		{Code: ldAbs, K: 0},                 // the call's number
		{Code: jge, Jt: 0, Jf: 2, K: first}, // below the first: allow
		{Code: jgt, Jt: 1, Jf: 0, K: last},  // above the last: allow
		{Code: ret, K: retNoSys},            // a Landlock call
		{Code: ret, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// Without Landlock, --sandbox refuses to start (exit 2, naming Landlock),
// and --sandbox=best-effort runs unconfined and says so in its log and in the
// session_start record.
func TestSandboxWithoutLandlock(t *testing.T) {
	probeBin(t) // Landlock, or skip: the control below needs it
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	run := func(t *testing.T, audit, sandboxFlag string) *proc {
		args := []string{"stdio", "--root", root, "--state-dir", t.TempDir(), "--audit", audit, sandboxFlag}
		cmd := exec.Command(os.Args[0], append([]string{brokerBin}, withConsent(t, "", args)...)...)
		return startProcEnv(t, cmd, noLandlockEnv+"=1")
	}

	t.Run("on", func(t *testing.T) {
		p := run(t, filepath.Join(t.TempDir(), "audit"), "--sandbox")
		if code := p.waitExit(); code != exitUsage {
			t.Fatalf("exit status %d, want %d\n%s", code, exitUsage, p.log())
		}
		if !strings.Contains(p.log(), "Landlock is not available") || strings.Contains(p.log(), "policies loaded") {
			t.Errorf("the refusal does not name Landlock, or comes after the policies loaded:\n%s", p.log())
		}
	})
	t.Run("best-effort", func(t *testing.T) {
		audit := filepath.Join(t.TempDir(), "audit")
		p := run(t, audit, "--sandbox=best-effort")
		p.handshake("2025-11-25")
		csRead(t, p, 2, filepath.Base(root)+"/a.txt", "a")
		p.closeStdin()
		if code := p.waitExit(); code != 0 {
			t.Fatalf("exit status %d, want 0\n%s", code, p.log())
		}
		if !strings.Contains(p.log(), "Landlock is missing; the broker and the server run unconfined") {
			t.Errorf("the log does not say the broker runs unconfined:\n%s", p.log())
		}
		if details := sessionStartDetails(t, audit); len(details) != 1 || !strings.Contains(details[0], "broker not confined") {
			t.Errorf("session_start details %q: want the broker not confined", details)
		}
	})
}

// runProbeSession runs the session of fsbroker wrap p with the probe as its
// server: the host initializes, the probe runs and the session starts, then
// the host closes its input and fsbroker must exit 0.
func runProbeSession(t *testing.T, p *proc) {
	t.Helper()
	hostInitialize(p, false)
	p.waitLog(probeDone)
	p.waitLogCount("session initialized", 1)
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d, want 0\n%s", code, p.log())
	}
}

// A read-only root inside a writable root cannot be made read-only by
// Landlock (rules add up): --sandbox refuses the configuration at start
// (exit 2, naming both roots and why) and starts no server;
// --sandbox=best-effort starts, says so in its log and its session_start
// record, and the server can indeed write the read-only root, which is why
// --sandbox refuses.
func TestSandboxReadOnlyRootInWritableRoot(t *testing.T) {
	bin := probeBin(t)
	run := func(t *testing.T, mode string) (*proc, sandboxtest.Layout, string) {
		l := sandboxtest.NewLayout(t)
		inner := filepath.Join(l.RW, "a")
		probes := []sandboxtest.Probe{{Name: "write-inner", Op: "write", Path: filepath.Join(inner, "new")}}
		p := startWrap(t, []string{"HOME=" + l.Home}, "--root", l.RW+":rw", "--root", inner, "--state-dir", l.State,
			"--audit", l.Audit, mode, "--", bin, sandboxtest.Arg(t, probes))
		return p, l, inner
	}
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		p, l, inner := run(t, "--sandbox")
		if code := p.waitExit(); code != exitUsage {
			t.Fatalf("exit status %d, want %d\n%s", code, exitUsage, p.log())
		}
		if log := p.log(); !strings.Contains(log, "the read-only root "+inner+" lies in the writable "+l.RW) ||
			!strings.Contains(log, "Landlock rules add up") || strings.Contains(log, "probe ") {
			t.Errorf("the refusal does not name both roots and why, or the server ran:\n%s", log)
		}
	})
	t.Run("best-effort", func(t *testing.T) {
		t.Parallel()
		p, l, inner := run(t, "--sandbox=best-effort")
		runProbeSession(t, p)
		if got := sandboxtest.Outcomes(p.log())["write-inner"]; got != "ok" {
			t.Errorf("the server's write in the read-only root inside the writable one: %s, want ok (Landlock cannot refuse it)", got)
		}
		if !strings.Contains(p.log(), "a read-only root is writable to the server") {
			t.Errorf("the log does not warn:\n%s", p.log())
		}
		details := strings.Join(sessionStartDetails(t, l.Audit), "\n")
		if !strings.Contains(details, "; server confined (Landlock ABI ") ||
			!strings.Contains(details, "writable to the server: the read-only root "+inner) {
			t.Errorf("session_start details %q: want the server confined and the read-only root named", details)
		}
	})
}

// sandbox.unixSockets in the config file: allow lets the confined server
// create UNIX sockets (Landlock then refuses an abstract socket from ABI 6
// and one at a path from ABI 9; before, it connects), and session_start
// says so; a value other than deny or allow stops fsbroker at start.
func TestSandboxUnixSocketsConfig(t *testing.T) {
	bin := probeBin(t)
	t.Run("allow", func(t *testing.T) {
		t.Parallel()
		l := sandboxtest.NewLayout(t)
		cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
		writeFile(t, cfg, "sandbox:\n  unixSockets: allow\n")
		probes := []sandboxtest.Probe{{Name: "path", Op: "unix-connect", Path: l.Socket},
			{Name: "abstract", Op: "unix-abstract", Path: l.AbstractSocket}, {Name: "socketpair", Op: "socketpair"}}
		want := map[string]string{"path": "ok", "abstract": "ok", "socketpair": "ok"}
		if sandbox.ABI() >= 6 {
			want["abstract"] = "EPERM"
		}
		if sandbox.ABI() >= 9 {
			want["path"] = "EACCES"
		}
		p := startWrap(t, []string{"HOME=" + l.Home}, "--config", cfg, "--root", l.RO, "--state-dir", l.State, "--audit", l.Audit,
			"--sandbox", "--", bin, sandboxtest.Arg(t, probes))
		runProbeSession(t, p)
		sandboxtest.Check(t, "allowed", probes, want, sandboxtest.Outcomes(p.log()))
		if details := strings.Join(sessionStartDetails(t, l.Audit), "\n"); !strings.Contains(details, "; the server may create UNIX sockets") {
			t.Errorf("session_start details %q: want UNIX sockets allowed", details)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		l := sandboxtest.NewLayout(t)
		cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
		writeFile(t, cfg, "sandbox:\n  unixSockets: sometimes\n")
		p := startWrap(t, nil, "--config", cfg, "--root", l.RO, "--state-dir", l.State, "--sandbox", "--", bin, "[]")
		if code := p.waitExit(); code != exitUsage || !strings.Contains(p.log(), "unixSockets") {
			t.Errorf("exit status %d, want %d naming unixSockets\n%s", code, exitUsage, p.log())
		}
	})
}
