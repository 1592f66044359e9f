// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !windows && !plan9

package audit

import (
	"context"
	"errors"
	"fmt"
	"log/syslog"
	"sync"
)

// syslogPriority is the facility and severity of witness statements: daemon.info, which the
// usual rsyslog rules write to /var/log/syslog (or messages) and journald keeps.
const syslogPriority = syslog.LOG_DAEMON | syslog.LOG_INFO

// syslogTag is the tag (program name) of witness statements in syslog.
const syslogTag = "fsbroker"

// syslogWitness sends each statement as one syslog message with Go's log/syslog: over the
// local socket, or to a syslog server over UDP, TCP or a unix socket. It connects at the first
// statement, and log/syslog connects again once when a write fails (a restarted daemon).
type syslogWitness struct {
	spec WitnessSpec

	mu     sync.Mutex
	w      *syslog.Writer
	busy   bool // a Send is running: it closes w itself if Close came meanwhile
	closed bool
}

// newSyslogWitness returns a syslog witness; it does not connect yet, so that a daemon that is
// down (or an address that does not answer) does not hold up the broker's start.
func newSyslogWitness(ws WitnessSpec) (Witness, error) { return &syslogWitness{spec: ws}, nil }

// errWitnessClosed is returned by Send after Close.
var errWitnessClosed = errors.New("audit witness: closed")

// Send writes ev's line. log/syslog takes no context: the writer's timeout bounds the wait.
func (s *syslogWitness) Send(_ context.Context, ev WitnessEvent) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errWitnessClosed
	}
	s.busy = true
	w := s.w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		if s.closed && s.w != nil {
			s.w.Close()
			s.w = nil
		}
		s.mu.Unlock()
	}()
	if w == nil {
		var err error
		if w, err = syslog.Dial(s.spec.Network, s.spec.Address, syslogPriority, syslogTag); err != nil {
			return fmt.Errorf("audit witness %s: %w", s.spec, err)
		}
		s.mu.Lock()
		s.w = w
		s.mu.Unlock()
	}
	if err := w.Info(ev.Line()); err != nil {
		return fmt.Errorf("audit witness %s: %w", s.spec, err)
	}
	return nil
}

// String returns the spec: syslog, syslog:udp://HOST:PORT, ...
func (s *syslogWitness) String() string { return s.spec.String() }

// Close closes the connection, or lets a Send still running close it (a log/syslog write
// cannot be interrupted).
func (s *syslogWitness) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.busy || s.w == nil {
		return nil
	}
	err := s.w.Close()
	s.w = nil
	return err
}
