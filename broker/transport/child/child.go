// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package child starts an MCP server as a child process and gives its stdio to
// the broker: the broker writes to the child's stdin and reads its stdout; each
// line the child writes to stderr goes to the broker's log. Stopping follows
// the MCP stdio shutdown order: close stdin, then SIGTERM, then SIGKILL.
package child

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxStderrLine bounds one logged stderr line; longer lines are split.
const maxStderrLine = 64 << 10

// Process is a running MCP server.
type Process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *os.File // our end of the child's stderr
	log    hclog.Logger

	exited   chan struct{} // closed when the process has exited
	waitErr  error
	stderrWG sync.WaitGroup
	stopOnce sync.Once
}

// Start starts name with args. The child's stderr is logged through log, one
// Info entry per line, as it arrives (the demo shows its server's lines this
// way). The child runs in its own process group (on Unix), so that
// the broker alone decides when it stops, and so that stopping reaches the
// processes it started too.
func Start(name string, args []string, log hclog.Logger) (*Process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start server %s: %w", name, err)
	}
	// The child has its own copies of these ends now.
	closeAll(inR, outW, errW)

	p := &Process{cmd: cmd, stdin: inW, stdout: outR, stderr: errR, log: log, exited: make(chan struct{})}
	p.stderrWG.Add(1)
	go p.logStderr(errR)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// Stdin is the child's standard input (the broker's writer).
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the child's standard output (the broker's reader).
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// StderrLogged waits up to d until everything the child wrote to stderr has
// been logged (its stderr has ended: the child, and any process it left
// holding it, exited), and reports whether it has.
func (p *Process) StderrLogged(d time.Duration) bool { return waitGroupFor(&p.stderrWG, d) }

func (p *Process) logStderr(r *os.File) {
	defer p.stderrWG.Done()
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			text := string(trimEOL(line))
			if text != "" {
				p.log.Info(text)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Stop ends the child: it closes its stdin and waits up to grace for it to
// exit; then sends SIGTERM (to its process group) and waits up to grace
// again; then kills it. Processes the child left running in its group are
// stopped the same way (SIGTERM, then SIGKILL) once it has exited. Stop
// returns once the child has exited and its stderr has been logged (or
// grace has passed for a process outside the group that still holds it).
// Calling Stop on an exited child only collects it.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		if !p.waitFor(grace) {
			p.log.Debug("server still running after stdin was closed; sending SIGTERM", "pid", p.PID())
			terminate(p.cmd)
			if !p.waitFor(grace) {
				p.log.Warn("server ignored SIGTERM; killing it", "pid", p.PID())
				kill(p.cmd)
				<-p.exited
			}
		}
		p.stopGroup(grace)
		if !waitGroupFor(&p.stderrWG, grace) {
			p.log.Warn("a process outside the server's group still holds its stderr; closing it")
			_ = p.stderr.Close()
			p.stderrWG.Wait()
		}
		_ = p.stderr.Close()
		_ = p.stdout.Close()
	})
}

// stopGroup stops what the child left running in its process group.
func (p *Process) stopGroup(grace time.Duration) {
	if !groupAlive(p.cmd) {
		return
	}
	p.log.Debug("the server left processes running; sending SIGTERM to its group", "pgid", p.PID())
	terminate(p.cmd)
	deadline := time.Now().Add(grace)
	for groupAlive(p.cmd) {
		if time.Now().After(deadline) {
			p.log.Warn("processes of the server ignored SIGTERM; killing them", "pgid", p.PID())
			kill(p.cmd)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitGroupFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func (p *Process) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// Wait waits for the child to exit or ctx to end, and returns the child's exit
// error as exec.Cmd.Wait reports it (nil for status 0).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return p.waitErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ExitCode returns the child's exit status, or -1 while it runs or when a
// signal ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// ExitDescription describes how the child ended ("exit status 3",
// "signal: killed"), or "running".
func (p *Process) ExitDescription() string {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.String()
	default:
		return "running"
	}
}
