package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: fsbroker version tells where the binary comes from (the
// commit it was built from, when built in a checkout), Go's and OPA's
// versions, as text and as JSON; never a bare "dev".
func TestVersion(t *testing.T) {
	t.Parallel()
	out, stderr, code := runFsbroker(t, nil, "version", "--json")
	if code != 0 {
		t.Fatalf("version --json: exit %d\n%s", code, stderr)
	}
	var r buildReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if r.Version == "" || r.Version == "dev" || !strings.HasPrefix(r.Go, "go1.") ||
		r.Platform != runtime.GOOS+"/"+runtime.GOARCH || !strings.HasPrefix(r.OPA, "v1.") {
		t.Errorf("version --json = %+v", r)
	}
	// The tests run in a checkout: the binary they built names its commit.
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not in a git checkout (%v): the revision is not checked", err)
	} else if want := strings.TrimSpace(string(head)); r.Revision != want || r.Time == "" {
		t.Errorf("revision %q at %q, want %s", r.Revision, r.Time, want)
	}

	text, _, code := runFsbroker(t, nil, "version")
	if code != 0 || !strings.HasPrefix(text, "fsbroker "+r.Version+"\n") || !strings.Contains(text, r.OPA) ||
		(r.Revision != "" && !strings.Contains(text, r.Revision)) {
		t.Errorf("version: exit %d\n%s", code, text)
	}
	if _, _, code := runFsbroker(t, nil, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}
