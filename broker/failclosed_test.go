// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/internal/testlog"
)

// untouched fails the test unless the fixture's disk is as startFiles and
// the test left it: rw/keep.txt holds "keep", rw/new.txt and rw/moved.txt do
// not exist.
func untouched(t *testing.T, f *filesFixture) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(f.rw, "keep.txt")); err != nil || string(b) != "keep" {
		t.Errorf("rw/keep.txt = %q, %v; want it untouched", b, err)
	}
	for _, name := range []string{"new.txt", "moved.txt"} {
		if _, err := os.Lstat(filepath.Join(f.rw, name)); !os.IsNotExist(err) {
			t.Errorf("rw/%s exists (%v): a refused request touched the disk", name, err)
		}
	}
}

// refuseAll sends one request of every files/* method (and roots/list) and
// wants each refused with code.
func refuseAll(t *testing.T, f *filesFixture, rpc int, code string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.rw, "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustFail("roots/list", map[string]any{}, rpc, code)
	f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, rpc, code)
	f.mustFail("files/list", map[string]any{"path": "rw"}, rpc, code)
	f.mustFail("files/write", map[string]any{"path": "rw/new.txt", "content": "x"}, rpc, code)
	f.mustFail("files/write", map[string]any{"path": "rw/keep.txt", "content": "overwritten"}, rpc, code)
	f.mustFail("files/create", map[string]any{"path": "rw/new.txt", "type": "file"}, rpc, code)
	f.mustFail("files/rename", map[string]any{"oldPath": "rw/keep.txt", "newPath": "rw/moved.txt"}, rpc, code)
	f.mustFail("files/delete", map[string]any{"path": "rw/keep.txt"}, rpc, code)
	untouched(t, f)
}

// TestSessionWithoutDeciderOrTrailRefuses: a session built with neither a
// decider nor an audit trail (nor WithoutAuditTrail) refuses every request,
// and nothing is touched: the library fails closed.
func TestSessionWithoutDeciderOrTrailRefuses(t *testing.T) {
	var log testlog.Lines
	f := startFilesWith(t, startBarePeer, WithLogger(log.Logger()))
	refuseAll(t, f, -32002, "PERMISSION_DENIED")
	if n := log.Count("[WARN]", "no audit trail: every audited request is refused"); n != 1 {
		t.Errorf("%d warnings of the missing trail, want 1:\n%s", n, log.String())
	}
}

// TestSessionWithoutDeciderDenies: a session with a trail and no decider
// refuses every request with PERMISSION_DENIED, and records each refusal.
func TestSessionWithoutDeciderDenies(t *testing.T) {
	w := openTrail(t)
	f := startFilesWith(t, startBarePeer, WithAudit(w.Writer, false))
	data := f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32002, "PERMISSION_DENIED")
	if data["reason"] != corridor.ReasonNoDecider {
		t.Errorf("reason %v, want %q", data["reason"], corridor.ReasonNoDecider)
	}
	refuseAll(t, f, -32002, "PERMISSION_DENIED")
	recs, _ := trailRecords(t, w)
	d, _ := byDecision(recs, data["decisionId"].(string))
	if d == nil || d.Allow == nil || *d.Allow || len(d.Reasons) != 1 || d.Reasons[0] != corridor.ReasonNoDecider {
		t.Errorf("the read's decision record is %+v, want its refusal", d)
	}
}

// TestSessionWithoutTrailRefuses: a session with a decider that allows but
// no audit trail refuses every audited request with IO_ERROR "audit
// unavailable", as a trail that fails does; so does one given a nil trail (a
// host whose writer did not open), even after WithoutAuditTrail, since the
// last of the two options counts.
func TestSessionWithoutTrailRefuses(t *testing.T) {
	var none *audit.Writer
	for name, opts := range map[string][]Option{
		"none":              nil,
		"nil writer":        {WithAudit(none, false)},
		"nil sink":          {WithAudit(nil, true)},
		"nil after opt-out": {WithoutAuditTrail(), WithAudit(nil, false)},
	} {
		t.Run(name, func(t *testing.T) {
			f := startFilesWith(t, startBarePeer, append([]Option{WithDecider(rootModeDecider{})}, opts...)...)
			data := f.mustFail("files/read", map[string]any{"path": "ro/a.txt"}, -32004, "IO_ERROR")
			if data["reason"] != corridor.ReasonAuditUnavailable || data["decisionId"] == "" {
				t.Errorf("data = %v, want %q with a decision id", data, corridor.ReasonAuditUnavailable)
			}
			refuseAll(t, f, -32004, "IO_ERROR")
		})
	}
}

// TestWithoutAuditTrailServes: a host that says so explicitly runs a session
// without a trail, and its requests go on.
func TestWithoutAuditTrailServes(t *testing.T) {
	f := startFilesWith(t, startBarePeer, WithDecider(rootModeDecider{}), WithAudit(nil, false), WithoutAuditTrail())
	f.call("files/read", map[string]any{"path": "ro/a.txt"})
	f.call("files/write", map[string]any{"path": "rw/new.txt", "content": "x"})
	if b, err := os.ReadFile(filepath.Join(f.rw, "new.txt")); err != nil || string(b) != "x" {
		t.Errorf("rw/new.txt = %q, %v; want the write done", b, err)
	}
}
