package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

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
	r := p.call(1, "files/read", map[string]any{"path": filepath.Base(root) + "/a.txt"})
	if r.Error != nil {
		t.Fatalf("read with the signed bundle: %s", r.raw)
	}
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Errorf("exit %d", code)
	}

	for _, file := range []string{unsigned, bad} {
		_, stderr, code := runPlain(t, "stdio", "--root", root, "--bundle", file, "--bundle-key", keyFile, "--bundle-key-alg", "HS256")
		if code != 2 || !strings.Contains(stderr, "bundle") {
			t.Errorf("%s: exit %d, want 2 naming the bundle:\n%s", filepath.Base(file), code, stderr)
		}
	}
}
