// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"io"
	"sync"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
)

// memStream is one end of an in-memory pair of jsonrpc.Streams: what one end
// writes, the other reads, one whole message at a time. A write returns once
// the other end has taken the message, so nothing is lost when an end closes
// and no message waits in a buffer that nobody reads.
type memStream struct {
	in     <-chan []byte
	out    chan<- []byte
	closed chan struct{} // this end closed
	peer   chan struct{} // the other end closed
	once   *sync.Once
}

var _ jsonrpc.Stream = (*memStream)(nil)

// streamPair returns two connected in-memory streams.
func streamPair() (a, b *memStream) {
	ab, ba := make(chan []byte), make(chan []byte)
	ca, cb := make(chan struct{}), make(chan struct{})
	a = &memStream{in: ba, out: ab, closed: ca, peer: cb, once: new(sync.Once)}
	b = &memStream{in: ab, out: ba, closed: cb, peer: ca, once: new(sync.Once)}
	return a, b
}

// Read returns the next message, or io.EOF once either end is closed.
func (s *memStream) Read() ([]byte, error) {
	select {
	case m := <-s.in:
		return m, nil
	case <-s.closed:
		return nil, io.EOF
	case <-s.peer:
		return nil, io.EOF
	}
}

// Write hands a copy of msg to the other end, waiting until it is read.
func (s *memStream) Write(msg []byte) error {
	m := append([]byte(nil), msg...)
	select {
	case s.out <- m:
		return nil
	case <-s.closed:
		return io.ErrClosedPipe
	case <-s.peer:
		return io.ErrClosedPipe
	}
}

// Close ends this end; both ends' pending and later reads and writes fail.
func (s *memStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}
