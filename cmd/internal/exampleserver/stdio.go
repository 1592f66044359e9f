// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package exampleserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sync"
)

// stdioTransport is MCP's stdio transport: one JSON-RPC message a line,
// read from in and written to out.
type stdioTransport struct {
	msgs chan []byte
	done chan struct{} // closed when in reaches EOF (or fails)

	mu  sync.Mutex // one message at a time on out
	out io.Writer
}

// newStdioTransport reads the client's lines from in in the background.
func newStdioTransport(in io.Reader, out io.Writer) *stdioTransport {
	t := &stdioTransport{msgs: make(chan []byte, 64), done: make(chan struct{}), out: out}
	go func() {
		defer close(t.done)
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if line = bytes.TrimSpace(line); len(line) > 0 {
				t.msgs <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return t
}

func (t *stdioTransport) incoming() <-chan []byte { return t.msgs }

func (t *stdioTransport) ended() <-chan struct{} { return t.done }

func (t *stdioTransport) send(msg []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.out.Write(append(msg[:len(msg):len(msg)], '\n')); err != nil {
		return fmt.Errorf("write to stdout: %w", err)
	}
	return nil
}
