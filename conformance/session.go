// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/internal/rpcpeer"
)

// message is one message the broker wrote to its stdout, as the runner's checks read it.
type message struct {
	raw    []byte
	value  map[string]any // decoded, numbers as json.Number
	method string
	id     any  // decoded id (nil for null)
	hasID  bool // an id member is present, null included
}

func (m *message) isRequest() bool      { return m.method != "" && m.hasID && m.id != nil }
func (m *message) isNotification() bool { return m.method != "" && !m.hasID }
func (m *message) isResponse() bool     { return m.method == "" && m.hasID }

// lockedBuffer collects the broker's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// maxStdoutLine bounds one line of the broker's stdout: far above any message a broker
// writes (fsbroker's limit is 32 MiB), so that the bound catches only a runaway line.
const maxStdoutLine = 1 << 30

// session is a running broker: the runner writes to its stdin and reads its stdout through
// an rpcpeer.Peer, which holds every stdout line to JSON-RPC 2.0 and answers the broker's
// pings as they come (still offering them to an expectRequest step).
type session struct {
	cmd    *exec.Cmd
	peer   *rpcpeer.Peer
	stdin  *os.File
	stderr lockedBuffer

	wmu    sync.Mutex // one write at a time on stdin
	closed bool       // stdin closed (under wmu)

	vmu   sync.Mutex
	views map[*rpcpeer.Message]*message // each message as the checks read it, decoded once

	readDone chan struct{} // stdout and stderr reached EOF
	exited   chan struct{} // closed once the process exited
	exitCode int           // under vmu once exited is closed
}

// startSession starts argv with env, wired to pipes.
func startSession(argv, env []string, dir string) (*session, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	setGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
			_ = f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	s := &session{cmd: cmd, stdin: inW, views: map[*rpcpeer.Message]*message{},
		readDone: make(chan struct{}), exited: make(chan struct{})}
	s.peer = rpcpeer.New("the broker", jsonrpc.NewLineStream(outR, stdinWriter{s}, maxStdoutLine),
		rpcpeer.RequireValid(), rpcpeer.OfferAnswered(),
		rpcpeer.WithHandler("ping", func(*rpcpeer.Message) (any, *jsonrpc.Error) { return map[string]any{}, nil }))
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		defer errR.Close()
		_, _ = io.Copy(&s.stderr, errR)
	}()
	go func() {
		<-s.peer.Done()
		_ = outR.Close()
		<-stderrDone
		close(s.readDone)
	}()
	go func() {
		_ = cmd.Wait()
		s.vmu.Lock()
		s.exitCode = cmd.ProcessState.ExitCode()
		s.vmu.Unlock()
		close(s.exited)
	}()
	return s, nil
}

// view returns m as the checks read it.
func (s *session) view(m *rpcpeer.Message) *message {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if v := s.views[m]; v != nil {
		return v
	}
	v := &message{raw: []byte(m.Raw)}
	// The peer offers only lines jsonrpc.Decode accepted: JSON objects, which decode.
	if x, err := decodeJSON(v.raw); err == nil {
		v.value, _ = x.(map[string]any)
	}
	v.method, _ = v.value["method"].(string)
	v.id, v.hasID = v.value["id"]
	s.views[m] = v
	return v
}

// matching adapts a check on the runner's view of a message to the peer's messages.
func (s *session) matching(match func(*message) bool) func(*rpcpeer.Message) bool {
	return func(m *rpcpeer.Message) bool { return match(s.view(m)) }
}

// note adds a line of the runner's own to the transcript kept for failure reports.
func (s *session) note(line string) { s.peer.Note(line) }

// send writes v as one line.
func (s *session) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.sendLine(b)
}

// sendLine writes b and a newline as they are: a raw step's bytes may hold anything.
func (s *session) sendLine(b []byte) error {
	s.note("> " + string(b))
	_, err := stdinWriter{s}.Write(append(b[:len(b):len(b)], '\n'))
	return err
}

// stdinWriter writes to the broker's stdin, one write at a time, for the runner's lines and
// the peer's answers alike.
type stdinWriter struct{ s *session }

// Write writes p whole, or says why it could not.
func (w stdinWriter) Write(p []byte) (int, error) {
	w.s.wmu.Lock()
	defer w.s.wmu.Unlock()
	if w.s.closed {
		return 0, errors.New("the broker's stdin is closed")
	}
	n, err := w.s.stdin.Write(p)
	if err != nil {
		return n, fmt.Errorf("write to the broker: %w", err)
	}
	return n, nil
}

// closeInput closes the broker's stdin.
func (s *session) closeInput() {
	s.wmu.Lock()
	was := s.closed
	if !was {
		s.closed = true
		_ = s.stdin.Close()
	}
	s.wmu.Unlock()
	if !was {
		s.note("> (end of input)")
	}
}

// await takes the first message not yet taken that matches, waiting up to d. It returns nil
// when none came in time, stdout ended, or ctx ended.
func (s *session) await(ctx context.Context, d time.Duration, match func(*message) bool) *message {
	if m := s.peer.TryAwait(ctx, d, s.matching(match)); m != nil {
		return s.view(m)
	}
	return nil
}

// pending returns the messages not taken that match.
func (s *session) pending(match func(*message) bool) []*message {
	var out []*message
	for _, m := range s.peer.Pending(s.matching(match)) {
		out = append(out, s.view(m))
	}
	return out
}

// sent reports whether the broker sent a notification with method, taken or not.
func (s *session) sent(method string) bool {
	return s.peer.Has(s.matching(func(m *message) bool { return m.isNotification() && m.method == method }))
}

// waitExit waits up to d for the process to end; it returns the exit status and whether it
// ended.
func (s *session) waitExit(ctx context.Context, d time.Duration) (int, bool) {
	select {
	case <-s.exited:
	case <-time.After(d):
		return 0, false
	case <-ctx.Done():
		return 0, false
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	return s.exitCode, true
}

// hasExited reports whether the process ended.
func (s *session) hasExited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// stop ends the process: stdin closed, then after grace SIGTERM, then after another grace
// SIGKILL. It returns the exit status and how the process ended ("" on its own after end of
// input, else "SIGTERM" or "SIGKILL").
func (s *session) stop(grace time.Duration) (int, string) {
	s.closeInput()
	how := ""
	select {
	case <-s.exited:
	case <-time.After(grace):
		how = "SIGTERM"
		signalGroup(s.cmd, true)
		select {
		case <-s.exited:
		case <-time.After(grace):
			how = "SIGKILL"
			signalGroup(s.cmd, false)
			<-s.exited
		}
	}
	// A child of the broker may hold its stdout open: do not wait for ever.
	select {
	case <-s.readDone:
	case <-time.After(grace):
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	return s.exitCode, how
}

// lastTranscript returns the last n lines exchanged.
func (s *session) lastTranscript(n int) []string {
	return s.peer.TranscriptLines(n)
}

// badLines returns the stdout lines that were not JSON-RPC messages, each with why.
func (s *session) badLines() []string {
	return s.peer.Problems()
}

// describe lists messages briefly, for a failure report.
func describe(ms []*message) string {
	if len(ms) == 0 {
		return "none"
	}
	var parts []string
	for _, m := range ms {
		parts = append(parts, clip(string(m.raw), 300))
	}
	return strings.Join(parts, "\n      ")
}
