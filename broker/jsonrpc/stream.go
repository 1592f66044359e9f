// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// DefaultMaxMessageBytes is the default limit on one message (32 MiB).
const DefaultMaxMessageBytes = 32 << 20

// ErrMessageTooLarge is returned by Stream.Read for a message over the limit.
// The oversized message has been discarded and the stream stays usable.
var ErrMessageTooLarge = errors.New("message exceeds the size limit")

// Stream moves whole messages. Read is called from one goroutine; Write may be
// called from many and must write each message whole.
type Stream interface {
	// Read returns the next message. It returns ErrMessageTooLarge (and stays
	// usable) for an oversized message and io.EOF at the end of the input.
	// The returned bytes are valid until the next call to Read.
	Read() ([]byte, error)
	// Write sends one message, which must not contain a newline.
	Write(msg []byte) error
	// Close releases the stream. It closes the underlying reader and writer
	// where they can be closed, which unblocks a pending Read.
	Close() error
}

// smallMessageBytes is the size under which Write copies a message to send it
// with its newline in one call.
const smallMessageBytes = 64 << 10

var newline = []byte{'\n'}

// keptBufferBytes is the largest read buffer kept between messages, so that one
// large message does not pin its memory for the rest of the session.
const keptBufferBytes = 1 << 20

// LineStream is a Stream of newline-delimited messages over a byte stream,
// such as a process's stdin and stdout.
type LineStream struct {
	r       *bufio.Reader
	w       io.Writer
	closers []io.Closer
	max     int
	buf     []byte

	wmu  sync.Mutex
	wbuf []byte
}

var _ Stream = (*LineStream)(nil)

// NewLineStream reads messages from r and writes them to w, one per line.
// maxMessageBytes <= 0 means DefaultMaxMessageBytes. Close closes r and w
// when they implement io.Closer.
func NewLineStream(r io.Reader, w io.Writer, maxMessageBytes int) *LineStream {
	if maxMessageBytes <= 0 {
		maxMessageBytes = DefaultMaxMessageBytes
	}
	s := &LineStream{r: bufio.NewReaderSize(r, 64<<10), w: w, max: maxMessageBytes}
	if c, ok := r.(io.Closer); ok {
		s.closers = append(s.closers, c)
	}
	if c, ok := w.(io.Closer); ok && !sameCloser(c, r) {
		s.closers = append(s.closers, c)
	}
	return s
}

// Read returns the next non-empty line without its line ending. A last line
// without a newline is returned at end of input.
func (s *LineStream) Read() ([]byte, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// ReadLine returns the next line as it came, blank ones included, without
// its line ending, under the same size limit as Read: for a reader that
// checks the peer's framing (a test peer) rather than tolerating it.
func (s *LineStream) ReadLine() ([]byte, error) { return s.readLine() }

func (s *LineStream) readLine() ([]byte, error) {
	if cap(s.buf) > keptBufferBytes {
		s.buf = nil
	}
	s.buf = s.buf[:0]
	tooLarge := false
	for {
		chunk, err := s.r.ReadSlice('\n')
		if !tooLarge {
			if len(s.buf)+len(chunk) > s.max+2 { // +2: the line ending is not part of the message
				tooLarge = true
				s.buf = s.buf[:0]
			} else {
				s.buf = append(s.buf, chunk...)
			}
		}
		switch {
		case err == nil: // a whole line
			if tooLarge {
				return nil, ErrMessageTooLarge
			}
			line := bytes.TrimSuffix(bytes.TrimSuffix(s.buf, []byte("\n")), []byte("\r"))
			if len(line) > s.max {
				return nil, ErrMessageTooLarge
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			// A reader closed by this side (to stop the session) ends the
			// input just as the peer closing it does.
			if tooLarge || len(s.buf) > s.max { // no line ending to allow for here
				return nil, ErrMessageTooLarge
			}
			if len(s.buf) > 0 {
				return s.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("read message: %w", err)
		}
	}
}

// Write writes msg and a newline in one call, so concurrent messages never
// interleave.
func (s *LineStream) Write(msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		return errors.New("write message: message contains a newline")
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var err error
	if len(msg) < smallMessageBytes {
		// One write call: small messages are the common case.
		s.wbuf = append(append(s.wbuf[:0], msg...), '\n')
		_, err = s.w.Write(s.wbuf)
	} else if _, err = s.w.Write(msg); err == nil {
		// Large messages are not copied; the lock keeps the two writes together.
		_, err = s.w.Write(newline)
	}
	if err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	return nil
}

// sameCloser reports whether w is the reader itself (a socket, say), so that
// it is closed once.
func sameCloser(w io.Closer, r io.Reader) (same bool) {
	defer func() { _ = recover() }() // uncomparable dynamic types are not the same
	rc, ok := r.(io.Closer)
	return ok && rc == w
}

// Close closes the underlying reader and writer where possible; closing what
// is already closed is not an error.
func (s *LineStream) Close() error {
	var errs []error
	for _, c := range s.closers {
		if err := c.Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) &&
			!errors.Is(err, os.ErrClosed) && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Buffered reports how many bytes of input are read and waiting in the
// stream's buffer: more than zero when the peer sent more than one message
// at once.
func (s *LineStream) Buffered() int { return s.r.Buffered() }
