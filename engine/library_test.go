// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestLibraryHelpersWithoutTheBuiltinSet: an operator's own set, without the built-in one,
// calls the helpers of data.fsbroker.lib, by the package or one name at a time.
func TestLibraryHelpersWithoutTheBuiltinSet(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, map[string]string{"policy.rego": `package fsbroker.authz

import data.fsbroker.lib
import data.fsbroker.lib.secret_path

default decision := {"allow": false}

decision := {"allow": true} if {
	lib.covers("proj/src", input.path.mountPath)
	not secret_path(input.path.relative)
	input.bytes <= lib.max_read_bytes
}
`})
	for path, allow := range map[string]bool{"proj/src/a.go": true, "proj/src/.env": false, "proj/srcx/a.go": false} {
		if d, err := e.Decide(ctx, testInput(t, "read", path, false)); err != nil || d.Allow != allow {
			t.Errorf("read %s: %#v, %v; want allow %t", path, d, err, allow)
		}
	}
}

// TestHelperNamesBesideTheBuiltinSet: the helpers authz.rego documents for reuse keep their
// names in package fsbroker.authz, so a file written for the built-in set calls them as before.
func TestHelperNamesBesideTheBuiltinSet(t *testing.T) {
	ctx := context.Background()
	files := defaultFiles(t)
	files["local.rego"] = `package fsbroker.authz

deny contains {"code": "PERMISSION_DENIED", "reason": "local: changes only under proj/docs"} if {
	input.operation in change_operations
	some _, p in request_paths
	not covers("proj/docs", p.mountPath)
}

deny contains {"code": "QUOTA_EXCEEDED", "reason": "local: half the read limit"} if {
	input.operation in read_operations
	input.bytes > max_read_bytes / 2
}
`
	e := newTestEngine(t, files, WithRunTests(false))
	write := grant("write", "proj")
	for _, tc := range []struct {
		op, path string
		bytes    int
		allow    bool
	}{
		{"write", "proj/docs/a.md", 1, true},
		{"write", "proj/src/a.go", 1, false},
		{"read", "proj/src/a.go", 1, true},
		{"read", "proj/src/a.go", 16 << 20, false},
	} {
		in := testInput(t, tc.op, tc.path, true, write)
		in["bytes"] = tc.bytes
		if d, err := e.Decide(ctx, in); err != nil || d.Allow != tc.allow {
			t.Errorf("%s %s (%d bytes): %#v, %v; want allow %t", tc.op, tc.path, tc.bytes, d, err, tc.allow)
		}
	}
}

// TestSourceDefiningTheLibrary: a source that defines package fsbroker.lib itself is loaded with
// its own, not with the built-in one as well.
func TestSourceDefiningTheLibrary(t *testing.T) {
	ctx := context.Background()
	own := "package fsbroker.lib\n\ncovers(prefix, path) if prefix == path\n"
	e := newTestEngine(t, map[string]string{
		"lib.rego":    own,
		"policy.rego": "package fsbroker.authz\n\nimport data.fsbroker.lib\n\ndefault decision := {\"allow\": false}\n\ndecision := {\"allow\": true} if lib.covers(\"proj/a\", input.path.mountPath)\n",
	})
	for path, allow := range map[string]bool{"proj/a": true, "proj/a/b": false} {
		if d, err := e.Decide(ctx, testInput(t, "read", path, false)); err != nil || d.Allow != allow {
			t.Errorf("read %s: %#v, %v; want allow %t (the source's covers)", path, d, err, allow)
		}
	}
	_, err := New(ctx, Source{Dir: policyDir(t, map[string]string{
		"lib.rego":    own,
		"policy.rego": "package fsbroker.authz\n\nimport data.fsbroker.lib\n\ndecision := {\"allow\": lib.secret_path(input.path.relative)}\n",
	})})
	var lerr *LoadError
	if !errors.As(err, &lerr) || !strings.Contains(err.Error(), "secret_path") {
		t.Errorf("a call of a helper the source's own library lacks: %v; want a load error naming it", err)
	}
}

