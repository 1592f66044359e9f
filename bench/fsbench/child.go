// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// child is one program under test, started with its stdin and stdout on
// pipes that fsbench drives.
type child struct {
	cmd     *exec.Cmd
	in      *os.File // the write end of its stdin
	outFile *os.File // the read end of its stdout
	out     *bufio.Reader
	stderr  *tailBuffer
	started time.Time // just before the process was started

	line []byte // readLine's buffer for lines longer than out's

	mu         sync.Mutex
	readerDone chan struct{} // closed when a reader goroutine (pipelined runs) ends
	killed     bool
}

// startChild starts argv in dir with env added to this process's
// environment.
func startChild(argv []string, dir string, env []string) (*child, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &child{
		cmd:     exec.Command(argv[0], argv[1:]...),
		in:      inW,
		outFile: outR,
		out:     bufio.NewReaderSize(outR, 4<<20),
		stderr:  &tailBuffer{max: 8 << 10},
	}
	c.cmd.Dir = dir
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, outW, c.stderr
	c.started = time.Now()
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return c, nil
}

// send writes one line (b ends with a newline) to the child's stdin.
func (c *child) send(b []byte) error {
	_, err := c.in.Write(b)
	return err
}

// readLine returns the next line of the child's stdout without its newline;
// it is valid until the next call.
func (c *child) readLine() ([]byte, error) {
	c.line = c.line[:0]
	for {
		frag, err := c.out.ReadSlice('\n')
		switch {
		case err == nil && len(c.line) == 0:
			return frag[:len(frag)-1], nil
		case err == nil:
			c.line = append(c.line, frag[:len(frag)-1]...)
			return c.line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			c.line = append(c.line, frag...)
		default:
			if c.wasKilled() {
				return nil, errors.New("killed: no answer in time")
			}
			return nil, fmt.Errorf("reading its stdout: %w%s", err, c.stderrNote())
		}
	}
}

// kill ends the child at once (a run past its time limit).
func (c *child) kill() {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.cmd.Process.Kill()
}

func (c *child) wasKilled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed
}

// stderrNote is the end of the child's stderr, to explain a failure.
func (c *child) stderrNote() string {
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	return "; its stderr ends: " + s
}

// peakRSS returns the child's peak resident set size in bytes (VmHWM in
// /proc/PID/status), or -1 where there is no such file (not Linux).
func (c *child) peakRSS() int64 {
	if runtime.GOOS != "linux" {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// clockTicks is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuTime returns the CPU time the child has used so far, user and system,
// all its threads (utime and stime in /proc/PID/stat), or -1 where there is
// no such file (not Linux).
func (c *child) cpuTime() time.Duration {
	if runtime.GOOS != "linux" {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: count from its ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// threadsCPUTime returns the CPU time the child's threads have used so far,
// in nanoseconds (the sum of their /proc/PID/task/TID/schedstat run times:
// finer than cpuTime's clock ticks, for one request's figure), or -1 where
// there are no such files. A thread that has ended is not counted.
func (c *child) threadsCPUTime() time.Duration {
	if runtime.GOOS != "linux" {
		return -1
	}
	dir := "/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return -1
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		sum += time.Duration(ns)
	}
	return sum
}

// close ends the session as a server would (closing the child's stdin) and
// waits up to limit for the child to exit, then kills it. It reports how the
// child ended when that was not a clean exit.
func (c *child) close(limit time.Duration) error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		c.cmd.Process.Kill()
		<-done
		err = fmt.Errorf("did not exit within %v of its stdin closing", limit)
	}
	c.mu.Lock()
	rd := c.readerDone
	c.mu.Unlock()
	c.outFile.Close()
	if rd != nil {
		<-rd
	}
	if err != nil && !c.wasKilled() {
		return fmt.Errorf("%v%s", err, c.stderrNote())
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, []byte("?")))
}
