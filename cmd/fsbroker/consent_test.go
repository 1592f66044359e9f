// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

// Consent, grants, revocation and rate limits (issue 6) over real sessions of
// the real binary: each consent provider (auto, deny, command:PROG, and the
// prompt on a pseudo-terminal that is the broker's controlling terminal), the
// policy's narrowing of what may be approved, grants shared across processes
// (a restart, an expired grant, a revocation by `fsbroker grants revoke` in
// another process), --server-id, and a flood against the rate limit.
//
// Linux only: the prompt test allocates its pseudo-terminal with Linux's
// ioctls (unlockpt and ptsname by hand).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/broker/ptytest"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/grants"
)

// csPeer is the serverInfo.name the test peer declares (replyInitialize): the
// server's identity for grants unless --server-id pins another.
const csPeer = "cli-test-peer"

// consentWorld is a state directory and two roots, neither pre-approved
// (its args give them as --root flags): proj (read-only) and rw (writable).
type consentWorld struct {
	base, state, proj, rw string
}

func newConsentWorld(t *testing.T) *consentWorld {
	t.Helper()
	base := realDir(t, t.TempDir())
	w := &consentWorld{base: base, state: filepath.Join(base, "state"), proj: filepath.Join(base, "proj"), rw: filepath.Join(base, "rw")}
	writeTree(t, base, map[string]string{
		"proj/a.txt": "alpha", "proj/b.txt": "bravo", "proj/c.txt": "charlie", "proj/d.txt": "delta",
		"proj/docs/guide.md": "guide", "proj/watched/a.txt": "watched", "proj/.git/config": "[core]",
		"rw/src/main.go": "package main", "rw/.git/hooks/README": "hooks", "rw/.git/config": "[core]", "rw/.env": "SECRET=1",
		"rw/.ssh/known_hosts": "host", "rw_evil/x.txt": "outside every root",
	})
	return w
}

// args are a stdio session's arguments on the world with consentSpec (which
// overrides the --consent auto that startBroker puts first), then extra.
func (w *consentWorld) args(consentSpec string, extra ...string) []string {
	return append([]string{"stdio", "--root", w.proj, "--root", w.rw + ":rw", "--state-dir", w.state,
		"--consent", consentSpec}, extra...)
}

// trail is the audit trail the world's brokers write (--audit is not given).
func (w *consentWorld) trail() string { return filepath.Join(w.state, "audit") }

// csResult calls method and returns its result, failing the test on an error.
func csResult(t *testing.T, p *proc, id any, method string, params map[string]any) map[string]any {
	t.Helper()
	r := p.Call(id, method, params)
	if r.Error != nil {
		t.Fatalf("%s %v: %s", method, params, r.Raw)
	}
	var res map[string]any
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("%s result %s: %v", method, r.Result, err)
	}
	return res
}

// csRefused calls method and returns the error data, failing the test unless
// the request was refused with data.code code.
func csRefused(t *testing.T, p *proc, id any, method string, params map[string]any, code string) errorData {
	t.Helper()
	r := p.Call(id, method, params)
	if r.Error == nil {
		t.Fatalf("%s %v = %s, want %s", method, params, r.Raw, code)
	}
	d := dataOf(t, r)
	if d.Code != code {
		t.Fatalf("%s %v = %s, want %s", method, params, r.Raw, code)
	}
	return d
}

// csNoConsent checks that method on path is refused for want of consent:
// PERMISSION_DENIED whose reason names consent, with a decision id.
func csNoConsent(t *testing.T, p *proc, id any, method string, params map[string]any) {
	t.Helper()
	d := csRefused(t, p, id, method, params, "PERMISSION_DENIED")
	if !strings.Contains(d.Reason, "consent") || d.DecisionID == "" {
		t.Fatalf("%s %v refused with reason %q (decision %q), want a reason that names consent and a decision id",
			method, params, d.Reason, d.DecisionID)
	}
}

// csRead reads path and checks its content.
func csRead(t *testing.T, p *proc, id any, path, want string) {
	t.Helper()
	if res := csResult(t, p, id, "files/read", map[string]any{"path": path}); res["content"] != want {
		t.Fatalf("read %s = %v, want content %q", path, res, want)
	}
}

// csConsent asks for access to paths and returns files/consent's result.
func csConsent(t *testing.T, p *proc, id any, access string, paths ...string) (granted bool, approved []string) {
	t.Helper()
	res := csResult(t, p, id, "files/consent", map[string]any{
		"message": "the test asks", "requestedPaths": paths, "access": access})
	return decodeConsent(t, res)
}

// decodeConsent checks the shape of a files/consent result and returns it.
func decodeConsent(t *testing.T, res map[string]any) (granted bool, approved []string) {
	t.Helper()
	g, ok := res["granted"].(bool)
	list, ok2 := res["approvedPaths"].([]any)
	if !ok || !ok2 || len(res) != 2 {
		t.Fatalf("files/consent result %v: want {granted: bool, approvedPaths: [...]}", res)
	}
	approved = []string{}
	for _, a := range list {
		approved = append(approved, a.(string))
	}
	if g != (len(approved) > 0) {
		t.Fatalf("files/consent result %v: granted must be true exactly when a path was approved", res)
	}
	return g, approved
}

// csScript writes an executable shell script into dir.
func csScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// approveAllScript writes a consent command that appends each request it is
// given to a log (one JSON line each) and approves every path asked for.
func approveAllScript(t *testing.T) (script, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "requests.jsonl")
	script = csScript(t, dir, "approve-all.sh", `IFS= read -r req
printf '%s\n' "$req" >> '`+log+`'
printf '{"approvedPaths":%s}\n' "$(printf '%s' "$req" | sed -n 's/.*"paths":\(\[[^]]*\]\).*/\1/p')"
`)
	return script, log
}

// commandRequest is what a consent command reads on stdin (broker/consent's
// package doc).
type commandRequest struct {
	Version int `json:"version"`
	Server  struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version string `json:"version"`
		Pinned  bool   `json:"pinned"`
	} `json:"server"`
	Message string   `json:"message"`
	Paths   []string `json:"paths"`
	Access  string   `json:"access"`
	Roots   []struct {
		Mount    string `json:"mount"`
		Name     string `json:"name"`
		Path     string `json:"path"`
		Writable bool   `json:"writable"`
	} `json:"roots"`
	Removed []struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	} `json:"removed"`
}

// commandRequests reads the requests an approveAllScript was given.
func commandRequests(t *testing.T, log string) []commandRequest {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []commandRequest
	for line := range strings.Lines(string(b)) {
		var r commandRequest
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("the consent command was given %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// csTrail reads every record of the trail segments in dir.
func csTrail(t *testing.T, dir string) []audit.Record {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit segments in %s (%v)", dir, err)
	}
	var recs []audit.Record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r audit.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %q: %v", f, sc.Text(), err)
			}
			recs = append(recs, r)
		}
	}
	return recs
}

func csIsListChanged(m *message) bool { return m.IsNotification("notifications/roots/list_changed") }

// csChangeOf matches a notifications/files/changed about path.
func csChangeOf(path string) func(*message) bool {
	return func(m *message) bool {
		return m.IsNotification("notifications/files/changed") && strings.Contains(string(m.Params), `"path":"`+path+`"`)
	}
}

