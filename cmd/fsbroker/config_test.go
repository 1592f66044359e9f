// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Usage and configuration errors exit with status 2 before any protocol
// message is sent, with a message that names the bad setting.
func TestUsageAndConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	proj := realDir(t, filepath.Join(dir, "proj"))
	proj2 := realDir(t, filepath.Join(dir, "other", "proj"))
	file := filepath.Join(dir, "plain-file")
	writeFile(t, file, "not a directory\n")
	missing := filepath.Join(dir, "no-such-dir")
	config := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	unknownKey := config("unknown-key.yaml", "roots:\n  - path: proj\n    bogus: 1\n")
	badMount := config("bad-mount.yaml", "roots:\n  - path: proj\n    mount: a/b\n")
	badYAML := config("bad-yaml.yaml", "roots: [\n  - path: proj\n")
	missingRoot := config("missing-root.yaml", "roots:\n  - path: proj\n  - path: no-such-dir\n")
	dupMounts := config("dup-mounts.yaml", "roots:\n  - path: proj\n  - path: other/proj\n")
	unknownTop := config("unknown-top.yaml", "rootz:\n  - path: proj\n")
	badLevel := config("bad-level.yaml", "log:\n  level: verbose\n")

	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{name: "no command", args: nil, want: []string{"Usage"}},
		{name: "unknown command", args: []string{"frobnicate"}, want: []string{`"frobnicate"`}},
		{name: "unknown flag", args: []string{"stdio", "--frobnicate"}, want: []string{"-frobnicate"}},
		{name: "flag without value", args: []string{"stdio", "--root"}, want: []string{"-root"}},
		{name: "stdio with arguments", args: []string{"stdio", "--root", proj, "extra"}, want: []string{"extra"}},
		{name: "missing root", args: []string{"stdio", "--root", missing}, want: []string{"--root", missing, "does not exist"}},
		{name: "root is a file", args: []string{"stdio", "--root", file}, want: []string{"--root", file, "not a directory"}},
		{name: "two roots with the same base name", args: []string{"stdio", "--root", proj, "--root", proj2},
			want: []string{"--root " + proj, "--root " + proj2, `"proj"`}},
		{name: "bad log level", args: []string{"stdio", "--root", proj, "--log-level", "verbose"}, want: []string{"--log-level", "verbose"}},
		{name: "bad log format", args: []string{"stdio", "--root", proj, "--log-format", "xml"}, want: []string{"--log-format", "xml"}},
		{name: "max message bytes too small", args: []string{"stdio", "--root", proj, "--max-message-bytes", "10"}, want: []string{"--max-message-bytes"}},
		{name: "zero init timeout", args: []string{"stdio", "--root", proj, "--init-timeout", "0s"}, want: []string{"--init-timeout"}},
		{name: "config with an unknown key", args: []string{"stdio", "--config", unknownKey}, want: []string{unknownKey, "/roots/0/bogus"}},
		{name: "config with an unknown top-level key", args: []string{"stdio", "--config", unknownTop}, want: []string{unknownTop, "/rootz"}},
		{name: "config with a bad mount", args: []string{"stdio", "--config", badMount}, want: []string{badMount, "/roots/0/mount"}},
		{name: "config with invalid YAML", args: []string{"stdio", "--config", badYAML}, want: []string{badYAML, "YAML"}},
		{name: "config with a missing root", args: []string{"stdio", "--config", missingRoot}, want: []string{missingRoot, "/roots/1", missing}},
		{name: "config with two roots on one mount", args: []string{"stdio", "--config", dupMounts},
			want: []string{dupMounts + ": /roots/0", dupMounts + ": /roots/1", `"proj"`}},
		{name: "config with a bad log level", args: []string{"stdio", "--config", badLevel}, want: []string{badLevel, "/log/level"}},
		{name: "missing config file", args: []string{"stdio", "--config", filepath.Join(dir, "nope.yaml")},
			want: []string{"--config", filepath.Join(dir, "nope.yaml")}},
		{name: "connect without a command", args: []string{"connect", "--root", proj}, want: []string{"connect", "command"}},
		{name: "connect without a command after --", args: []string{"connect", "--root", proj, "--"}, want: []string{"connect", "command"}},
		{name: "connect with a command not in PATH", args: []string{"connect", "--root", proj, "--", "fsbroker-no-such-server"},
			want: []string{"fsbroker-no-such-server"}},
		{name: "connect with a missing command path", args: []string{"connect", "--root", proj, "--", missing + "/server"},
			want: []string{missing + "/server"}},
		{name: "connect with a non-executable command", args: []string{"connect", "--root", proj, "--", file},
			want: []string{file}},
		{name: "connect with bad flags", args: []string{"connect", "--root", missing, "--", "sh"}, want: []string{"--root", missing}},
		{name: "wrap with a command not in PATH", args: []string{"wrap", "--root", proj, "--", "fsbroker-no-such-server"},
			want: []string{"fsbroker-no-such-server"}},
		{name: "bad consent", args: []string{"stdio", "--root", proj, "--consent", "maybe"}, want: []string{"--consent", "maybe"}},
		{name: "bad audit sync", args: []string{"stdio", "--root", proj, "--audit-sync", "sometimes"}, want: []string{"--audit-sync", "sometimes"}},
		{name: "audit segments too small", args: []string{"stdio", "--root", proj, "--audit-segment-bytes", "10"},
			want: []string{"--audit-segment-bytes"}},
		{name: "bad audit witness", args: []string{"stdio", "--root", proj, "--audit-witness", "carrier-pigeon"},
			want: []string{"--audit-witness"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(brokerBin, tc.args...) // as given (not withConsent): the errors name the flags
			cmd.Dir = dir
			p := startProc(t, cmd)
			p.closeStdin()
			if code := p.waitExit(); code != 2 {
				t.Errorf("exit status = %d, want 2", code)
			}
			log := p.log()
			for _, w := range tc.want {
				if !strings.Contains(log, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, log)
				}
			}
			if p.Has(func(*message) bool { return true }) {
				t.Error("a protocol message was sent despite the configuration error")
			}
			checkNoPoliciesLoaded(t, log)
		})
	}
}

