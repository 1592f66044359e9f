package conformance

import (
	"bufio"
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
)

// message is one line the broker wrote to its stdout.
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

// kind names what m is, for messages.
func (m *message) kind() string {
	switch {
	case m.isRequest():
		return "request " + m.method
	case m.isNotification():
		return "notification " + m.method
	}
	return "response"
}

// checkLine returns why line is not one JSON-RPC 2.0 message, or "".
func checkLine(fields map[string]json.RawMessage) string {
	if string(fields["jsonrpc"]) != `"2.0"` {
		return `"jsonrpc" is not "2.0"`
	}
	_, hasMethod := fields["method"]
	_, hasID := fields["id"]
	_, hasResult := fields["result"]
	_, hasError := fields["error"]
	switch {
	case hasMethod && (hasResult || hasError):
		return "a method with a result or an error"
	case hasMethod:
		return ""
	case !hasID:
		return "a response without an id"
	case hasResult == hasError:
		return "a response needs exactly one of result and error"
	}
	return ""
}

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

// session is a running broker: the runner writes to its stdin and reads its stdout.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer

	wmu    sync.Mutex // one line at a time on stdin
	closed bool       // stdin closed (under wmu)

	mu         sync.Mutex
	msgs       []*message
	taken      []bool
	bad        []string
	transcript []string
	changed    chan struct{} // closed and replaced when msgs grows or stdout ends
	outDone    bool

	readDone chan struct{} // stdout and stderr reached EOF
	exited   chan struct{} // closed once the process exited
	exitCode int
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
	s := &session{cmd: cmd, stdin: inW, changed: make(chan struct{}),
		readDone: make(chan struct{}), exited: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		defer errR.Close()
		_, _ = io.Copy(&s.stderr, errR)
	}()
	go func() {
		defer readers.Done()
		defer outR.Close()
		s.readStdout(outR)
	}()
	go func() {
		readers.Wait()
		close(s.readDone)
	}()
	go func() {
		_ = cmd.Wait()
		s.mu.Lock()
		s.exitCode = cmd.ProcessState.ExitCode()
		s.mu.Unlock()
		close(s.exited)
	}()
	return s, nil
}

// readStdout splits the broker's output into messages, answering its pings as they come.
func (s *session) readStdout(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			s.note("< " + string(line))
			m, bad := parseMessage(line)
			s.mu.Lock()
			if bad != "" {
				s.bad = append(s.bad, fmt.Sprintf("%s: %s", bad, clip(string(line), 200)))
			} else {
				s.msgs = append(s.msgs, m)
				s.taken = append(s.taken, false)
			}
			s.signal()
			s.mu.Unlock()
			if m != nil && m.isRequest() && m.method == "ping" {
				_ = s.send(map[string]any{"jsonrpc": "2.0", "id": m.id, "result": map[string]any{}})
			}
		}
		if err != nil {
			s.mu.Lock()
			s.outDone = true
			s.signal()
			s.mu.Unlock()
			return
		}
	}
}

// signal wakes the waiters; s.mu is held.
func (s *session) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// parseMessage decodes one line, or says why it is not a JSON-RPC message.
func parseMessage(line []byte) (*message, string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return nil, "not a JSON object"
	}
	if why := checkLine(fields); why != "" {
		return nil, why
	}
	v, err := decodeJSON(line)
	if err != nil {
		return nil, err.Error()
	}
	m := &message{raw: line, value: v.(map[string]any)}
	m.method, _ = m.value["method"].(string)
	m.id, m.hasID = m.value["id"]
	return m, ""
}

// note adds a line to the transcript kept for failure reports.
func (s *session) note(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcript = append(s.transcript, clip(line, 400))
}

// send writes v as one line.
func (s *session) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.sendLine(b)
}

// sendLine writes b and a newline.
func (s *session) sendLine(b []byte) error {
	s.note("> " + string(b))
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return errors.New("the broker's stdin is closed")
	}
	_, err := s.stdin.Write(append(b[:len(b):len(b)], '\n'))
	if err != nil {
		return fmt.Errorf("write to the broker: %w", err)
	}
	return nil
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
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		for i, m := range s.msgs {
			if !s.taken[i] && match(m) {
				s.taken[i] = true
				s.mu.Unlock()
				return m
			}
		}
		changed, done := s.changed, s.outDone
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// pending returns the messages not taken that match.
func (s *session) pending(match func(*message) bool) []*message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*message
	for i, m := range s.msgs {
		if !s.taken[i] && match(m) {
			out = append(out, m)
		}
	}
	return out
}

// sent reports whether the broker sent a notification with method, taken or not.
func (s *session) sent(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if m.isNotification() && m.method == method {
			return true
		}
	}
	return false
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
	s.mu.Lock()
	defer s.mu.Unlock()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitCode, how
}

// lastTranscript returns the last n lines exchanged.
func (s *session) lastTranscript(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.transcript
	if len(t) > n {
		t = append([]string{fmt.Sprintf("(%d earlier lines)", len(t)-n)}, t[len(t)-n:]...)
	}
	return append([]string(nil), t...)
}

// badLines returns the stdout lines that were not JSON-RPC messages.
func (s *session) badLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
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
