// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/policies"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/sdk"
)

// benchPolicy is a policy set of realistic size, written the way that evaluates fastest that
// was found (see the package documentation): several deny rules, a grants check that loops over
// the grants with set lookups, the 12-pattern glob deny-list from data matched as one glob with
// alternatives, a quota rule with its own code, obligations, and visible over the same list.
const benchPolicy = `package fsbroker.authz

read_ops := {"read", "list", "watch", "visible"}

write_ops := {"write", "create", "delete", "rename"}

# The grant kinds that allow this operation: a write grant covers reading too.
accesses := {"read", "write"} if input.operation in read_ops

else := {"write"}

# The path and each of its ancestors: a grant on any of them covers the path.
covered_by := {concat("/", array.slice(parts, 0, i + 1)) |
	parts := split(input.path.mountPath, "/")
	some i, _ in parts
}

granted if {
	some g in input.grants
	covered_by[g.path]
	accesses[g.access]
}

# The deny-list as one glob with alternatives: one match instead of one per pattern.
deny_glob := concat("", ["{", concat(",", data.fsbroker.config.denyGlobs), "}"])

writing if input.operation in write_ops

deny contains "hidden files are not served" if input.path.hidden

deny contains "the root is read-only" if {
	writing
	not input.path.writable
}

deny contains "the path is on the deny-list" if glob.match(deny_glob, ["/"], input.path.relative)

deny contains "only regular files and directories are served" if input.path.type == "symlink"

deny contains "only regular files and directories are served" if input.path.type == "other"

deny contains "a file with several hard links cannot be changed" if {
	writing
	input.path.nlink > 1
}

deny contains "over the daily byte quota" if {
	input.operation == "write"
	input.usage.bytesWrittenToday + input.bytes > data.fsbroker.config.dailyBytes
}

deny contains "too many watches" if {
	input.operation == "watch"
	input.usage.watches >= data.fsbroker.config.maxWatches
}

default allow := false

allow if {
	granted
	count(deny) == 0
}

default code := ""

code := "QUOTA_EXCEEDED" if {
	not allow
	"over the daily byte quota" in deny
} else := "PERMISSION_DENIED" if not allow

reasons := deny if granted

else := deny | {"no consent grant covers the path"}

default obligations := {}

obligations := {"maxBytes": data.fsbroker.config.maxReadBytes} if input.operation == "read"

decision := {"allow": allow, "code": code, "reasons": reasons, "obligations": obligations}

visible contains e.mountPath if {
	some e in input.entries
	not e.hidden
	not glob.match(deny_glob, ["/"], e.relative)
}
`

const benchData = `{"denyGlobs": [
	"**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/id_rsa", "**/id_ed25519",
	"**/.ssh/**", "**/.aws/**", "**/.git/**", "**/node_modules/**", "**/*.kdbx", "**/secrets/**"
], "dailyBytes": 1073741824, "maxWatches": 64, "maxReadBytes": 16777216}`

// trivialPolicy is the baseline: allow := true.
const trivialPolicy = `package fsbroker.authz

allow := true

decision := {"allow": allow}

visible contains e.mountPath if some e in input.entries
`

