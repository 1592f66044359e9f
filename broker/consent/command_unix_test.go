// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package consent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommandAnswers(t *testing.T) {
	t.Setenv("FSBROKER_CONSENT_TEST_PATH", "proj/b")
	tests := []struct {
		name     string
		body     string // the script; $D is its directory
		args     string // after the script in the spec
		opts     []Option
		approved []string
		wantErr  string // empty: no error
	}{
		{name: "approves some", body: `cat > "$D/stdin.json"; printf '{"approvedPaths": ["proj/c", "proj/a"], "granted": true}\n'`,
			approved: []string{"proj/a", "proj/c"}},
		{name: "granted may be left out", body: `echo '{"approvedPaths": ["proj/a"]}'`, approved: []string{"proj/a"}},
		{name: "a bare array of paths", body: `echo '["proj/c", "proj/a"]'`, approved: []string{"proj/a", "proj/c"}},
		{name: "a bare empty array", body: `echo '[]'`},
		{name: "drops paths not requested",
			body:     `cat >/dev/null; echo '{"approvedPaths":["proj/zzz","proj","proj/b/x","/home/ann/proj/b","PROJ/B","proj/b/","proj/b","proj/b"],"reason":"fine"}'`,
			approved: []string{"proj/b"}},
		{name: "approves none", body: `echo '{"approvedPaths": [], "granted": false}'`},
		{name: "granted false approves nothing", body: `echo '{"approvedPaths": ["proj/a"], "granted": false}'`},
		{name: "need not read stdin", body: `echo '{"approvedPaths":["proj/a"]}'`, approved: []string{"proj/a"}},
		{name: "arguments", body: `printf '{"approvedPaths":["%s","%s"]}' "$1" "$2"`, args: ` proj/a 'proj/c'`,
			approved: []string{"proj/a", "proj/c"}},
		{name: "inherits the environment", body: `echo "{\"approvedPaths\":[\"$FSBROKER_CONSENT_TEST_PATH\"]}"`,
			approved: []string{"proj/b"}},
		{name: "WithEnv replaces it", body: `echo "{\"approvedPaths\":[\"$FSBROKER_CONSENT_TEST_PATH\"]}"`,
			opts: []Option{WithEnv([]string{"FSBROKER_CONSENT_TEST_PATH=proj/c"})}, approved: []string{"proj/c"}},
		{name: "non-zero exit", body: `echo '{"approvedPaths":["proj/a"]}'; printf 'no dialog: \033[31mDISPLAY unset\n' >&2; exit 3`,
			wantErr: "exited with exit status 3; stderr: no dialog: DISPLAY unset"},
		{name: "killed by a signal", body: `echo '["proj/a"]'; kill -9 $$`, wantErr: "exited with signal: killed"},
		{name: "garbage", body: `echo 'sure, go ahead'`, wantErr: "malformed answer: invalid character"},
		{name: "empty output", body: `true`, wantErr: "malformed answer: empty output"},
		{name: "two values", body: `echo '{"approvedPaths":[]} {"approvedPaths":["proj/a"]}'`, wantErr: "more than one JSON value"},
		{name: "approvedPaths missing", body: `echo '{"approve":["proj/a"]}'`, wantErr: `no "approvedPaths" array`},
		{name: "approvedPaths null", body: `echo '{"approvedPaths":null}'`, wantErr: `no "approvedPaths" array`},
		{name: "the old approved member", body: `echo '{"approved":["proj/a"]}'`,
			wantErr: `"approved" is no longer read: answer {"approvedPaths": [...]}`},
		{name: "approvedPaths a string", body: `echo '{"approvedPaths":"proj/a"}'`, wantErr: "malformed answer"},
		{name: "approvedPaths numbers", body: `echo '{"approvedPaths":["proj/a",1]}'`, wantErr: "malformed answer"},
		{name: "a bare array of numbers", body: `echo '["proj/a",1]'`, wantErr: "a bare answer must be an array of path strings"},
		{name: "granted a string", body: `echo '{"approvedPaths":["proj/a"],"granted":"yes"}'`, wantErr: "malformed answer"},
		{name: "a bare string", body: `echo '"proj/a"'`, wantErr: `must be an object {"approvedPaths": [...]} or an array of paths`},
		{name: "null", body: `echo 'null'`, wantErr: `must be an object`},
		{name: "answer too long", body: `printf '{"approvedPaths":["proj/a"]}'; yes | head -c 2000000`, wantErr: "answer longer than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			prog := script(t, dir, "ask", "D='"+dir+"'\n"+tt.body)
			p, err := Parse("command:"+prog+tt.args, append(tt.opts, WithTimeout(20*time.Second))...)
			if err != nil {
				t.Fatal(err)
			}
			d, err := p.Ask(context.Background(), sampleRequest())
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" {
				var ce *CommandError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.wantErr) || ce.Program != prog {
					t.Fatalf("err = %v, want a *CommandError containing %q", err, tt.wantErr)
				}
			}
			if !reflect.DeepEqual(d.Approved, tt.approved) || d.Provider != "command:"+prog {
				t.Fatalf("decision %+v, want %q from command:%s", d, tt.approved, prog)
			}
		})
	}
}

