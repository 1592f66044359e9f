// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestDecideAllowAndDeny(t *testing.T) {
	e, err := New(context.Background(), basicSource())
	if err != nil {
		t.Fatal(err)
	}
	obligations := map[string]any{"maxBytes": json.Number("1048576")}
	tests := []struct {
		name  string
		input map[string]any
		want  Decision
	}{
		{
			name:  "granted read",
			input: testInput(t, "read", "proj/src/main.go", false, grant("read", "proj/src")),
			want:  Decision{Allow: true, Reasons: []string{}, Obligations: obligations},
		},
		{
			name:  "no grant",
			input: testInput(t, "read", "proj/src/main.go", false, grant("read", "proj/srcx")),
			want:  Decision{Allow: false, Code: CodePermissionDenied, Reasons: []string{}, Obligations: obligations},
		},
		{
			name:  "hidden file",
			input: testInput(t, "read", "proj/.env", false, grant("read", "proj")),
			want: Decision{Allow: false, Code: CodePermissionDenied,
				Reasons: []string{"hidden files are not served"}, Obligations: obligations},
		},
		{
			name:  "write to a read-only root",
			input: testInput(t, "write", "proj/.git/config", false, grant("write", "proj")),
			want: Decision{Allow: false, Code: CodePermissionDenied,
				Reasons: []string{"hidden files are not served", "the root is read-only"}, Obligations: obligations},
		},
		{
			name:  "write to a writable root",
			input: testInput(t, "write", "proj/a.txt", true, grant("write", "proj")),
			want:  Decision{Allow: true, Reasons: []string{}, Obligations: obligations},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Revision = e.Revision()
			got, err := e.Decide(context.Background(), tc.input)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %#v\nwant %#v", got, tc.want)
			}

			// The same input as JSON decides the same.
			raw, err := json.Marshal(tc.input)
			if err != nil {
				t.Fatal(err)
			}
			got, err = e.Decide(context.Background(), json.RawMessage(raw))
			if err != nil {
				t.Fatalf("Decide(json): %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide(json) = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// failClosed checks a fail-closed denial.
func failClosed(t *testing.T, d Decision, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Error("no error returned with the fail-closed decision")
	}
	if d.Allow || d.Code != CodePermissionDenied || !slices.Equal(d.Reasons, []string{reason}) {
		t.Errorf("decision = %#v, want a denial with code %s and reason %q", d, CodePermissionDenied, reason)
	}
}

func TestDecideFailsClosed(t *testing.T) {
	const pkg = "package fsbroker.authz\n\n"
	tests := []struct {
		name    string
		policy  string
		reason  string
		wantErr string // substring of the error
		notErr  error  // the error must not be this (a builtin error is not "undefined")
	}{
		{
			name:    "undefined decision",
			policy:  `decision := {"allow": true} if input.operation == "delete"`,
			reason:  reasonUndefined,
			wantErr: "undefined",
		},
		{
			name:    "division by zero",
			policy:  `decision := {"allow": 1 / count(input.grants) > 0}`,
			reason:  reasonEvalFailed,
			wantErr: "divide by zero",
			notErr:  errUndefined,
		},
		{
			name:    "built-in error",
			policy:  `decision := {"allow": to_number(input.session.id) > 0}`,
			reason:  reasonEvalFailed,
			wantErr: "to_number",
			notErr:  errUndefined,
		},
		{
			name:    "conflicting values",
			policy:  "decision := {\"allow\": true} if input.version == 1\n\ndecision := {\"allow\": false} if input.bytes == 0",
			reason:  reasonEvalFailed,
			wantErr: "conflict",
		},
		{name: "not an object", policy: `decision := true`, reason: reasonWrongShape, wantErr: "want an object"},
		{name: "no allow", policy: `decision := {"code": "QUOTA_EXCEEDED"}`, reason: reasonWrongShape, wantErr: "no allow"},
		{name: "allow is a string", policy: `decision := {"allow": "yes"}`, reason: reasonWrongShape, wantErr: "allow"},
		{name: "code is a number", policy: `decision := {"allow": true, "code": 7}`, reason: reasonWrongShape, wantErr: "code"},
		{name: "reasons is a string", policy: `decision := {"allow": true, "reasons": "ok"}`, reason: reasonWrongShape, wantErr: "reasons"},
		{name: "reasons holds a number", policy: `decision := {"allow": true, "reasons": [1]}`, reason: reasonWrongShape, wantErr: "reasons"},
		{name: "obligations is an array", policy: `decision := {"allow": true, "obligations": []}`, reason: reasonWrongShape, wantErr: "obligations"},
		{name: "unknown key", policy: `decision := {"allow": true, "obligation": {}}`, reason: reasonWrongShape, wantErr: "unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, map[string]string{"authz.rego": pkg + tc.policy + "\n"})
			d, err := e.Decide(context.Background(), testInput(t, "read", "proj/a.txt", false))
			failClosed(t, d, err, tc.reason)
			if err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
			if tc.notErr != nil && errors.Is(err, tc.notErr) {
				t.Errorf("error %q is %v", err, tc.notErr)
			}
			if d.Revision != e.Revision() {
				t.Errorf("revision = %q, want %q", d.Revision, e.Revision())
			}
			// Explain fails closed the same way.
			d, _, err = e.Explain(context.Background(), testInput(t, "read", "proj/a.txt", false))
			failClosed(t, d, err, tc.reason)
		})
	}

	t.Run("input not an object", func(t *testing.T) {
		e, err := New(context.Background(), basicSource())
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []any{nil, "x", []any{}, json.RawMessage(`[1]`), json.RawMessage(`{`)} {
			d, err := e.Decide(context.Background(), in)
			failClosed(t, d, err, reasonBadInput)
		}
	})
	t.Run("input that cannot be converted", func(t *testing.T) {
		e, err := New(context.Background(), basicSource())
		if err != nil {
			t.Fatal(err)
		}
		// Maps are converted before evaluation (the engine adds its facts): the failure is
		// the input's, whether it is nested or not.
		in := testInput(t, "read", "proj/a.txt", false, grant("read", "proj"))
		in["path"] = map[string]any{"hidden": false, "mountPath": make(chan int)}
		d, err := e.Decide(context.Background(), in)
		failClosed(t, d, err, reasonBadInput)
		t.Logf("error: %v", err)
		d, err = e.Decide(context.Background(), map[string]chan int{"x": nil})
		failClosed(t, d, err, reasonBadInput)
	})
	t.Run("no engine", func(t *testing.T) {
		var e *Engine
		d, err := e.Decide(context.Background(), testInput(t, "read", "proj/a.txt", false))
		failClosed(t, d, err, reasonNoPolicy)
		if !errors.Is(err, errNoPolicy) {
			t.Errorf("error = %v, want errNoPolicy", err)
		}
		vis, err := e.Visible(context.Background(), visibleInput(t, "proj/a"))
		if err == nil || len(vis) != 0 {
			t.Errorf("Visible = %v, %v; want nothing and an error", vis, err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		e, err := New(context.Background(), basicSource())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := e.Decide(ctx, testInput(t, "read", "proj/a.txt", false, grant("read", "proj")))
		failClosed(t, d, err, reasonEvalFailed)
	})
}

func TestQuotaCode(t *testing.T) {
	e := newTestEngine(t, map[string]string{"authz.rego": `package fsbroker.authz

decision := {"allow": false, "code": "QUOTA_EXCEEDED", "reasons": ["over the daily byte quota"]} if {
	input.usage.bytesWrittenToday + input.bytes > 100
} else := {"allow": true}
`})
	in := testInput(t, "write", "proj/a", true)
	in["bytes"] = 101
	d, err := e.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := Decision{Allow: false, Code: "QUOTA_EXCEEDED", Reasons: []string{"over the daily byte quota"}, Revision: e.Revision()}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Decide = %#v, want %#v", d, want)
	}
}

// loadErr loads files and returns the *LoadError New must fail with.
func loadErr(t *testing.T, files map[string]string, opts ...Option) (*LoadError, string) {
	t.Helper()
	dir := policyDir(t, files)
	e, err := New(context.Background(), Source{Dir: dir}, opts...)
	if err == nil {
		t.Fatalf("New succeeded (revision %s), want a *LoadError", e.Revision())
	}
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("New: %T %v, want a *LoadError", err, err)
	}
	t.Logf("load error: %v", le)
	return le, dir
}

const okDecision = "package fsbroker.authz\n\ndecision := {\"allow\": false}\n"

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		file     string // the file the first problem names, relative to the directory
		line     int
		contains string
	}{
		{
			name:     "syntax error",
			files:    map[string]string{"a.rego": okDecision, "sub/bad.rego": "package fsbroker.x\n\nallow if {\n\tinput.operation ==\n"},
			file:     "sub/bad.rego",
			line:     5,
			contains: "rego_parse_error",
		},
		{
			name: "type error against the input schema",
			files: map[string]string{"a.rego": okDecision, "paths.rego": `package fsbroker.paths

secret if {
	endswith(input.path.canonicl, ".pem")
}
`},
			file:     "paths.rego",
			line:     4,
			contains: "input.path.canonicl",
		},
		{
			name:     "type mismatch against the input schema",
			files:    map[string]string{"a.rego": okDecision, "v.rego": "package fsbroker.v\n\nold if input.version == \"1\"\n"},
			file:     "v.rego",
			line:     3,
			contains: "rego_type_error",
		},
		{
			name:     "strict mode",
			files:    map[string]string{"a.rego": okDecision, "s.rego": "package fsbroker.s\n\nx if {\n\ty := 1\n\tinput.bytes > 0\n}\n"},
			file:     "s.rego",
			line:     4,
			contains: "unused",
		},
		{
			name:     "bad data file",
			files:    map[string]string{"a.rego": okDecision, "fsbroker/limits/data.json": "{\n  \"max\": 1,\n  oops\n}\n"},
			file:     "fsbroker/limits/data.json",
			line:     3,
			contains: "invalid JSON",
		},
		{
			name:     "data file that is not an object",
			files:    map[string]string{"a.rego": okDecision, "x/data.yaml": "- 1\n- 2\n"},
			file:     "x/data.yaml",
			contains: "object",
		},
		{
			name:     "overlapping data files",
			files:    map[string]string{"a.rego": okDecision, "data.json": `{"x": {"k": 1}}`, "x/data.yaml": "k: 2\n"},
			contains: "data.x.k",
		},
		{
			name:     "no decision",
			files:    map[string]string{"a.rego": "package fsbroker.authz\n\nallow := true\n"},
			contains: "no rule defines data.fsbroker.authz.decision",
		},
		{
			name:     "empty directory",
			files:    map[string]string{"README.md": "nothing here"},
			contains: "no rule defines",
		},
		{
			name: "failing test",
			files: map[string]string{"a.rego": okDecision, "a_test.rego": `package fsbroker.authz_test

import data.fsbroker.authz

test_denied if not authz.decision.allow

test_allowed if authz.decision.allow
`},
			file:     "a_test.rego",
			line:     7,
			contains: "test_allowed failed",
		},
		{
			name: "test that errors",
			files: map[string]string{"a.rego": okDecision, "a_test.rego": `package fsbroker.authz_test

test_errors if to_number("x") == 1
`},
			file:     "a_test.rego",
			line:     3,
			contains: "to_number",
		},
		{
			name:     "test file that does not compile",
			files:    map[string]string{"a.rego": okDecision, "a_test.rego": "package fsbroker.authz_test\n\ntest_x if input.path.canonicl\n"},
			file:     "a_test.rego",
			line:     3,
			contains: "canonicl",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			le, dir := loadErr(t, tc.files)
			if tc.file != "" {
				if want := filepath.Join(dir, filepath.FromSlash(tc.file)); le.File != want {
					t.Errorf("File = %q, want %q", le.File, want)
				}
			}
			if tc.line != 0 && le.Line != tc.line {
				t.Errorf("Line = %d, want %d", le.Line, tc.line)
			}
			if !strings.Contains(le.Error(), tc.contains) {
				t.Errorf("error %q does not contain %q", le.Error(), tc.contains)
			}
			if len(le.Problems) == 0 || le.Problems[0].File != le.File || le.Problems[0].Line != le.Line {
				t.Errorf("Problems = %+v do not start with File and Line", le.Problems)
			}
			// Check reports the same compile errors; tests are not its business.
			if err := Check(context.Background(), Source{Dir: dir}); err == nil && !strings.Contains(tc.name, "test") && !strings.Contains(tc.contains, "no rule") {
				t.Errorf("Check succeeded, want an error")
			}
		})
	}
}

