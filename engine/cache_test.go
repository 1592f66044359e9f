// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
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

func TestTimeMember(t *testing.T) {
	for _, tc := range []struct {
		doc       string
		value     string // the time member's value, "" when there is none
		found, ok bool
	}{
		{`{"a":1,"time":{"rfc3339":"x","unixNano":1}}`, `{"rfc3339":"x","unixNano":1}`, true, true},
		{` { "time" : 5 , "b" : [1, {"time": 2}] } `, `5`, true, true},
		{`{"b":{"time":1},"c":"\"time\":3"}`, "", false, true},
		{`{"\u0074ime":1}`, "", false, true}, // escaped: part of the key, never cut out
		{`{}`, "", false, true},
		{`{"time":"a\"}"}`, `"a\"}"`, true, true},
		{`{"time":1,"time":2}`, "", false, false},
		{`[]`, "", false, false},
		{`{"a":1`, "", false, false},
		{`{"a":1}x`, "", false, false},
		{`{"a":}`, "", false, false},
		{`{"a" 1}`, "", false, false},
		{`{"a":[1,2}`, "", false, false},
		{`{"a":"x`, "", false, false},
	} {
		_, vs, end, found, ok := timeMember([]byte(tc.doc))
		value := ""
		if found {
			value = tc.doc[vs:end]
		}
		if found != tc.found || ok != tc.ok || value != tc.value {
			t.Errorf("timeMember(%s) = value %q, found %t, ok %t; want %q, %t, %t", tc.doc, value, found, ok, tc.value, tc.found, tc.ok)
		}
	}
}

func TestBatchKey(t *testing.T) {
	key := func(doc string) batchKey {
		t.Helper()
		k, _, ok := batchKeyOf(visibleQuery, json.RawMessage(doc))
		if !ok {
			t.Fatalf("batchKeyOf(%s) not ok", doc)
		}
		return k
	}
	base := key(`{"entries":[1],"time":{"unixNano":1}}`)
	if key(`{"entries":[1],"time":{"unixNano":2}}`) != base {
		t.Error("inputs that differ only in time have different keys")
	}
	for _, other := range []string{
		`{"entries":[2],"time":{"unixNano":1}}`,
		`{"entries":[1]}`,                        // no time at all is another input
		`{"time":{"unixNano":1},"entries":[1]}`,  // the time member elsewhere
		`{"entries":[1],"time":{"unixNano":1}} `, // the length
	} {
		if key(other) == base {
			t.Errorf("%s has the key of another input", other)
		}
	}
	if k, _, _ := batchKeyOf(consentQuery, json.RawMessage(`{"entries":[1],"time":{"unixNano":1}}`)); k == base {
		t.Error("the consent query shares keys with the visible query")
	}
	if _, _, ok := batchKeyOf(visibleQuery, map[string]any{"entries": []any{}}); ok {
		t.Error("a map input has a key")
	}
}

