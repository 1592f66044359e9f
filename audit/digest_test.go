// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestPathDigestKnownAnswer checks the digest against one computed here with crypto/hmac
// directly, from the definition in PathDigest's documentation, and against a fixed vector so
// that an accidental change of the construction (label, prefix, encoding) is caught.
func TestPathDigestKnownAnswer(t *testing.T) {
	key := bytes.Repeat([]byte{0x42}, KeySize)
	const path = "/home/alice/project/secret.txt"

	sub := hmac.New(sha256.New, key)
	sub.Write([]byte("fsbroker audit path digest v1"))
	mac := hmac.New(sha256.New, sub.Sum(nil))
	mac.Write([]byte(path))
	want := "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))

	got := PathDigest(key, path)
	if got != want {
		t.Fatalf("PathDigest = %s, want %s", got, want)
	}
	// Computed outside Go (Python's hmac module) from the same definition.
	const fixed = "hmac-sha256:bb3491cb955dda93f3b6742b234e3065f6cebd04c02406153e22108369840b3e"
	if got != fixed {
		t.Errorf("PathDigest = %s, want the fixed vector %s", got, fixed)
	}
	if !IsPathDigest(got) {
		t.Errorf("IsPathDigest(%s) = false", got)
	}
	if PathDigest(key, path) != got {
		t.Error("the digest is not stable")
	}
}

func TestPathDigestDiffers(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, KeySize)
	k2 := bytes.Repeat([]byte{2}, KeySize)
	base := PathDigest(k1, "/a/b")
	for name, other := range map[string]string{
		"another key":         PathDigest(k2, "/a/b"),
		"another path":        PathDigest(k1, "/a/c"),
		"a trailing slash":    PathDigest(k1, "/a/b/"),
		"an uncleaned path":   PathDigest(k1, "/a/./b"),
		"another letter case": PathDigest(k1, "/A/b"),
	} {
		if other == base {
			t.Errorf("%s gives the same digest %s", name, base)
		}
	}
	// The digest never is the plain HMAC under the chain key itself.
	plain := hmac.New(sha256.New, k1)
	plain.Write([]byte("/a/b"))
	if base == PathDigestPrefix+hex.EncodeToString(plain.Sum(nil)) {
		t.Error("the digest uses the audit key directly, not a subkey")
	}
}

func TestIsPathDigest(t *testing.T) {
	good := PathDigest(make([]byte, KeySize), "/x")
	for s, want := range map[string]bool{
		good:                     true,
		"/x":                     false,
		"hmac-sha256:":           false,
		good[:len(good)-1]:       false,
		good + "0":               false,
		"sha256:" + good[12:]:    false,
		good[:len(good)-1] + "G": false,
		good[:len(good)-1] + "A": false,
	} {
		if got := IsPathDigest(s); got != want {
			t.Errorf("IsPathDigest(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestArgumentsDigestKnownAnswer checks the arguments digest against a fixed vector computed
// outside Go (Python's hmac module) from the definition in ArgumentsDigest's documentation:
// the canonical form sorts members, drops white space, keeps numbers as written (a 20-digit
// integer included) and does not escape HTML characters.
func TestArgumentsDigestKnownAnswer(t *testing.T) {
	key := bytes.Repeat([]byte{0x42}, KeySize)
	args := []byte(`{ "z": [1, {"b": null, "a": true}], "path": "/a/<b>", "n": 10000000000000000001 }`)
	const fixed = "hmac-sha256:d41b1bbe54c44109324b1634bcd4a3724928ee58d7e0067d59b67ccc24b4133a"
	got, err := ArgumentsDigest(key, args)
	if err != nil {
		t.Fatal(err)
	}
	if got != fixed {
		t.Errorf("ArgumentsDigest = %s, want the fixed vector %s", got, fixed)
	}
	if !IsPathDigest(got) {
		t.Errorf("%s does not have the digest form", got)
	}
	// The same text as a path has another digest: the subkeys differ.
	canonical, err := CanonicalJSON(args)
	if err != nil {
		t.Fatal(err)
	}
	if PathDigest(key, string(canonical)) == got {
		t.Error("an arguments digest equals the path digest of the same bytes")
	}
}

func TestArgumentsDigestDiffers(t *testing.T) {
	key := bytes.Repeat([]byte{1}, KeySize)
	digest := func(k []byte, doc string) string {
		t.Helper()
		d, err := ArgumentsDigest(k, []byte(doc))
		if err != nil {
			t.Fatalf("ArgumentsDigest(%s): %v", doc, err)
		}
		return d
	}
	base := digest(key, `{"a":1,"b":"x"}`)
	if same := digest(key, "{\n \"b\": \"x\",\t\"a\": 1}"); same != base {
		t.Errorf("member order and white space change the digest: %s, %s", same, base)
	}
	for name, other := range map[string]string{
		"another key":    digest(bytes.Repeat([]byte{2}, KeySize), `{"a":1,"b":"x"}`),
		"another value":  digest(key, `{"a":1,"b":"y"}`),
		"another number": digest(key, `{"a":1.0,"b":"x"}`),
		"a member more":  digest(key, `{"a":1,"b":"x","c":null}`),
	} {
		if other == base {
			t.Errorf("%s gives the same digest %s", name, base)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `nul`} {
		if d, err := ArgumentsDigest(key, []byte(bad)); err == nil {
			t.Errorf("ArgumentsDigest(%q) = %s, want an error", bad, d)
		}
	}
}
