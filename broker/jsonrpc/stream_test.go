// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// wait bounds anything a test waits on so that a bug fails the test instead
// of hanging it. It is never a timing assertion.
const wait = 10 * time.Second

// pipe returns a real OS pipe whose two ends are closed when the test ends.
func pipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return r, w
}

// feed writes data to w from a goroutine (a pipe holds only 64 KiB) and
// closes w; the returned channel reports the write error.
func feed(w *os.File, data ...[]byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		var err error
		for _, d := range data {
			if _, err = w.Write(d); err != nil {
				break
			}
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}

// readOutcome is one Read's outcome: a message or an error.
type readOutcome struct {
	msg string
	err error
}

func (o readOutcome) String() string {
	if o.err != nil {
		return "error(" + o.err.Error() + ")"
	}
	if len(o.msg) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", o.msg[:40], len(o.msg))
	}
	return fmt.Sprintf("%q", o.msg)
}

// readAll reads s until io.EOF or another error that ends the stream, with an
// upper bound on the number of reads.
func readAll(t testing.TB, s *LineStream, max int) []readOutcome {
	t.Helper()
	var out []readOutcome
	for range max {
		msg, err := s.Read()
		if err != nil {
			out = append(out, readOutcome{err: err})
			if !errors.Is(err, ErrMessageTooLarge) {
				return out
			}
			continue
		}
		if bytes.IndexByte(msg, '\n') >= 0 {
			t.Errorf("Read returned a message with a newline: %q", msg)
		}
		out = append(out, readOutcome{msg: string(msg)})
	}
	t.Fatalf("stream did not end after %d reads: %v", max, out)
	return nil
}

func msgs(lines ...string) []readOutcome {
	out := make([]readOutcome, 0, len(lines)+1)
	for _, l := range lines {
		if l == "<too large>" {
			out = append(out, readOutcome{err: ErrMessageTooLarge})
			continue
		}
		out = append(out, readOutcome{msg: l})
	}
	return append(out, readOutcome{err: io.EOF})
}

func sameOutcomes(got, want []readOutcome) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].msg != want[i].msg || !errors.Is(got[i].err, want[i].err) || (got[i].err == nil) != (want[i].err == nil) {
			return false
		}
	}
	return true
}