// checkNoPoliciesLoaded fails the test when the log of a command that ended
// on a usage error says the policies were loaded: every setting is checked
// before, so that the usage error is all a mistyped command line prints.
func checkNoPoliciesLoaded(t *testing.T, log string) {
	t.Helper()
	if strings.Contains(log, "policies loaded") {
		t.Errorf("the policies were loaded before the usage error:\n%s", log)
	}
}

// configOf returns a config file's content with the given root paths, each
// pre-approved (consent: preapproved), as withConsent pre-approves the roots
// of --root flags.
func configOf(paths ...string) string {
	var b strings.Builder
	b.WriteString("version: 1\nroots:\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "  - path: %s\n    consent: preapproved\n", p)
	}
	return b.String()
}

// rootPaths returns the directories that roots name.
func rootPaths(t *testing.T, roots []rootEntry) []string {
	t.Helper()
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		out = append(out, fileURIPath(t, r.URI))
	}
	return out
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// quiet is how long the broker must stay silent after a config edit that must
// not notify (the promise is a notification within 1 s).
const quiet = 1500 * time.Millisecond

func isListChanged(m *message) bool { return m.IsNotification("notifications/roots/list_changed") }

// Editing the config file of a running session (PROTOCOL.md section 3): a
// change of the roots sends notifications/roots/list_changed and roots/list
// returns the new set; an edit that fails to load or to resolve changes
// nothing and says so in the log; an edit that leaves the roots as they were
// sends nothing.
func TestConfigHotReload(t *testing.T) {
	t.Parallel()

	// setup starts a session on a config with root "a", next to which
	// directory "b" exists.
	setup := func(t *testing.T) (p *proc, cfg, a, b string) {
		dir := t.TempDir()
		a = realDir(t, filepath.Join(dir, "a"))
		b = realDir(t, filepath.Join(dir, "b"))
		cfg = filepath.Join(dir, "fsbroker.yaml")
		writeFile(t, cfg, configOf(a))
		p = startBroker(t, "", "stdio", "--config", cfg, "--log-level", "debug")
		p.handshake("2025-11-25")
		if got := rootPaths(t, p.listRoots("before")); !equalStrings(got, []string{a}) {
			t.Fatalf("roots before the edit = %q, want %q", got, a)
		}
		return p, cfg, a, b
	}

	for _, edit := range []struct {
		name  string
		write func(*testing.T, string, string)
	}{
		{"rename over", replaceFile},
		{"in place", writeFile},
	} {
		t.Run("add a root, "+edit.name, func(t *testing.T) {
			t.Parallel()
			p, cfg, a, b := setup(t)
			start := time.Now()
			edit.write(t, cfg, configOf(a, b))
			if p.TryAwait(waitLimit, isListChanged) == nil {
				t.Fatalf("no notifications/roots/list_changed within %s of the edit", waitLimit)
			}
			t.Logf("config edit (%s) to notifications/roots/list_changed: %s (promised: within 1s)",
				edit.name, time.Since(start).Round(time.Millisecond))
			if got := rootPaths(t, p.listRoots("after")); !equalStrings(got, []string{a, b}) {
				t.Errorf("roots after the edit = %q, want %q", got, []string{a, b})
			}
			// And back: removing a root notifies too.
			edit.write(t, cfg, configOf(b))
			if p.TryAwait(waitLimit, isListChanged) == nil {
				t.Fatalf("no notifications/roots/list_changed after removing a root")
			}
			if got := rootPaths(t, p.listRoots("after removal")); !equalStrings(got, []string{b}) {
				t.Errorf("roots after the removal = %q, want %q", got, []string{b})
			}
		})
	}

	for _, bad := range []struct {
		name, content string
	}{
		{"invalid YAML", "roots: [\n  - path: x\n"},
		{"unknown key", "roots:\n  - path: a\n    bogus: true\n"},
		{"missing directory", "roots:\n  - path: a\n  - path: no-such-dir\n"},
		{"duplicate mount", "roots:\n  - path: a\n  - path: a\n"},
	} {
		t.Run("invalid edit: "+bad.name, func(t *testing.T) {
			t.Parallel()
			p, cfg, a, _ := setup(t)
			failures := p.countLog("reload failed")
			replaceFile(t, cfg, bad.content)
			if m := p.TryAwait(quiet, isListChanged); m != nil {
				t.Errorf("an invalid config edit sent %s", m.Raw)
			}
			p.waitLogCount("reload failed", failures+1)
			if got := rootPaths(t, p.listRoots("after")); !equalStrings(got, []string{a}) {
				t.Errorf("roots after an invalid edit = %q, want the old %q", got, a)
			}
			// The session still follows the file once it is fixed.
			replaceFile(t, cfg, configOf(a, "b"))
			if p.TryAwait(waitLimit, isListChanged) == nil {
				t.Fatalf("no notifications/roots/list_changed after the config was fixed")
			}
		})
	}

	t.Run("edit that keeps the roots", func(t *testing.T) {
		t.Parallel()
		p, cfg, a, _ := setup(t)
		unchanged := p.countLog("roots unchanged")
		// The same roots, written another way (relative path, explicit
		// defaults), and another setting.
		replaceFile(t, cfg, "roots:\n  - path: ./a\n    mount: a\n    name: a\n    writable: false\n    consent: preapproved\nlog:\n  level: info\n")
		p.waitLogCount("roots unchanged", unchanged+1)
		if m := p.TryAwait(quiet, isListChanged); m != nil {
			t.Errorf("an edit that kept the roots sent %s", m.Raw)
		}
		if got := rootPaths(t, p.listRoots("after")); !equalStrings(got, []string{a}) {
			t.Errorf("roots = %q, want %q", got, a)
		}
	})

	t.Run("an unrelated file in the config directory", func(t *testing.T) {
		t.Parallel()
		p, cfg, _, _ := setup(t)
		writeFile(t, filepath.Join(filepath.Dir(cfg), "unrelated.txt"), "hello\n")
		if m := p.TryAwait(quiet, isListChanged); m != nil {
			t.Errorf("writing another file next to the config sent %s", m.Raw)
		}
	})
}

