package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs `fsbroker demo` as the README's quick start does: the
// session shows allowed and denied requests, the audit trail lists them, and
// it verifies; the secret file's content appears nowhere.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := runPlain(t, "demo", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"DENIED  PERMISSION_DENIED: no consent grant covers path for read access",
		"ALLOWED approved: project\n",
		"ALLOWED approved: scratch\n",
		"ALLOWED 29 bytes read",
		"EVENT   created scratch/notes.md",
		`DENIED  PERMISSION_DENIED: secrets: path matches the protected name pattern ".env"`,
		"no consent grant covers path for write access",
		"DENIED  QUOTA_EXCEEDED",
		"the path climbs above its root",
		"session_start",
		"consent ",
		"grant ",
		"intact: 1 segment(s)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "project/.env,") || strings.Contains(stdout, "entries: project/.env") {
		t.Errorf("the listing showed .env:\n%s", stdout)
	}
	segments, _ := filepath.Glob(filepath.Join(dir, "state", "audit", "*.jsonl"))
	for _, f := range segments {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "not-for-servers") || strings.Contains(string(b), "# Notes") {
			t.Errorf("file content reached the trail %s", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "project", "README.md")); err != nil || string(b) != "# Demo project\n" {
		t.Errorf("README.md = %q, %v; want it untouched", b, err)
	}
}
