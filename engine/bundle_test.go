// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// makeBundle builds a bundle (as `opa build` would) from Rego files and a data document.
func makeBundle(t testing.TB, revision string, modules map[string]string, data map[string]any) bundle.Bundle {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: revision}, Data: data}
	if b.Data == nil {
		b.Data = map[string]any{}
	}
	b.Manifest.Init()
	for _, name := range slices.Sorted(mapKeys(modules)) {
		m, err := ast.ParseModuleWithOpts(name, modules[name], parserOptions())
		if err != nil {
			t.Fatal(err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{
			URL: "/" + name, Path: "/" + name, Raw: []byte(modules[name]), Parsed: m,
		})
	}
	return b
}

// mapKeys iterates the keys of m.
func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// saveBundle writes b as a .tar.gz bundle file.
func saveBundle(t testing.TB, file string, b bundle.Bundle) {
	t.Helper()
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// signingKeys is a key pair (or secret) for one algorithm.
type signingKeys struct {
	alg     string
	private string // what SigningConfig takes
	public  string // what the verification KeyConfig takes
}

func hs256Keys() signingKeys {
	return signingKeys{alg: "HS256", private: "a shared secret for the test", public: "a shared secret for the test"}
}

func rs256Keys(t *testing.T) signingKeys {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return signingKeys{
		alg:     "RS256",
		private: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

// verification requires a signature by k, under key id "fsbroker".
func (k signingKeys) verification() *bundle.VerificationConfig {
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
		"fsbroker": {Key: k.public, Algorithm: k.alg},
	}, "fsbroker", "", nil)
}

// sign signs b with k.
func (k signingKeys) sign(t *testing.T, b *bundle.Bundle) {
	t.Helper()
	if err := b.GenerateSignature(bundle.NewSigningConfig(k.private, k.alg, ""), "fsbroker", false); err != nil {
		t.Fatal(err)
	}
}

const bundlePolicy = `package fsbroker.authz

decision := {"allow": data.fsbroker.open, "reasons": ["from the bundle"]}
`

const bundleTest = `package fsbroker.authz_test

import data.fsbroker.authz

test_reason if authz.decision.reasons == ["from the bundle"]
`

func TestBundle(t *testing.T) {
	for _, keys := range []signingKeys{hs256Keys(), rs256Keys(t)} {
		t.Run(keys.alg, func(t *testing.T) {
			dir := t.TempDir()
			newBundle := func() bundle.Bundle {
				return makeBundle(t, "2026-01-02-abc123",
					map[string]string{"authz.rego": bundlePolicy, "authz_test.rego": bundleTest},
					map[string]any{"fsbroker": map[string]any{"open": true}})
			}

			// Signed, verified: loads; the revision is the manifest's.
			signed := newBundle()
			keys.sign(t, &signed)
			good := filepath.Join(dir, "signed.tar.gz")
			saveBundle(t, good, signed)
			e, err := New(context.Background(), Source{Bundle: good, BundleVerification: keys.verification()})
			if err != nil {
				t.Fatalf("signed bundle refused: %v", err)
			}
			if e.Revision() != "2026-01-02-abc123" {
				t.Errorf("Revision = %q, want the manifest's", e.Revision())
			}
			d, err := e.Decide(context.Background(), testInput(t, "read", "proj/a", false))
			if err != nil || !d.Allow || !slices.Equal(d.Reasons, []string{"from the bundle"}) {
				t.Errorf("Decide = %#v, %v", d, err)
			}
			rep, err := Test(context.Background(), Source{Bundle: good, BundleVerification: keys.verification()})
			if err != nil || len(rep.Results) != 1 || !rep.Passed() || rep.Coverage != 100 {
				t.Errorf("Test = %+v, %v; want one passing test, 100%% coverage", rep, err)
			}

			refused := func(name string, b bundle.Bundle, vc *bundle.VerificationConfig, want string) {
				t.Helper()
				file := filepath.Join(dir, name+".tar.gz")
				saveBundle(t, file, b)
				_, err := New(context.Background(), Source{Bundle: file, BundleVerification: vc})
				var le *LoadError
				if !errors.As(err, &le) {
					t.Fatalf("%s: New = %v, want a *LoadError", name, err)
				}
				if le.File != file || !strings.Contains(le.Error(), want) {
					t.Errorf("%s: LoadError %q (file %q), want it to name %s and say %q", name, le, le.File, file, want)
				}
			}

			// A policy changed after signing.
			tampered := newBundle()
			keys.sign(t, &tampered)
			tampered.Modules[0].Raw = []byte(strings.Replace(bundlePolicy, "data.fsbroker.open", "true", 1))
			refused("tampered-policy", tampered, keys.verification(), "digest mismatch")

			// Data changed after signing.
			tampered = newBundle()
			keys.sign(t, &tampered)
			tampered.Data = map[string]any{"fsbroker": map[string]any{"open": false}}
			refused("tampered-data", tampered, keys.verification(), "digest mismatch")

			// The manifest (and its revision) changed after signing.
			tampered = newBundle()
			keys.sign(t, &tampered)
			tampered.Manifest.Revision = "forged"
			refused("tampered-manifest", tampered, keys.verification(), "digest mismatch")

			// Unsigned, while verification is required; even when the caller's configuration
			// says the signature is optional (OPA's default for keys without a signing block).
			refused("unsigned", newBundle(), keys.verification(), "missing .signatures.json")
			refused("unsigned-optional", newBundle(), keys.verification().WithOptionalSignature(), "missing .signatures.json")

			// Signed with another key.
			other := hs256Keys()
			other.private, other.public = "another secret", "another secret"
			if keys.alg == "RS256" {
				other = rs256Keys(t)
			}
			wrong := newBundle()
			other.sign(t, &wrong)
			refused("wrong-key", wrong, keys.verification(), "")

			// Signed, but no key to check it with.
			refused("no-verification", signed, nil, "verification key not provided")
		})
	}

	t.Run("unsigned without verification", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "plain.tar.gz")
		b := makeBundle(t, "", map[string]string{"authz.rego": bundlePolicy}, map[string]any{"fsbroker": map[string]any{"open": false}})
		saveBundle(t, file, b)
		e, err := New(context.Background(), Source{Bundle: file})
		if err != nil {
			t.Fatal(err)
		}
		// No manifest revision: the file's digest.
		if len(e.Revision()) != 64 {
			t.Errorf("Revision = %q, want a sha256", e.Revision())
		}
	})

	t.Run("type error in a bundle", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "bad.tar.gz")
		b := makeBundle(t, "r", map[string]string{"authz.rego": "package fsbroker.authz\n\ndecision := {\"allow\": input.path.canonicl == \"\"}\n"}, nil)
		saveBundle(t, file, b)
		_, err := New(context.Background(), Source{Bundle: file})
		var le *LoadError
		if !errors.As(err, &le) || le.Line != 3 || !strings.HasSuffix(le.File, "authz.rego") {
			t.Errorf("New = %v, want a *LoadError at authz.rego:3", err)
		}
	})
}