// TestCommandInput holds the JSON a command reads to the layout the package
// doc documents, byte for byte.
func TestCommandInput(t *testing.T) {
	dir := t.TempDir()
	prog := script(t, dir, "ask", `cat > '`+dir+`/stdin.json'; echo '{"approvedPaths":[]}'`)
	p, err := NewCommand(prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  Request
		want string
	}{
		{sampleRequest(), `{"version":1,"server":{"id":"notes","name":"notes","version":"1.2.0","pinned":false},` +
			`"message":"I need your notes.","paths":["proj/a","proj/b","proj/c"],"access":"read",` +
			`"roots":[{"mount":"proj","name":"Project","path":"/home/ann/proj","writable":false}],"removed":[]}` + "\n"},
		{Request{Server: Server{ID: "acme", Name: "n\x1b[2J", Pinned: true}, Message: "<b>hi</b>\n\x07",
			Paths: []string{"w/x", "w/x"}, Removed: []Removed{{Path: "w/.env", Reason: "secrets: a secret"}}},
			`{"version":1,"server":{"id":"acme","name":"n\u001b[2J","version":"","pinned":true},` +
				`"message":"\u003cb\u003ehi\u003c/b\u003e\n\u0007","paths":["w/x"],"access":"read","roots":[],` +
				`"removed":[{"path":"w/.env","reason":"secrets: a secret"}]}` + "\n"},
	}
	for _, tt := range tests {
		if _, err := p.Ask(context.Background(), tt.req); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "stdin.json"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("stdin\n got %s\nwant %s", got, tt.want)
		}
	}

	// No paths: the command is not run.
	if err := os.Remove(filepath.Join(dir, "stdin.json")); err != nil {
		t.Fatal(err)
	}
	if d, err := p.Ask(context.Background(), Request{}); err != nil || d.Approved != nil {
		t.Fatalf("no paths: %+v %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stdin.json")); !os.IsNotExist(err) {
		t.Fatalf("the command ran for an empty request: %v", err)
	}
}

// TestCommandTimeout: a command that does not answer in time approves
// nothing, and its whole process group (a background grandchild included)
// is killed.
func TestCommandTimeout(t *testing.T) {
	for _, mode := range []string{"deadline", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			prog := script(t, dir, "slow", fmt.Sprintf(`sleep 300 &
echo $! > '%[1]s/grandchild.pid'
echo $$ > '%[1]s/child.pid'
echo '{"approvedPaths":["proj/a"]}'
sleep 300
echo '{"approvedPaths":["proj/a"]}'`, dir))
			timeout := 60 * time.Second
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if mode == "deadline" {
				timeout = 1500 * time.Millisecond
			} else {
				go func() {
					waitFile(t, filepath.Join(dir, "child.pid"))
					cancel()
				}()
			}
			p, err := NewCommand(prog, nil, WithTimeout(timeout))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, err := p.Ask(ctx, sampleRequest())
			elapsed := time.Since(start)
			if d.Approved != nil {
				t.Fatalf("approved %q", d.Approved)
			}
			want := context.DeadlineExceeded
			if mode == "cancel" {
				want = context.Canceled
			}
			var ce *CommandError
			if !errors.Is(err, want) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "process group killed") {
				t.Fatalf("err = %v, want a *CommandError wrapping %v", err, want)
			}
			if elapsed > 20*time.Second {
				t.Fatalf("Ask took %s", elapsed)
			}
			for _, name := range []string{"child.pid", "grandchild.pid"} {
				pid := readPID(t, filepath.Join(dir, name))
				waitGone(t, name, pid)
			}
		})
	}
}

func waitFile(t *testing.T, path string) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return
		}
	}
	t.Errorf("%s never appeared", path)
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("%s: %q", path, b)
	}
	return pid
}

// waitGone waits for pid to be gone: no such process, or a zombie waiting
// for its new parent to reap it.
func waitGone(t *testing.T, name string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
				return
			}
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("%s %d still runs after the timeout", name, pid)
}

// TestCommandLeavesSomethingBehind: a command that answers and exits while a
// process it started still holds its stdout is answered a second later; the
// answer stands.
func TestCommandLeavesSomethingBehind(t *testing.T) {
	dir := t.TempDir()
	prog := script(t, dir, "ask", fmt.Sprintf(`sleep 60 &
echo $! > '%s/bg.pid'
echo '{"approvedPaths":["proj/b"]}'`, dir))
	p, err := NewCommand(prog, nil, WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := p.Ask(context.Background(), sampleRequest())
	if pid := readPID(t, filepath.Join(dir, "bg.pid")); pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil || !reflect.DeepEqual(d.Approved, []string{"proj/b"}) {
		t.Fatalf("decision %+v, error %v", d, err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("Ask took %s", elapsed)
	}
}
