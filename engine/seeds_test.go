// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// constantsPolicy has rules of every kind constantRules must tell apart.
const constantsPolicy = `package fsbroker.authz

limit := data.cfg.limit
doubled := limit * 2
from_function := twice(limit)
twice(x) := x * 2
reads_input := input.path.mountPath
depends_on_input := reads_input
now := time.now_ns()
later := now + 1
mocked := x if {
	x := limit with data.cfg.limit as 1
}
printed if print("x")
undefined_rule := data.cfg.missing
partial contains 1
obligations["limit"] := limit

decision := {"allow": true, "obligations": obligations} if {
	limit == 7
	doubled == 14
	mocked == 1
	not undefined_rule
	depends_on_input == "proj/a"
} else := {"allow": false}
`

// TestConstantRules checks which rules are computed once per set: none that reads input, has a
// with, calls a nondeterministic built-in or print (compiled in only when the log is at debug
// level), or depends on one that does.
func TestConstantRules(t *testing.T) {
	files := map[string]string{"authz.rego": constantsPolicy, "cfg/data.json": `{"limit": 7}`}
	debug := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: io.Discard})
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"printing", []Option{WithLogger(debug)}, []string{"doubled", "from_function", "limit", "undefined_rule"}},
		{"print compiled out", nil, []string{"doubled", "from_function", "limit", "printed", "undefined_rule"}},
	} {
		set := newTestEngine(t, files, tc.opts...).current()
		var got []string
		for i, ref := range set.rules.seedRefs {
			name, ok := strings.CutPrefix(ref.String(), "data.fsbroker.authz.")
			if !ok {
				continue // the library's
			}
			got = append(got, name)
			if name == "undefined_rule" && set.rules.seedValues[i] != nil {
				t.Errorf("%s: undefined_rule seeded with %v, want undefined", tc.name, set.rules.seedValues[i])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: constant rules = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSeededDecisions checks decisions that read seeded rules: the seeded values are the
// rules' own, a rule under `with` is computed with what the with gives, and the input still
// decides.
func TestSeededDecisions(t *testing.T) {
	e := newTestEngine(t, map[string]string{"authz.rego": constantsPolicy, "cfg/data.json": `{"limit": 7}`})
	ctx := context.Background()
	for range 3 { // the caches are reused
		d, err := e.Decide(ctx, map[string]any{"path": map[string]any{"mountPath": "proj/a"}})
		if err != nil || !d.Allow || d.Obligations["limit"] == nil {
			t.Fatalf("Decide(proj/a) = %+v, %v; want an allow with the limit", d, err)
		}
		d, err = e.Decide(ctx, map[string]any{"path": map[string]any{"mountPath": "proj/b"}})
		if err != nil || d.Allow {
			t.Fatalf("Decide(proj/b) = %+v, %v; want a denial", d, err)
		}
	}
}

// TestBrokenSecretsGlobStillDenies loads the built-in set with an extra secrets pattern that is
// not a valid glob: its constant rules then cannot all be computed, and every read must still
// be denied (the secrets rule fails closed), through Decide as the broker calls it.
func TestBrokenSecretsGlobStillDenies(t *testing.T) {
	files := defaultFiles(t)
	files["data.json"] = `{"fsbroker": {"limits": {"max_write_bytes": 16777216, "max_bytes_per_day": 1073741824,
		"max_read_bytes": 16777216, "max_watches": 64}, "secrets": {"extra_patterns": ["[unclosed"], "extra_dirs": [], "allow": []},
		"servers": {}, "consent": {"never_write": [".git"], "never": []}, "hardlinks": {"allow": []}}}`
	e := newTestEngine(t, files, WithRunTests(false))
	in := testInput(t, "read", "proj/src/main.go", false, grant("read", "proj"))
	d, err := e.Decide(context.Background(), in)
	if d.Allow {
		t.Fatalf("Decide with a broken secrets glob = %+v, %v; want a denial", d, err)
	}
	healthy := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	if d, err := healthy.Decide(context.Background(), in); err != nil || !d.Allow {
		t.Fatalf("the same read with the built-in data = %+v, %v; want an allow", d, err)
	}
}

// TestSeededDecisionsConcurrently decides with the built-in set from several goroutines at once,
// reads that are allowed and reads the secrets rule denies, so that the race detector sees the
// seeds and the pooled rule caches shared between evaluations.
func TestSeededDecisionsConcurrently(t *testing.T) {
	e := newTestEngine(t, defaultFiles(t), WithRunTests(false))
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				allowed := fmt.Sprintf("proj/src/g%d/file%d.go", g, i)
				secret := fmt.Sprintf("proj/src/g%d/%d/.env", g, i)
				if d, err := e.Decide(ctx, testInput(t, "read", allowed, false, grant("read", "proj"))); err != nil || !d.Allow {
					t.Errorf("Decide(%s) = %+v, %v; want an allow", allowed, d, err)
					return
				}
				if d, err := e.Decide(ctx, testInput(t, "read", secret, false, grant("read", "proj"))); err != nil || d.Allow {
					t.Errorf("Decide(%s) = %+v, %v; want a denial", secret, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// conflictPolicy has a constant rule, limit, whose two definitions conflict (an evaluation
// error), and guard, a constant rule computed from it, which the decision reads.
const conflictPolicy = `package fsbroker.authz

limit := 1 if data.cfg.a
limit := 2 if data.cfg.b
guard := limit + 1

decision := {"allow": true} if {
	input.path.mountPath == "proj/a"
	guard > 0
} else := {"allow": false}
`

// TestConstantRuleOnAFailingRuleFailsClosed attacks the seeding order: limit, computed first,
// fails (its definitions conflict) and is not seeded, but its first value stays behind in the
// cache the seeds are computed with; guard, computed next, must not be seeded from that value.
// Every decision that reads guard must fail, as it does without seeds.
func TestConstantRuleOnAFailingRuleFailsClosed(t *testing.T) {
	e := newTestEngine(t, map[string]string{"authz.rego": conflictPolicy, "cfg/data.json": `{"a": true, "b": true}`})
	for _, ref := range e.current().rules.seedRefs {
		if s := ref.String(); s == "data.fsbroker.authz.limit" || s == "data.fsbroker.authz.guard" {
			t.Errorf("%s is seeded; it fails in every evaluation", s)
		}
	}
	d, err := e.Decide(context.Background(), map[string]any{"path": map[string]any{"mountPath": "proj/a"}})
	if err == nil || d.Allow {
		t.Fatalf("Decide(proj/a) = %+v, %v; want a denial with the conflict's error", d, err)
	}
}

// slowPolicy has a constant rule that takes seconds to compute (2.5e7 iterations, about 20 s here), and a
// decision that reads it.
const slowPolicy = `package fsbroker.authz

slow := count({1 | some i in numbers.range(1, 5000); some j in numbers.range(1, 5000)})

decision := {"allow": true} if {
	input.path.mountPath == "proj/a"
	slow > 0
} else := {"allow": false}
`

// TestSlowConstantRuleDoesNotHoldTheLoad attacks the load with a constant rule that takes
// seconds: computed at load without a bound, it held the set's load (the broker's start, or
// every later reload) for as long. It must be left to each evaluation, which its request's
// deadline bounds (a denial), as before the constant rules were computed at load.
func TestSlowConstantRuleDoesNotHoldTheLoad(t *testing.T) {
	e := newTestEngine(t, map[string]string{"authz.rego": slowPolicy})
	for _, ref := range e.current().rules.seedRefs {
		if ref.String() == "data.fsbroker.authz.slow" {
			t.Fatal("the slow rule was computed at load")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if d, err := e.Decide(ctx, map[string]any{"path": map[string]any{"mountPath": "proj/a"}}); err == nil || d.Allow {
		t.Fatalf("Decide under a deadline = %+v, %v; want a denial", d, err)
	}
}
