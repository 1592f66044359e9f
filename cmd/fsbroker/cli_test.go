// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandsOf returns c and every command below it that a person may run
// (hidden ones left out), depth first.
func commandsOf(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			out = append(out, commandsOf(sub)...)
		}
	}
	return out
}

// helpOf runs `fsbroker help ARGS...` in this process and returns what it
// printed and its exit status.
func helpOf(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"help"}, args...), nil, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestEveryCommandExplainsItself: every command a person may run has a
// short and a long description and examples, and `fsbroker help COMMAND`
// prints them with its flags, each line within 100 columns; the hidden
// commands appear in no help.
func TestEveryCommandExplainsItself(t *testing.T) {
	t.Parallel()
	root := newRootCommand(nil, io.Discard, io.Discard)
	var all strings.Builder
	for _, c := range commandsOf(root) {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"fsbroker"}, path...), " "), func(t *testing.T) {
			if c.Short == "" || c.Long == "" || c.Example == "" {
				t.Errorf("short %q, long %q, example %q: want all three", c.Short, c.Long, c.Example)
			}
			stdout, stderr, code := helpOf(t, path...)
			if code != 0 || stderr != "" {
				t.Fatalf("help: exit %d, stderr %q", code, stderr)
			}
			all.WriteString(stdout)
			firstLine, _, _ := strings.Cut(c.Long, "\n")
			for _, want := range []string{firstLine, "Usage:\n  " + c.UseLine(), "Examples:\n", "--help"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("help lacks %q:\n%s", want, stdout)
				}
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(stdout, "--"+f.Name) {
					t.Errorf("help does not list --%s:\n%s", f.Name, stdout)
				}
			})
			for i, line := range strings.Split(stdout, "\n") {
				if n := len([]rune(line)); n > helpWidth {
					t.Errorf("line %d is %d columns, more than %d: %q", i+1, n, helpWidth, line)
				}
			}
		})
	}
	for _, hidden := range []string{exampleServerCommand, manCommand, "__complete"} {
		if strings.Contains(all.String(), hidden) {
			t.Errorf("the help shows the hidden command %s", hidden)
		}
		if _, stderr, code := helpOf(t, hidden); code != exitUsage || !strings.Contains(stderr, "unknown command") {
			t.Errorf("help %s: exit %d, stderr %q; want 2 and unknown command", hidden, code, stderr)
		}
	}
}

// TestHelpSaysWhatCommandsDo: help of a group lists its commands; help of
// eval and demo says what they do.
func TestHelpSaysWhatCommandsDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"policy"}, []string{"\n  check ", "\n  test ", "compile", "Rego tests", "Exit status"}},
		{[]string{"eval"}, []string{"decision", "rules that", "matched", "schema/policy-input.json", "--input FILE"}},
		{[]string{"demo"}, []string{"example MCP server", "separate process", "audit trail", "--dir DIR", "--server COMMAND"}},
		{[]string{"grants"}, []string{"\n  list ", "\n  revoke ", "\n  restore "}},
		{[]string{"audit"}, []string{"\n  verify ", "\n  query ", "\n  tail ", "\n  export ", "\n  hash "}},
		{nil, []string{"Serve MCP servers:", "Write and check policies:", "Consent and the audit trail:",
			"\n  completion ", "\n  help ", "Exit status"}},
		{[]string{"stdio"}, []string{"roots/list and files/* requests", "files/read", "files/consent",
			"consent grants and blocks (grants/)", "usage counters (usage/)", "audit keys (audit.key",
			"the audit trail (audit/", "lock files (locks/)"}},
		{[]string{"wrap"}, []string{`The server command comes after "--", which is required`}},
		{[]string{"connect"}, []string{"Roots, configuration and state:", "Remote server:", "Policies:",
			"Audit trail:", "Limits:", "Logging:", "--url URL", "required"}},
	} {
		stdout, stderr, code := helpOf(t, tc.args...)
		if code != 0 {
			t.Errorf("help %v: exit %d: %s", tc.args, code, stderr)
		}
		flowing := strings.Join(strings.Fields(stdout), " ") // the words, however the lines wrap
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) && !strings.Contains(flowing, w) {
				t.Errorf("help %v lacks %q:\n%s", tc.args, w, stdout)
			}
		}
	}
}