// Relative root paths in a config file are relative to the config file's
// directory, not to the working directory, at start-up and on reload.
func TestConfigRelativeRoots(t *testing.T) {
	t.Parallel()
	confDir := t.TempDir()
	data := realDir(t, filepath.Join(confDir, "data"))
	more := realDir(t, filepath.Join(confDir, "nested", "more"))
	// The working directory has directories of the same names: a broker
	// that resolved against it would pick them.
	work := t.TempDir()
	realDir(t, filepath.Join(work, "data"))
	realDir(t, filepath.Join(work, "nested", "more"))
	realDir(t, filepath.Join(work, "conf"))

	cfg := filepath.Join(confDir, "fsbroker.yaml")
	writeFile(t, cfg, configOf("data"))
	p := startBroker(t, work, "stdio", "--config", cfg)
	p.handshake("2025-11-25")
	if got := rootPaths(t, p.listRoots(1)); !equalStrings(got, []string{data}) {
		t.Fatalf("roots = %q, want %q", got, data)
	}
	replaceFile(t, cfg, configOf("data", "nested/more"))
	if p.TryAwait(waitLimit, isListChanged) == nil {
		t.Fatal("no notifications/roots/list_changed")
	}
	if got := rootPaths(t, p.listRoots(2)); !equalStrings(got, []string{data, more}) {
		t.Errorf("roots after reload = %q, want %q", got, []string{data, more})
	}
}