// TestVisibleCached: a batch repeated is answered from the set's cache, keyed by the whole
// input (a rule may look at the whole batch), without its time; a reload drops the cache.
func TestVisibleCached(t *testing.T) {
	ctx := context.Background()
	// Hides everything in a batch of more than two entries: a per-entry cache would be wrong.
	dir := policyDir(t, map[string]string{"authz.rego": `package fsbroker.authz

decision := {"allow": true}

visible := {e.mountPath | some e in input.entries} if count(input.entries) <= 2 else := set()
`})
	e, err := New(ctx, Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(in map[string]any) json.RawMessage {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	three := visibleInput(t, "proj/a", "proj/b", "proj/c")
	two := visibleInput(t, "proj/a", "proj/b")
	for range 2 {
		if vis, err := e.Visible(ctx, doc(three)); err != nil || len(vis) != 0 {
			t.Fatalf("three entries: %v, %v; want none", vis, err)
		}
		vis, err := e.Visible(ctx, doc(two))
		if err != nil || len(vis) != 2 {
			t.Fatalf("two entries: %v, %v; want both", vis, err)
		}
		vis["proj/z"] = true // the caller's own copy
	}
	if n := len(e.current().batches.m); n != 2 {
		t.Errorf("the cache holds %d batches, want 2", n)
	}
	// Another time is the same input for a set that does not read it.
	two["time"] = map[string]any{"rfc3339": "2030-01-01T00:00:00Z", "unixNano": int64(1893456000000000000)}
	if vis, err := e.Visible(ctx, doc(two)); err != nil || len(vis) != 2 || vis["proj/z"] {
		t.Errorf("two entries at another time: %v, %v", vis, err)
	}
	if n := len(e.current().batches.m); n != 2 {
		t.Errorf("the cache holds %d batches, want still 2", n)
	}
	// A time member that is not JSON is never answered from the cache.
	bad := bytes.Replace(doc(two), []byte(`"time":{`), []byte(`"time":{{`), 1)
	if vis, err := e.Visible(ctx, json.RawMessage(bad)); err == nil || len(vis) != 0 {
		t.Errorf("a broken time member: %v, %v; want an error and nothing visible", vis, err)
	}
	// Consentable keeps its own results (here derived from the decision, which allows all).
	consent := visibleInput(t, "proj/a", "proj/b")
	consent["method"], consent["operation"] = "files/consent", "consent"
	for range 2 {
		if ok, err := e.Consentable(ctx, doc(consent)); err != nil || len(ok) != 2 {
			t.Errorf("Consentable = %v, %v; want both", ok, err)
		}
	}
	if n := len(e.current().batches.m); n != 3 {
		t.Errorf("the cache holds %d batches, want 3", n)
	}
	// A reload starts an empty cache.
	replaceFile(t, dir+"/authz.rego", "package fsbroker.authz\n\ndecision := {\"allow\": true}\n\nvisible := set()\n")
	e.reload(ctx, nil)
	if vis, err := e.Visible(ctx, doc(two)); err != nil || len(vis) != 0 {
		t.Errorf("after a reload: %v, %v; want the new set's answer", vis, err)
	}
}

// TestVisibleCacheTime: for a set that reads input.time a batch result is reused for at most
// timeTTL; a set that is not cacheable keeps nothing.
func TestVisibleCacheTime(t *testing.T) {
	e := newTestEngine(t, map[string]string{"authz.rego": `package fsbroker.authz

decision := {"allow": true}

visible := {e.mountPath | some e in input.entries; input.time.unixNano > 0}
`})
	if c := e.current().batches; c == nil || c.ttl != timeTTL {
		t.Fatalf("batches = %+v, want a cache with the time TTL", c)
	}
	e = newTestEngine(t, map[string]string{"authz.rego": `package fsbroker.authz

decision := {"allow": true}

visible := {e.mountPath | some e in input.entries; time.now_ns() > 0}
`})
	if e.current().batches != nil {
		t.Fatal("a set that calls time.now_ns has a batch cache")
	}
	doc, _ := json.Marshal(visibleInput(t, "proj/a"))
	if vis, err := e.Visible(context.Background(), json.RawMessage(doc)); err != nil || !vis["proj/a"] {
		t.Fatalf("Visible = %v, %v", vis, err)
	}
}

func TestBatchCacheBounds(t *testing.T) {
	c := &batchCache{ttl: 20 * time.Millisecond}
	paths := map[string]bool{"proj/a": true}
	for i := range batchCacheEntries + 10 {
		c.put(batchKey{n: i}, paths)
	}
	if len(c.m) > batchCacheEntries {
		t.Errorf("%d batches kept, more than %d", len(c.m), batchCacheEntries)
	}
	big := map[string]bool{}
	for i := range batchCacheBytes / 4 / (batchEntryOverhead + 100) {
		big[fmt.Sprintf("%0100d", i)] = true
	}
	for i := range 20 {
		c.put(batchKey{query: "big", n: i}, big)
	}
	if c.bytes > batchCacheBytes {
		t.Errorf("%d bytes kept, more than %d", c.bytes, batchCacheBytes)
	}
	total := 0
	for _, b := range c.m {
		total += b.size
	}
	if total != c.bytes {
		t.Errorf("bytes = %d, the entries add up to %d", c.bytes, total)
	}
	huge := maps.Clone(big)
	for i := range len(big) {
		huge[fmt.Sprintf("x%0100d", i)] = true
	}
	c.put(batchKey{query: "huge"}, huge)
	if _, ok := c.m[batchKey{query: "huge"}]; ok {
		t.Error("a result over a quarter of the budget was kept")
	}
	c.put(batchKey{query: "fresh"}, paths)
	if _, ok := c.get(batchKey{query: "fresh"}); !ok {
		t.Fatal("a fresh entry missed")
	}
	time.Sleep(40 * time.Millisecond)
	if _, ok := c.get(batchKey{query: "fresh"}); ok {
		t.Error("an entry older than the TTL was served")
	}
}
