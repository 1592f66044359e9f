// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"bytes"
	"io"
	"sync"
)

// maxHeldBytes bounds what a HeldOutput keeps while it is held; writes
// beyond it are dropped, and counted.
const maxHeldBytes = 1 << 20

// HeldOutput passes what is written to it on to an io.Writer (the log's
// stderr), except while a consent prompt is on the terminal: then it keeps
// each write, and writes them all, in order, once the prompt ends, so that
// no log line lands in the middle of a question. It keeps at most 1 MiB;
// whole writes beyond that are dropped and counted, and the count is passed
// to the function given to NewHeldOutput after the held writes are out. It is
// safe for concurrent use.
type HeldOutput struct {
	mu      sync.Mutex
	w       io.Writer
	holds   int
	held    bytes.Buffer
	dropped int
	onDrop  func(writes int)
}

// NewHeldOutput returns a HeldOutput writing to w. onDrop (may be nil) is
// told how many writes were dropped while held, once they could be written
// again.
func NewHeldOutput(w io.Writer, onDrop func(writes int)) *HeldOutput {
	return &HeldOutput{w: w, onDrop: onDrop}
}

// Write writes p, or keeps it while the output is held.
func (h *HeldOutput) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == 0 {
		return h.w.Write(p)
	}
	if h.held.Len()+len(p) > maxHeldBytes {
		h.dropped++
		return len(p), nil
	}
	h.held.Write(p)
	return len(p), nil
}

// hold holds the output until the matching release; a nil HeldOutput does
// nothing.
func (h *HeldOutput) hold() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.holds++
	h.mu.Unlock()
}

// release ends one hold; the last writes out what was kept.
func (h *HeldOutput) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.holds--
	if h.holds > 0 {
		h.mu.Unlock()
		return
	}
	if h.held.Len() > 0 {
		_, _ = h.w.Write(h.held.Bytes()) // the log's own output: nowhere to report a failure
		h.held.Reset()
	}
	dropped := h.dropped
	h.dropped = 0
	h.mu.Unlock()
	if dropped > 0 && h.onDrop != nil {
		h.onDrop(dropped)
	}
}
