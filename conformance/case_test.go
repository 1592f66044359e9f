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
		"wrong name":        strings.Replace(good, "name: good", "name: other", 1),
		"two actions":       strings.Replace(good, "- request: {method: ping}", "- {request: {method: ping}, sleep: 1s}", 1),
		"unknown field":     good + "bogus: 1\n",
		"no tags":           strings.Replace(good, "tags: [s2-lifecycle]", "tags: []", 1),
		"bad fail code":     strings.Replace(good, "error: {code: -32700}", "fail: NOPE", 1),
		"expect on a sleep": strings.Replace(good, "- request: {method: ping}", "- {sleep: 1s, expect: {any: true}}", 1),
	} {
		if _, err := ParseCase("cases/x/good.yaml", []byte(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
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
