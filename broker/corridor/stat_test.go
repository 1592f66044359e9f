// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/broker/errcode"
)

// TestStatRunsTheStages: Stat goes through the stages as a read does, with
// the real engine and default policies and a real trail: a file in a
// read-only root is described, with its decision (a read, recorded under the
// tool's name) and outcome records; a secret (.env) and a path outside
// every root are refused, the secret by its refusing decision record, and
// nothing of either is reported.
func TestStatRunsTheStages(t *testing.T) {
	f := newFixture(t)
	c, sink := f.auditedCorridor(t)
	caller := f.caller
	caller.FrontEnd, caller.Tool = "serve", "get_file_info"
	ctx := context.Background()

	res, err := c.Stat(ctx, caller, StatRequest{Path: filepath.Join(f.ro, "a.txt")})
	if err != nil || res.Path != "ro/a.txt" || res.Type != "file" || res.Size != 6 {
		t.Fatalf("stat = %+v, %v; want ro/a.txt, a file of 6 bytes", res, err)
	}
	if got := sink.kinds("s1-1"); len(got) != 2 || got[0] != audit.KindDecision || got[1] != audit.KindOutcome {
		t.Errorf("records of the allowed stat: %v, want a decision and an outcome", got)
	}
	sink.mu.Lock()
	first := sink.recs[0]
	sink.mu.Unlock()
	if first.Method != "get_file_info" || first.Operation != decision.OpRead || first.Tool != "get_file_info" {
		t.Errorf("decision record %+v, want method and tool get_file_info, operation read", first)
	}

	for _, raw := range []string{"ro/.env", filepath.Join(filepath.Dir(f.ro), "elsewhere")} {
		res, err := c.Stat(ctx, caller, StatRequest{Path: raw})
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.PermissionDenied || e.DecisionID == "" {
			t.Fatalf("stat of %s: %+v, %v; want PERMISSION_DENIED with a decision id", raw, res, err)
		}
		if res != (StatResult{}) {
			t.Errorf("a refused stat reported %+v", res)
		}
		if raw == "ro/.env" {
			if got := sink.kinds(e.DecisionID); len(got) != 1 || got[0] != audit.KindDecision {
				t.Errorf("records of the refused stat: %v, want its refusing decision only", got)
			}
		}
	}
}