// TestOneDashLongFlags: a long flag given with one dash, as Go's flag
// package took it, becomes two dashes; shorthands, values, arguments and
// everything after "--" (or, for connect and wrap, after the first
// argument) stay as they are.
func TestOneDashLongFlags(t *testing.T) {
	t.Parallel()
	root := newRootCommand(nil, io.Discard, io.Discard)
	for _, tc := range []struct{ in, want string }{
		{"stdio -root /a -root=/b:rw --log-level debug", "stdio --root /a --root=/b:rw --log-level debug"},
		{"stdio -h", "stdio -h"},
		{"stdio -help", "stdio --help"},
		{"-version", "--version"},
		{"connect -root /a -consent auto -- sh -root x", "connect --root /a --consent auto -- sh -root x"},
		{"connect -root -state-dir -- sh", "connect --root -state-dir -- sh"}, // a value that looks like a flag
		{"connect -root /a sh -root x", "connect --root /a sh -root x"},
		{"wrap -header 'A: b' -url http://x", "wrap --header 'A: b' --url http://x"},
		{"audit tail -n 5 -f -server notes /trail -since 1h", "audit tail -n 5 -f --server notes /trail --since 1h"},
		{"audit tail -fn 5 -kind decision", "audit tail -fn 5 --kind decision"},
		{"audit query -- -server", "audit query -- -server"},
		{"grants revoke -all -state-dir /s", "grants revoke --all --state-dir /s"},
		{"policy test -verbose dir", "policy test --verbose dir"},
		{"help stdio", "help stdio"},
		{"stdio -frobnicate", "stdio -frobnicate"}, // not a flag: left for pflag to refuse
		{exampleServerCommand + " -script demo", exampleServerCommand + " -script demo"},
	} {
		in := splitWords(t, tc.in)
		if got, want := oneDashLongFlags(root, in), splitWords(t, tc.want); !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// splitWords splits a test's command line at spaces, keeping 'quoted words'.
func splitWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for i, part := range strings.Split(s, "'") {
		if i%2 == 1 {
			out = append(out, part)
			continue
		}
		out = append(out, strings.Fields(part)...)
	}
	return out
}

// TestCommandLineErrors: usage errors exit 2 with a message naming what was
// wrong; one-dash long flags work in the binary as they did.
func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	dir := realDir(t, t.TempDir())
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"stdio", "-root", dir, "-log-level", "verbose"}, []string{"--log-level", "verbose"}},
		{[]string{"stdio", "-root=" + missing}, []string{"--root", missing}},
		{[]string{"stdio", "--root"}, []string{"flag needs an argument", "--root", "fsbroker help stdio"}},
		{[]string{"stdio", "-x"}, []string{"unknown shorthand flag", "-x"}},
		{[]string{"stdio", "--max-in-flight", "many"}, []string{"--max-in-flight", "many"}},
		{[]string{"grant", "list"}, []string{`unknown command "grant"`, `did you mean "grants"?`}},
		{[]string{"audit", "verfy"}, []string{`unknown command "verfy"`, `did you mean "verify"?`}},
		{[]string{"completion", "tcsh"}, []string{"bash, zsh, fish or powershell", "tcsh"}},
		{[]string{"completion"}, []string{"give one shell"}},
		{[]string{"version", "extra"}, []string{"version takes no arguments", "extra"}},
		{[]string{"connect", "--root", dir, "sh", "-c", "exit 0"}, []string{`put "--" before the server command`, "sh -c exit 0"}},
		{[]string{"wrap", "--root", dir, "sh"}, []string{`wrap: put "--" before the server command`}},
		{[]string{"connect", "--root", dir, "sh", "--", "-c", "exit 0"}, []string{`put "--" before the server command`}},
	} {
		stdout, stderr, code := runFsbroker(t, nil, tc.args...)
		if code != exitUsage {
			t.Errorf("fsbroker %q: exit %d, want 2\n%s%s", tc.args, code, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("fsbroker %q: stderr lacks %q:\n%s", tc.args, w, stderr)
			}
		}
		if strings.Contains(stderr, "policies loaded") {
			t.Errorf("fsbroker %q: the policies were loaded before a usage error:\n%s", tc.args, stderr)
		}
	}
	if stdout, _, code := runFsbroker(t, nil, "-version"); code != 0 || !strings.HasPrefix(stdout, "fsbroker ") {
		t.Errorf("fsbroker -version: exit %d, stdout %q", code, stdout)
	}
}

