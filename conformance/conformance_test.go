// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package conformance

// TestConformance runs the whole embedded suite against a freshly built fsbroker (built with
// the race detector when the tests run with it), one subtest per case. Set
// FSBROKER_CONFORMANCE_BROKER to a command line to run it against another broker instead,
// FSBROKER_CONFORMANCE_TOOLS to that broker's tools ("grants-revoke=CMD ARGS"; see
// [ParseTools]; "grants-revoke=" when it has none), and FSBROKER_CONFORMANCE_TAGS to a
// comma-separated tag list (known-failure included) to select.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var brokerCmd []string // the broker command template under test

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if cmd := os.Getenv("FSBROKER_CONFORMANCE_BROKER"); cmd != "" {
		brokerCmd = strings.Fields(cmd)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "fsbroker-conformance-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "fsbroker")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/fsbroker/fsbroker/cmd/fsbroker")
	if out, err := exec.Command(goTool(), args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	brokerCmd = []string{bin, "stdio"}
	return m.Run()
}

// goTool returns the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func TestConformance(t *testing.T) {
	cases, err := Suite()
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	if s := os.Getenv("FSBROKER_CONFORMANCE_TAGS"); s != "" {
		tags = strings.Split(s, ",")
	}
	if cases, err = Select(cases, "", tags); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Broker: brokerCmd}
	if spec := os.Getenv("FSBROKER_CONFORMANCE_TOOLS"); spec != "" {
		if r.Tools, err = ParseTools(spec); err != nil {
			t.Fatal("FSBROKER_CONFORMANCE_TOOLS:", err)
		}
	}
	if raceEnabled {
		r.Env = append(r.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	// Cases start in t.Run, before t.Parallel returns control, on a semaphore of their own:
	// they mostly wait on the broker, so more of them run at once than -parallel allows
	// tests to; each subtest then reports its case's result.
	sem := make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			done := make(chan *Result, 1)
			go func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				done <- r.RunCase(context.Background(), c)
			}()
			t.Parallel()
			reportResult(t, <-done)
		})
	}
}

// TestCommand drives "fsbroker conformance" itself: its last lines, its exit statuses, known
// failures run only on request, and --serve (against fsbroker serve and against another server
// command given after "--", with its per-tag lines).
func TestCommand(t *testing.T) {
	if os.Getenv("FSBROKER_CONFORMANCE_BROKER") != "" {
		t.Skip("testing another broker")
	}
	t.Parallel()
	bin := brokerCmd[0]
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		lines []string // the output's last lines
	}{
		{"passing cases", []string{"--run", "server-ping-answered-with-empty-object,string-id-is-echoed"}, 0, []string{"2 passed, 0 failed"}},
		{"another broker command", []string{"--run", "string-id-is-echoed", "--broker", bin + " stdio"}, 0, []string{"1 passed, 0 failed"}},
		{"a broker that is not one", []string{"--run", "string-id-is-echoed", "--broker", "/bin/cat", "--grace", "1s"}, 1, []string{"0 passed, 1 failed"}},
		{"no case selected", []string{"--run", "no-such-case"}, 2, nil},
		{"bad flag", []string{"--bogus"}, 2, nil},
		{"fsbroker serve", []string{"--serve", "--run", "serve-read-*,serve-secret-read-refused"}, 0,
			[]string{"s8-drop-in: 4 of 4 passed", "s8-enforce: 1 of 1 passed", "5 passed, 0 failed"}},
		{"another server", []string{"--serve", "--run", "serve-read-file-is-the-alias,serve-refusal-text-starts-with-the-code",
			"--", bin, "serve", "--consent", "auto", "--state-dir", "{statedir}", "{roots}"}, 0,
			[]string{"s8-drop-in: 1 of 1 passed", "s8-enforce: 1 of 1 passed", "2 passed, 0 failed"}},
		{"a server that is not one", []string{"--serve", "--run", "serve-read-file-is-the-alias", "--grace", "1s", "--", "/bin/cat"}, 1,
			[]string{"s8-drop-in: 0 of 1 passed", "s8-enforce: 0 of 0 passed", "0 passed, 1 failed"}},
		{"the serve section listed", []string{"--serve", "--list", "--run", "serve-get-file-info"}, 0,
			[]string{"1 cases"}},
		{"broker cases are not serve cases", []string{"--serve", "--run", "string-id-is-echoed"}, 2, nil},
		{"--broker with --serve", []string{"--serve", "--broker", bin + " stdio"}, 2, nil},
		{"a command without --serve", []string{"--", bin, "serve"}, 2, nil},
		{"an argument before --", []string{"--serve", "serve"}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, lines := runCommand(t, bin, tc.args, tc.code)
			if len(tc.lines) > 0 && (len(lines) < len(tc.lines) || !slices.Equal(lines[len(lines)-len(tc.lines):], tc.lines)) {
				t.Errorf("output ends %q, want %q; output:\n%s", lines[max(0, len(lines)-len(tc.lines)):], tc.lines, out)
			}
		})
	}
}
