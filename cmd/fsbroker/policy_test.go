// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/policies"
)

// copyDefaultPolicies writes the built-in policy set into dir, as an admin
// starting from it would.
func copyDefaultPolicies(t *testing.T, dir string) {
	t.Helper()
	err := fs.WalkDir(policies.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(policies.FS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPoliciesLoadErrorExits2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyDefaultPolicies(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "local.rego"), []byte("package fsbroker.authz\n\ndeny contains \"typo\" if {\n  input.path.canonicl == 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBroker(t, "", "stdio", "--root", t.TempDir(), "--policies", dir)
	if code := p.waitExit(); code != 2 {
		t.Fatalf("exit status %d, want 2", code)
	}
	if log := p.log(); !strings.Contains(log, "local.rego:4") {
		t.Errorf("the error does not name local.rego:4:\n%s", log)
	}
}

// TestPolicyEditTakesEffectWithoutRestart is the admin's path: a rule that
// denies one server writes under docs/, added while the broker runs.
func TestPolicyEditTakesEffectWithoutRestart(t *testing.T) {
	t.Parallel()
	pol, root := t.TempDir(), t.TempDir()
	copyDefaultPolicies(t, pol)
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	mount := filepath.Base(root)
	p := startBroker(t, "", "stdio", "--root", root+":rw", "--policies", pol, "--log-level", "debug")
	p.handshake("2025-11-25") // serverInfo.name is "cli-test-peer"
	write := func(id string) *message {
		return p.Call(id, "files/write", map[string]any{"path": mount + "/docs/a.md", "content": "x"})
	}
	if r := write("before"); r.Error != nil {
		t.Fatalf("write before the rule: %s", r.Raw)
	}
	rule := `package fsbroker.authz

deny contains {"code": "PERMISSION_DENIED", "reason": "local: cli-test-peer may not write docs"} if {
	input.server.id == "cli-test-peer"
	input.operation == "write"
	startswith(input.path.relative, "docs/")
}
`
	start := time.Now()
	if err := os.WriteFile(filepath.Join(pol, "local.rego"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitLog(regexp.MustCompile(`policies reloaded`))
	t.Logf("policy edit to effect: %v", time.Since(start))
	r := write("after")
	if r.Error == nil || !strings.Contains(string(r.Error.Data), "may not write docs") {
		t.Fatalf("write after the rule: %s", r.Raw)
	}
	// A broken edit keeps the last good set deciding.
	if err := os.WriteFile(filepath.Join(pol, "local.rego"), []byte("package fsbroker.authz\n\ndeny contains {"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitLog(regexp.MustCompile(`policy reload failed`))
	if r := write("broken"); r.Error == nil {
		t.Fatalf("after a broken edit the old rule stopped deciding: %s", r.Raw)
	}
}

func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	good := t.TempDir()
	copyDefaultPolicies(t, good)
	failing := t.TempDir()
	copyDefaultPolicies(t, failing)
	if err := os.WriteFile(filepath.Join(failing, "local_test.rego"), []byte("package fsbroker.authz_test\n\ntest_wrong if {\n  1 == 2\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "x.rego"), []byte("package fsbroker.authz\n\ndecision := {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"policy", "test"}, 0, "0 failed"},
		{[]string{"policy", "test", good}, 0, "coverage: 100.0%"},
		{[]string{"policy", "test", "--verbose", good}, 0, "PASS "},
		{[]string{"policy", "test", failing}, 4, "FAIL data.fsbroker.authz_test.test_wrong"},
		{[]string{"policy", "test", broken}, 3, "x.rego:"},
		{[]string{"policy", "check", good}, 0, "type-checks"},
		{[]string{"policy", "check", broken}, 3, "x.rego:"},
		{[]string{"policy", "frobnicate"}, 2, `unknown command "frobnicate": want check or test`},
		{[]string{"policy"}, 2, "give a command: check or test"},
		{[]string{"policy", "test", good, broken}, 2, "at most one policy directory"},
	}
	for _, c := range cases {
		stdout, stderr, code := runFsbroker(t, nil, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, stdout, stderr)
		}
		if out := stdout + stderr; !strings.Contains(out, c.want) {
			t.Errorf("%v: output lacks %q:\n%s", c.args, c.want, out)
		}
	}
}

func TestEvalExplainsADecision(t *testing.T) {
	t.Parallel()
	input := `{"version":1,"method":"files/read","operation":"read",
	"server":{"id":"s","name":"s","version":"1","pinned":false},
	"session":{"id":"x","protocolVersion":"2025-11-25","transport":"stdio"},
	"path":{"requested":"p/.env","canonical":"/r/.env","root":"/r","mount":"p","relative":".env","mountPath":"p/.env",
	        "writable":false,"exists":true,"type":"file","size":3,"nlink":1,"hidden":true},
	"params":{"path":"p/.env"},"bytes":3,"grants":[{"access":"read","path":"p","granted":"2026-01-01T00:00:00Z","expires":""}],
	"usage":{"bytesWrittenToday":0,"watches":0},"time":{"rfc3339":"2026-06-01T00:00:00Z","unixNano":1780272000000000000}}`
	file := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(file, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runFsbroker(t, nil, "eval", "--input", file)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{`"allow": false`, `"PERMISSION_DENIED"`, "secret", `"matched"`} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %s:\n%s", want, out)
		}
	}
}

// TestEvalRefusesAnInputOffTheSchema: an input the broker could never send
// (a required member missing, a misspelt one, a wrong type) is a usage
// error naming the member, never a decision.
func TestEvalRefusesAnInputOffTheSchema(t *testing.T) {
	t.Parallel()
	valid := map[string]any{"version": 1, "method": "files/read", "operation": "read",
		"server":  map[string]any{"id": "s", "name": "s", "version": "1", "pinned": false},
		"session": map[string]any{"id": "x", "protocolVersion": "2025-11-25", "transport": "stdio"},
		"path": map[string]any{"requested": "p/a", "canonical": "/r/a", "root": "/r", "mount": "p", "relative": "a",
			"mountPath": "p/a", "writable": false, "exists": true, "type": "file", "size": 3, "nlink": 1, "hidden": false},
		"params": map[string]any{"path": "p/a"}, "bytes": 3,
		"grants": []any{map[string]any{"access": "read", "path": "p", "granted": "2026-01-01T00:00:00Z", "expires": ""}},
		"usage":  map[string]any{"bytesWrittenToday": 0, "watches": 0},
		"time":   map[string]any{"rfc3339": "2026-06-01T00:00:00Z", "unixNano": int64(1780272000000000000)}}
	dir := t.TempDir()
	write := func(name string, doc map[string]any) string {
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	if _, stderr, code := runFsbroker(t, nil, "eval", "--input", write("valid", valid)); code != 0 {
		t.Fatalf("a valid input: exit %d\n%s", code, stderr)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"grants missing", func(m map[string]any) { delete(m, "grants") }, "grants"},
		{"misspelt member", func(m map[string]any) { m["operaton"] = m["operation"]; delete(m, "operation") }, "/operaton"},
		{"wrong type", func(m map[string]any) { m["bytes"] = "three" }, "/bytes"},
	} {
		doc := maps.Clone(valid)
		c.edit(doc)
		out, stderr, code := runFsbroker(t, nil, "eval", "--input", write(c.name, doc))
		if code != 2 || !strings.Contains(stderr, "schema/policy-input.json") || !strings.Contains(stderr, c.want) || strings.Contains(out, "allow") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming %s and no decision", c.name, code, out, stderr, c.want)
		}
	}
}
