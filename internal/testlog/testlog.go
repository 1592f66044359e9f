// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package testlog captures what a logger writes, for tests that count log lines (how many
// errors a failure produced, say). The broker itself never imports it.
package testlog

import (
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Lines collects the lines written to it; it is safe for concurrent use.
type Lines struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many lines hold every one of parts.
func (l *Lines) Count(parts ...string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// Logger is a debug-level text logger writing to l.
func (l *Lines) Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: l, Level: hclog.Debug})
}