func TestRunTestsOption(t *testing.T) {
	files := map[string]string{"a.rego": okDecision, "a_test.rego": "package fsbroker.authz_test\n\nimport data.fsbroker.authz\n\ntest_allowed if authz.decision.allow\n"}
	loadErr(t, files)
	if _, err := New(context.Background(), Source{Dir: policyDir(t, files)}, WithRunTests(false)); err != nil {
		t.Errorf("New with WithRunTests(false): %v", err)
	}
	// Without tests, the test files are not parsed either: one that does not parse gates only a
	// load that runs them. It still counts in the revision.
	broken := map[string]string{"a.rego": okDecision, "a_test.rego": "package fsbroker.authz_test\n\ntest_x if {\n"}
	dir := policyDir(t, broken)
	e, err := New(context.Background(), Source{Dir: dir}, WithRunTests(false))
	if err != nil {
		t.Fatalf("New with WithRunTests(false) and a broken test file: %v", err)
	}
	if set := e.current(); set.tests != 1 || set.revision == newTestEngine(t, map[string]string{"a.rego": okDecision}, WithRunTests(false)).Revision() {
		t.Errorf("tests = %d, revision %s: want the test file counted and in the revision", set.tests, set.revision)
	}
	if _, err := New(context.Background(), Source{Dir: dir}); err == nil {
		t.Error("New with tests and a broken test file succeeded")
	}
	if err := Check(context.Background(), Source{Dir: dir}); err == nil {
		t.Error("Check with a broken test file succeeded")
	}
}

func TestSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  Source
		is   error
	}{
		{name: "empty", src: Source{}},
		{name: "two sources", src: Source{Dir: "testdata/basic", Bundle: "x.tar.gz"}},
		{name: "missing directory", src: Source{Dir: filepath.Join(t.TempDir(), "nope")}, is: fs.ErrNotExist},
		{name: "missing bundle", src: Source{Bundle: filepath.Join(t.TempDir(), "nope.tar.gz")}, is: fs.ErrNotExist},
		{name: "file as directory", src: Source{Dir: "testdata/basic/authz.rego"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.src)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("New: %T %v, want a *LoadError", err, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	e, err := New(context.Background(), basicSource())
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Visible(context.Background(), visibleInput(t, "proj/a.txt", "proj/.env", "proj/src/.cache/x", "proj/src/b.go"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"proj/a.txt": true, "proj/src/b.go": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Visible = %v, want %v", got, want)
	}

	got, err = e.Visible(context.Background(), visibleInput(t))
	if err != nil || len(got) != 0 {
		t.Errorf("Visible(no entries) = %v, %v; want nothing, no error", got, err)
	}

	failures := []struct{ name, policy string }{
		{"evaluation error", "visible contains e.mountPath if {\n\tsome e in input.entries\n\tto_number(e.relative) > 0\n}"},
		{"wrong shape", `visible := {"a": 1}`},
		{"not strings", "visible contains e.size if {\n\tsome e in input.entries\n}"},
		{"undefined", `visible := {"proj/a.txt"} if count(input.entries) > 100`},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, map[string]string{"a.rego": okDecision + "\n" + tc.policy + "\n"})
			got, err := e.Visible(context.Background(), visibleInput(t, "proj/a.txt", "proj/b.txt"))
			if err == nil || len(got) != 0 {
				t.Errorf("Visible = %v, %v; want nothing and an error", got, err)
			}
			t.Logf("error: %v", err)
		})
	}
}

