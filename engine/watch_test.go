// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// taggedPolicy allows or denies everything and names its version in its reasons.
func taggedPolicy(tag string, allow bool) string {
	return fmt.Sprintf("package fsbroker.authz\n\ndecision := {\"allow\": %t, \"reasons\": [%q]}\n", allow, tag)
}

// taggedTest is a test file that passes for every taggedPolicy: the decision has one reason.
const taggedTest = "package fsbroker.authz_test\n\nimport data.fsbroker.authz\n\ntest_one_reason if count(authz.decision.reasons) == 1\n"

func TestHotReload(t *testing.T) {
	dir := policyDir(t, map[string]string{
		"authz.rego":      taggedPolicy("v1", true),
		"authz_test.rego": taggedTest,
	})
	e, err := New(context.Background(), Source{Dir: dir},
		WithReloadDebounce(20*time.Millisecond),
		WithLogger(hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Info})))
	if err != nil {
		t.Fatal(err)
	}
	reloads := watch(t, e)
	in := testInput(t, "read", "proj/a.txt", false)
	decide := func() Decision {
		t.Helper()
		d, err := e.Decide(context.Background(), in)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return d
	}
	rev1 := e.Revision()
	if d := decide(); !d.Allow || d.Revision != rev1 {
		t.Fatalf("initial decision = %#v", d)
	}

	// 1. An edit takes effect.
	start := time.Now()
	replaceFile(t, filepath.Join(dir, "authz.rego"), taggedPolicy("v2", false))
	ev := waitReload(t, reloads)
	t.Logf("edit to effect: %v (debounce 20 ms)", ev.at.Sub(start))
	if ev.err != nil {
		t.Fatalf("reload: %v", ev.err)
	}
	rev2 := e.Revision()
	if rev2 == rev1 || ev.revision != rev2 {
		t.Errorf("revision after reload %q (reported %q), before %q: want a new one", rev2, ev.revision, rev1)
	}
	if d := decide(); d.Allow || !slices.Equal(d.Reasons, []string{"v2"}) || d.Revision != rev2 {
		t.Errorf("decision after the edit = %#v", d)
	}

	// 2. A broken edit keeps the old policy deciding and reports file and line.
	start = time.Now()
	replaceFile(t, filepath.Join(dir, "authz.rego"), "package fsbroker.authz\n\ndecision := {\"allow\": input.path.canonicl}\n")
	ev = waitReload(t, reloads)
	t.Logf("broken edit to report: %v", ev.at.Sub(start))
	var le *LoadError
	if !errors.As(ev.err, &le) {
		t.Fatalf("reload after a broken edit: revision %q, error %v; want a *LoadError", ev.revision, ev.err)
	}
	if le.File != filepath.Join(dir, "authz.rego") || le.Line != 3 || !strings.Contains(le.Error(), "canonicl") {
		t.Errorf("LoadError = %q at %s:%d, want authz.rego:3 about canonicl", le.Error(), le.File, le.Line)
	}
	if d := decide(); d.Allow || !slices.Equal(d.Reasons, []string{"v2"}) || d.Revision != rev2 {
		t.Errorf("decision after the broken edit = %#v, want v2 still deciding", d)
	}
	if e.Revision() != rev2 {
		t.Errorf("revision changed to %q after a broken edit", e.Revision())
	}

	// 3. A failing test is a broken edit too.
	replaceFile(t, filepath.Join(dir, "authz.rego"),
		"package fsbroker.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"v3\", \"two\"]}\n")
	ev = waitReload(t, reloads)
	if !errors.As(ev.err, &le) || !strings.Contains(le.Error(), "test_one_reason failed") {
		t.Fatalf("reload with a failing test: %q, %v; want a *LoadError naming the test", ev.revision, ev.err)
	}
	if d := decide(); !slices.Equal(d.Reasons, []string{"v2"}) {
		t.Errorf("decision after an edit that fails its tests = %#v, want v2 still deciding", d)
	}

	// 4. A fixed edit takes effect again.
	start = time.Now()
	replaceFile(t, filepath.Join(dir, "authz.rego"), taggedPolicy("v4", false))
	ev = waitReload(t, reloads)
	t.Logf("fixing edit to effect: %v", ev.at.Sub(start))
	if ev.err != nil {
		t.Fatalf("reload after the fix: %v", ev.err)
	}
	rev4 := e.Revision()
	if rev4 == rev2 || ev.revision != rev4 {
		t.Errorf("revision after the fix %q (reported %q), want new", rev4, ev.revision)
	}
	if d := decide(); !slices.Equal(d.Reasons, []string{"v4"}) || d.Revision != rev4 {
		t.Errorf("decision after the fix = %#v", d)
	}

	// 5. A new directory with a data file in it is picked up.
	writeFiles(t, dir, map[string]string{"fsbroker/limits/data.json": `{"maxBytes": 7}`})
	ev = waitReload(t, reloads)
	if ev.err != nil || ev.revision == rev4 {
		t.Errorf("reload after adding a data file: %q, %v", ev.revision, ev.err)
	}
}

