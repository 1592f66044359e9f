// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/policies"
)

// TestDefaultPolicies loads the embedded default policy set the way the broker does.
func TestDefaultPolicies(t *testing.T) {
	for _, run := range []bool{true, false} {
		start := time.Now()
		e, err := New(context.Background(), Source{FS: policies.FS}, WithRunTests(run))
		if err != nil {
			t.Fatalf("New(default policies, tests %t): %v", run, err)
		}
		t.Logf("loaded the default policies (tests run: %t) in %v, revision %s", run, time.Since(start), e.Revision())
	}
	e, err := New(context.Background(), Source{FS: policies.FS}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), testInput(t, "read", "proj/src/main.go", false, grant("read", "proj")))
	t.Logf("read with a grant: %#v, %v", d, err)
	d, err = e.Decide(context.Background(), testInput(t, "read", "proj/.env", false, grant("read", "proj")))
	t.Logf("read .env: %#v, %v", d, err)
	vis, err := e.Visible(context.Background(), visibleInput(t, "proj/a.go", "proj/.env", "proj/key.pem"))
	t.Logf("visible: %v, %v", vis, err)
	rep, err := Test(context.Background(), Source{FS: policies.FS})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tests, passed %t, coverage %.1f%%", len(rep.Results), rep.Passed(), rep.Coverage)
}

// TestDefaultPoliciesExtendedThroughSecretPath: a file that adds a definition
// of secret_path, one of the helpers authz.rego documents for extensions,
// protects more paths: the secrets rules deny them (and only them).
func TestDefaultPoliciesExtendedThroughSecretPath(t *testing.T) {
	ctx := context.Background()
	files := defaultFiles(t)
	files["local_private.rego"] = "package fsbroker.authz\n\nsecret_path(rel) if startswith(rel, \"private/\")\n"
	e, err := New(ctx, Source{Dir: policyDir(t, files)}, WithRunTests(false))
	if err != nil {
		t.Fatal(err)
	}
	for path, allow := range map[string]bool{"proj/private/notes.txt": false, "proj/public/notes.txt": true, "proj/.env": false} {
		d, err := e.Decide(ctx, testInput(t, "read", path, false, grant("read", "proj")))
		if err != nil || d.Allow != allow {
			t.Errorf("read %s: %#v, %v; want allow %t", path, d, err, allow)
		}
	}
}
