// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/internal/testfs"
)

// TestCheckOutsideRoots: the broker's own paths and the roots, compared
// symlink-resolved and by identity, in both directions, read-only roots
// included; paths not made yet are placed by their deepest existing
// ancestor.
func TestCheckOutsideRoots(t *testing.T) {
	t.Parallel()
	base := testfs.RealDir(t, t.TempDir())
	home := testfs.RealDir(t, filepath.Join(base, "home"))
	proj := testfs.RealDir(t, filepath.Join(base, "proj"))
	state := testfs.RealDir(t, filepath.Join(base, "state"))
	testfs.RealDir(t, filepath.Join(state, "grants"))
	testfs.WriteFile(t, filepath.Join(home, "fsbroker.yaml"), "version: 1\n")
	if err := os.Symlink(home, filepath.Join(base, "home-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(home, "made-later"), filepath.Join(base, "dangling")); err != nil {
		t.Fatal(err)
	}
	rootOf := func(dir string, writable bool) rootAt {
		t.Helper()
		set, err := roots.New([]roots.Spec{{Path: dir, Writable: writable}})
		if err != nil {
			t.Fatal(err)
		}
		setting := "--root " + dir
		if writable {
			setting += ":rw"
		}
		return rootAt{setting: setting, root: set.All()[0]}
	}
	// boundAt is the root of dir as seen through a bind mount at elsewhere:
	// another path, dir's own identity.
	boundAt := func(dir, elsewhere string) rootAt {
		r := rootOf(dir, true)
		r.root.Path, r.setting = elsewhere, "--root "+elsewhere+":rw"
		return r
	}
	stateAt := func(p string) OwnPath {
		return OwnPath{Setting: "--state-dir", Path: p, Fix: "set --state-dir (or stateDir in the config file) to another directory"}
	}
	cases := []struct {
		name  string
		own   []OwnPath
		roots []rootAt
		want  []string // substrings of the error; none: no error
	}{
		{"state beside the roots", []OwnPath{stateAt(state)}, []rootAt{rootOf(home, true), rootOf(proj, false)}, nil},
		{"a root whose name extends the state's", []OwnPath{stateAt(home + "-state")}, []rootAt{rootOf(home, true)}, nil},
		{"state inside a writable root, not made yet", []OwnPath{stateAt(filepath.Join(home, ".local", "state", "fsbroker"))},
			[]rootAt{rootOf(proj, false), rootOf(home, true)},
			[]string{"--state-dir " + filepath.Join(home, ".local", "state", "fsbroker"), "lies inside the root --root " + home + ":rw", "set --state-dir"}},
		{"state inside a read-only root", []OwnPath{stateAt(filepath.Join(home, "st"))}, []rootAt{rootOf(home, false)},
			[]string{"lies inside the root --root " + home + " ("}},
		{"state is a root", []OwnPath{stateAt(home)}, []rootAt{rootOf(home, false)}, []string{"lies inside the root"}},
		{"a root inside the state", []OwnPath{stateAt(state)}, []rootAt{rootOf(filepath.Join(state, "grants"), true)},
			[]string{"the root --root " + filepath.Join(state, "grants") + ":rw", "lies inside --state-dir " + state}},
		{"a root above the state", []OwnPath{stateAt(filepath.Join(home, "a", "b"))}, []rootAt{rootOf(base, false)},
			[]string{"lies inside the root --root " + base}},
		{"state through a link into a root", []OwnPath{stateAt(filepath.Join(base, "home-link", "st"))}, []rootAt{rootOf(home, true)},
			[]string{filepath.Join(base, "home-link", "st") + " (" + filepath.Join(home, "st") + ")", "lies inside the root"}},
		{"state through a dangling link into a root", []OwnPath{stateAt(filepath.Join(base, "dangling", "st"))}, []rootAt{rootOf(home, true)},
			[]string{"(" + filepath.Join(home, "made-later", "st") + ")", "lies inside the root"}},
		{"state inside a root seen through a bind mount", []OwnPath{stateAt(filepath.Join(home, "st"))},
			[]rootAt{boundAt(home, "/mnt/fsbroker-test-home")},
			[]string{"lies inside the root --root /mnt/fsbroker-test-home:rw", home + " is that root's directory, by device and inode"}},
		{"the audit directory", []OwnPath{stateAt(state), {Setting: "--audit", Path: filepath.Join(proj, "trail"), Fix: "set --audit"}},
			[]rootAt{rootOf(proj, false)}, []string{"--audit " + filepath.Join(proj, "trail"), "set --audit"}},
		{"the policy directory", []OwnPath{stateAt(state), {Setting: "config /etc/f.yaml: /policies", Path: filepath.Join(proj, "pol")}},
			[]rootAt{rootOf(proj, false)}, []string{"config /etc/f.yaml: /policies " + filepath.Join(proj, "pol")}},
		{"the bundle", []OwnPath{stateAt(state), {Setting: "--bundle", Path: filepath.Join(proj, "b.tar.gz")}},
			[]rootAt{rootOf(proj, false)}, []string{"--bundle " + filepath.Join(proj, "b.tar.gz")}},
		{"the config file", []OwnPath{stateAt(state), {Setting: "--config", Path: filepath.Join(home, "fsbroker.yaml")}},
			[]rootAt{rootOf(home, false)}, []string{"--config " + filepath.Join(home, "fsbroker.yaml")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOutsideRoots(tc.own, tc.roots)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error %v (%T), want a *ConfigError", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
