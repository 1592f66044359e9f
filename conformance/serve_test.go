// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package conformance

// The serve section: TestServeConformance holds a freshly built fsbroker serve to every case,
// TestServeConformanceReference holds the reference filesystem server (from npm, pinned by
// serve/testdata/refserver/package-lock.json) to the drop-in cases and requires it to fail
// exactly the enforcement cases tagged reference-fails. Set FSBROKER_CONFORMANCE_SERVER to a
// command line to run the section against another server instead of fsbroker serve.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fsbroker/fsbroker/internal/npmtest"
)

// referenceServer is the npm project of the reference filesystem server: the lock file the
// serve package's differential test installs (one install serves both, npmtest caching it by
// the lock file's hash).
var referenceServer = &npmtest.Project{
	Src:     "../serve/testdata/refserver",
	What:    "the reference filesystem MCP server",
	MinNode: 20,
	Marker:  "@modelcontextprotocol/server-filesystem/dist/index.js",
}

// serveCommand is the server the serve section runs against: FSBROKER_CONFORMANCE_SERVER, else
// the fsbroker the tests built, with "serve" and its flags in place.
func serveCommand(t *testing.T) []string {
	t.Helper()
	if cmd := os.Getenv("FSBROKER_CONFORMANCE_SERVER"); cmd != "" {
		return strings.Fields(cmd)
	}
	if os.Getenv("FSBROKER_CONFORMANCE_BROKER") != "" {
		t.Skip("testing another broker (FSBROKER_CONFORMANCE_SERVER names the server for the serve section)")
	}
	return []string{brokerCmd[0], "serve", PlaceholderRoots, PlaceholderState, PlaceholderConsent, PlaceholderFlags}
}

// runServeSection runs the selected serve cases against server, at most a few at once, and
// returns their results in order.
func runServeSection(t *testing.T, server []string, tags []string) []*Result {
	t.Helper()
	cases, err := ServeSuite()
	if err != nil {
		t.Fatal(err)
	}
	if cases, err = Select(cases, "", tags); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Server: server, Parallel: max(4, 2*runtime.GOMAXPROCS(0))}
	if raceEnabled {
		r.Env = append(r.Env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	}
	results := make([]*Result, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.Parallel)
	for i, c := range cases {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = r.RunCase(context.Background(), c)
		})
	}
	wg.Wait()
	return results
}

// TestServeConformance runs the serve section against fsbroker serve: every case passes (the
// known failures, run only with FSBROKER_CONFORMANCE_TAGS=known-failure, aside).
func TestServeConformance(t *testing.T) {
	server := serveCommand(t)
	t.Parallel()
	var tags []string
	if s := os.Getenv("FSBROKER_CONFORMANCE_TAGS"); s != "" {
		tags = strings.Split(s, ",")
	}
	results := runServeSection(t, server, tags)
	if len(results) == 0 {
		t.Fatal("no serve case selected")
	}
	for _, res := range results {
		t.Run(res.Case.Name, func(t *testing.T) { reportResult(t, res) })
	}
}

// TestServeConformanceReference runs the whole serve section (known failures of fsbroker
// included) against the reference filesystem server: it passes every case but those tagged
// reference-fails, and fails every one of those.
func TestServeConformanceReference(t *testing.T) {
	node, dir := referenceServer.Installed(t)
	t.Parallel()
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	results := runServeSection(t, []string{node, entry}, []string{TagDropIn, TagEnforce, KnownFailureTag})
	var failedEnforcement []string
	for _, res := range results {
		expectFail := slices.Contains(res.Case.Tags, TagReferenceFails)
		switch {
		case res.Skipped != "":
			t.Errorf("%s: skipped against the reference server: %s", res.Case.Name, res.Skipped)
		case expectFail && res.Passed():
			t.Errorf("%s: the reference server passes it, but it is tagged %s", res.Case.Name, TagReferenceFails)
		case !expectFail && !res.Passed():
			t.Errorf("the reference server fails a case it is expected to pass:\n%s", res.Report(true))
		case expectFail:
			failedEnforcement = append(failedEnforcement, res.Case.Name+": "+firstDifference(res.Failures))
		}
	}
	t.Logf("the reference server fails %d of %d serve cases, as expected:\n  %s", len(failedEnforcement), len(results),
		strings.Join(failedEnforcement, "\n  "))
}

// firstDifference is the first two lines of a case's first failure, on one line: the step, and its
// first difference.
func firstDifference(failures []string) string {
	if len(failures) == 0 {
		return ""
	}
	lines := strings.SplitN(failures[0], "\n", 3)
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return clip(strings.Join(lines[:min(2, len(lines))], " "), 300)
}

