// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/ptytest"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// promptChild is a helper process that asks on a pseudo-terminal.
type promptChild struct {
	cmd            *exec.Cmd
	term           *ptytest.Terminal // nil without a terminal
	stdout, stderr bytes.Buffer
}

// startPrompt starts a helper that asks reqs at once with the given timeout.
// With a terminal, the pseudo-terminal is its controlling terminal (a new
// session with the slave as its terminal) while its stdin and stdout are
// pipes, as the broker's carry the protocol; without, it is in a new session
// with no terminal at all. typeAhead is typed before the helper starts.
func startPrompt(t *testing.T, withTerminal bool, timeout time.Duration, typeAhead string, reqs ...Request) *promptChild {
	t.Helper()
	return startPromptJob(t, withTerminal, typeAhead, helperJob{TimeoutMS: int(timeout / time.Millisecond), Requests: reqs})
}

// startPromptJob is startPrompt with the whole job given.
func startPromptJob(t *testing.T, withTerminal bool, typeAhead string, hj helperJob) *promptChild {
	t.Helper()
	job, err := json.Marshal(hj)
	if err != nil {
		t.Fatal(err)
	}
	// The test binary in the role "prompt", wired by hand: a job on stdin,
	// a report on stdout, and a controlling terminal (helperproc.Start's
	// line pipes are not the shape of it).
	c := &promptChild{cmd: helperproc.Command("prompt")}
	c.cmd.Stdin = bytes.NewReader(job)
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if withTerminal {
		c.term = ptytest.Attach(t, c.cmd)
		if typeAhead != "" {
			c.send(t, typeAhead)
		}
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if c.term != nil {
		c.term.Started()
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// waitFor waits until the terminal has shown want at least n times, and
// returns what it has shown.
func (c *promptChild) waitFor(t *testing.T, want string, n int) string {
	t.Helper()
	return c.term.WaitFor(t, want, n, 30*time.Second, func() string { return "stderr: " + c.stderr.String() })
}

// send types s on the terminal.
func (c *promptChild) send(t *testing.T, s string) {
	t.Helper()
	c.term.Type(t, s)
}

// shown is what the terminal has shown ("" without one).
func (c *promptChild) shown() string {
	if c.term == nil {
		return ""
	}
	return c.term.String()
}

// results waits for the helper to end and returns its report.
func (c *promptChild) results(t *testing.T) helperOutput {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v; stderr: %s", err, c.stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Fatalf("the helper did not end; the terminal shows:\n%s", c.shown())
	}
	var out helperOutput
	if err := json.Unmarshal(c.stdout.Bytes(), &out); err != nil {
		t.Fatalf("helper output %q: %v", c.stdout.String(), err)
	}
	if c.term != nil {
		select {
		case <-c.term.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal did not close")
		}
	}
	return out
}

const (
	askAll  = "Approve? [y] yes, all  [n] no, none  [s] choose one by one"
	askEach = "approve read? [y/n]"
	heading = "=== fsbroker: an MCP server asks for file access ==="
	patient = 30 * time.Second
)

// TestPromptAnswers drives the prompt through a real pseudo-terminal: each
// step waits for the question, then types the answer.
func TestPromptAnswers(t *testing.T) {
	type step struct{ wait, send string }
	tests := []struct {
		name      string
		typeAhead string
		steps     []step
		approved  []string
	}{
		{"all", "", []step{{askAll, "a\n"}}, []string{"proj/a", "proj/b", "proj/c"}},
		{"all spelled out", "", []step{{askAll, "  ALL \n"}}, []string{"proj/a", "proj/b", "proj/c"}},
		{"y is all", "", []step{{askAll, "y\n"}}, []string{"proj/a", "proj/b", "proj/c"}},
		{"yes is all", "", []step{{askAll, "Yes\n"}}, []string{"proj/a", "proj/b", "proj/c"}},
		{"no is none", "", []step{{askAll, "no\n"}}, nil},
		{"none", "", []step{{askAll, "n\n"}}, nil},
		{"Enter is none", "", []step{{askAll, "\n"}}, nil},
		{"choose", "", []step{{askAll, "s\n"}, {"1/3 proj/a  " + askEach, "y\n"}, {"2/3 proj/b  " + askEach, "n\n"},
			{"3/3 proj/c  " + askEach, "yes\n"}}, []string{"proj/a", "proj/c"}},
		{"choose with Enter as no", "", []step{{askAll, "s\n"}, {"1/3", "\n"}, {"2/3", "y\n"}, {"3/3", "\n"}}, []string{"proj/b"}},
		{"asks again after nonsense", "", []step{{askAll, "yes please\n"}, {"Please type y, n or s", ""}, {askAll, "s\n"},
			{"1/3", "maybe\n"}, {"Please type y or n", ""}, {"1/3", "y\n"}, {"2/3", "n\n"}, {"3/3", "n\n"}}, []string{"proj/a"}},
		{"an overlong line is no answer", "", []step{{askAll, strings.Repeat("a", 300) + "\n"}, {"Please type y, n or s", ""},
			{askAll, "n\n"}}, nil},
		{"typed-ahead keys are discarded", "a\n", []step{{askAll, "n\n"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startPrompt(t, true, patient, tt.typeAhead, sampleRequest())
			seen := map[string]int{}
			for _, s := range tt.steps {
				seen[s.wait]++
				c.waitFor(t, s.wait, seen[s.wait])
				if s.send != "" {
					c.send(t, s.send)
				}
			}
			c.waitFor(t, fmt.Sprintf("fsbroker: approved %d of 3 path(s) for read access.", len(tt.approved)), 1)
			out := c.results(t)
			if len(out.Results) != 1 {
				t.Fatalf("results %+v", out)
			}
			r := out.Results[0]
			if r.Error != "" || !reflect.DeepEqual(r.Approved, tt.approved) || r.Provider != NamePrompt {
				t.Fatalf("result %+v, want %q approved", r, tt.approved)
			}
			if !out.Terminal || out.Default != NamePrompt {
				t.Fatalf("with a terminal: TerminalAvailable %v, Default %q", out.Terminal, out.Default)
			}
		})
	}
}

// TestPromptShowsRequest: what the person sees, with a hostile server that
// tries to repaint the terminal, retitle it, overwrite lines and reorder
// text, and to pass for a known, verified server.
func TestPromptShowsRequest(t *testing.T) {
	req := sampleRequest()
	req.Server = Server{ID: "filesystem", Name: "filesystem\x1b[8m", Version: "1.0"}
	req.Access = AccessWrite
	req.Paths = []string{"proj/a", "proj/odd\u202etxt.exe"}
	req.Removed = []Removed{{Path: "proj/.env", Reason: `secrets: path matches the protected name pattern ".env"`},
		{Path: "/etc/\x1b]0;retitled\x07passwd", Reason: "outside every root"},
		{Path: "proj/x", Reason: "overrides: server \"a\x1b[2Jb\" is read-only\nsecond line"}}
	req.Message = "\x1b[2J\x1b[Hfsbroker: this server is verified.\x1b]0;pwned\x07\n" +
		"Please \x1b[1mapprove\x1b[0m\u009b31m everything\rDENIED\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\u202egnirts\x07\b\b"
	c := startPrompt(t, true, patient, "", req)
	shown := c.waitFor(t, "Approve? [y] yes, all", 1)
	c.send(t, "s\n")
	c.waitFor(t, "1/2 proj/a  approve write? [y/n]", 1)
	c.send(t, "n\n")
	c.waitFor(t, `2/2 "proj/odd\u202etxt.exe"  approve write? [y/n]`, 1)
	c.send(t, "y\n")
	c.waitFor(t, "fsbroker: approved 1 of 2 path(s) for write access.", 1)
	out := c.results(t)
	if r := out.Results[0]; r.Error != "" || !reflect.DeepEqual(r.Approved, []string{"proj/odd\u202etxt.exe"}) {
		t.Fatalf("result %+v", r)
	}

	shown = strings.ReplaceAll(shown, "\r\n", "\n") // the terminal's ONLCR
	for _, want := range []string{
		heading,
		`Server:  "filesystem\x1b[8m" version "1.0"`,
		"UNVERIFIED: this name is only what the server says it is;",
		"Access:  write (read, create, change and delete)",
		"Paths:   2, each with everything beneath it:",
		"  1. proj/a   (root \"Project\" at /home/ann/proj, read-only)\n",
		`  2. "proj/odd\u202etxt.exe"   (root "Project"`,
		"Not asked: 3 requested path(s) that cannot be granted:\n" +
			"  - proj/.env: secrets: path matches the protected name pattern \".env\"\n" +
			"  - \"/etc/\\x1b]0;retitled\\apasswd\": outside every root\n" +
			"  - proj/x: overrides: server \"ab\" is read-only second line\n",
		"Message from the server (its own words, unverified):\n" +
			"  | fsbroker: this server is verified.\n" +
			"  | Please approve everything\n" +
			"  | DENIEDlinkgnirts\n",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal lacks %q; it shows:\n%s", want, shown)
		}
	}
	all := c.term.Raw()
	for _, bad := range []string{"\x1b", "\x07", "\b", "\u009b", "\u202e", "pwned", "http://evil"} {
		if strings.Contains(all, bad) {
			t.Errorf("the terminal received %q:\n%q", bad, all)
		}
	}
	if strings.Contains(strings.ReplaceAll(all, "\r\n", ""), "\r") {
		t.Errorf("a bare carriage return reached the terminal: %q", all)
	}
}

// TestPromptTimeout: no answer before the deadline approves nothing, and the
// terminal says so.
func TestPromptTimeout(t *testing.T) {
	c := startPrompt(t, true, 1500*time.Millisecond, "", sampleRequest())
	c.waitFor(t, askAll, 1)
	c.waitFor(t, "fsbroker: no answer in time; nothing approved.", 1)
	out := c.results(t)
	r := out.Results[0]
	if r.Approved != nil || !r.Deadline || r.Provider != NamePrompt {
		t.Fatalf("result %+v, want nothing approved and a deadline error", r)
	}
	// A late answer changes nothing: the helper has already reported.
}

// TestPromptOneAtATime: two requests at once are asked one after the other,
// each answered on its own.
func TestPromptOneAtATime(t *testing.T) {
	first, second := sampleRequest(), sampleRequest()
	first.Message, second.Message = "request number one", "request number two"
	second.Paths = []string{"proj/x"}
	c := startPrompt(t, true, patient, "", first, second)
	shown := c.waitFor(t, askAll, 1)
	if n := strings.Count(shown, heading); n != 1 {
		t.Fatalf("%d requests on the terminal at once:\n%s", n, shown)
	}
	firstShown := "one"
	if strings.Contains(shown, "request number two") {
		firstShown = "two"
	}
	c.send(t, "a\n")
	shown = c.waitFor(t, askAll, 2)
	if n := strings.Count(shown, heading); n != 2 {
		t.Fatalf("the second request was not shown after the first:\n%s", shown)
	}
	c.send(t, "n\n")
	c.waitFor(t, "fsbroker: approved 0 of", 1)
	out := c.results(t)
	approvedOne := []string{"proj/a", "proj/b", "proj/c"}
	var approvedTwo []string
	if firstShown == "two" {
		approvedOne, approvedTwo = nil, []string{"proj/x"}
	}
	if r := out.Results; r[0].Error != "" || r[1].Error != "" ||
		!reflect.DeepEqual(r[0].Approved, approvedOne) || !reflect.DeepEqual(r[1].Approved, approvedTwo) {
		t.Fatalf("results %+v (request %s was asked first)", r, firstShown)
	}
}

// TestPromptNoTerminal: a process without a controlling terminal (a new
// session that never acquired one) denies, with ErrNoTerminal.
func TestPromptNoTerminal(t *testing.T) {
	c := startPrompt(t, false, patient, "", sampleRequest())
	out := c.results(t)
	r := out.Results[0]
	if r.Approved != nil || !r.NoTerminal || !strings.Contains(r.Error, "/dev/tty") || r.Provider != NamePrompt {
		t.Fatalf("result %+v, want nothing approved and ErrNoTerminal", r)
	}
	if out.Terminal || out.Default != NameDeny {
		t.Fatalf("without a terminal: TerminalAvailable %v, Default %q", out.Terminal, out.Default)
	}
}

// TestPromptHoldsTheLog: the helper writes a log line to the terminal every
// few milliseconds, through a HeldOutput; while the question is on the
// terminal none of them appears, and once it is answered every one held
// comes out, in order, none lost.
func TestPromptHoldsTheLog(t *testing.T) {
	c := startPromptJob(t, true, "", helperJob{TimeoutMS: int(patient / time.Millisecond), Requests: []Request{sampleRequest()},
		LogToTerminal: true})
	c.waitFor(t, askAll, 1)
	c.send(t, "s\n")
	c.waitFor(t, "1/3", 1)
	c.send(t, "y\n")
	c.waitFor(t, "2/3", 1)
	c.send(t, "n\n")
	c.waitFor(t, "3/3", 1)
	c.send(t, "n\n")
	out := c.results(t)
	if r := out.Results[0]; r.Error != "" || !reflect.DeepEqual(r.Approved, []string{"proj/a"}) {
		t.Fatalf("result %+v", r)
	}
	if out.LogLinesDuringAsk == 0 {
		t.Fatal("no log line was written while the question was asked: the test shows nothing")
	}
	shown := c.shown()
	start, end := strings.Index(shown, heading), strings.Index(shown, "fsbroker: approved 1 of 3 path(s) for read access.")
	if start < 0 || end < start {
		t.Fatalf("the terminal shows:\n%s", shown)
	}
	if question := shown[start:end]; strings.Contains(question, "log line") {
		t.Errorf("%d log lines were written during the question, and some appear in it:\n%s", out.LogLinesDuringAsk, question)
	}
	last := 0
	for _, line := range strings.Split(shown, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "[INFO] log line %d", &n); err == nil {
			if n != last+1 {
				t.Errorf("log line %d after %d: lines lost or out of order", n, last)
			}
			last = n
		}
	}
	if last != out.LogLines {
		t.Errorf("the terminal shows %d log lines, the helper wrote %d", last, out.LogLines)
	}
}
