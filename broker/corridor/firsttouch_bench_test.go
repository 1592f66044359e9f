// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package corridor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/audit/audittest"
	"github.com/fsbroker/fsbroker/broker/executor"
	"github.com/fsbroker/fsbroker/broker/grants"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/usage"
	"github.com/fsbroker/fsbroker/engine"
	"github.com/fsbroker/fsbroker/internal/cputime"
	"github.com/fsbroker/fsbroker/policies"
)

// firstTouchFilesPerDir is how many files each directory of the first-touch tree holds.
const firstTouchFilesPerDir = 100

// firstTouchContent is every first-touch file's content: 1 KiB of text.
var firstTouchContent = bytes.Repeat([]byte("0123456789abcde\n"), 64)

// firstTouchPath is the mount-relative path of the i-th file of the first-touch tree.
func firstTouchPath(i int) string {
	return fmt.Sprintf("proj/src/d%03d/f%06d.txt", i/firstTouchFilesPerDir, i)
}

// firstTouchCorridor builds what fsbroker's runtime gives a session (broker/runtime), in a
// temporary directory: a writable root "proj", pre-approved, holding n files of 1 KiB
// (firstTouchPath), the executor, grants and usage stores on a state directory, the real engine
// with the built-in policies, and a real audit trail in its default sync mode (batch).
func firstTouchCorridor(b *testing.B, n int) (*Corridor, Caller) {
	b.Helper()
	base := b.TempDir()
	root := filepath.Join(base, "proj")
	for i := range n {
		p := filepath.Join(base, filepath.FromSlash(firstTouchPath(i)))
		if i%firstTouchFilesPerDir == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, firstTouchContent, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	set, err := roots.New([]roots.Spec{{Path: root, Mount: "proj", Writable: true, Preapproved: true}})
	if err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(base, "state")
	x, err := executor.New(state)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	gs, err := grants.Open(filepath.Join(state, grants.DirName))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = gs.Close() })
	us, err := usage.Open(filepath.Join(state, usage.DirName))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = us.Close() })
	e, err := engine.New(context.Background(), engine.Source{FS: policies.FS}, engine.WithRunTests(false))
	if err != nil {
		b.Fatal(err)
	}
	trail, _ := audittest.Open(b, audit.WithSync(audit.SyncBatch))
	c := New(WithRoots(func() *roots.Set { return set }), WithExecutor(x), WithDecider(engine.Decider{Engine: e}),
		WithAudit(trail, false), WithUsage(us), WithConsent(nil, gs))
	b.Cleanup(c.Close)
	return c, Caller{ID: "bench", Name: "bench", Version: "1.0.0", SessionID: "s1", ProtocolVersion: "2025-11-25", Transport: "stdio"}
}

// BenchmarkReadFirstTouch is the whole corridor's files/read of 1 KiB on first touch: each
// iteration reads a file no earlier iteration read (proj/src/dNNN/fNNNNNN.txt, a hundred to a
// directory), so the decision cache answers none of them, through everything a session's
// corridor runs in fsbroker (canonicalization and resolution, the consent check, the built-in
// policy set with its decision cache, the audit trail's decision and outcome records in batch
// mode, the executor's confined read). The files are made before the timer starts. Besides
// ns/op (wall time, which other processes on a shared machine inflate) it reports cpu-ns/op:
// the CPU time of the whole process per read, every thread included (the garbage collector,
// the trail's syncer), where the platform tells it.
func BenchmarkReadFirstTouch(b *testing.B) {
	c, caller := firstTouchCorridor(b, b.N)
	ctx := context.Background()
	params := make([][]byte, b.N)
	paths := make([]string, b.N)
	for i := range b.N {
		paths[i] = firstTouchPath(i)
		params[i] = fmt.Appendf(nil, `{"path":%q}`, paths[i])
	}
	b.ReportAllocs()
	cpu0, haveCPU := cputime.Process()
	b.ResetTimer()
	for i := range b.N {
		r, err := c.Read(ctx, caller, ReadRequest{Path: paths[i], Length: -1, UTF8: true, Params: params[i]})
		if err != nil || len(r.Data) != len(firstTouchContent) {
			b.Fatalf("read %s: %d bytes, %v", paths[i], len(r.Data), err)
		}
	}
	b.StopTimer()
	if cpu1, _ := cputime.Process(); haveCPU {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
