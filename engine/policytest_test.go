// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestTestReport(t *testing.T) {
	dir := policyDir(t, map[string]string{
		"authz.rego": `package fsbroker.authz

default allow := false

allow if input.operation == "read"

reasons contains "writes are off" if input.operation == "write"

reasons contains "deletes are off" if input.operation == "delete"

decision := {"allow": allow, "reasons": reasons}
`,
		"authz_test.rego": `package fsbroker.authz_test

import data.fsbroker.authz

test_read_allowed if authz.allow with input as {"operation": "read"}

test_write_denied if {
	not authz.allow with input as {"operation": "write"}
	authz.reasons == {"writes are off"} with input as {"operation": "write"}
}

test_wrong if authz.allow with input as {"operation": "write"}

todo_test_later if false
`,
	})
	rep, err := Test(context.Background(), Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]TestResult{}
	for _, r := range rep.Results {
		t.Logf("%s.%s pass=%t skip=%t fail=%q %s:%d %v", r.Package, r.Name, r.Pass, r.Skip, r.Fail, r.File, r.Line, r.Duration)
		got[r.Name] = r
		if r.Package != "data.fsbroker.authz_test" {
			t.Errorf("%s: Package = %q", r.Name, r.Package)
		}
	}
	if len(rep.Results) != 4 {
		t.Errorf("%d results, want 4", len(rep.Results))
	}
	if r := got["test_read_allowed"]; !r.Pass || r.Fail != "" {
		t.Errorf("test_read_allowed = %+v, want a pass", r)
	}
	if r := got["test_write_denied"]; !r.Pass {
		t.Errorf("test_write_denied = %+v, want a pass", r)
	}
	if r := got["test_wrong"]; r.Pass || r.Fail == "" || r.Line != 12 || !strings.HasSuffix(r.File, "authz_test.rego") {
		t.Errorf("test_wrong = %+v, want a failure at authz_test.rego:12", r)
	}
	if r := got["todo_test_later"]; !r.Pass || !r.Skip {
		t.Errorf("todo_test_later = %+v, want skipped", r)
	}
	if rep.Passed() {
		t.Error("Passed() with a failing test")
	}
	// The delete reason is never evaluated: coverage is below 100 but well above 0. Only the
	// policy file counts.
	t.Logf("coverage %.1f%%", rep.Coverage)
	if rep.Coverage <= 50 || rep.Coverage >= 100 {
		t.Errorf("Coverage = %.1f, want between 50 and 100", rep.Coverage)
	}
}

func TestTestCompileError(t *testing.T) {
	dir := policyDir(t, map[string]string{
		"authz.rego":      okDecision,
		"authz_test.rego": "package fsbroker.authz_test\n\ntest_x if input.path.canonicl == \"\"\n",
	})
	_, err := Test(context.Background(), Source{Dir: dir})
	var le *LoadError
	if !errors.As(err, &le) || le.Line != 3 || !strings.HasSuffix(le.File, "authz_test.rego") {
		t.Errorf("Test = %v, want a *LoadError at authz_test.rego:3", err)
	}
}

func TestTestBasic(t *testing.T) {
	rep, err := Test(context.Background(), basicSource())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed() || len(rep.Results) != 2 {
		t.Errorf("report = %+v", rep)
	}
	t.Logf("testdata/basic coverage %.1f%%", rep.Coverage)
}

func TestCheck(t *testing.T) {
	if err := Check(context.Background(), basicSource()); err != nil {
		t.Errorf("Check(basic) = %v", err)
	}
	dir := policyDir(t, map[string]string{"authz.rego": "package fsbroker.authz\n\ndecision := {\"allow\": input.path.canonicl}\n"})
	err := Check(context.Background(), Source{Dir: dir})
	var le *LoadError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("Check = %v, want a *LoadError at line 3", err)
	}
}
