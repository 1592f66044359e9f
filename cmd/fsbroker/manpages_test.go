// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestManPages: `fsbroker __man DIR` (make man) writes one page per command
// a person may run, and none for the hidden ones; each has the command's
// description and examples, with the text Markdown would eat (<state-dir>)
// intact; the pages are dated by the commit the binary was built from
// (else $SOURCE_DATE_EPOCH), so that two runs write the same bytes; man
// renders them.
func TestManPages(t *testing.T) {
	t.Parallel()
	const epoch = "1577836800" // 2020-01-01T00:00:00Z
	gen := func() string {
		dir := filepath.Join(t.TempDir(), "man")
		if _, stderr, code := runFsbroker(t, []string{"SOURCE_DATE_EPOCH=" + epoch}, manCommand, dir); code != 0 {
			t.Fatalf("fsbroker %s: exit %d: %s", manCommand, code, stderr)
		}
		return dir
	}
	dir, again := gen(), gen()

	var want []string
	for _, c := range commandsOf(newRootCommand(nil, io.Discard, io.Discard)) {
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("man pages %q, want %q", got, want)
	}

	var built struct{ Time string }
	stdout, _, _ := runFsbroker(t, nil, "version", "--json")
	if err := json.Unmarshal([]byte(stdout), &built); err != nil {
		t.Fatal(err)
	}
	date := "Jan 2020"
	if tm, err := time.Parse(time.RFC3339, built.Time); err == nil {
		date = tm.UTC().Format("Jan 2006")
	}
	for _, name := range got {
		page := readFile(t, filepath.Join(dir, name))
		if page != readFile(t, filepath.Join(again, name)) {
			t.Errorf("%s differs between two runs", name)
		}
		for _, w := range []string{`.TH "` + strings.ToUpper(strings.TrimSuffix(name, ".1")) + `" "1" "` + date + `"`,
			".SH DESCRIPTION", ".SH EXAMPLE", ".SH OPTIONS"} {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, page)
			}
		}
		for _, hidden := range []string{exampleServerCommand, manCommand} {
			if strings.Contains(page, hidden) {
				t.Errorf("%s names the hidden command %s", name, hidden)
			}
		}
	}

	if _, err := exec.LookPath("man"); err != nil {
		t.Skipf("no man command to render the pages: %v", err)
	}
	cmd := exec.Command("man", "-l", filepath.Join(dir, "fsbroker-audit.1"))
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("man -l fsbroker-audit.1: %v\n%s", err, out)
	}
	text := strings.Join(strings.Fields(string(out)), " ")
	for _, w := range []string{"fsbroker-audit - check and read the audit trail", "else <state-dir>/audit",
		"fsbroker audit query --decision deny --since 24h", "fsbroker-audit-verify(1)"} {
		if !strings.Contains(text, w) {
			t.Errorf("man fsbroker-audit lacks %q:\n%s", w, out)
		}
	}
}

// completionScript writes fsbroker's completion script for shell into a
// file and returns its path.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	stdout, stderr, code := runFsbroker(t, nil, "completion", shell)
	if code != 0 || stdout == "" {
		t.Fatalf("fsbroker completion %s: exit %d: %s", shell, code, stderr)
	}
	path := filepath.Join(t.TempDir(), "fsbroker."+shell)
	writeFile(t, path, stdout)
	return path
}

// shellOutput runs a shell's command line with the fsbroker under test first
// on PATH (the scripts run `fsbroker __complete ...`), and returns its output.
func shellOutput(t *testing.T, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(brokerEnv(), "PATH="+filepath.Dir(brokerBin)+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v\n%s", argv, err, out)
	}
	return string(out)
}

// bashCompletion is where the bash-completion package keeps its functions.
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// TestCompletionBash: the bash script is valid bash and loads; with the
// bash-completion package it completes commands, subcommands and flags,
// and never offers a hidden command.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	script := completionScript(t, "bash")
	shellOutput(t, "bash", "-n", script)
	if out := shellOutput(t, "bash", "-c", `source "$1" && complete -p fsbroker`, "bash", script); !strings.Contains(out, "__start_fsbroker") {
		t.Fatalf("the script does not register a completion for fsbroker: %s", out)
	}
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Skipf("no bash-completion package to complete with: %v", err)
	}
	complete := func(line string) []string {
		t.Helper()
		out := shellOutput(t, "bash", "-c", `source "$1" && source "$2"
COMP_LINE="$3"; COMP_POINT=${#COMP_LINE}
read -r -a COMP_WORDS <<< "$COMP_LINE"
case "$COMP_LINE" in *" ") COMP_WORDS+=("");; esac
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
__start_fsbroker fsbroker "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null # compopt: outside a completion
printf '%s\n' "${COMPREPLY[@]}"`, "bash", bashCompletion, script, line)
		return strings.Fields(out)
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"fsbroker con", []string{"connect", "conformance"}},
		{"fsbroker audit ver", []string{"verify"}},
		{"fsbroker stdio --state-", []string{"--state-dir"}},
		{"fsbroker completion ", []string{"bash", "zsh", "fish", "powershell"}},
		{"fsbroker help grants re", []string{"restore", "revoke"}},
	} {
		got := complete(tc.line)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %q, want %q among them", tc.line, got, w)
			}
		}
	}
	if got := complete("fsbroker __"); len(got) != 0 {
		t.Errorf("the hidden commands are offered: %q", got)
	}
}

// TestCompletionZsh: the zsh script is valid zsh and defines its
// completion function under compinit, where zsh is installed.
func TestCompletionZsh(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skipf("zsh is not installed: %v", err)
	}
	script := completionScript(t, "zsh")
	shellOutput(t, "zsh", "-n", script)
	out := shellOutput(t, "zsh", "-f", "-c", `autoload -U compinit && compinit -u -D && source "$1" && whence -w _fsbroker`, "zsh", script)
	if !strings.Contains(out, "_fsbroker: function") {
		t.Errorf("zsh did not define _fsbroker: %s", out)
	}
}

// TestCompletionFish: the fish script is valid fish, and fish completes
// fsbroker's commands with it, where fish is installed.
func TestCompletionFish(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skipf("fish is not installed: %v", err)
	}
	script := completionScript(t, "fish")
	shellOutput(t, "fish", "--no-execute", script)
	out := shellOutput(t, "fish", "--no-config", "-c", `source $argv[1]; complete -C "fsbroker con"; complete -C "fsbroker __"`, script)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, _, _ := strings.Cut(line, "\t")
		names = append(names, name)
	}
	if want := []string{"conformance", "connect", "console"}; !slices.Equal(slices.Sorted(slices.Values(names)), want) {
		t.Errorf("fish completes \"fsbroker con\" and \"fsbroker __\" to %q, want %q alone", names, want)
	}
}
