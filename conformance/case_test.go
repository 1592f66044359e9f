// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCase(t *testing.T) {
	good := `
name: good
description: d
tags: [s2-lifecycle]
roots: [{path: proj}]
steps:
  - request: {method: ping}
  - name: r2
    raw: {text: "{"}
    expect: {id: null, error: {code: -32700}}
`
	c, err := ParseCase("cases/x/good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Steps[0].Name != "s1" || c.Steps[1].Name != "r2" || !c.Steps[1].Expect.hasID {
		t.Errorf("steps = %+v", c.Steps)
	}
	for name, text := range map[string]string{
		"wrong name":         strings.Replace(good, "name: good", "name: other", 1),
		"two actions":        strings.Replace(good, "- request: {method: ping}", "- {request: {method: ping}, sleep: 1s}", 1),
		"unknown field":      good + "bogus: 1\n",
		"no tags":            strings.Replace(good, "tags: [s2-lifecycle]", "tags: []", 1),
		"bad fail code":      strings.Replace(good, "error: {code: -32700}", "fail: NOPE", 1),
		"expect on a sleep":  strings.Replace(good, "- request: {method: ping}", "- {sleep: 1s, expect: {any: true}}", 1),
		"run without a tool": strings.Replace(good, "- request: {method: ping}", "- run: {argv: [/bin/true]}", 1),
		"run without argv":   strings.Replace(good, "- request: {method: ping}", "- run: {expectExit: 0}", 1),
		"retry of async":     strings.Replace(good, "- request: {method: ping}", "- request: {method: ping, async: true, retryFor: 1s}", 1),
		"bad retryFor":       strings.Replace(good, "- request: {method: ping}", "- request: {method: ping, retryFor: soon}", 1),
		"bad consent":        strings.Replace(good, "roots: [{path: proj}]", "roots: [{path: proj}]\nconsent: prompt", 1),
		"restart, unknown":   strings.Replace(good, "- request: {method: ping}", "- restart: {roots: []}", 1),
	} {
		if _, err := ParseCase("cases/x/good.yaml", []byte(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseCaseRunAndRestart(t *testing.T) {
	text := `
name: good
description: d
tags: [s5-consent]
roots: [{path: proj}]
consent: "command:${area}/approve.sh"
steps:
  - run: {argv: ["{grants-revoke}", --path, proj/dir], expectExit: {$any: true}, within: 5s}
  - restart: {consent: deny, flags: []}
  - restart: {preapproved: true}
  - request: {method: files/read, params: {path: proj/a}, retryFor: 1s}
    expect: {fail: PERMISSION_DENIED}
  - run: {argv: ["{other-tool}"]}
  - run: {argv: ["{grants-revoke}"]}
`
	c, err := ParseCase("cases/x/good.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tools(); !slices.Equal(got, []string{"grants-revoke", "other-tool"}) {
		t.Errorf("Tools() = %q", got)
	}
	if r := c.Steps[1].Restart; r == nil || r.Consent != "deny" || r.Flags == nil || len(r.Flags) != 0 || r.Preapproved != nil {
		t.Errorf("restart = %+v, want consent deny and flags [] (given, empty)", r)
	}
	if r := c.Steps[2].Restart; r == nil || r.Preapproved == nil || !*r.Preapproved || r.Flags != nil {
		t.Errorf("restart = %+v, want preapproved true", r)
	}
	if c.Steps[3].Request.RetryFor != "1s" {
		t.Errorf("retryFor = %q", c.Steps[3].Request.RetryFor)
	}
}

func TestParseTools(t *testing.T) {
	tools, err := ParseTools("")
	if err != nil || !slices.Equal(tools[ToolGrantsRevoke], DefaultTools()[ToolGrantsRevoke]) {
		t.Errorf("empty: %q, %v", tools, err)
	}
	tools, err = ParseTools("grants-revoke=/opt/other/revoke --data {statedir} ; x-y=a b")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/other/revoke", "--data", "{statedir}"}; !slices.Equal(tools[ToolGrantsRevoke], want) {
		t.Errorf("grants-revoke = %q, want %q", tools[ToolGrantsRevoke], want)
	}
	if !slices.Equal(tools["x-y"], []string{"a", "b"}) {
		t.Errorf("x-y = %q", tools["x-y"])
	}
	if tools, err = ParseTools("grants-revoke="); err != nil || tools[ToolGrantsRevoke] != nil {
		t.Errorf("removed: %q, %v", tools, err)
	}
	for _, bad := range []string{"grants-revoke", "Grants=x", "=x"} {
		if _, err := ParseTools(bad); err == nil {
			t.Errorf("ParseTools(%q): no error", bad)
		}
	}
}

// TestRunCaseSkipsWithoutTool: a case whose run step names a tool the runner lacks is skipped,
// before anything starts.
func TestRunCaseSkipsWithoutTool(t *testing.T) {
	c, err := ParseCase("cases/x/t.yaml", []byte("name: t\ndescription: d\ntags: [s5-consent]\nroots: [{path: p}]\n"+
		"steps:\n  - run: {argv: [\"{grants-revoke}\", --path, p]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Broker: []string{"/nonexistent/broker"}, Tools: map[string][]string{}}
	if res := r.RunCase(t.Context(), c); res.Skipped == "" || len(res.Failures) > 0 {
		t.Errorf("result %+v, want skipped", res)
	}
}

func TestSelect(t *testing.T) {
	fsys := fstest.MapFS{}
	for _, c := range []struct{ name, tags string }{
		{"read-a", "s5-read"}, {"read-b", "s5-read, known-failure"}, {"write-a", "s5-write"},
	} {
		fsys["cases/"+c.name+".yaml"] = &fstest.MapFile{Data: []byte("name: " + c.name +
			"\ndescription: d\ntags: [" + c.tags + "]\nroots: [{path: p}]\nsteps: []\n")}
	}
	cases, err := LoadCases(fsys, "cases")
	if err != nil {
		t.Fatal(err)
	}
	names := func(cs []*Case) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		run  string
		tags []string
		want []string
	}{
		{"", nil, []string{"read-a", "write-a"}},
		{"read-*", nil, []string{"read-a"}},
		{"", []string{"known-failure"}, []string{"read-b"}},
		{"write-*,read-a", nil, []string{"read-a", "write-a"}},
		{"", []string{"s5-read", "known-failure"}, []string{"read-a", "read-b"}},
	} {
		got, err := Select(cases, tc.run, tc.tags)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got), tc.want) {
			t.Errorf("Select(%q, %q) = %q, want %q", tc.run, tc.tags, names(got), tc.want)
		}
	}
}

// TestSuiteLoads checks every embedded case against the schema and the rules beyond it.
func TestSuiteLoads(t *testing.T) {
	cases, err := Suite()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !strings.HasPrefix(c.File, "cases/") || strings.Count(c.File, "/") != 2 {
			t.Errorf("%s: want cases/<section>/<name>.yaml", c.File)
		}
	}
}

