// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// keptSink is a real audit writer that also keeps what it was given, so a
// test can look at the records of one request.
type keptSink struct {
	*audit.Writer
	mu   sync.Mutex
	recs []audit.Record
}

func (s *keptSink) Append(ctx context.Context, rec audit.Record) (uint64, error) {
	seq, err := s.Writer.Append(ctx, rec)
	if err == nil {
		s.mu.Lock()
		s.recs = append(s.recs, rec)
		s.mu.Unlock()
	}
	return seq, err
}

// records returns the records the sink kept of one decision, in order.
func (s *keptSink) records(decisionID string) []audit.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []audit.Record
	for _, r := range s.recs {
		if r.DecisionID == decisionID {
			out = append(out, r)
		}
	}
	return out
}

// kinds returns the kinds of the records of one decision, in order.
func (s *keptSink) kinds(decisionID string) []audit.Kind {
	var out []audit.Kind
	for _, r := range s.records(decisionID) {
		out = append(out, r.Kind)
	}
	return out
}

// defaultDecider is the real engine with the built-in policies.
func defaultDecider(t *testing.T) engine.Decider {
	t.Helper()
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	return engine.Decider{Engine: e}
}

// auditedCorridor returns a corridor over the fixture deciding with the
// default policies and writing a real trail, which the returned sink also
// keeps; the read-only root holds a secret, ro/.env.
func (f *fixture) auditedCorridor(t *testing.T) (*Corridor, *keptSink) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.ro, ".env"), []byte("SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := audittest.Open(t)
	sink := &keptSink{Writer: w}
	return f.corridor(t, WithDecider(defaultDecider(t)), WithAudit(sink, false)), sink
}

// TestEntryPointsWithoutATransport: the corridor serves a caller with no
// JSON-RPC in between, as fsbroker serve's tools will, with the real engine
// and default policies and a real trail: an allowed read returns the file
// and leaves its decision and outcome records; a read of a secret and a
// write in a read-only root are refused with PERMISSION_DENIED and a
// decision id whose decision record is the request's last.
func TestEntryPointsWithoutATransport(t *testing.T) {
	f := newFixture(t)
	c, sink := f.auditedCorridor(t)
	caller := f.caller
	ctx := context.Background()

	r, err := c.Read(ctx, caller, ReadRequest{Path: "ro/a.txt", Length: -1, UTF8: true})
	if err != nil || string(r.Data) != "hello\n" || !r.EOF {
		t.Fatalf("read = %+v, %v", r, err)
	}
	if got := sink.kinds("s1-1"); len(got) != 2 || got[0] != audit.KindDecision || got[1] != audit.KindOutcome {
		t.Errorf("records of the allowed read: %v, want a decision and an outcome", got)
	}

	_, readErr := c.Read(ctx, caller, ReadRequest{Path: "ro/.env", Length: -1, UTF8: true})
	_, writeErr := c.Write(ctx, caller, WriteRequest{Path: "ro/new.txt", Data: []byte("x"), Create: true, Final: true})
	for op, err := range map[string]error{"read of a secret": readErr, "write in a read-only root": writeErr} {
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.PermissionDenied || e.DecisionID == "" {
			t.Errorf("%s: %v, want PERMISSION_DENIED with a decision id", op, err)
			continue
		}
		if got := sink.kinds(e.DecisionID); len(got) != 1 || got[0] != audit.KindDecision {
			t.Errorf("%s: records %v, want its refusing decision only", op, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.ro, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write touched the disk: %v", err)
	}
}
