// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// waitDelay is how long a finished or killed command's stdout and stderr may
// stay open (held by a process it left behind) before they are closed.
const waitDelay = time.Second

// maxStderr is how much of a command's stderr is kept for the error message.
const maxStderr = 4 << 10

// Command asks an external program; see the package doc for its protocol.
type Command struct {
	path    string
	args    []string
	timeout time.Duration
	env     []string
	envSet  bool
}

// NewCommand returns the provider that runs prog with args. prog is looked up
// in PATH when it has no separator, and made absolute.
func NewCommand(prog string, args []string, opts ...Option) (*Command, error) {
	if prog == "" {
		return nil, errors.New("consent command: no program")
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return nil, fmt.Errorf("consent command: %w", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	o := newOptions(opts)
	return &Command{
		path:    path,
		args:    append([]string(nil), args...),
		timeout: o.timeout,
		env:     o.env,
		envSet:  o.envSet,
	}, nil
}

// Name is the provider's name in decisions: "command:" and the program.
func (c *Command) Name() string { return NameCommand + ":" + c.path }

// CommandError is a consent command that gave no usable answer; nothing was
// approved.
type CommandError struct {
	// Program is the command's absolute path.
	Program string
	// Reason says what went wrong, for the log.
	Reason string
	// Stderr is the start of what the command wrote to stderr, with control
	// characters removed.
	Stderr string
	// Err is the cause, if any (context.DeadlineExceeded for a timeout).
	Err error
}

// Error implements the error interface.
func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString("consent command " + e.Program + ": " + e.Reason)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	if e.Stderr != "" {
		b.WriteString("; stderr: " + e.Stderr)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CommandError) Unwrap() error { return e.Err }

// commandInput is the JSON document a command reads on stdin.
type commandInput struct {
	Version int `json:"version"`
	Request
}

// commandAnswer is the object form of a command's answer: the shape of the
// files/consent result.
type commandAnswer struct {
	ApprovedPaths *[]string `json:"approvedPaths"`
	Granted       *bool     `json:"granted"`
	// Approved is the answer member of fsbroker before protocol section 5
	// named the files/consent shape; it is only looked for to say so.
	Approved json.RawMessage `json:"approved"`
}

// Ask runs the command with req on stdin and returns the requested paths it
// approved on stdout. A timeout, a non-zero exit or an unreadable answer
// approve nothing and return a *CommandError.
func (c *Command) Ask(ctx context.Context, req Request) (Decision, error) {
	d := Decision{Provider: c.Name()}
	req, err := req.normalize()
	if err != nil {
		return d, err
	}
	if len(req.Paths) == 0 {
		return d, nil
	}
	if req.Roots == nil {
		req.Roots = []Root{}
	}
	if req.Removed == nil {
		req.Removed = []Removed{}
	}
	input, err := json.Marshal(commandInput{Version: 1, Request: req})
	if err != nil {
		return d, &CommandError{Program: c.path, Reason: "cannot encode the request", Err: err}
	}
	if err := ctx.Err(); err != nil {
		return d, &CommandError{Program: c.path, Reason: "not run", Err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, c.args...)
	cmd.Stdin = bytes.NewReader(append(input, '\n'))
	stdout := &capped{limit: MaxAnswerBytes, fail: true}
	stderr := &capped{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if c.envSet {
		cmd.Env = append([]string{}, c.env...)
	}
	cmd.WaitDelay = waitDelay
	ownProcessGroup(cmd)

	runErr := cmd.Run()
	fail := func(reason string, err error) (Decision, error) {
		return d, &CommandError{Program: c.path, Reason: reason, Stderr: oneLine(stderr.String(), 512), Err: err}
	}
	switch {
	case stdout.over:
		return fail(fmt.Sprintf("answer longer than %d bytes", MaxAnswerBytes), nil)
	case runErr != nil && ctx.Err() != nil:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail("no answer in time (process group killed)", ctx.Err())
		}
		return fail("canceled (process group killed)", ctx.Err())
	case runErr != nil && !errors.Is(runErr, exec.ErrWaitDelay):
		var exit *exec.ExitError
		if errors.As(runErr, &exit) {
			return fail("exited with "+exit.ProcessState.String(), nil)
		}
		return fail("cannot run", runErr)
	}

	approved, err := parseAnswer(stdout.Bytes())
	if err != nil {
		return fail("malformed answer", err)
	}
	d.Approved = keep(req.Paths, approved)
	return d, nil
}

// parseAnswer reads a command's answer: one JSON value, nothing after it but
// white space, either in the shape of the files/consent result
// ({"approvedPaths": [paths], "granted": bool}, granted optional, other
// members ignored) or a bare array of paths. "granted": false approves
// nothing, whatever approvedPaths holds.
func parseAnswer(out []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty output")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	switch raw[0] {
	case '[':
		var paths []string
		if err := json.Unmarshal(raw, &paths); err != nil {
			return nil, fmt.Errorf("a bare answer must be an array of path strings: %w", err)
		}
		return paths, nil
	case '{':
	default:
		return nil, errors.New(`the answer must be an object {"approvedPaths": [...]} or an array of paths`)
	}
	var a commandAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	switch {
	case a.ApprovedPaths == nil && a.Approved != nil:
		return nil, errors.New(`"approved" is no longer read: answer {"approvedPaths": [...]}, the files/consent result's shape`)
	case a.ApprovedPaths == nil:
		return nil, errors.New(`no "approvedPaths" array`)
	case a.Granted != nil && !*a.Granted:
		return nil, nil
	}
	return *a.ApprovedPaths, nil
}

// capped keeps the first limit bytes written to it. With fail, a write past
// the limit fails (which ends the copy from the command, whose next write
// then gets EPIPE); without, the rest is discarded.
type capped struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	fail  bool
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.buf.Len()
	if len(p) > room {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		if c.fail {
			return max(room, 0), errors.New("output over the limit")
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Bytes()
}

func (c *capped) String() string { return string(c.Bytes()) }

// splitWords splits the text after "command:" into the program and its
// arguments: words are separated by blanks; '...' quotes literally; "..."
// quotes with \" and \\ as its only escapes; outside quotes a backslash
// takes the next character literally. Nothing is expanded and no shell runs.
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words, in = append(words, cur.String()), false
				cur.Reset()
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, in = i+1+j, true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`unterminated " quote`)
			}
			in = true
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