// TestConsentAutoApprovesOnlyWhatIsAsked: --consent auto approves what a
// server asks for and nothing else (PROTOCOL.md section 5). Each attack on a
// broker of its own: a server that never sent files/consent reads and
// writes nothing; a read grant never allows a change; a grant on proj/docs
// never covers proj/a.txt beside it, nor proj above it.
func TestConsentAutoApprovesOnlyWhatIsAsked(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) (*consentWorld, *proc) {
		t.Helper()
		w := newConsentWorld(t)
		p := startBroker(t, "", w.args("auto")...)
		p.handshake("2025-11-25")
		return w, p
	}
	t.Run("consent never given", func(t *testing.T) {
		t.Parallel()
		_, p := start(t)
		csNoConsent(t, p, 1, "files/read", map[string]any{"path": "proj/a.txt"})
		csNoConsent(t, p, 2, "files/list", map[string]any{"path": "proj"})
		csNoConsent(t, p, 3, "files/write", map[string]any{"path": "rw/src/new.go", "content": "package new"})
		csNoConsent(t, p, 4, "files/watch", map[string]any{"path": "rw"})
	})
	t.Run("read grant then write", func(t *testing.T) {
		t.Parallel()
		w, p := start(t)
		if granted, approved := csConsent(t, p, 1, "read", "rw/src"); !granted || !slices.Equal(approved, []string{"rw/src"}) {
			t.Fatalf("auto approved %q", approved)
		}
		csRead(t, p, 2, "rw/src/main.go", "package main")
		csNoConsent(t, p, 3, "files/write", map[string]any{"path": "rw/src/main.go", "content": "package evil"})
		csNoConsent(t, p, 4, "files/delete", map[string]any{"path": "rw/src/main.go"})
		csNoConsent(t, p, 5, "files/create", map[string]any{"path": "rw/src/d", "type": "directory"})
		if b, err := os.ReadFile(filepath.Join(w.rw, "src", "main.go")); err != nil || string(b) != "package main" {
			t.Errorf("rw/src/main.go after the refused changes: %q, %v", b, err)
		}
	})
	t.Run("sub-path grant then sibling", func(t *testing.T) {
		t.Parallel()
		_, p := start(t)
		if granted, approved := csConsent(t, p, 1, "read", "proj/docs"); !granted || !slices.Equal(approved, []string{"proj/docs"}) {
			t.Fatalf("auto approved %q", approved)
		}
		csRead(t, p, 2, "proj/docs/guide.md", "guide")
		csNoConsent(t, p, 3, "files/read", map[string]any{"path": "proj/a.txt"})
		csNoConsent(t, p, 4, "files/list", map[string]any{"path": "proj"})
		csNoConsent(t, p, 5, "files/watch", map[string]any{"path": "proj/watched"})
	})
}

// TestConsentAuto: a files/consent round under --consent auto approves what
// the policy lets be granted (never a path outside the roots, never a
// secret), the approved paths are usable, and the round is recorded: grants
// by auto, a consent record and a grant record each.
func TestConsentAuto(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p := startBroker(t, "", w.args("auto")...)
	p.handshake("2025-11-25")

	granted, approved := csConsent(t, p, 1, "read", "proj/docs", filepath.Join(w.proj, "b.txt"), "/etc/passwd",
		filepath.Join(w.base, "rw_evil", "x.txt"), "rw/.env", "proj/docs")
	if !granted || !slices.Equal(approved, []string{"proj/docs", "proj/b.txt"}) {
		t.Fatalf("auto approved %q (granted %v), want proj/docs and proj/b.txt", approved, granted)
	}
	csRead(t, p, 2, "proj/docs/guide.md", "guide")
	csRead(t, p, 3, "proj/b.txt", "bravo")
	csRefused(t, p, 4, "files/read", map[string]any{"path": "rw/.env"}, "PERMISSION_DENIED")
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}

	gs := csListGrants(t, w.state, csPeer)
	if len(gs) != 2 || gs[0].Path != "proj/b.txt" || gs[1].Path != "proj/docs" || gs[0].By != "auto" || gs[0].Access != grants.Read {
		t.Errorf("grants after the auto round: %+v", gs)
	}
	var consents, grantRecs int
	for _, r := range csTrail(t, w.trail()) {
		switch {
		case r.Kind == audit.KindConsent:
			consents++
			if r.Method != "files/consent" || r.Allow == nil || !*r.Allow || !strings.Contains(r.Detail, "6 requested, 2 approvable, 2 approved by auto") ||
				!slices.Equal(r.Paths, []string{filepath.Join(w.proj, "docs"), filepath.Join(w.proj, "b.txt")}) {
				t.Errorf("consent record %+v", r)
			}
		case r.Kind == audit.KindGrant && r.Method == "files/consent":
			grantRecs++
		}
	}
	if consents != 1 || grantRecs != 2 {
		t.Errorf("%d consent and %d grant records, want 1 and 2", consents, grantRecs)
	}
}