func TestBuildArgv(t *testing.T) {
	groups := map[string][]string{
		PlaceholderRoots:   {"--root", "/a"},
		PlaceholderState:   {"--state-dir", "/s"},
		PlaceholderConsent: {"--consent", "auto"},
		PlaceholderFlags:   {"-x"},
	}
	r := strings.NewReplacer("{area}", "/area", "{statedir}", "/s")
	got := buildArgv([]string{"b", "stdio"}, groups, r)
	if want := []string{"b", "stdio", "--root", "/a", "--state-dir", "/s", "--consent", "auto", "-x"}; !slices.Equal(got, want) {
		t.Errorf("appended: %q, want %q", got, want)
	}
	got = buildArgv([]string{"wrap", "{flags}", "--data={statedir}", "{roots}"}, groups, r)
	if want := []string{"wrap", "-x", "--data=/s", "--root", "/a"}; !slices.Equal(got, want) {
		t.Errorf("placed: %q, want %q", got, want)
	}
}

// TestDocumentedCounts holds docs/conformance.md's coverage table to the suite: each tag's row
// gives the number of cases carrying it, known failures included.
func TestDocumentedCounts(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "conformance.md"))
	if err != nil {
		t.Skipf("no docs/conformance.md: %v", err)
	}
	cases, err := Suite()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	known := 0
	for _, c := range cases {
		for _, tag := range c.Tags {
			counts[tag]++
		}
		if slices.Contains(c.Tags, KnownFailureTag) {
			known++
		}
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| [^|]+ \\| (\\d+) \\|")
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) == 0 {
		t.Fatal("docs/conformance.md has no coverage table")
	}
	documented := map[string]bool{}
	for _, m := range rows {
		documented[m[1]] = true
		if n, _ := strconv.Atoi(m[2]); n != counts[m[1]] {
			t.Errorf("docs/conformance.md: %s has %d cases, the suite %d", m[1], n, counts[m[1]])
		}
	}
	for tag := range counts {
		if tag != KnownFailureTag && !documented[tag] {
			t.Errorf("docs/conformance.md: tag %s (%d cases) is not in the coverage table", tag, counts[tag])
		}
	}
	total := regexp.MustCompile(`(\d+) cases in all, (\d+) of them`).FindStringSubmatch(string(doc))
	if total == nil || total[1] != strconv.Itoa(len(cases)) || total[2] != strconv.Itoa(known) {
		t.Errorf("docs/conformance.md: total %q, the suite has %d cases, %d known failures", total, len(cases), known)
	}
}