// TestDurationNeedsAUnit: a duration flag given a bare number is a usage
// error that says a unit is needed, with the value and the unit in an
// example (10 -> 10s), and names the flag.
func TestDurationNeedsAUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args        []string
		flag, value string
	}{
		{[]string{"stdio", "--root", dir, "--init-timeout", "10"}, "--init-timeout", "10"},
		{[]string{"connect", "--root", dir, "--shutdown-timeout=2.5", "--", "true"}, "--shutdown-timeout", "2.5"},
		{[]string{"conformance", "--grace", "10"}, "--grace", "10"},
	} {
		stdout, stderr, code := runFsbroker(t, nil, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, `"`+tc.flag+`"`) ||
			!strings.Contains(stderr, "a duration needs a unit, as in "+tc.value+"s") {
			t.Errorf("fsbroker %q: exit %d, stderr %q; want 2, the flag and the unit", tc.args, code, stderr)
		}
		if stdout != "" || strings.Contains(stderr, "policies loaded") {
			t.Errorf("fsbroker %q: stdout %q, stderr %q: want only the message", tc.args, stdout, stderr)
		}
	}
	if _, err := parseDuration("1x"); err == nil || !strings.Contains(err.Error(), "as in 500ms, 10s") {
		t.Errorf("parseDuration(1x) = %v, want an example of a duration", err)
	}
}

// TestDocumentedFlagsWork: every flag the README's and docs/protocol.md's
// command tables name is a flag of the command the row names, taken with
// two dashes and with one; every flag of their flag tables is one of every
// serving command (stdio, connect, wrap), or of those the row names. Rows
// of what is not built yet are left out.
func TestDocumentedFlagsWork(t *testing.T) {
	t.Parallel()
	root := newRootCommand(nil, io.Discard, io.Discard)
	flagName := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	checked := 0
	check := func(doc, row string, path []string, flags []string) {
		t.Helper()
		c, rest, err := root.Find(path)
		if err != nil || len(rest) > 0 {
			t.Errorf("%s: %q names the command %q, which does not exist", doc, row, path)
			return
		}
		c.InitDefaultHelpFlag()
		for _, f := range flags {
			name := strings.TrimPrefix(f, "--")
			if c.Flags().Lookup(name) == nil {
				t.Errorf("%s: %q: fsbroker %s has no flag %s", doc, row, strings.Join(path, " "), f)
				continue
			}
			if got := oneDashLongFlags(root, append(slices.Clone(path), "-"+name)); got[len(got)-1] != f {
				t.Errorf("%s: fsbroker %s -%s is not taken as %s (%q)", doc, strings.Join(path, " "), name, f, got)
			}
			checked++
		}
	}
	for _, doc := range []string{"../../README.md", "../../docs/protocol.md"} {
		text := readFile(t, doc)
		if doc == "../../docs/protocol.md" { // section 7, the command line
			start := strings.Index(text, "\n## 7. ")
			end := strings.Index(text[start+1:], "\n## ") + start + 1
			text = text[start:end]
		}
		for _, row := range strings.Split(text, "\n") {
			if !strings.HasPrefix(row, "| `") || strings.Contains(row, "not built yet") {
				continue
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " | ")
			flags := flagName.FindAllString(first, -1)
			if cmdLine, ok := strings.CutPrefix(first, "`fsbroker "); ok {
				words := strings.Fields(strings.Trim(cmdLine, "`"))
				var path []string
				for _, w := range words {
					if strings.ContainsAny(w, "[]-|.") || strings.ToUpper(w) == w {
						break
					}
					path = append(path, w)
				}
				if alternatives := strings.Fields(strings.Trim(cmdLine, "`")); len(path) == 1 && len(alternatives) > 1 &&
					strings.Contains(alternatives[1], `\|`) {
					path = append(path, strings.Split(alternatives[1], `\|`)[0]) // grants list|revoke|restore: the first
				}
				if len(flags) > 0 {
					check(doc, row, path, flags)
				}
				continue
			}
			if !strings.HasPrefix(first, "`--") {
				continue
			}
			commands := []string{"stdio", "connect", "wrap"}
			if strings.Contains(first, "(`connect`, `wrap`)") {
				commands = commands[1:]
			}
			for _, c := range commands {
				check(doc, row, []string{c}, flags)
			}
		}
	}
	if checked < 100 {
		t.Errorf("%d flags checked: the tables were not found", checked)
	}
}