// TestOperatorTestsOfADecisionOnlySet: `fsbroker policy test` on a directory that defines only
// decision runs its tests, which may ask the derived visible and consentable, and its coverage
// counts its own lines, not the library's.
func TestOperatorTestsOfADecisionOnlySet(t *testing.T) {
	dir := policyDir(t, map[string]string{
		"policy.rego": `package fsbroker.authz

import data.fsbroker.lib

default decision := {"allow": false}

decision := {"allow": true} if {
	input.operation == "read"
	lib.covered(input.path, {"read"})
}
`,
		"policy_test.rego": `package fsbroker.authz_test

entry(rel) := {"requested": concat("/", ["proj", rel]), "canonical": concat("/", ["/srv/proj", rel]), "root": "/srv/proj",
	"mount": "proj", "relative": rel, "mountPath": concat("/", ["proj", rel]), "writable": false,
	"exists": true, "type": "file", "size": 1, "nlink": 1, "hidden": false}

batch(operation, grants) := {
	"version": 1, "method": "files/list", "operation": operation, "bytes": 0, "grants": grants,
	"server": {"id": "s", "name": "s", "version": "1", "pinned": false},
	"session": {"id": "1", "protocolVersion": "2025-06-18", "transport": "stdio"},
	"usage": {"bytesWrittenToday": 0, "watches": 0},
	"time": {"rfc3339": "2026-01-01T00:00:00Z", "unixNano": 1767225600000000000},
	"params": {"access": "read"},
	"entries": [entry("a"), entry("b")],
}

test_listing_shows_what_is_granted if {
	data.fsbroker.derived.visible == {"proj/a"} with input as batch("visible", [{"access": "read", "path": "proj/a", "granted": "", "expires": ""}])
}

test_consent_grants_reads if {
	data.fsbroker.derived.consentable == {"proj/a", "proj/b"} with input as batch("consent", [])
}
`,
	})
	rep, err := Test(context.Background(), Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || !rep.Passed() {
		t.Errorf("results %+v; want 2 tests passed", rep.Results)
	}
	if rep.Coverage != 100 {
		t.Errorf("coverage %.1f%%, want 100%% (the library's lines are not the set's)", rep.Coverage)
	}
	if err := Check(context.Background(), Source{Dir: dir}); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestDerivedCaching: the derived rules leave a set's decisions cached as they were (a set that
// reads no time keeps them for its life) and answer batches for at most a second (they put
// input.time in the grant they add); a set that calls a helper reading input.time
// (lib.covered) keeps its decisions for at most a second.
func TestDerivedCaching(t *testing.T) {
	allow := newTestEngine(t, map[string]string{"policy.rego": "package fsbroker.authz\n\ndecision := {\"allow\": true}\n"}).current()
	if allow.cache == nil || allow.cache.ttl != 0 || allow.batches == nil || allow.batches.ttl != timeTTL {
		t.Errorf("allow all: decision cache %+v, batch cache %+v; want decisions kept, batches for %s", allow.cache, allow.batches, timeTTL)
	}
	granted := newTestEngine(t, map[string]string{"policy.rego": "package fsbroker.authz\n\nimport data.fsbroker.lib\n\ndecision := {\"allow\": lib.covered(input.path, {\"read\"})}\n"}).current()
	if granted.cache == nil || granted.cache.ttl != timeTTL {
		t.Errorf("a set calling lib.covered: decision cache %+v; want decisions kept for %s", granted.cache, timeTTL)
	}
	own := newTestEngine(t, map[string]string{"policy.rego": "package fsbroker.authz\n\ndecision := {\"allow\": true}\n\nvisible := set()\n\nconsentable := set()\n"}).current()
	if own.batches == nil || own.batches.ttl != 0 {
		t.Errorf("a set with its own visible and consentable: batch cache %+v; want batches kept", own.batches)
	}
	builtOn := newTestEngine(t, map[string]string{"policy.rego": "package fsbroker.authz\n\ndecision := {\"allow\": true}\n\nvisible := set()\n\nconsentable := data.fsbroker.derived.consentable\n"}).current()
	if builtOn.batches == nil || builtOn.batches.ttl != timeTTL {
		t.Errorf("a set whose own consentable uses the derived one: batch cache %+v; want batches for %s", builtOn.batches, timeTTL)
	}
}