// TestConsentPreapprovedByConfig: the operator pre-approves a root with
// roots[].consent: preapproved in the config file, the only way (PROTOCOL.md
// section 5): files/* work there without a files/consent round, whatever the
// provider, while a root the same file leaves to ask needs a grant.
// Pre-approval is consent, not permission: the policy still refuses a write
// in a read-only root, and secrets.
func TestConsentPreapprovedByConfig(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	cfg := filepath.Join(t.TempDir(), "fsbroker.yaml")
	writeFile(t, cfg, "version: 1\nroots:\n  - path: "+w.proj+"\n    consent: preapproved\n  - path: "+w.rw+"\n    writable: true\n")
	p := startBroker(t, "", "stdio", "--config", cfg, "--state-dir", w.state, "--consent", "deny")
	p.handshake("2025-11-25")

	csRead(t, p, 1, "proj/a.txt", "alpha")
	csResult(t, p, 2, "files/list", map[string]any{"path": "proj/docs"})
	if d := csRefused(t, p, 3, "files/write", map[string]any{"path": "proj/a.txt", "content": "x"}, "PERMISSION_DENIED"); strings.Contains(d.Reason, "consent") {
		t.Errorf("a write in the read-only root was refused for consent (%q), want the read-only rule", d.Reason)
	}
	csRefused(t, p, 4, "files/read", map[string]any{"path": "proj/.git/config"}, "PERMISSION_DENIED")
	csNoConsent(t, p, 5, "files/read", map[string]any{"path": "rw/src/main.go"})
	p.closeStdin()
	if code := p.waitExit(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

// TestConsentDeny: --consent deny grants nothing, and nothing is usable
// without a grant: PERMISSION_DENIED whose reason names consent.
func TestConsentDeny(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p := startBroker(t, "", w.args("deny")...)
	p.handshake("2025-11-25")

	csNoConsent(t, p, 1, "files/read", map[string]any{"path": "proj/a.txt"})
	if granted, approved := csConsent(t, p, 2, "read", "proj/a.txt", "proj/docs"); granted || len(approved) != 0 {
		t.Fatalf("deny approved %q", approved)
	}
	csNoConsent(t, p, 3, "files/read", map[string]any{"path": "proj/a.txt"})
	csNoConsent(t, p, 4, "files/list", map[string]any{"path": "proj"})
	csNoConsent(t, p, 5, "files/watch", map[string]any{"path": "proj/docs"})
	csNoConsent(t, p, 6, "files/write", map[string]any{"path": "rw/new.txt", "content": "x"})
	csNoConsent(t, p, 7, "files/rename", map[string]any{"oldPath": "rw/src/main.go", "newPath": "rw/main.go"})
	if _, err := os.Stat(filepath.Join(w.rw, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt written without consent: %v", err)
	}
	// roots/list needs no consent.
	if roots := p.listRoots(8); len(roots) != 2 {
		t.Errorf("roots/list = %v", roots)
	}
	p.closeStdin()
	p.waitExit()

	if gs := csListGrants(t, w.state, csPeer); len(gs) != 0 {
		t.Errorf("deny left grants: %+v", gs)
	}
	var consent *audit.Record
	for _, r := range csTrail(t, w.trail()) {
		if r.Kind == audit.KindConsent {
			consent = &r
		}
		if r.Kind == audit.KindGrant {
			t.Errorf("a grant record under deny: %+v", r)
		}
	}
	if consent == nil || consent.Allow == nil || *consent.Allow || !strings.Contains(consent.Detail, "0 approved by deny") {
		t.Errorf("consent record %+v, want one that approves nothing, by deny", consent)
	}
}

// TestConsentFlagErrors: a --consent value that names no provider, or a
// consent command that does not exist, stops the broker at start-up with
// exit status 2 and a message that names the setting.
func TestConsentFlagErrors(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	for _, spec := range []string{"maybe", "command:", "command:" + filepath.Join(w.base, "no-such-program"), "command:'unclosed"} {
		_, stderr, code := runFsbroker(t, nil, w.args(spec)...)
		if code != 2 || !strings.Contains(stderr, "--consent") {
			t.Errorf("--consent %q: exit status %d, stderr:\n%s", spec, code, stderr)
		}
		checkNoPoliciesLoaded(t, stderr)
	}
}

// TestConsentCommand: --consent command:PROG with real scripts: one that
// approves some paths (and tries to approve one it was not asked about), one
// that never answers (the operation timeout bounds it), one that exits
// non-zero after printing an approval.
func TestConsentCommand(t *testing.T) {
	t.Parallel()

	t.Run("approves some", func(t *testing.T) {
		t.Parallel()
		w := newConsentWorld(t)
		dir := t.TempDir()
		log := filepath.Join(dir, "requests.jsonl")
		script := csScript(t, dir, "approve-some.sh", `IFS= read -r req
printf '%s\n' "$req" >> '`+log+`'
echo '{"approvedPaths": ["proj/c.txt", "proj/a.txt", "proj", "proj/never-asked"], "note": "ignored"}'
`)
		p := startBroker(t, "", w.args("command:"+script)...)
		p.handshake("2025-11-25")
		granted, approved := csConsent(t, p, 1, "read", "proj/a.txt", "proj/b.txt", "proj/c.txt")
		if !granted || !slices.Equal(approved, []string{"proj/a.txt", "proj/c.txt"}) {
			t.Fatalf("approved %q, want proj/a.txt and proj/c.txt (in the order asked; nothing not asked for)", approved)
		}
		csRead(t, p, 2, "proj/a.txt", "alpha")
		csRead(t, p, 3, "proj/c.txt", "charlie")
		csNoConsent(t, p, 4, "files/read", map[string]any{"path": "proj/b.txt"})
		csNoConsent(t, p, 5, "files/read", map[string]any{"path": "proj/d.txt"}) // "proj" was approved by the script, never asked

		reqs := commandRequests(t, log)
		if len(reqs) != 1 {
			t.Fatalf("the command ran %d times, want 1", len(reqs))
		}
		r := reqs[0]
		if r.Version != 1 || r.Server.ID != csPeer || r.Server.Name != csPeer || r.Server.Version != "0.0.1" || r.Server.Pinned ||
			r.Message != "the test asks" || r.Access != "read" || !slices.Equal(r.Paths, []string{"proj/a.txt", "proj/b.txt", "proj/c.txt"}) {
			t.Errorf("the command was given %+v", r)
		}
		if len(r.Roots) != 2 || r.Roots[0].Mount != "proj" || r.Roots[0].Path != w.proj || r.Roots[0].Writable ||
			r.Roots[1].Mount != "rw" || !r.Roots[1].Writable {
			t.Errorf("the command was given roots %+v", r.Roots)
		}
		gs := csListGrants(t, w.state, csPeer)
		if len(gs) != 2 || gs[0].By != "command:"+script {
			t.Errorf("grants %+v, want two by command:%s", gs, script)
		}
	})

	// The two answer shapes PROTOCOL.md section 5 allows, and fsbroker's
	// old {"approved": [...]}, which approves nothing.
	for _, shape := range []struct{ name, answer, want string }{
		{"a bare array", `["proj/b.txt"]`, "proj/b.txt"},
		{"granted false", `{"approvedPaths": ["proj/b.txt"], "granted": false}`, ""},
		{"the old approved member", `{"approved": ["proj/b.txt"]}`, ""},
	} {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			w := newConsentWorld(t)
			dir := t.TempDir()
			script := csScript(t, dir, "answer.sh", "cat >/dev/null\necho '"+shape.answer+"'\n")
			p := startBroker(t, "", w.args("command:"+script)...)
			p.handshake("2025-11-25")
			granted, approved := csConsent(t, p, 1, "read", "proj/b.txt")
			if shape.want == "" {
				if granted || len(approved) != 0 {
					t.Fatalf("answer %s: granted %v, approved %q; want nothing approved", shape.answer, granted, approved)
				}
				csNoConsent(t, p, 2, "files/read", map[string]any{"path": "proj/b.txt"})
				return
			}
			if !granted || !slices.Equal(approved, []string{shape.want}) {
				t.Fatalf("answer %s: granted %v, approved %q; want %s", shape.answer, granted, approved, shape.want)
			}
			csRead(t, p, 2, "proj/b.txt", "bravo")
		})
	}

	t.Run("never answers", func(t *testing.T) {
		t.Parallel()
		w := newConsentWorld(t)
		dir := t.TempDir()
		pidFile, marker := filepath.Join(dir, "pid"), filepath.Join(dir, "finished")
		// The provider's own limit is 60 s and no flag sets it; the operation
		// timeout bounds the context it runs under.
		script := csScript(t, dir, "slow.sh", `echo $$ > '`+pidFile+`'
sleep 30
echo '{"approvedPaths": ["proj/a.txt"]}'
touch '`+marker+`'
`)
		p := startBroker(t, "", w.args("command:"+script, "--operation-timeout", "2s")...)
		p.handshake("2025-11-25")
		start := time.Now()
		r := p.Call(1, "files/consent", map[string]any{"message": "m", "requestedPaths": []string{"proj/a.txt"}})
		took := time.Since(start)
		t.Logf("files/consent with a command that never answers, under --operation-timeout 2s, answered after %v: %s", took, r.Raw)
		if took > 8*time.Second {
			t.Errorf("answered after %v: the 2 s operation timeout did not bound the command", took)
		}
		// The command's process group is killed.
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("the command did not run: %v", err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		for deadline := time.Now().Add(waitLimit); pid > 0 && alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the consent command (pid %d) still runs after the timeout", pid)
			}
		}
		csNoConsent(t, p, 2, "files/read", map[string]any{"path": "proj/a.txt"})
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Errorf("the command ran to its end: %v", err)
		}
		p.ping(3)
		p.closeStdin()
		p.waitExit()
		checkConsentTimedOut(t, w, r)
	})

	t.Run("exits non-zero", func(t *testing.T) {
		t.Parallel()
		w := newConsentWorld(t)
		script := csScript(t, t.TempDir(), "fail.sh", `cat > /dev/null
echo '{"approvedPaths": ["proj/a.txt"]}'
echo 'no display to ask on' >&2
exit 3
`)
		p := startBroker(t, "", w.args("command:"+script)...)
		p.handshake("2025-11-25")
		if granted, approved := csConsent(t, p, 1, "read", "proj/a.txt"); granted || len(approved) != 0 {
			t.Fatalf("a failing command approved %q", approved)
		}
		csNoConsent(t, p, 2, "files/read", map[string]any{"path": "proj/a.txt"})
		p.waitLog(regexp.MustCompile(`consent was not given.*no display to ask on`))
		p.closeStdin()
		p.waitExit()
		if gs := csListGrants(t, w.state, csPeer); len(gs) != 0 {
			t.Errorf("grants after a failing command: %+v", gs)
		}
	})
}

