package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCacheable(t *testing.T) {
	for name, tc := range map[string]struct {
		rule string
		ok   bool
	}{
		"paths only":       {`decision := {"allow": input.path.relative == "a"}`, true},
		"time":             {`decision := {"allow": input.time.unixNano > 0}`, true},
		"whole input":      {`decision := {"allow": count(input) > 0}`, false},
		"computed key":     {`decision := {"allow": input[k] == 1} if { some k in ["method"] }`, false},
		"time.now_ns":      {`decision := {"allow": time.now_ns() > 0}`, false},
		"jwt verify":       {`decision := {"allow": io.jwt.decode_verify("x", {"secret": "s"})[0]}`, false},
		"walk of input":    {`decision := {"allow": true} if { walk(input, [_, _]) }`, false},
		"input.path whole": {`decision := {"allow": count(input.path) > 0}`, true},
		"data only":        {`decision := {"allow": data.fsbroker.open == true}`, true},
		"print is fine":    {`decision := {"allow": true} if { print(input.method) }`, true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newTestEngine(t, map[string]string{"authz.rego": "package fsbroker.authz\n\n" + tc.rule + "\n"})
			c := e.current().cache
			if got := c != nil; got != tc.ok {
				t.Errorf("cacheable = %v, want %v", got, tc.ok)
			}
			if wantTTL := strings.Contains(tc.rule, "input.time"); c != nil && (c.ttl != 0) != wantTTL {
				t.Errorf("ttl = %s, want one only for a set that reads input.time", c.ttl)
			}
		})
	}
	// The default set is cacheable.
	e, err := New(context.Background(), Source{Dir: policyDir(t, defaultFiles(t))})
	if err != nil {
		t.Fatal(err)
	}
	if c := e.current().cache; c == nil || c.ttl != timeTTL {
		t.Errorf("the default policy set's cache = %+v, want one with the time TTL (grants expire)", c)
	}
}

// TestDecideCached: a cached decision is the decision; a reload drops the cache; a set that
// reads input.time is never cached.
func TestDecideCached(t *testing.T) {
	ctx := context.Background()
	dir := policyDir(t, map[string]string{"authz.rego": "package fsbroker.authz\n\ndecision := {\"allow\": input.path.relative == \"a.txt\", \"reasons\": [\"v1\"]}\n"})
	e, err := New(ctx, Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	in := testInput(t, "read", "proj/a.txt", false)
	raw, _ := json.Marshal(in)
	key := raw
	for range 3 {
		d, err := e.DecideCached(ctx, key, in)
		if err != nil || !d.Allow || d.Reasons[0] != "v1" {
			t.Fatalf("DecideCached = %+v, %v", d, err)
		}
	}
	if n := len(e.current().cache.m); n != 1 {
		t.Errorf("cache holds %d decisions, want 1", n)
	}
	// The same key with another input answers from the cache: the key is the contract.
	other := testInput(t, "read", "proj/b.txt", false)
	if d, _ := e.DecideCached(ctx, key, other); !d.Allow {
		t.Error("a cached key was decided again")
	}
	// A reload swaps in a set with an empty cache.
	replaceFile(t, dir+"/authz.rego", "package fsbroker.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"v2\"]}\n")
	e.reload(ctx, nil)
	if d, _ := e.DecideCached(ctx, key, in); d.Allow || d.Reasons[0] != "v2" {
		t.Errorf("after a reload: %+v, want the new set's denial", d)
	}
	// Bounded.
	for i := range decisionCacheSize + 10 {
		e.DecideCached(ctx, append(slices.Clip(key), strings.Repeat(" ", i+1)...), in)
	}
	if n := len(e.current().cache.m); n > decisionCacheSize {
		t.Errorf("cache holds %d decisions, more than %d", n, decisionCacheSize)
	}
	// A failed decision is not cached (no policy set: Decide's fail-closed path).
	var none Engine
	if d, err := none.DecideCached(ctx, key, in); err == nil || d.Allow {
		t.Errorf("no policy: %+v, %v", d, err)
	}
}

func TestDecisionCacheTTL(t *testing.T) {
	c := &decisionCache{ttl: 20 * time.Millisecond}
	c.put([]byte("k"), Decision{Allow: true})
	if d, ok := c.get([]byte("k")); !ok || !d.Allow {
		t.Fatal("a fresh entry missed")
	}
	time.Sleep(40 * time.Millisecond)
	if _, ok := c.get([]byte("k")); ok {
		t.Error("an entry older than the TTL was served")
	}
}
