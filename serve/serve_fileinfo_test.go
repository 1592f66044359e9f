// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package serve

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFileInfo: get_file_info goes through the corridor as a read. A
// file in a read-only root is described (the reference's seven lines); a
// secret, a path outside every root, a sibling-prefix name and a link out
// of the root are refused with PERMISSION_DENIED, nothing of them shown,
// each refusal in the trail.
func TestServeFileInfo(t *testing.T) {
	at := newAttackTree(t)
	p := at.start(t)
	res := p.call("get_file_info", map[string]any{"path": filepath.Join(at.ro, "a.txt")})
	text := resultText(res)
	if res["isError"] == true || !strings.HasPrefix(text, "size: 2\ncreated: ") ||
		!strings.HasSuffix(text, "\nisDirectory: false\nisFile: true\npermissions: 644") {
		t.Fatalf("get_file_info of a file in a read-only root: %v", res)
	}
	if dir := resultText(p.call("get_file_info", map[string]any{"path": "ro"})); !strings.Contains(dir, "\nisDirectory: true\nisFile: false\n") {
		t.Errorf("get_file_info of the root: %q", dir)
	}

	requireRefused(t, p.call("get_file_info", map[string]any{"path": filepath.Join(at.ro, ".env")}), "PERMISSION_DENIED: secrets")
	for _, path := range []string{
		filepath.Join(at.outside, "secret.txt"),
		at.ro + "_evil",
		filepath.Join(at.ro, "link-out"),
	} {
		res := p.call("get_file_info", map[string]any{"path": path})
		requireRefused(t, res, "PERMISSION_DENIED")
		if strings.Contains(resultText(res), "size:") {
			t.Errorf("%s: refused yet described: %q", path, resultText(res))
		}
	}
	if rec := at.refusedRecord(t, "get_file_info", ".env"); rec.Method != "get_file_info" || rec.Operation != "read" {
		t.Errorf("record %+v, want a refused read recorded as get_file_info", rec)
	}
	at.refusedRecord(t, "get_file_info", "link-out")
}