// defaultFiles reads the embedded default policy set, without its tests.
func defaultFiles(b testing.TB) map[string]string {
	files := map[string]string{}
	err := fs.WalkDir(policies.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || isTestFile(p) || !isPolicyFile(path.Base(p)) {
			return err
		}
		content, err := fs.ReadFile(policies.FS, p)
		files[p] = string(content)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return files
}

// benchSets are the policy sets BenchmarkDecide compares, as files.
var benchSets = []struct {
	name  string
	files map[string]string
}{
	{"trivial", map[string]string{"authz.rego": trivialPolicy}},
	{"realistic", map[string]string{"authz.rego": benchPolicy, "fsbroker/config/data.json": benchData}},
}

// benchInput is a read of proj/src/pkg/main.go by a server with n grants, the covering one last:
// the grants loop runs through all of them, every deny rule is evaluated, and the decision is
// an allow.
func benchInput(b testing.TB, n int) map[string]any {
	grants := make([]map[string]any, 0, n)
	for i := range n - 1 {
		grants = append(grants, grant("read", fmt.Sprintf("other%d/dir", i)))
	}
	grants = append(grants, grant("read", "proj/src"))
	in := testInput(b, "read", "proj/src/pkg/main.go", false, grants...)
	in["bytes"] = 1048576
	return in
}

// percentiles runs op b.N times, timing each call, and reports the p50 and p99 of the wall time
// (p50-ns, p99-ns) and, on Linux, of the CPU time of the benchmark's thread (p50-cpu-ns,
// p99-cpu-ns). The machines this runs on are shared: wall time includes the time other
// processes had the CPU, thread CPU time does not (GC work done by other threads is left out,
// GC assists are in). The cost of reading the clocks is measured first and subtracted.
func percentiles(b *testing.B, op func()) {
	b.Helper()
	percentilesPrepared(b, nil, op)
}

// percentilesPrepared is percentiles with prepare(i) called before the i-th call of op, outside
// the times measured (nil: nothing to prepare).
func percentilesPrepared(b *testing.B, prepare func(i int), op func()) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, haveCPU := threadCPUTime()
	overheadWall, overheadCPU := clockOverhead(haveCPU)

	wall := make([]time.Duration, b.N)
	var cpu []time.Duration
	if haveCPU {
		cpu = make([]time.Duration, b.N)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if prepare != nil {
			prepare(i)
		}
		var c0 time.Duration
		if haveCPU {
			c0, _ = threadCPUTime()
		}
		start := time.Now()
		op()
		wall[i] = time.Since(start) - overheadWall
		if haveCPU {
			c1, _ := threadCPUTime()
			cpu[i] = c1 - c0 - overheadCPU
		}
	}
	b.StopTimer()
	report := func(durs []time.Duration, unit string) {
		slices.Sort(durs)
		b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-"+unit)
		b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-"+unit)
	}
	report(wall, "ns")
	if haveCPU {
		report(cpu, "cpu-ns")
	}
}

// clockOverhead is the median cost of the clock readings percentiles makes around an empty
// operation: the wall clock, and the thread CPU clock when it is used.
func clockOverhead(haveCPU bool) (wall, cpu time.Duration) {
	const n = 2001
	ws, cs := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		var c0 time.Duration
		if haveCPU {
			c0, _ = threadCPUTime()
		}
		start := time.Now()
		ws[i] = time.Since(start)
		if haveCPU {
			c1, _ := threadCPUTime()
			cs[i] = c1 - c0
		}
	}
	slices.Sort(ws)
	slices.Sort(cs)
	return ws[n/2], cs[n/2]
}