// TestServeSuiteLoads: the serve section's cases are the files under cases/serve, each plays the
// host, is a drop-in case or an enforcement case (not both), and only enforcement cases are
// expected to fail against the reference server.
func TestServeSuiteLoads(t *testing.T) {
	cases, err := ServeSuite()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("cases", "serve", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != len(files) || len(cases) == 0 {
		t.Errorf("%d serve cases, %d files under cases/serve", len(cases), len(files))
	}
	for _, c := range cases {
		if !strings.HasPrefix(c.File, "cases/serve/") {
			t.Errorf("%s: a case that plays the host belongs under cases/serve/", c.File)
		}
		dropIn, enforce := slices.Contains(c.Tags, TagDropIn), slices.Contains(c.Tags, TagEnforce)
		if dropIn == enforce {
			t.Errorf("%s: tagged %v, want exactly one of %s and %s", c.Name, c.Tags, TagDropIn, TagEnforce)
		}
		if dropIn && slices.Contains(c.Tags, TagReferenceFails) {
			t.Errorf("%s: a drop-in case the reference server fails", c.Name)
		}
	}
	broker, err := Suite()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range broker {
		if strings.HasPrefix(c.File, "cases/serve/") {
			t.Errorf("%s: under cases/serve/ but does not play the host", c.File)
		}
	}
}

// TestParseServeCase: host excludes the broker's handshake, and reply stands alone.
func TestParseServeCase(t *testing.T) {
	good := `
name: good
description: d
tags: [s8-drop-in]
host: {capabilities: {roots: {}}, expect: {serverInfo: {name: {$type: string}}}}
roots: [{path: proj}]
steps:
  - request: {method: tools/call, params: {name: nope}}
    expect: {reply: {$anyOf: [{error: {code: -32602}}, {result: {isError: true}}]}}
`
	c, err := ParseCase("cases/serve/good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if !c.PlaysHost() || c.Steps[0].Expect.Reply == nil {
		t.Errorf("case %+v: want a host case with a reply matcher", c)
	}
	for name, text := range map[string]string{
		"host and initialize": good + "initialize: {protocolVersion: \"2025-06-18\"}\n",
		"awaitInitialize":     strings.Replace(good, "  - request: {method: tools/call, params: {name: nope}}\n    expect:", "  - awaitInitialize: {}\n  - request: {method: ping}\n    expect:", 1),
		"reply and result":    strings.Replace(good, "expect: {reply:", "expect: {result: {}, reply:", 1),
		"unknown host member": strings.Replace(good, "host: {", "host: {roots: [], ", 1),
	} {
		if _, err := ParseCase("cases/serve/good.yaml", []byte(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestServeTemplate: the root directories are appended to a server command without
// placeholders, and go where {dirs} stands otherwise.
func TestServeTemplate(t *testing.T) {
	groups := map[string][]string{PlaceholderDirs: {"/a", "/b"}, PlaceholderRoots: {"--root", "/a:rw", "--root", "/b"}}
	r := strings.NewReplacer()
	for _, tc := range []struct{ template, want []string }{
		{[]string{"npx", "server"}, []string{"npx", "server", "/a", "/b"}},
		{[]string{"srv", "{dirs}", "--flag"}, []string{"srv", "/a", "/b", "--flag"}},
		{[]string{"fsbroker", "serve", "{roots}"}, []string{"fsbroker", "serve", "--root", "/a:rw", "--root", "/b"}},
	} {
		if got := buildArgv(serveTemplate(tc.template), groups, r); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.template, got, tc.want)
		}
	}
}

// TestServeDocumentedCounts holds docs/conformance.md's table of the serve section to the suite:
// each tag's row gives the number of serve cases carrying it, and the total.
func TestServeDocumentedCounts(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "conformance.md"))
	if err != nil {
		t.Skipf("no docs/conformance.md: %v", err)
	}
	cases, err := ServeSuite()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, c := range cases {
		for _, tag := range c.Tags {
			counts[tag]++
		}
	}
	row := regexp.MustCompile("(?m)^\\| serve `([a-z0-9-]+)` \\| (\\d+) \\|")
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) == 0 {
		t.Fatal("docs/conformance.md has no table of the serve section")
	}
	documented := map[string]bool{}
	for _, m := range rows {
		documented[m[1]] = true
		if n, _ := strconv.Atoi(m[2]); n != counts[m[1]] {
			t.Errorf("docs/conformance.md: serve %s has %d cases, the suite %d", m[1], n, counts[m[1]])
		}
	}
	for tag, n := range counts {
		if !documented[tag] {
			t.Errorf("docs/conformance.md: serve tag %s (%d cases) is not in the table", tag, n)
		}
	}
	total := regexp.MustCompile(`The serve section has (\d+) cases`).FindStringSubmatch(string(doc))
	if total == nil || total[1] != strconv.Itoa(len(cases)) {
		t.Errorf("docs/conformance.md: serve total %q, the suite has %d cases", total, len(cases))
	}
}

// runCommand runs "fsbroker conformance" with args, requires the exit status code, and returns
// its output and the output's lines.
func runCommand(t *testing.T, bin string, args []string, code int) (string, []string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"conformance"}, args...)...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	out, err := cmd.CombinedOutput()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != code {
		t.Errorf("exit status %d, want %d; output:\n%s", got, code, out)
	}
	return string(out), strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// reportResult makes a case's result the (sub)test's: skipped, or failed with the case's report.
func reportResult(t *testing.T, res *Result) {
	t.Helper()
	switch {
	case res.Skipped != "":
		t.Skip(res.Skipped)
	case !res.Passed():
		t.Error("\n" + res.Report(true))
	}
}
