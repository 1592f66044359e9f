// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServeConsentNamesWhatTheToolActsOn: through the real fsbroker serve
// with --consent auto (which approves whatever it is asked) and no grant
// at first, the question a tool call puts to the provider, and so the
// grant fsbroker grants list then shows, names exactly what the tool acts
// on, resolved as the tool resolves it. move_file and create_directory act
// on a link in the last segment itself, never on where it leads: a move of
// a link to ../other asks for the link and the destination, not for
// other, and moves the link; a move of a link to .. or a create_directory
// on one never asks for the whole root. A tool that reads or writes a file's content follows
// the link, and a link that leads to a directory (here, to .. : the root)
// is never asked about: nothing is granted and the call is refused.
func TestServeConsentNamesWhatTheToolActsOn(t *testing.T) {
	base := t.TempDir()
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	for _, d := range []string{"sub", "other"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "other", "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "../other", "up": "..", "mkup": "..", "wup": "..", "rup": ".."} {
		if err := os.Symlink(target, filepath.Join(ws, "sub", name)); err != nil {
			t.Fatal(err)
		}
	}
	p := startServe(t, state, "--root", ws+":rw", "--consent", "auto")
	granted := func() []string {
		var paths []string
		for _, g := range listGrants(t, state) {
			paths = append(paths, g.Access+" "+g.Path)
		}
		slices.Sort(paths)
		return paths
	}
	for _, c := range []struct {
		name    string
		tool    string
		args    map[string]any
		refused bool
		grants  []string // the grants the call adds, sorted
	}{
		{"move a link to a directory", ToolMoveFile,
			map[string]any{"source": filepath.Join(ws, "sub", "link"), "destination": filepath.Join(ws, "sub", "renamed")},
			false, []string{"write ws/sub/link", "write ws/sub/renamed"}},
		{"move a link to ..", ToolMoveFile,
			map[string]any{"source": "ws/sub/up", "destination": "ws/sub/up2"},
			false, []string{"write ws/sub/up", "write ws/sub/up2"}},
		// The link exists (EEXIST), and whether it leads to a directory is
		// not known without a read grant where it leads: an IO_ERROR.
		{"create a directory on a link to ..", ToolCreateDirectory,
			map[string]any{"path": "ws/sub/mkup"},
			true, []string{"write ws/sub/mkup"}},
		{"write through a link to ..", ToolWriteFile,
			map[string]any{"path": "ws/sub/wup", "content": "x"},
			true, nil},
		{"read through a link to ..", ToolReadTextFile,
			map[string]any{"path": "ws/sub/rup"},
			true, nil},
	} {
		before := granted()
		res := p.call(c.tool, c.args)
		if refused := res["isError"] == true; refused != c.refused {
			t.Errorf("%s: %v, want refused %v", c.name, res, c.refused)
		}
		var added []string
		for _, g := range granted() {
			if !slices.Contains(before, g) {
				added = append(added, g)
			}
		}
		if !slices.Equal(added, c.grants) {
			t.Errorf("%s: granted %q, want %q", c.name, added, c.grants)
		}
	}
	for _, g := range granted() {
		if path := g[strings.Index(g, " ")+1:]; path == "ws" || path == "ws/sub" || path == "ws/other" {
			t.Errorf("a grant on %s, where a link leads: %q", path, granted())
		}
	}
	if data, err := os.ReadFile(filepath.Join(ws, "other", "keep.txt")); err != nil || string(data) != "keep\n" {
		t.Errorf("other/keep.txt is now %q (%v)", data, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "sub", "renamed")); err != nil || target != "../other" {
		t.Errorf("the moved link: %q (%v), want the link itself moved", target, err)
	}
}
