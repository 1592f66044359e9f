// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/fsbroker/fsbroker/broker/decisionlog/decisionlogtest"
	"github.com/fsbroker/fsbroker/policies"
)

// defaultPolicyBundle returns the built-in policy set as a bundle, as
// `opa build` would make it.
func defaultPolicyBundle(t *testing.T, revision string) bundle.Bundle {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: revision}, Data: map[string]any{}}
	b.Manifest.Init()
	raw, err := fs.ReadFile(policies.FS, "data.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &b.Data); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(policies.FS, "*.rego")
	for _, name := range names {
		src, err := fs.ReadFile(policies.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ast.ParseModuleWithOpts(name, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + name, Path: "/" + name, Raw: src, Parsed: m})
	}
	return b
}

func writeBundle(t *testing.T, file string, b bundle.Bundle) {
	t.Helper()
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSignedBundle: a bundle signed with the operator's key decides; an
// unsigned or tampered one stops the broker with exit status 2.
func TestSignedBundle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "the fleet's bundle signing secret"
	keyFile := filepath.Join(dir, "bundle.key")
	if err := os.WriteFile(keyFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	sign := func(b *bundle.Bundle) {
		if err := b.GenerateSignature(bundle.NewSigningConfig(secret, "HS256", ""), "default", false); err != nil {
			t.Fatal(err)
		}
	}
	signed := defaultPolicyBundle(t, "rev-1")
	sign(&signed)
	good := filepath.Join(dir, "good.tar.gz")
	writeBundle(t, good, signed)
	unsigned := filepath.Join(dir, "unsigned.tar.gz")
	writeBundle(t, unsigned, defaultPolicyBundle(t, "rev-1"))
	tampered := defaultPolicyBundle(t, "rev-1")
	sign(&tampered)
	tampered.Data["fsbroker"].(map[string]any)["limits"].(map[string]any)["max_write_bytes"] = 1e12
	bad := filepath.Join(dir, "tampered.tar.gz")
	writeBundle(t, bad, tampered)

	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBroker(t, "", "stdio", "--root", root, "--bundle", good, "--bundle-key", keyFile, "--bundle-key-alg", "HS256")
	p.handshake("2025-11-25")
	r := p.Call(1, "files/read", map[string]any{"path": filepath.Base(root) + "/a.txt"})
	if r.Error != nil {
		t.Fatalf("read with the signed bundle: %s", r.Raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit %d", code)
	}

	for _, file := range []string{unsigned, bad} {
		_, stderr, code := runFsbroker(t, nil, "stdio", "--root", root, "--bundle", file, "--bundle-key", keyFile, "--bundle-key-alg", "HS256")
		if code != 2 || !strings.Contains(stderr, "bundle") {
			t.Errorf("%s: exit %d, want 2 naming the bundle:\n%s", filepath.Base(file), code, stderr)
		}
	}
}

// TestBundleServer: with OPA's services/bundles/keys in the config file, the
// broker pulls a signed bundle from a bundle server over HTTP, denies
// everything until it has one, takes a new revision without a restart, and
// keeps the last good one when the server hands out an unsigned bundle.
func TestBundleServer(t *testing.T) {
	t.Parallel()
	const secret = "the fleet's bundle signing secret"
	var (
		mu      sync.Mutex
		content []byte
		etag    string
	)
	serve := func(b bundle.Bundle, sign bool) {
		if sign {
			if err := b.GenerateSignature(bundle.NewSigningConfig(secret, "HS256", ""), "fleet", false); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if err := bundle.NewWriter(&buf).Write(b); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		content, etag = buf.Bytes(), b.Manifest.Revision
		mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if content == nil || r.URL.Path != "/fleet/authz.tar.gz" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write(content)
	}))
	defer srv.Close()

	dir := t.TempDir()
	root := filepath.Join(dir, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "notes.fleet"), "hi")
	config := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, config, fmt.Sprintf(`version: 1
roots:
  - path: %s
    consent: preapproved
opa:
  services:
    fleet:
      url: %s
  bundles:
    authz:
      service: fleet
      resource: fleet/authz.tar.gz
      signing:
        keyid: fleet
      polling:
        min_delay_seconds: 1
        max_delay_seconds: 1
  keys:
    fleet:
      key: %q
      algorithm: HS256
`, root, srv.URL, secret))

	p := startBroker(t, "", "stdio", "--config", config)
	p.handshake("2025-11-25")
	read := func(id int) *message { return p.Call(id, "files/read", map[string]any{"path": "proj/notes.fleet"}) }
	if r := read(1); r.Error == nil || !strings.Contains(string(r.Raw), "no policy is loaded") {
		t.Fatalf("read before any bundle: %s, want a denial", r.Raw)
	}

	serve(defaultPolicyBundle(t, "fleet-1"), true)
	p.waitLog(regexp.MustCompile(`policies reloaded.*revision=fleet-1`))
	if r := read(2); r.Error != nil {
		t.Fatalf("read under fleet-1: %s", r.Raw)
	}

	// A revision whose secrets list covers *.fleet.
	// (The built-in tests pin the default secrets list, so this one ships without them.)
	next := defaultPolicyBundle(t, "fleet-2")
	next.Modules = slices.DeleteFunc(next.Modules, func(m bundle.ModuleFile) bool { return strings.HasSuffix(m.Path, "_test.rego") })
	next.Data["fsbroker"].(map[string]any)["secrets"].(map[string]any)["extra_patterns"] = []any{"*.fleet"}
	serve(next, true)
	p.waitLog(regexp.MustCompile(`policies reloaded.*revision=fleet-2`))
	if r := read(3); r.Error == nil || !strings.Contains(string(r.Raw), `secrets: path matches the protected name pattern \"*.fleet\"`) {
		t.Fatalf("read under fleet-2: %s, want the secrets denial", r.Raw)
	}

	// Unsigned: refused, fleet-2 keeps deciding.
	serve(defaultPolicyBundle(t, "fleet-3"), false)
	p.waitLog(regexp.MustCompile(`policy reload failed.*signatures`))
	if r := read(4); r.Error == nil || !strings.Contains(string(r.Raw), "secrets:") {
		t.Fatalf("read after the unsigned bundle: %s, want fleet-2's denial", r.Raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit %d", code)
	}

	// The config is checked at start.
	for name, opa := range map[string]string{
		"bad key":        "opa:\n  bundles:\n    authz:\n      service: nope\n",
		"with policies":  "policies: " + dir + "\nopa:\n  bundles:\n    authz: {}\n",
		"unknown member": "opa:\n  decision_log: {}\n",
	} {
		bad := filepath.Join(dir, "bad.yaml")
		writeFile(t, bad, "version: 1\n"+opa)
		_, stderr, code := runFsbroker(t, nil, "stdio", "--config", bad)
		if code != 2 || !strings.Contains(stderr, "/opa") {
			t.Errorf("%s: exit %d, want 2 naming /opa:\n%s", name, code, stderr)
		}
	}
}

// TestDecisionLogService: with OPA's decision_logs in the config file and OPA's
// default reporting delay (5 to 10 minutes), every decision reaches the
// decision-log service under the audit trail's decision id when the broker
// stops: it flushes the decisions of its trail.
func TestDecisionLogService(t *testing.T) {
	t.Parallel()
	srv := decisionlogtest.New(t)
	dir, config := decisionLogWorld(t, srv.URL, "")
	p := startBroker(t, "", "stdio", "--config", config, "--state-dir", filepath.Join(dir, "state"))
	p.handshake("2025-11-25")
	if r := p.Call(1, "files/read", map[string]any{"path": "proj/a.txt"}); r.Error != nil {
		t.Fatalf("read: %s", r.Raw)
	}
	denied := refusalID(t, p, 2, "files/write", map[string]any{"path": "proj/a.txt", "content": "no"})
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	events := decisionlogtest.ByID(t, srv.Events(t))
	if len(events) != 2 || events[denied].Member("result", "allow") != false || events[denied].Member("", "path") != "fsbroker/authz/decision" {
		t.Errorf("uploaded %v; want the read's and the denied write's (%s)", events, denied)
	}
}