// testWriter sends log output to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestReloadRecoversWithSameRevision(t *testing.T) {
	dir := policyDir(t, map[string]string{"authz.rego": taggedPolicy("v1", true)})
	e, err := New(context.Background(), Source{Dir: dir}, WithReloadDebounce(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rev := e.Revision()
	reloads := watch(t, e)
	file := filepath.Join(dir, "authz.rego")
	replaceFile(t, file, "package fsbroker.authz\n\ndecision := \n")
	if ev := waitReload(t, reloads); ev.err == nil {
		t.Fatalf("broken edit reloaded: %q", ev.revision)
	}
	// Back to the very same files: the failure is over, and that is reported.
	replaceFile(t, file, taggedPolicy("v1", true))
	if ev := waitReload(t, reloads); ev.err != nil || ev.revision != rev {
		t.Errorf("after reverting: %q, %v; want %q, nil", ev.revision, ev.err, rev)
	}
}

func TestConcurrentDecideDuringReloads(t *testing.T) {
	dir := policyDir(t, map[string]string{"authz.rego": taggedPolicy("v0", true)})
	e, err := New(context.Background(), Source{Dir: dir}, WithReloadDebounce(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	reloads := watch(t, e)
	in := testInput(t, "read", "proj/a.txt", false)

	// Every decision must come whole from one set: its revision always goes with the same tag
	// and allow, and nothing ever fails.
	var (
		mu        sync.Mutex
		byRev     = map[string]string{}
		decisions atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.Decide(context.Background(), in)
				if err != nil {
					t.Errorf("Decide during reload: %v", err)
					return
				}
				if len(d.Reasons) != 1 {
					t.Errorf("decision = %#v", d)
					return
				}
				tag := fmt.Sprintf("%s/%t", d.Reasons[0], d.Allow)
				mu.Lock()
				if old, ok := byRev[d.Revision]; ok && old != tag {
					t.Errorf("revision %s decided %s and %s", d.Revision, old, tag)
				}
				byRev[d.Revision] = tag
				mu.Unlock()
				decisions.Add(1)
			}
		})
	}
	const edits = 8
	for i := 1; i <= edits; i++ {
		replaceFile(t, filepath.Join(dir, "authz.rego"), taggedPolicy(fmt.Sprintf("v%d", i), i%2 == 0))
		ev := waitReload(t, reloads)
		if ev.err != nil {
			t.Fatalf("reload %d: %v", i, ev.err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d decisions during %d reloads, %d revisions seen", decisions.Load(), edits, len(byRev))
	if d, err := e.Decide(context.Background(), in); err != nil || d.Reasons[0] != fmt.Sprintf("v%d", edits) {
		t.Errorf("final decision = %#v, %v", d, err)
	}
}

func TestWatchBundle(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "authz.tar.gz")
	saveBundle(t, file, makeBundle(t, "rev-1", map[string]string{"authz.rego": taggedPolicy("v1", true)}, nil))
	e, err := New(context.Background(), Source{Bundle: file}, WithReloadDebounce(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	reloads := watch(t, e)
	// Replace the bundle the way a deployment does: write elsewhere, rename over it.
	tmp := filepath.Join(dir, "next.tmp")
	saveBundle(t, tmp, makeBundle(t, "rev-2", map[string]string{"authz.rego": taggedPolicy("v2", false)}, nil))
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	ev := waitReload(t, reloads)
	if ev.err != nil || ev.revision != "rev-2" || e.Revision() != "rev-2" {
		t.Errorf("after replacing the bundle: %q, %v; revision %q", ev.revision, ev.err, e.Revision())
	}
}
