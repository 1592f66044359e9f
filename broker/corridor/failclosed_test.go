// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/policies"
)

// TestCorridorFailsClosed: a corridor built with neither a decider nor an
// audit trail refuses a read and a write (PERMISSION_DENIED, no policy), one
// with the default policies, which allow both, but no trail refuses them too
// (IO_ERROR, audit unavailable), every refusal carries a decision id, and no
// refused write touches the disk; only WithoutAuditTrail lets requests run
// with no trail.
func TestCorridorFailsClosed(t *testing.T) {
	f := newFixture(t)
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	policy := engine.Decider{Engine: e}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		opts   []Option
		code   errcode.Code
		reason string
	}{
		{"no decider, no trail", nil, errcode.PermissionDenied, ReasonNoDecider},
		{"no trail", []Option{WithDecider(policy)}, errcode.IOError, ReasonAuditUnavailable},
		{"nil decider, nil sink", []Option{WithDecider(nil), WithAudit(nil, false)}, errcode.PermissionDenied, ReasonNoDecider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.corridor(t, tc.opts...)
			_, readErr := c.Read(ctx, f.caller, ReadRequest{Path: "ro/a.txt", Length: -1, UTF8: true})
			_, writeErr := c.Write(ctx, f.caller, WriteRequest{Path: "rw/new.txt", Data: []byte("x"), Create: true, Final: true})
			for op, err := range map[string]error{"read": readErr, "write": writeErr} {
				var e *errcode.Error
				if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason || e.DecisionID == "" {
					t.Errorf("%s: %v (%+v), want %s %q with a decision id", op, err, e, tc.code, tc.reason)
				}
			}
			if _, err := os.Lstat(filepath.Join(f.rw, "new.txt")); !os.IsNotExist(err) {
				t.Errorf("a refused write touched the disk: %v", err)
			}
		})
	}
	c := f.corridor(t, WithDecider(policy), WithoutAuditTrail())
	if r, err := c.Read(ctx, f.caller, ReadRequest{Path: "ro/a.txt", Length: -1, UTF8: true}); err != nil || string(r.Data) != "hello\n" {
		t.Errorf("WithoutAuditTrail: read = %q, %v", r.Data, err)
	}
}