// A --root flag and the config's roots together: the config's come first, and
// a reload keeps the flag's root.
func TestConfigAndFlagRoots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := realDir(t, filepath.Join(dir, "a"))
	b := realDir(t, filepath.Join(dir, "b"))
	flagRoot := realDir(t, filepath.Join(t.TempDir(), "flagged"))
	cfg := filepath.Join(dir, "fsbroker.yaml")
	writeFile(t, cfg, configOf(a))
	p := startBroker(t, "", "stdio", "--config", cfg, "--root", flagRoot)
	p.handshake("2025-11-25")
	if got := rootPaths(t, p.listRoots(1)); !equalStrings(got, []string{a, flagRoot}) {
		t.Fatalf("roots = %q, want %q", got, []string{a, flagRoot})
	}
	replaceFile(t, cfg, configOf(a, b))
	if p.TryAwait(waitLimit, isListChanged) == nil {
		t.Fatal("no notifications/roots/list_changed")
	}
	if got := rootPaths(t, p.listRoots(2)); !equalStrings(got, []string{a, b, flagRoot}) {
		t.Errorf("roots after reload = %q, want %q", got, []string{a, b, flagRoot})
	}
}

// The --root flag's :rw and :ro suffixes are not part of the directory.
func TestRootFlagSuffixes(t *testing.T) {
	t.Parallel()
	rw := realDir(t, filepath.Join(t.TempDir(), "writable"))
	ro := realDir(t, filepath.Join(t.TempDir(), "readonly"))
	p := startBroker(t, "", "stdio", "--root", rw+":rw", "--root", ro+":ro")
	p.handshake("2025-11-25")
	roots := p.listRoots(1)
	if got := rootPaths(t, roots); !equalStrings(got, []string{rw, ro}) {
		t.Errorf("roots = %q, want %q", got, []string{rw, ro})
	}
	if len(roots) == 2 && (roots[0].Name != "writable" || roots[1].Name != "readonly") {
		t.Errorf("root names = %q, %q, want writable, readonly", roots[0].Name, roots[1].Name)
	}
}
