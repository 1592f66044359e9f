// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Issue 15 item 10 over real sessions of the real binary: a hard link never
// launders another file's content (a secret) under an innocent name, unless
// the operator allows linked files in that place.
//
// Linux only: it reads with csRead of consent_test.go.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardLinkDoesNotLaunderASecret: cfg/settings.txt is a hard link to
// cfg/.env, and outside.txt one to a key outside every root (made before the
// broker started). Neither is read with the default policies, though both
// names are innocent; the read of a singly-linked file is unaffected. With
// the operator's data.fsbroker.hardlinks.allow naming the directory, the
// link there is read, and a linked file elsewhere still is not.
func TestHardLinkDoesNotLaunderASecret(t *testing.T) {
	t.Parallel()
	base := realDir(t, t.TempDir())
	root := filepath.Join(base, "proj")
	const secret, key = "API_TOKEN=s3cr3t-value\n", "-----BEGIN PRIVATE KEY-----\nAAAA\n"
	writeTree(t, base, map[string]string{"proj/cfg/.env": secret, "proj/cfg/plain.txt": "plain\n",
		"proj/store/pkg/index.js": "module.exports = 1\n", "keys/id_ed25519": key})
	for link, target := range map[string]string{"proj/cfg/settings.txt": "proj/cfg/.env",
		"proj/outside.txt": "keys/id_ed25519", "proj/store/pkg/main.js": "proj/store/pkg/index.js"} {
		if err := os.Link(filepath.Join(base, filepath.FromSlash(target)), filepath.Join(base, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	refusedAsLinked := func(p *proc, id, path string) {
		t.Helper()
		r := p.Call(id, "files/read", map[string]any{"path": path})
		if strings.Contains(string(r.Raw), "s3cr3t") || strings.Contains(string(r.Raw), "PRIVATE KEY") {
			t.Fatalf("read %s disclosed the linked content: %s", path, r.Raw)
		}
		if d := dataOf(t, r); d.Code != "PERMISSION_DENIED" || !strings.Contains(d.Reason, "hardlinks: path is a regular file with 2 links") {
			t.Fatalf("read %s = %s, want PERMISSION_DENIED by the hardlinks rule", path, r.Raw)
		}
	}

	p := startBroker(t, "", "stdio", "--root", root, "--state-dir", filepath.Join(base, "state"))
	p.handshake("2025-11-25")
	refusedAsLinked(p, "settings", "proj/cfg/settings.txt")
	refusedAsLinked(p, "outside", "proj/outside.txt")
	refusedAsLinked(p, "store", "proj/store/pkg/main.js")
	csRead(t, p, "plain", "proj/cfg/plain.txt", "plain\n")

	// The operator allows linked files under proj/store (a package store).
	pol := t.TempDir()
	copyDefaultPolicies(t, pol)
	var data map[string]map[string]any
	raw, err := os.ReadFile(filepath.Join(pol, "data.json"))
	if err == nil {
		err = json.Unmarshal(raw, &data)
	}
	if err != nil {
		t.Fatal(err)
	}
	data["fsbroker"]["hardlinks"] = map[string]any{"allow": []string{"proj/store"}}
	raw, err = json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pol, "data.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	q := startBroker(t, "", "stdio", "--root", root, "--state-dir", filepath.Join(base, "state2"), "--policies", pol)
	q.handshake("2025-11-25")
	csRead(t, q, "store", "proj/store/pkg/main.js", "module.exports = 1\n")
	refusedAsLinked(q, "settings", "proj/cfg/settings.txt")
	refusedAsLinked(q, "outside", "proj/outside.txt")
}