// checkConsentTimedOut checks what a consent round whose provider ran out of
// time leaves, once its broker has exited: the reply r says nothing was
// approved ({granted: false}, or TIMEOUT: the operation passed its deadline),
// no grant, and a consent record that approves nothing. The provider's
// failure is not the audit trail's: "audit unavailable" is wrong, and so is a
// consent round the trail does not show.
func checkConsentTimedOut(t *testing.T, w *consentWorld, r *message) {
	t.Helper()
	switch {
	case r.Error == nil:
		var res map[string]any
		_ = json.Unmarshal(r.Result, &res)
		if granted, _ := decodeConsent(t, res); granted {
			t.Errorf("files/consent = %s after the provider ran out of time", r.Raw)
		}
	case dataOf(t, r).Code != "TIMEOUT":
		t.Errorf("files/consent = %s after the provider ran out of time, want {granted: false} or TIMEOUT", r.Raw)
	}
	if gs := csListGrants(t, w.state, csPeer); len(gs) != 0 {
		t.Errorf("grants after a timeout: %+v", gs)
	}
	var consents int
	for _, rec := range csTrail(t, w.trail()) {
		if rec.Kind == audit.KindConsent {
			consents++
			if rec.Allow == nil || *rec.Allow || !strings.Contains(rec.Detail, "0 approved") {
				t.Errorf("consent record %+v, want one that approves nothing", rec)
			}
		}
	}
	if consents != 1 {
		t.Errorf("%d consent records after a consent round that timed out, want 1", consents)
	}
}

// TestConsentPolicyNarrows: the policy's consentable query takes out of a
// request what may never be granted before the provider is asked (here a
// command that approves everything it is given): write access under .git,
// write access in a read-only root, secrets; paths outside every root are
// never approvable at all.
func TestConsentPolicyNarrows(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	script, log := approveAllScript(t)
	p := startBroker(t, "", w.args("command:"+script)...)
	p.handshake("2025-11-25")

	granted, approved := csConsent(t, p, 1, "write",
		"rw/src", "rw/.git/hooks", "rw/.git", "proj/docs", "rw/.env", "rw/.ssh",
		"/etc", filepath.Join(w.base, "rw_evil"), "rw/../proj/docs", "file://"+filepath.Join(w.base, "rw_evil", "x.txt"))
	if !granted || !slices.Equal(approved, []string{"rw/src"}) {
		t.Fatalf("write consent approved %q, want rw/src only", approved)
	}
	granted, approved = csConsent(t, p, 2, "read", "proj/docs", "proj/.git/config", "rw/.git", "rw/.ssh", "rw/.env", "/etc/passwd")
	if !granted || !slices.Equal(approved, []string{"proj/docs", "rw/.git"}) {
		t.Fatalf("read consent approved %q, want proj/docs and rw/.git", approved)
	}
	// Nothing approvable: the command is not even asked.
	if granted, approved := csConsent(t, p, 3, "write", "rw/.git/hooks", "proj", filepath.Join(w.base, "rw_evil")); granted || len(approved) != 0 {
		t.Fatalf("approved %q of nothing approvable", approved)
	}
	reqs := commandRequests(t, log)
	if len(reqs) != 2 || !slices.Equal(reqs[0].Paths, []string{"rw/src"}) || reqs[0].Access != "write" ||
		!slices.Equal(reqs[1].Paths, []string{"proj/docs", "rw/.git"}) || reqs[1].Access != "read" {
		t.Fatalf("the command was asked %+v, want [rw/src] (write) then [proj/docs rw/.git] (read)", reqs)
	}
	// It is told what was left out, and why: every other path asked for.
	why := map[string]string{}
	for _, r := range reqs[0].Removed {
		why[r.Path] = r.Reason
	}
	for path, want := range map[string]string{"rw/.git/hooks": `".git", which is never writable`, "rw/.git": `".git", which is never writable`,
		"proj/docs": `readonly: the root of path ("proj") is read-only`, "rw/.env": "secrets: ", "rw/.ssh": "secrets: ",
		"/etc": "outside every root", filepath.Join(w.base, "rw_evil"): "outside every root",
		"rw/../proj/docs": "climbs above its root"} {
		if !strings.Contains(why[path], want) {
			t.Errorf("the command was told %s was left out because %q, want %q", path, why[path], want)
		}
	}
	if len(why) != 9 {
		t.Errorf("the command was told of %d removed paths, want 9: %+v", len(why), reqs[0].Removed)
	}

	csResult(t, p, 4, "files/write", map[string]any{"path": "rw/src/lib.go", "content": "package main"})
	csNoConsent(t, p, 5, "files/write", map[string]any{"path": "rw/.git/hooks/pre-commit", "content": "#!/bin/sh"})
	csNoConsent(t, p, 6, "files/write", map[string]any{"path": "proj/docs/new.md", "content": "x"})
	csNoConsent(t, p, 7, "files/read", map[string]any{"path": "rw/.env"})
	csRead(t, p, 8, "rw/.git/hooks/README", "hooks")
	csRead(t, p, 9, "proj/docs/guide.md", "guide")
	// A read grant on rw/.git does not reach the secret inside it.
	if d := csRefused(t, p, 10, "files/read", map[string]any{"path": "rw/.git/config"}, "PERMISSION_DENIED"); !strings.Contains(d.Reason, "secrets") {
		t.Errorf("rw/.git/config refused with %q, want the secrets rule", d.Reason)
	}
	csRefused(t, p, 11, "files/read", map[string]any{"path": filepath.Join(w.base, "rw_evil", "x.txt")}, "PERMISSION_DENIED")
	if _, err := os.Stat(filepath.Join(w.rw, ".git", "hooks", "pre-commit")); !os.IsNotExist(err) {
		t.Errorf("a hook was written: %v", err)
	}
}

// ttyScreen is the broker's controlling terminal, as the tests use it.
type ttyScreen struct{ *ptytest.Terminal }

// waitFor waits until the terminal has shown want at least n times and
// returns what it shows.
func (s ttyScreen) waitFor(t *testing.T, want string, n int) string {
	t.Helper()
	return s.WaitFor(t, want, n, waitLimit, nil)
}

// typeLine types line and Enter on the terminal.
func (s ttyScreen) typeLine(t *testing.T, line string) {
	t.Helper()
	s.Type(t, line+"\n")
}