// BenchmarkDecide compares a decision through this package (a prepared v1/rego query shared by
// all callers) with one through OPA's v1/sdk loading the same policy set as a bundle, for the
// trivial and the realistic policy and the embedded default set (policies.FS), in one run. The
// input carries 20 grants (the realistic policy loops over all of them); the -2grants cases
// are the same policies with a typical input.
// Every variant converts the same map input and returns a checked Decision.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name   string
		files  map[string]string
		grants int
	}{
		{"trivial", benchSets[0].files, 20},
		{"realistic", benchSets[1].files, 20},
		{"realistic-2grants", benchSets[1].files, 2},
		{"default", defaultFiles(b), 20},
		{"default-2grants", defaultFiles(b), 2},
	}
	for _, tc := range cases {
		in := benchInput(b, tc.grants)
		dir := policyDir(b, tc.files)

		b.Run(tc.name+"/rego", func(b *testing.B) {
			e, err := New(ctx, Source{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			d, err := e.Decide(ctx, in)
			if err != nil || !d.Allow {
				b.Fatalf("Decide = %#v, %v; want an allow", d, err)
			}
			percentiles(b, func() {
				if d, err := e.Decide(ctx, in); err != nil || !d.Allow {
					b.Fatalf("Decide = %#v, %v", d, err)
				}
			})
		})

		// The broker's input: the same document as JSON bytes.
		b.Run(tc.name+"/rego-json", func(b *testing.B) {
			e, err := New(ctx, Source{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			doc, err := json.Marshal(in)
			if err != nil {
				b.Fatal(err)
			}
			percentiles(b, func() {
				if d, err := e.Decide(ctx, json.RawMessage(doc)); err != nil || !d.Allow {
					b.Fatalf("Decide = %#v, %v", d, err)
				}
			})
		})

		// The same decision again, from the set's decision cache (the broker's key: the
		// input's JSON without its time member).
		b.Run(tc.name+"/rego-cached", func(b *testing.B) {
			e, err := New(ctx, Source{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if e.current().cache == nil {
				b.Skip("this policy set is not cacheable")
			}
			doc, err := json.Marshal(in)
			if err != nil {
				b.Fatal(err)
			}
			percentiles(b, func() {
				if d, err := e.DecideCached(ctx, doc, in); err != nil || !d.Allow {
					b.Fatalf("DecideCached = %#v, %v", d, err)
				}
			})
		})

		b.Run(tc.name+"/sdk", func(b *testing.B) {
			opa := newSDK(b, tc.files)
			decide := func() (Decision, error) {
				res, err := opa.Decision(ctx, sdk.DecisionOptions{
					Path:                "/fsbroker/authz/decision",
					Input:               in,
					StrictBuiltinErrors: true,
					DecisionID:          "bench", // the broker has its own audit id
				})
				if err != nil {
					return Decision{}, err
				}
				return decisionFromJSON(res.Result)
			}
			if d, err := decide(); err != nil || !d.Allow {
				b.Fatalf("sdk decision = %#v, %v; want an allow", d, err)
			}
			percentiles(b, func() {
				if d, err := decide(); err != nil || !d.Allow {
					b.Fatalf("sdk decision = %#v, %v", d, err)
				}
			})
		})
	}
}

// newSDK starts an OPA SDK instance that loads files as a bundle file (file:// resource), with
// no decision logging and no status reporting.
func newSDK(b *testing.B, files map[string]string) *sdk.OPA {
	b.Helper()
	modules := map[string]string{}
	data := map[string]any{}
	for name, content := range files {
		if filepath.Ext(name) == ".rego" {
			modules[name] = content
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(content), &doc); err != nil {
			b.Fatal(err)
		}
		if dir := path.Dir(name); dir != "." {
			for _, seg := range slices.Backward(strings.Split(dir, "/")) {
				doc = map[string]any{seg: doc}
			}
		}
		if conflict := merge(data, doc, "data"); conflict != "" {
			b.Fatalf("data conflict at %s", conflict)
		}
	}
	file := filepath.Join(b.TempDir(), "bench.tar.gz")
	saveBundle(b, file, makeBundle(b, "bench", modules, data))
	config := fmt.Sprintf(`{"bundles": {"authz": {"resource": "file://%s"}}}`, file)
	opa, err := sdk.New(context.Background(), sdk.Options{
		ID:            "fsbroker-bench",
		Config:        bytes.NewReader([]byte(config)),
		Logger:        logging.NewNoOpLogger(),
		ConsoleLogger: logging.NewNoOpLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { opa.Stop(context.Background()) })
	return opa
}

// decisionFromJSON checks and converts a decision the SDK returned as Go values, as strictly as
// parseDecision does.
func decisionFromJSON(v any) (Decision, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Decision{}, errors.New("not an object")
	}
	var d Decision
	allow, ok := obj["allow"].(bool)
	if !ok {
		return Decision{}, errors.New("no boolean allow")
	}
	d.Allow = allow
	for k, x := range obj {
		switch k {
		case "allow":
		case "code":
			if d.Code, ok = x.(string); !ok {
				return Decision{}, errors.New("code")
			}
		case "reasons":
			list, ok := x.([]any)
			if !ok {
				return Decision{}, errors.New("reasons")
			}
			for _, r := range list {
				s, ok := r.(string)
				if !ok {
					return Decision{}, errors.New("reasons")
				}
				d.Reasons = append(d.Reasons, s)
			}
		case "obligations":
			if d.Obligations, ok = x.(map[string]any); !ok {
				return Decision{}, errors.New("obligations")
			}
		default:
			return Decision{}, errors.New("unknown key")
		}
	}
	return d, nil
}

// listingPage is a listing page of 1,000 entries: one in 50 a hidden name, one in 50 a secret
// (*.pem), the others source files.
func listingPage() []string {
	entries := make([]string, 0, 1000)
	for i := range 1000 {
		switch {
		case i%50 == 0:
			entries = append(entries, fmt.Sprintf("proj/src/.hidden%d", i))
		case i%50 == 1:
			entries = append(entries, fmt.Sprintf("proj/src/key%d.pem", i))
		default:
			entries = append(entries, fmt.Sprintf("proj/src/pkg%d/file%d.go", i%7, i))
		}
	}
	return entries
}

// BenchmarkVisible1000 decides one batch of 1,000 entries (a listing page): with the realistic
// policy every entry is checked against the hidden rule and the 12-pattern glob deny-list, with
// the default policy set against its secrets deny-list; the trivial policy shows every entry
// (the floor: converting and iterating the batch). The input is a map (converted as the policy
// reads it), then the broker's JSON bytes without the batch cache, then the same batch again
// from the cache.
func BenchmarkVisible1000(b *testing.B) {
	ctx := context.Background()
	entries := listingPage()
	in := visibleInput(b, entries...)
	doc, err := json.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		visible int
	}{
		{"trivial", benchSets[0].files, 1000},
		{"realistic", benchSets[1].files, 960},
		{"default", defaultFiles(b), 980}, // it leaves hidden names to includeHidden
	} {
		b.Run(tc.name, func(b *testing.B) {
			e, err := New(ctx, Source{Dir: policyDir(b, tc.files)})
			if err != nil {
				b.Fatal(err)
			}
			vis, err := e.Visible(ctx, in)
			if err != nil || len(vis) != tc.visible {
				b.Fatalf("Visible: %d visible, %v; want %d", len(vis), err, tc.visible)
			}
			percentiles(b, func() {
				if vis, err := e.Visible(ctx, in); err != nil || len(vis) != tc.visible {
					b.Fatalf("Visible: %d visible, %v", len(vis), err)
				}
			})
		})
		for _, cached := range []bool{false, true} {
			name := tc.name + "/json"
			if cached {
				name += "-cached"
			}
			b.Run(name, func(b *testing.B) {
				e, err := New(ctx, Source{Dir: policyDir(b, tc.files)})
				if err != nil {
					b.Fatal(err)
				}
				if !cached {
					e.current().batches = nil
				} else if e.current().batches == nil {
					b.Skip("this policy set is not cacheable")
				}
				percentiles(b, func() {
					if vis, err := e.Visible(ctx, json.RawMessage(doc)); err != nil || len(vis) != tc.visible {
						b.Fatalf("Visible: %d visible, %v", len(vis), err)
					}
				})
			})
		}
	}
}

// BenchmarkReloadDefaultSet measures what a policy edit costs before it takes
// effect: loading the default set from a directory, compiling and
// type-checking it, and running its tests (Watch adds its debounce, 100 ms
// by default). The budget from edit to effect is 500 ms.
func BenchmarkReloadDefaultSet(b *testing.B) {
	dir := b.TempDir()
	err := fs.WalkDir(policies.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(policies.FS, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(ctx, Source{Dir: dir}, WithRunTests(true)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadEmbedded measures what the embedded default set costs fsbroker at start: New on
// policies.FS without its tests (they run in fsbroker's own test suite), as cmd/fsbroker loads
// it: reading, parsing, compiling, type-checking and preparing the queries.
func BenchmarkLoadEmbedded(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(ctx, Source{FS: policies.FS}, WithRunTests(false)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideParts splits an uncached decision on the broker's JSON input (a read with 2 or
// 20 grants, as BenchmarkDecide) into its parts, each timed as percentiles times Decide: parsing
// the JSON alone, then evaluating the decision query of the trivial policy and of the default
// set on the already parsed input (OPA's fixed cost per evaluation plus the rules), then the
// whole Decide. Parsing plus evaluating is the whole: the rest of Decide is a few hundred
// nanoseconds.
func BenchmarkDecideParts(b *testing.B) {
	ctx := context.Background()
	sets := []struct {
		name  string
		files map[string]string
	}{{"trivial", benchSets[0].files}, {"default", defaultFiles(b)}}
	for _, grants := range []int{2, 20} {
		doc, err := json.Marshal(benchInput(b, grants))
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("%dgrants", grants)
		b.Run(name+"/parse", func(b *testing.B) {
			percentiles(b, func() {
				if _, err := parseJSONObject(doc); err != nil {
					b.Fatal(err)
				}
			})
		})
		v, err := parseJSONObject(doc)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range sets {
			e, err := New(ctx, Source{Dir: policyDir(b, s.files)})
			if err != nil {
				b.Fatal(err)
			}
			set := e.current()
			b.Run(name+"/"+s.name+"/eval", func(b *testing.B) {
				percentiles(b, func() {
					rs, err := eval(ctx, set.decision, v)
					if d, err := set.decisionOf(rs, err); err != nil || !d.Allow {
						b.Fatalf("eval = %#v, %v", d, err)
					}
				})
			})
			b.Run(name+"/"+s.name+"/decide", func(b *testing.B) {
				percentiles(b, func() {
					if d, err := e.Decide(ctx, json.RawMessage(doc)); err != nil || !d.Allow {
						b.Fatalf("Decide = %#v, %v", d, err)
					}
				})
			})
		}
	}
}

// BenchmarkDerived1000 decides one batch of 1,000 entries (a listing page, and a files/consent
// request as large) with the rules derived from the decision (policies/lib/derived.rego), for
// sets that define only decision: allow all (the floor: building each entry's input and
// evaluating a one-line decision), the "a few rules" set of TestOneFileDecision (grants, a
// prefix, the secrets helper), and the built-in set's decision with its own visible and
// consentable taken out (the dearest decision there is). The input is the broker's JSON,
// without the batch cache.
func BenchmarkDerived1000(b *testing.B) {
	ctx := context.Background()
	entries := listingPage()
	builtinDecisionOnly := defaultFiles(b)
	for _, rule := range []struct{ file, text string }{
		{"authz.rego", "default visible := set()"},
		{"authz.rego", `visible := {e.mountPath | some e in input.entries} - hide if input.operation == "visible"`},
		{"consent.rego", "default consentable := set()"},
		{"consent.rego", `consentable := {e.mountPath | some e in input.entries} - hide - withheld if input.operation == "consent"`},
	} {
		if !strings.Contains(builtinDecisionOnly[rule.file], rule.text) {
			b.Fatalf("%s no longer holds %q", rule.file, rule.text)
		}
		builtinDecisionOnly[rule.file] = strings.ReplaceAll(builtinDecisionOnly[rule.file], rule.text, "")
	}
	for _, tc := range []struct {
		name           string
		files          map[string]string
		shown, granted int
	}{
		{"allow-all", map[string]string{"policy.rego": oneFileDecisions[0].policy}, 1000, 1000},
		{"few-rules", map[string]string{"policy.rego": oneFileDecisions[2].policy}, 980, 980},
		{"builtin-decision", builtinDecisionOnly, 980, 980},
	} {
		for _, batch := range []string{"visible", "consent"} {
			in := batchInput(b, batch, "read", entries, grant("read", "proj"))
			if batch == "consent" {
				in["grants"] = []any{}
			}
			doc, err := json.Marshal(in)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(tc.name+"/"+batch, func(b *testing.B) {
				e, err := New(ctx, Source{Dir: policyDir(b, tc.files)}, WithRunTests(false))
				if err != nil {
					b.Fatal(err)
				}
				if set := e.current(); set.hasVisible || set.hasConsent {
					b.Fatalf("the set defines visible (%t) or consentable (%t)", set.hasVisible, set.hasConsent)
				}
				e.current().batches = nil
				eval, want := e.Visible, tc.shown
				if batch == "consent" {
					eval, want = e.Consentable, tc.granted
				}
				percentiles(b, func() {
					if got, err := eval(ctx, json.RawMessage(doc)); err != nil || len(got) != want {
						b.Fatalf("%s: %d, %v; want %d", batch, len(got), err, want)
					}
				})
			})
		}
	}
}