func TestExplain(t *testing.T) {
	e, err := New(context.Background(), basicSource())
	if err != nil {
		t.Fatal(err)
	}
	d, lines, err := e.Explain(context.Background(), testInput(t, "write", "proj/.env", false, grant("write", "proj")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || !slices.Equal(d.Reasons, []string{"hidden files are not served", "the root is read-only"}) {
		t.Errorf("decision = %#v", d)
	}
	for _, l := range lines {
		t.Log(l)
	}
	file := filepath.Join("testdata", "basic", "authz.rego")
	for _, want := range []string{
		file + `:18: data.fsbroker.authz.deny contains "hidden files are not served"`,
		file + `:20: data.fsbroker.authz.deny contains "the root is read-only"`,
		file + `:6: data.fsbroker.authz.allow = false (default)`,
		file + `:27: data.fsbroker.authz.code = "PERMISSION_DENIED"`,
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("Explain lines do not contain %q", want)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "covers") {
			t.Errorf("a function is listed: %q", l)
		}
	}
}

func TestRevision(t *testing.T) {
	files := map[string]string{"a.rego": okDecision, "x/data.json": `{"k": 1}`}
	a := newTestEngine(t, files)
	b := newTestEngine(t, files) // another directory, same files
	if a.Revision() == "" || a.Revision() != b.Revision() {
		t.Errorf("revisions %q and %q, want equal and not empty", a.Revision(), b.Revision())
	}
	files["x/data.json"] = `{"k": 2}`
	if c := newTestEngine(t, files); c.Revision() == a.Revision() {
		t.Error("changing a data file does not change the revision")
	}
	files["x/data.json"] = `{"k": 1}`
	files["b.rego"] = "package fsbroker.other\n\nx := 1\n"
	if c := newTestEngine(t, files); c.Revision() == a.Revision() {
		t.Error("adding a module does not change the revision")
	}
	// Hidden files and other files are not part of the set.
	files["b.rego"] = ""
	delete(files, "b.rego")
	files[".hidden.rego"] = "not rego"
	files["notes.txt"] = "x"
	files["input.json"] = "[not data"
	if c := newTestEngine(t, files); c.Revision() != a.Revision() {
		t.Error("ignored files change the revision")
	}
}

func TestFSSource(t *testing.T) {
	fsys := fstest.MapFS{
		"authz.rego":                  {Data: []byte(okDecision)},
		"fsbroker/limits/data.yaml":   {Data: []byte("maxBytes: 5\n")},
		"use.rego":                    {Data: []byte("package fsbroker.use\n\nmax := data.fsbroker.limits.maxBytes\n")},
		".git/config":                 {Data: []byte("x")},
		"authz_test.rego":             {Data: []byte("package fsbroker.authz_test\n\nimport data.fsbroker.use\n\ntest_max if use.max == 5\n")},
		"testdata/fixtures/note.json": {Data: []byte("{}")},
	}
	e, err := New(context.Background(), Source{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), testInput(t, "read", "p/a", false))
	if err != nil || d.Allow {
		t.Errorf("Decide = %#v, %v", d, err)
	}
	// An FS never changes: Watch just waits.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx, nil) }()
	waitWatching(t, e)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch = %v", err)
	}
}