// startOnTerminal starts fsbroker with args with a new pseudo-terminal as its
// controlling terminal, while its stdin, stdout and stderr stay the pipes
// startProc makes.
func startOnTerminal(t *testing.T, args ...string) (*proc, ttyScreen) {
	t.Helper()
	cmd := exec.Command(brokerBin, args...)
	term := ptytest.Attach(t, cmd) // its cleanup runs after startProc's: the terminal outlives the broker
	p := startProc(t, cmd)
	term.Started()
	return p, ttyScreen{term}
}

const (
	askAll  = "Approve? [y] yes, all  [n] no, none  [s] choose one by one"
	askRead = "approve read? [y/n]"
)

// TestConsentPrompt drives --consent prompt through a pseudo-terminal that is
// the broker's controlling terminal, while the protocol runs on its stdin and
// stdout: one by one, all, none.
func TestConsentPrompt(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p, screen := startOnTerminal(t, w.args("prompt")...)
	p.handshake("2025-11-25")

	// One by one: y, n, y. A path outside the roots is never shown.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "files/consent", "params": map[string]any{
		"message":        "I index your notes.\x1b[2J",
		"requestedPaths": []string{"proj/a.txt", "proj/b.txt", "/etc/passwd", "proj/c.txt"}}})
	shown := screen.waitFor(t, askAll, 1)
	for _, want := range []string{
		"=== fsbroker: an MCP server asks for file access ===",
		`Server:  "cli-test-peer" version "0.0.1"`,
		"UNVERIFIED",
		"Access:  read\n",
		"Paths:   3, each with everything beneath it:",
		"  1. proj/a.txt   (root \"proj\" at " + w.proj + ", read-only)\n",
		"  3. proj/c.txt",
		"  | I index your notes.\n",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal lacks %q; it shows:\n%s", want, shown)
		}
	}
	if regexp.MustCompile(`\d\. [^\n]*passwd`).MatchString(shown) || strings.Contains(shown, "\x1b") {
		t.Errorf("the terminal asks about a path outside the roots, or shows the server's escape:\n%q", shown)
	}
	if !strings.Contains(shown, "Not asked: 1 requested path(s) that cannot be granted:\n  - /etc/passwd: ") {
		t.Errorf("the terminal does not say the path outside the roots was left out:\n%s", shown)
	}
	screen.typeLine(t, "s")
	screen.waitFor(t, "1/3 proj/a.txt  "+askRead, 1)
	screen.typeLine(t, "y")
	screen.waitFor(t, "2/3 proj/b.txt  "+askRead, 1)
	screen.typeLine(t, "n")
	screen.waitFor(t, "3/3 proj/c.txt  "+askRead, 1)
	screen.typeLine(t, "y")
	r := p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("1") })
	if r.Error != nil {
		t.Fatalf("files/consent: %s", r.Raw)
	}
	var res map[string]any
	_ = json.Unmarshal(r.Result, &res)
	if granted, approved := decodeConsent(t, res); !granted || !slices.Equal(approved, []string{"proj/a.txt", "proj/c.txt"}) {
		t.Fatalf("the prompt approved %q, want proj/a.txt and proj/c.txt", approved)
	}
	screen.waitFor(t, "fsbroker: approved 2 of 3 path(s) for read access.", 1)
	csRead(t, p, 2, "proj/a.txt", "alpha")
	csRead(t, p, 3, "proj/c.txt", "charlie")
	csNoConsent(t, p, 4, "files/read", map[string]any{"path": "proj/b.txt"})

	// All.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "files/consent", "params": map[string]any{
		"message": "and b", "requestedPaths": []string{"proj/b.txt", "proj/docs"}}})
	screen.waitFor(t, askAll, 2)
	screen.typeLine(t, "a")
	r = p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("5") })
	_ = json.Unmarshal(r.Result, &res)
	if granted, approved := decodeConsent(t, res); !granted || !slices.Equal(approved, []string{"proj/b.txt", "proj/docs"}) {
		t.Fatalf("the prompt approved %q, want all", approved)
	}
	csRead(t, p, 6, "proj/b.txt", "bravo")
	csRead(t, p, 7, "proj/docs/guide.md", "guide")

	// None.
	p.Send(map[string]any{"jsonrpc": "2.0", "id": 8, "method": "files/consent", "params": map[string]any{
		"message": "and d", "requestedPaths": []string{"proj/d.txt"}}})
	screen.waitFor(t, askAll, 3)
	screen.typeLine(t, "n")
	r = p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("8") })
	_ = json.Unmarshal(r.Result, &res)
	if granted, _ := decodeConsent(t, res); granted {
		t.Fatalf("the prompt approved %s after n", r.Raw)
	}
	csNoConsent(t, p, 9, "files/read", map[string]any{"path": "proj/d.txt"})

	// Write access in the read-only root is never approvable: no question.
	if granted, _ := csConsent(t, p, 10, "write", "proj/d.txt"); granted {
		t.Fatal("write access in a read-only root was approved")
	}
	if n := strings.Count(screen.String(), askAll); n != 3 {
		t.Errorf("the terminal asked %d times, want 3", n)
	}
	p.closeStdin()
	p.waitExit()
	gs := csListGrants(t, w.state, csPeer)
	if len(gs) != 4 || gs[0].By != "prompt" {
		t.Errorf("grants %+v, want four by prompt", gs)
	}
}

// TestConsentPromptNoAnswer: nobody answers the prompt; the operation
// timeout (the provider's own 60 s has no flag) ends the question, the
// terminal says so, and nothing is approved.
func TestConsentPromptNoAnswer(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p, screen := startOnTerminal(t, w.args("prompt", "--operation-timeout", "2s")...)
	p.handshake("2025-11-25")
	p.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "files/consent", "params": map[string]any{
		"message": "anyone there?", "requestedPaths": []string{"proj/a.txt"}}})
	screen.waitFor(t, askAll, 1)
	screen.waitFor(t, "fsbroker: no answer in time; nothing approved.", 1)
	r := p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("1") })
	t.Logf("files/consent without an answer, under --operation-timeout 2s: %s", r.Raw)
	screen.typeLine(t, "a") // too late: changes nothing
	csNoConsent(t, p, 2, "files/read", map[string]any{"path": "proj/a.txt"})
	p.closeStdin()
	p.waitExit()
	checkConsentTimedOut(t, w, r)
}

// csSend writes one request without failing the test (for goroutines).
func csSend(p *proc, id, method string, params any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	return p.Write(b)
}

