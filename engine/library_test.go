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