func TestLineStreamRead(t *testing.T) {
	const limit = 8
	big := strings.Repeat("x", 200<<10) // over the 64 KiB read buffer
	tests := []struct {
		name  string
		in    string
		limit int
		want  []readOutcome
	}{
		{"empty input", "", limit, msgs()},
		{"LF lines", "a\nbb\nccc\n", limit, msgs("a", "bb", "ccc")},
		{"CRLF lines", "a\r\nbb\r\n", limit, msgs("a", "bb")},
		{"mixed endings", "a\r\nb\nc\r\n", limit, msgs("a", "b", "c")},
		{"only one CR is a line ending", "a\r\r\n", limit, msgs("a\r")},
		{"CR inside a line is kept", "a\rb\n", limit, msgs("a\rb")},
		{"blank lines skipped", "\n\n\r\n \t \n a\n\n", limit, msgs(" a")},
		{"only blank lines", "\n\r\n  \n", limit, msgs()},
		{"last line without newline", "a\nlast", limit, msgs("a", "last")},
		{"only a line without newline", "{}", limit, msgs("{}")},
		{"blank last line without newline", "a\n  ", limit, msgs("a")},
		{"line exactly at the limit", "12345678\nnext\n", limit, msgs("12345678", "next")},
		{"line exactly at the limit with CRLF", "12345678\r\nnext\r\n", limit, msgs("12345678", "next")},
		{"limit+1 refused, next read", "123456789\nnext\n", limit, msgs("<too large>", "next")},
		{"limit+1 with CRLF refused", "123456789\r\nnext\n", limit, msgs("<too large>", "next")},
		{"limit+2 refused", "1234567890\nnext\n", limit, msgs("<too large>", "next")},
		{"two oversized in a row", "123456789\n1234567890\nok\n", limit, msgs("<too large>", "<too large>", "ok")},
		{"oversized blank line", "          \nok\n", limit, msgs("<too large>", "ok")},
		{"last line at the limit without newline", "a\n12345678", limit, msgs("a", "12345678")},
		{"last line far over the limit without newline", "a\n" + strings.Repeat("y", 100), limit, msgs("a", "<too large>")},
		{"line over the read buffer refused", big + "\nok\n", limit, msgs("<too large>", "ok")},
		{"line over the read buffer accepted", big + "\nok\n", len(big), msgs(big, "ok")},
		{"zero limit means the default", "abc\n", 0, msgs("abc")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w := pipe(t)
			done := feed(w, []byte(tt.in))
			s := NewLineStream(r, io.Discard, tt.limit)
			got := readAll(t, s, 100)
			if !sameOutcomes(got, tt.want) {
				t.Errorf("reads = %v, want %v", got, tt.want)
			}
			// The end of input is sticky.
			if _, err := s.Read(); !errors.Is(err, io.EOF) {
				t.Errorf("Read after EOF = %v, want io.EOF", err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLineStreamReadLine: ReadLine returns the lines Read skips (blank ones)
// and otherwise what Read returns, under the same limit.
func TestLineStreamReadLine(t *testing.T) {
	r, w := pipe(t)
	done := feed(w, []byte("a\n\n \r\n123456789\nb\r\n  "))
	s := NewLineStream(r, io.Discard, 8)
	var got []readOutcome
	for range 10 {
		line, err := s.ReadLine()
		if err != nil {
			got = append(got, readOutcome{err: err})
			if errors.Is(err, ErrMessageTooLarge) {
				continue
			}
			break
		}
		got = append(got, readOutcome{msg: string(line)})
	}
	if want := msgs("a", "", " ", "<too large>", "b", "  "); !sameOutcomes(got, want) {
		t.Errorf("ReadLine = %v, want %v", got, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLineStreamLastLineOverLimit: a last line without a newline is held to
// the same limit as every other line.
func TestLineStreamLastLineOverLimit(t *testing.T) {
	for _, in := range []string{"123456789", "1234567890"} { // limit+1, limit+2
		r, w := pipe(t)
		done := feed(w, []byte(in))
		got := readAll(t, NewLineStream(r, io.Discard, 8), 10)
		if want := msgs("<too large>"); !sameOutcomes(got, want) {
			t.Errorf("%q: reads = %v, want %v", in, got, want)
		}
		<-done
	}
}

// TestLineStreamHugeLine sends a 40 MiB line against the default 32 MiB
// limit: it is refused, the next line is read, and the stream does not keep
// the large buffer.
func TestLineStreamHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 40 MiB through a pipe")
	}
	r, w := pipe(t)
	huge := bytes.Repeat([]byte("x"), 40<<20)
	huge = append(huge, '\n')
	done := feed(w, huge, []byte(`{"after":true}`+"\n"))
	s := NewLineStream(r, io.Discard, 0)
	if _, err := s.Read(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("first Read = %v, want ErrMessageTooLarge", err)
	}
	msg, err := s.Read()
	if err != nil || string(msg) != `{"after":true}` {
		t.Fatalf("second Read = %q, %v", msg, err)
	}
	if c := cap(s.buf); c > keptBufferBytes {
		t.Errorf("the stream keeps a %d-byte buffer after a large message", c)
	}
	if _, err := s.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("third Read = %v, want io.EOF", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLineStreamWrite(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		ok   bool
	}{
		{"small", `{"a":1}`, true},
		{"empty", ``, true},
		{"CR is allowed", "a\rb", true},
		{"exactly the copy threshold", strings.Repeat("s", smallMessageBytes), true},
		{"just under the copy threshold", strings.Repeat("u", smallMessageBytes-1), true},
		{"large", strings.Repeat("l", 300<<10), true},
		{"newline in the middle", "a\nb", false},
		{"trailing newline", "a\n", false},
		{"newline in a large message", strings.Repeat("l", 100<<10) + "\n" + "z", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w := pipe(t)
			s := NewLineStream(strings.NewReader(""), w, 0)
			read := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(r)
				read <- b
			}()
			err := s.Write([]byte(tt.msg))
			if (err == nil) != tt.ok {
				t.Fatalf("Write = %v, want ok=%v", err, tt.ok)
			}
			// A refused message writes nothing: the next message is the
			// first line on the wire.
			if err := s.Write([]byte("marker")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var got []byte
			select {
			case got = <-read:
			case <-time.After(wait):
				t.Fatal("reader did not finish")
			}
			want := "marker\n"
			if tt.ok {
				want = tt.msg + "\n" + want
			}
			if string(got) != want {
				t.Errorf("wire = %.80q (%d bytes), want %.80q (%d bytes)", got, len(got), want, len(want))
			}
		})
	}
}

// TestLineStreamConcurrentWrites writes small and large (> 64 KiB, written in
// two calls) messages from 16 goroutines and parses every line back: no line
// is torn or interleaved with another.
func TestLineStreamConcurrentWrites(t *testing.T) {
	const (
		writers = 16
		each    = 20
	)
	r, w := pipe(t)
	s := NewLineStream(strings.NewReader(""), w, 0)

	type line struct {
		G   int    `json:"g"`
		I   int    `json:"i"`
		Pad string `json:"pad"`
	}
	size := func(g, i int) int {
		switch (g + i) % 4 {
		case 0:
			return 10
		case 1:
			return smallMessageBytes + 1
		case 2:
			return 150 << 10
		default:
			return 3000
		}
	}

	got := make(chan error, 1)
	go func() {
		seen := make(map[[2]int]bool)
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			b, err := br.ReadBytes('\n')
			if errors.Is(err, io.EOF) {
				if len(b) != 0 {
					got <- fmt.Errorf("unterminated tail of %d bytes", len(b))
					return
				}
				break
			}
			if err != nil {
				got <- err
				return
			}
			var l line
			if err := json.Unmarshal(b, &l); err != nil {
				got <- fmt.Errorf("torn line (%d bytes): %v", len(b), err)
				return
			}
			if want := strings.Repeat(string(rune('a'+l.G)), size(l.G, l.I)); l.Pad != want {
				got <- fmt.Errorf("message %d/%d has a corrupted pad of %d bytes", l.G, l.I, len(l.Pad))
				return
			}
			k := [2]int{l.G, l.I}
			if seen[k] {
				got <- fmt.Errorf("message %v seen twice", k)
				return
			}
			seen[k] = true
		}
		if len(seen) != writers*each {
			got <- fmt.Errorf("read %d messages, want %d", len(seen), writers*each)
			return
		}
		got <- nil
	}()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				b, err := json.Marshal(line{G: g, I: i, Pad: strings.Repeat(string(rune('a'+g)), size(g, i))})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Write(b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("reader did not finish")
	}
}

// TestLineStreamCloseUnblocksRead: Close on the stream closes the read end of
// the pipe, and a Read blocked on it returns io.EOF.
func TestLineStreamCloseUnblocksRead(t *testing.T) {
	tests := []struct {
		name    string
		pending string // written before Close, after one whole line
		want    []readOutcome
	}{
		{"nothing pending", "", msgs()},
		// A partial line already buffered when this side closes the reader is
		// handed out like an unterminated last line at end of input.
		{"partial line buffered", "{\"partial\":", msgs(`{"partial":`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, peerW := pipe(t)
			peerR, w := pipe(t)
			s := NewLineStream(r, w, 0)
			// One write below PIPE_BUF is atomic, so the first Read's fill
			// brings the pending bytes into the stream's buffer with it.
			if _, err := peerW.Write([]byte("first\n" + tt.pending)); err != nil {
				t.Fatal(err)
			}
			if msg, err := s.Read(); err != nil || string(msg) != "first" {
				t.Fatalf("first Read = %q, %v", msg, err)
			}
			got := make(chan []readOutcome, 1)
			go func() { got <- readAll(t, s, 10) }()
			// Whether that Read is already blocked in the pipe or not, it ends.
			if err := s.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			select {
			case g := <-got:
				if !sameOutcomes(g, tt.want) {
					t.Errorf("reads = %v, want %v", g, tt.want)
				}
			case <-time.After(wait):
				t.Fatal("Close did not unblock Read")
			}
			// The write end was closed too: the peer sees end of input.
			if b, err := io.ReadAll(peerR); err != nil || len(b) != 0 {
				t.Errorf("peer read after Close = %q, %v; want EOF", b, err)
			}
			if err := s.Write([]byte("x")); err == nil {
				t.Error("Write after Close succeeded")
			}
		})
	}
}

// TestLineStreamCloseWithoutClosers: readers and writers that are not
// io.Closers are left alone.
func TestLineStreamCloseWithoutClosers(t *testing.T) {
	var out bytes.Buffer
	s := NewLineStream(strings.NewReader("a\n"), &out, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if msg, err := s.Read(); err != nil || string(msg) != "a" {
		t.Errorf("Read = %q, %v", msg, err)
	}
	if err := s.Write([]byte("b")); err != nil || out.String() != "b\n" {
		t.Errorf("Write = %v, wrote %q", err, out.String())
	}
}

// TestLineStreamCloseSharedReadWriter: one connection used as both reader and
// writer (a socket) is closed once, without error.
func TestLineStreamCloseSharedReadWriter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if other := recv(t, accepted, "the accepted connection"); other != nil {
		defer other.Close()
	}
	if err := NewLineStream(c, c, 0).Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