// TestConsentRevocationFromAnotherProcess: while a session reads and watches
// under a grant, `fsbroker grants revoke` in another process takes it away:
// the next requests are refused for want of consent (PROTOCOL.md: within 1
// second; measured and logged, asserted with room for a loaded machine), the
// watch ends, the server is told its roots may have changed, and the trail
// records the revocation.
func TestConsentRevocationFromAnotherProcess(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	script, _ := approveAllScript(t)
	p := startBroker(t, "", w.args("command:"+script)...)
	p.handshake("2025-11-25")

	if granted, approved := csConsent(t, p, 1, "read", "proj/watched", "proj/a.txt"); !granted || len(approved) != 2 {
		t.Fatalf("approved %q", approved)
	}
	// The grant itself changes the server's grants: the notification it
	// causes must not pass for the revocation's.
	p.Await("roots/list_changed after the grant", csIsListChanged)
	watchID, _ := csResult(t, p, 2, "files/watch", map[string]any{"path": "proj/watched", "recursive": true})["watchId"].(string)
	writeFile(t, filepath.Join(w.proj, "watched", "before.txt"), "x")
	p.Await("a change event under the watch", csChangeOf("proj/watched/before.txt"))
	csRead(t, p, 3, "proj/watched/a.txt", "watched")
	time.Sleep(300 * time.Millisecond)
	for p.TryAwait(0, csIsListChanged) != nil {
	}

	var grantID string
	for _, g := range csListGrants(t, w.state, csPeer) {
		if g.Path == "proj/watched" {
			grantID = g.ID
		}
	}
	if grantID == "" {
		t.Fatal("no grant on proj/watched")
	}

	// When the revocation changes the grants file, as the test's own watch of
	// the directory sees it: the start of the latency measured.
	var (
		changedMu sync.Mutex
		armed     bool
		changedAt time.Time
	)
	observer, err := grants.Open(filepath.Join(w.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	if err := observer.Watch(t.Context(), func(server string) {
		changedMu.Lock()
		defer changedMu.Unlock()
		if armed && changedAt.IsZero() && (server == csPeer || server == grants.AnyServer) {
			changedAt = time.Now()
		}
	}); err != nil {
		t.Fatal(err)
	}

	// A reader reads under the grant until it is refused.
	type refusal struct {
		at time.Time
		m  *message
	}
	refused := make(chan refusal, 1)
	stop := make(chan struct{})
	var (
		reads       sync.WaitGroup
		lastAllowed atomic.Int64 // when the last read allowed was sent (UnixNano)
	)
	reads.Add(1)
	go func() {
		defer reads.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("bg-%d", i)
			sent := time.Now()
			if csSend(p, id, "files/read", map[string]any{"path": "proj/watched/a.txt"}) != nil {
				return
			}
			m := p.TryAwait(waitLimit, func(m *message) bool { return m.IsReplyTo(`"` + id + `"`) })
			if m == nil {
				return
			}
			if m.Error != nil {
				refused <- refusal{time.Now(), m}
				return
			}
			lastAllowed.Store(sent.UnixNano())
			time.Sleep(2 * time.Millisecond)
		}
	}()
	stopReads := sync.OnceFunc(func() { close(stop); reads.Wait() })
	defer stopReads()

	changedMu.Lock()
	armed = true
	changedMu.Unlock()
	lateness := watchScheduling()
	start := time.Now()
	stdout, stderr, code := runFsbroker(t, nil, "grants", "revoke", "--state-dir", w.state, "--server", csPeer, "--path", "proj/watched")
	exited := time.Now()
	if !strings.Contains(stdout, "revoked 1 grant(s)") || !strings.Contains(stdout, grantID) {
		t.Fatalf("grants revoke: exit status %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code != 0 { // the revocation happened; the rest is still checked
		t.Errorf("grants revoke revoked the grant but exited with status %d; stderr:\n%s", code, stderr)
	}
	var r refusal
	select {
	case r = <-refused:
	case <-time.After(5 * time.Second):
		lateness()
		t.Fatal("reads under the revoked grant were still answered 5 s after fsbroker grants revoke exited")
	}
	late := lateness()
	// The promise (PROTOCOL.md: 1 s): a read sent more than a second after
	// the grants file's change (when the test's watch saw it; else the
	// command's start, an upper bound) is refused. So the latency is when
	// the last read still allowed was sent, after the change; it is held to
	// latencyBound (the second, plus what the load measured meanwhile cost),
	// and the log shows the measures.
	changedMu.Lock()
	from, what := changedAt, "the grants file changed"
	changedMu.Unlock()
	if from.IsZero() || from.After(r.at) {
		from, what = start, "fsbroker grants revoke started"
	}
	latency := max(time.Unix(0, lastAllowed.Load()).Sub(from), 0)
	t.Logf("revocation latency: the last read allowed was sent %v after %s, the first refused came back %v after it (%v after the command started, %v after it exited; it ran %v); scheduling lateness up to %v, bound %v",
		latency, what, r.at.Sub(from), r.at.Sub(start), r.at.Sub(exited), exited.Sub(start), late, latencyBound(late))
	if latency > latencyBound(late) {
		t.Errorf("a read sent %v after %s was still allowed (PROTOCOL.md: refused within 1 s; with the %v the load cost, %v)",
			latency, what, latencyBound(late)-promisedLatency, latencyBound(late))
	}
	if d := dataOf(t, r.m); d.Code != "PERMISSION_DENIED" || !strings.Contains(d.Reason, "consent") {
		t.Fatalf("the read after the revocation: %s, want PERMISSION_DENIED naming consent", r.m.Raw)
	}
	csNoConsent(t, p, 4, "files/read", map[string]any{"path": "proj/watched/a.txt"})
	csRead(t, p, 5, "proj/a.txt", "alpha") // the other grant stands

	p.Await("roots/list_changed after the revocation", csIsListChanged)
	p.waitLog(regexp.MustCompile(`consent revoked: watches ended.*` + watchID))
	writeFile(t, filepath.Join(w.proj, "watched", "after.txt"), "x")
	if m := p.TryAwait(time.Second, csChangeOf("proj/watched/after.txt")); m != nil {
		t.Errorf("a change under the revoked watch was sent: %s", m.Raw)
	}
	if d := csRefused(t, p, 6, "files/unwatch", map[string]any{"watchId": watchID}, "INVALID_PARAMS"); !strings.Contains(d.Reason, "no watch") {
		t.Errorf("unwatch of the ended watch: %+v", d)
	}
	csNoConsent(t, p, 7, "files/watch", map[string]any{"path": "proj/watched"})
	stopReads()
	p.closeStdin()
	p.waitExit()

	var granted, revoked bool
	for _, rec := range csTrail(t, w.trail()) {
		if rec.Kind != audit.KindGrant || !strings.Contains(rec.Detail, grantID) {
			continue
		}
		switch rec.Method {
		case "files/consent":
			granted = rec.Allow != nil && *rec.Allow && slices.Equal(rec.Paths, []string{filepath.Join(w.proj, "watched")})
		case "grants/revoke":
			revoked = rec.Server == csPeer && rec.Allow != nil && !*rec.Allow && rec.Operation == "read"
		}
	}
	if !granted || !revoked {
		t.Errorf("the trail shows the grant %s given: %v, revoked (grants/revoke): %v", grantID, granted, revoked)
	}
}

// TestConsentGrantsSurviveARestart: consent given in one broker process is
// kept in the state directory: the next process, which asks nobody (deny),
// uses it without a files/consent round.
func TestConsentGrantsSurviveARestart(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	script, log := approveAllScript(t)
	first := startBroker(t, "", w.args("command:"+script)...)
	first.handshake("2025-11-25")
	csConsent(t, first, 1, "read", "proj/docs")
	csConsent(t, first, 2, "write", "rw/src")
	csRead(t, first, 3, "proj/docs/guide.md", "guide")
	first.closeStdin()
	if code := first.waitExit(); code != 0 {
		t.Fatalf("first broker: exit status %d", code)
	}

	second := startBroker(t, "", w.args("deny")...)
	second.handshake("2025-11-25")
	csRead(t, second, 1, "proj/docs/guide.md", "guide")
	csResult(t, second, 2, "files/write", map[string]any{"path": "rw/src/second.go", "content": "package main"})
	csRead(t, second, 3, "rw/src/main.go", "package main") // a write grant covers reading
	csNoConsent(t, second, 4, "files/read", map[string]any{"path": "proj/a.txt"})
	second.closeStdin()
	second.waitExit()
	if n := len(commandRequests(t, log)); n != 2 {
		t.Errorf("the consent command ran %d times, want 2 (the first process only)", n)
	}
}

// TestConsentExpiredGrantRefused: a grant past its expiry covers nothing,
// even though it is still in the grants file.
func TestConsentExpiredGrantRefused(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	now := time.Now()
	// Written by a store whose clock is two hours behind, as a broker two
	// hours ago would have written it: the first grant expired an hour ago.
	past, err := grants.Open(filepath.Join(w.state, grants.DirName), grants.WithClock(func() time.Time { return now.Add(-2 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	root := grantRoot(t, w.proj)
	if _, err := past.Grant(broker.DeclaredPrefix+csPeer,
		grants.Grant{Access: grants.Read, Path: "proj/a.txt", Root: root, Expires: now.Add(-time.Hour), By: grants.ByPrompt},
		grants.Grant{Access: grants.Read, Path: "proj/b.txt", Root: root, Expires: now.Add(time.Hour), By: grants.ByPrompt},
	); err != nil {
		t.Fatal(err)
	}
	past.Close()
	gs := csListGrants(t, w.state, csPeer)
	if len(gs) != 2 || !gs[0].Expired || gs[1].Expired {
		t.Fatalf("seeded grants %+v, want proj/a.txt expired and proj/b.txt live", gs)
	}

	p := startBroker(t, "", w.args("deny")...)
	p.handshake("2025-11-25")
	csNoConsent(t, p, 1, "files/read", map[string]any{"path": "proj/a.txt"})
	csRead(t, p, 2, "proj/b.txt", "bravo")
}

// TestConsentPinnedServerID: with --server-id, grants are kept under the
// pinned id: a grant made to the name the server declares does not cover it,
// and what it is granted is stored under the pinned id.
func TestConsentPinnedServerID(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	s, err := grants.Open(filepath.Join(w.state, grants.DirName))
	if err != nil {
		t.Fatal(err)
	}
	// A declared name's grants are kept apart from pinned ids' (behind
	// broker.DeclaredPrefix), so a server cannot claim a pinned id's grants.
	if _, err := s.Grant(broker.DeclaredPrefix+csPeer, grants.Grant{Access: grants.Read, Path: "proj", Root: grantRoot(t, w.proj), By: grants.ByPrompt}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Unpinned: the declared name's grant covers the session.
	plain := startBroker(t, "", w.args("deny")...)
	plain.handshake("2025-11-25")
	csRead(t, plain, 1, "proj/a.txt", "alpha")
	plain.closeStdin()
	plain.waitExit()

	script, log := approveAllScript(t)
	p := startBroker(t, "", w.args("command:"+script, "--server-id", "indexer-prod")...)
	p.handshake("2025-11-25") // declares cli-test-peer
	csNoConsent(t, p, 1, "files/read", map[string]any{"path": "proj/a.txt"})
	if granted, _ := csConsent(t, p, 2, "read", "proj/docs"); !granted {
		t.Fatal("the pinned server's consent was not granted")
	}
	csRead(t, p, 3, "proj/docs/guide.md", "guide")
	csNoConsent(t, p, 4, "files/read", map[string]any{"path": "proj/a.txt"})
	p.closeStdin()
	p.waitExit()

	reqs := commandRequests(t, log)
	if len(reqs) != 1 || reqs[0].Server.ID != "indexer-prod" || !reqs[0].Server.Pinned || reqs[0].Server.Name != csPeer {
		t.Errorf("the command was told the server is %+v, want id indexer-prod, pinned, declaring %s", reqs, csPeer)
	}
	if gs := csListGrants(t, w.state, "indexer-prod"); len(gs) != 1 || gs[0].Path != "proj/docs" {
		t.Errorf("grants of indexer-prod: %+v", gs)
	}
	if gs := csListGrants(t, w.state, csPeer); len(gs) != 1 || gs[0].Path != "proj" {
		t.Errorf("grants of %s: %+v", csPeer, gs)
	}
}

// TestConsentRateLimitFlood: 5,000 requests in about 2.5 s (ten times the
// rate), on the default limits (200/s, bursts of 400, 64 in flight): the
// limit holds (QUOTA_EXCEEDED with data.retryAfterMs), ping is answered
// throughout, and the trail records about one refusal per second, counting
// the others, not one per refusal.
func TestConsentRateLimitFlood(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	p := startBroker(t, "", w.args("auto")...)
	p.handshake("2025-11-25")
	// auto approves what is asked: the flood's reads are then covered.
	if granted, _ := csConsent(t, p, "consent", "read", "proj"); !granted {
		t.Fatal("auto did not approve proj")
	}

	const (
		flood     = 5000
		batch     = 100 // requests written at once, every pause
		pause     = 50 * time.Millisecond
		pingEvery = 250
		// floodWait bounds the waits of this test: on a loaded machine, with
		// the race detector, the broker may take far longer than usual to
		// work through the flood.
		floodWait = time.Minute
	)
	within := func(what string, match func(*message) bool) *message {
		t.Helper()
		m := p.TryAwait(floodWait, match)
		if m == nil {
			t.Fatalf("no %s from fsbroker within %s", what, floodWait)
		}
		return m
	}
	var (
		mu     sync.Mutex
		pinged = map[string]time.Time{}
	)
	sent := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := range flood {
			if i > 0 && i%batch == 0 {
				time.Sleep(pause)
			}
			if i%pingEvery == 0 {
				id := fmt.Sprintf("ping-%d", i/pingEvery)
				mu.Lock()
				pinged[id] = time.Now()
				mu.Unlock()
				if err := csSend(p, id, "ping", nil); err != nil {
					sent <- err
					return
				}
			}
			if err := csSend(p, strconv.Itoa(i), "files/read", map[string]any{"path": "proj/a.txt"}); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// Each ping is answered, with {}, while the flood goes on.
	var slowest time.Duration
	for k := range flood / pingEvery {
		id := fmt.Sprintf("ping-%d", k)
		m := within("the reply to "+id, func(m *message) bool { return m.IsReplyTo(`"` + id + `"`) })
		mu.Lock()
		took := time.Since(pinged[id])
		mu.Unlock()
		slowest = max(slowest, took)
		if m.Error != nil || string(m.Result) != "{}" {
			t.Fatalf("%s answered %s", id, m.Raw)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	var ok, limited int
	for i := range flood {
		id := strconv.Quote(strconv.Itoa(i))
		m := within("the reply to "+id, func(m *message) bool { return m.IsReplyTo(id) })
		if m.Error == nil {
			ok++
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(m.Error.Data, &data); err != nil || data["code"] != "QUOTA_EXCEEDED" || m.Error.Code != -32007 {
			t.Fatalf("request %d: %s, want a result or QUOTA_EXCEEDED", i, m.Raw)
		}
		if ms, isNum := data["retryAfterMs"].(float64); !isNum || ms < 1 || ms != float64(int64(ms)) {
			t.Fatalf("request %d: %s, want data.retryAfterMs a positive integer", i, m.Raw)
		}
		limited++
	}
	elapsed := time.Since(start) // an upper bound on the time the limiter saw the flood over
	p.ping("after")
	t.Logf("flood of %d reads in %v: %d answered, %d refused (QUOTA_EXCEEDED); slowest ping %v", flood, elapsed, ok, limited, slowest)
	if most := 400 + int(200*elapsed.Seconds()) + 1; ok == 0 || ok > most || limited == 0 {
		t.Errorf("%d of %d answered in %v: the limit (200/s, bursts of 400) allows at most %d", ok, flood, elapsed, most)
	}
	p.closeStdin()
	p.waitExit()

	// About one record per second of flood, and the counts add up.
	var records, counted int
	suppressed := regexp.MustCompile(`; (\d+) more refusals of this server since the last one recorded`)
	atEnd := regexp.MustCompile(`; (\d+) rate-limit refusals of this server not recorded one by one`)
	for _, r := range csTrail(t, w.trail()) {
		switch {
		case r.Kind == audit.KindDecision && r.Code == "QUOTA_EXCEEDED":
			records++
			counted++
			if m := suppressed.FindStringSubmatch(r.Detail); m != nil {
				n, _ := strconv.Atoi(m[1])
				counted += n
			}
		case r.Kind == audit.KindSessionEnd:
			if m := atEnd.FindStringSubmatch(r.Detail); m != nil {
				n, _ := strconv.Atoi(m[1])
				counted += n
			}
		}
	}
	t.Logf("%d QUOTA_EXCEEDED records in the trail, accounting for %d refusals", records, counted)
	if most := int(elapsed.Seconds()) + 2; records < 2 || records > most {
		t.Errorf("%d QUOTA_EXCEEDED records for a flood of %v, want 2 to %d (one per second)", records, elapsed, most)
	}
	if counted != limited {
		t.Errorf("the trail accounts for %d refusals, the server saw %d", counted, limited)
	}
}

// TestConsentGrantBoundToItsRoot: a grant approved for /one/proj does not
// apply to /two/proj when the operator later configures that directory
// under the same mount (both named proj), though the state directory and
// the server are the same; grants list marks it. The grant still covers
// /one/proj.
func TestConsentGrantBoundToItsRoot(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	one := w.proj
	two := filepath.Join(w.base, "two", "proj")
	if err := os.MkdirAll(two, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(two, "a.txt"), "another alpha")
	script, _ := approveAllScript(t)
	args := func(proj, consentSpec string) []string {
		return []string{"stdio", "--root", proj, "--state-dir", w.state, "--consent", consentSpec}
	}

	first := startBroker(t, "", args(one, "command:"+script)...)
	first.handshake("2025-11-25")
	if granted, _ := csConsent(t, first, 1, "read", "proj"); !granted {
		t.Fatal("consent for proj was not granted")
	}
	csRead(t, first, 2, "proj/a.txt", "alpha")
	first.closeStdin()
	first.waitExit()

	other := startBroker(t, "", args(two, "deny")...)
	other.handshake("2025-11-25")
	csNoConsent(t, other, 1, "files/read", map[string]any{"path": "proj/a.txt"})
	csNoConsent(t, other, 2, "files/list", map[string]any{"path": "proj"})
	other.closeStdin()
	other.waitExit()

	gs := csListGrants(t, w.state, csPeer)
	if len(gs) != 1 || gs[0].Root.Path != one || gs[0].RootStatus != rootUnchecked {
		t.Fatalf("grants list = %+v, want one grant under %s", gs, one)
	}
	stdout, stderr, code := runFsbroker(t, nil, "grants", "list", "--state-dir", w.state, "--root", two)
	if code != 0 || !strings.Contains(stdout, one+" (root changed: proj is "+two+" now") {
		t.Fatalf("grants list --root %s: exit status %d, stdout:\n%s\nstderr:\n%s", two, code, stdout, stderr)
	}

	again := startBroker(t, "", args(one, "deny")...)
	again.handshake("2025-11-25")
	csRead(t, again, 1, "proj/a.txt", "alpha")
	again.closeStdin()
	again.waitExit()
}

// TestConsentPromptHoldsTheLogAndSaysWhatWasRemoved: fsbroker's stderr is its
// terminal, as when a person starts it there, at log level debug (a line per
// request). While the question is on the terminal the server's requests go
// on, each logged, yet no log line appears in the question; they all come
// out after the answer. The question says which requested paths the policy
// removed and why (a secret, the .git of a writable root, a path outside
// every root), and asks about the others only.
func TestConsentPromptHoldsTheLogAndSaysWhatWasRemoved(t *testing.T) {
	t.Parallel()
	w := newConsentWorld(t)
	args := append([]string{"-c", `exec "$0" "$@" 2>/dev/tty`, brokerBin}, w.args("prompt", "--log-level", "debug")...)
	cmd := exec.Command("sh", args...)
	term := ptytest.Attach(t, cmd)
	p := startProc(t, cmd)
	term.Started()
	screen := ttyScreen{term}
	p.handshake("2025-11-25")
	screen.waitFor(t, "session initialized", 1) // the log is on the terminal

	p.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "files/consent", "params": map[string]any{
		"message": "I build the project.", "access": "write",
		"requestedPaths": []string{"rw/src", "rw/.env", "rw/.git/hooks", "/etc"}}})
	screen.waitFor(t, askAll, 1)
	for i := 2; i <= 6; i++ { // refused for want of consent, and logged, while the question waits
		csNoConsent(t, p, i, "files/read", map[string]any{"path": "rw/src/main.go"})
	}
	screen.typeLine(t, "y")
	r := p.Await("the reply to files/consent", func(m *message) bool { return m.IsReplyTo("1") })
	var res map[string]any
	_ = json.Unmarshal(r.Result, &res)
	if granted, approved := decodeConsent(t, res); !granted || !slices.Equal(approved, []string{"rw/src"}) {
		t.Fatalf("approved %q, want rw/src alone", approved)
	}
	shown := screen.waitFor(t, "request failed: method=files/read id=6", 1)
	start := strings.Index(shown, "=== fsbroker: an MCP server asks for file access ===")
	end := strings.Index(shown, "fsbroker: approved 1 of 1 path(s) for write access.")
	if start < 0 || end < start {
		t.Fatalf("the terminal shows:\n%s", shown)
	}
	question := shown[start:end]
	if strings.Contains(question, "[DEBUG]") || strings.Contains(question, "[INFO]") {
		t.Errorf("log lines in the middle of the question:\n%s", question)
	}
	if held := strings.Index(shown, "request failed: method=files/read id=2"); held < end {
		t.Errorf("the requests' log lines do not come after the answer:\n%s", shown)
	}
	for _, want := range []string{
		"Paths:   1, each with everything beneath it:\n  1. rw/src ",
		"Not asked: 3 requested path(s) that cannot be granted:\n",
		"  - rw/.env: secrets: path matches the protected name pattern \".env\"\n",
		"  - rw/.git/hooks: consent: path is under \".git\", which is never writable\n",
		"  - /etc: ",
	} {
		if !strings.Contains(question, want) {
			t.Errorf("the question lacks %q:\n%s", want, question)
		}
	}
	p.closeStdin()
	p.waitExit()
}
