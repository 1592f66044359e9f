// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// decisionCacheSize bounds the decisions one policy set remembers.
const decisionCacheSize = 4096

// timeTTL is how long a decision of a set that reads input.time is reused: a rule that changes
// its answer with the time (a grant that expires) takes effect at most this late.
const timeTTL = time.Second

// clockBuiltins lists built-ins that read the clock without being marked
// nondeterministic by OPA: a set that calls one is never cached.
var clockBuiltins = map[string]bool{
	"io.jwt.decode_verify":                                   true,
	"crypto.x509.parse_and_verify_certificates":              true,
	"crypto.x509.parse_and_verify_certificates_with_options": true,
}

// cacheable reports whether a compiled policy set's decision is a function of its input and
// its data (fixed for the set's life): no rule reads input as a whole or by a computed key, and
// no rule calls a nondeterministic or clock-reading built-in. Only such a set's decisions are
// reused (DecideCached). readsTime is true when some rule reads input.time: its decisions are
// then reused for at most timeTTL.
//
// modules are the compiled modules, in which every reference to input is a ref rooted at it.
func cacheable(modules map[string]*ast.Module) (ok, readsTime bool, why string) {
	for name, m := range modules {
		var vis *ast.GenericVisitor
		vis = ast.NewGenericVisitor(func(x any) bool {
			if why != "" {
				return true
			}
			switch v := x.(type) {
			case *ast.With: // its target (with input as ...) is replaced, not read
				vis.Walk(v.Value)
				return true
			case ast.Var:
				if v.Equal(ast.InputRootDocument.Value) {
					why = name + ": reads input as a whole"
				}
			case ast.Ref:
				if !v.HasPrefix(ast.InputRootRef) {
					return false
				}
				if len(v) < 2 {
					why = name + ": reads input as a whole"
					return true
				}
				switch key, isString := v[1].Value.(ast.String); {
				case !isString:
					why = name + ": reads input by a computed key"
				case key == "time":
					readsTime = true
				}
				for _, t := range v[2:] { // the head is input itself, not a use of it as a whole
					vis.Walk(t)
				}
				return true
			case ast.Call:
				why = clockCall(name, v[0])
			case *ast.Expr:
				if v.IsCall() {
					why = clockCall(name, v.Operator())
				}
			}
			return why != ""
		})
		vis.Walk(m)
		if why != "" {
			return false, false, why
		}
	}
	return true, readsTime, ""
}

// clockCall returns why a call to op makes a set uncacheable, or "".
func clockCall(module string, op any) string {
	name := fmt.Sprint(op)
	if b, found := ast.BuiltinMap[name]; (found && b.Nondeterministic) || clockBuiltins[name] {
		return module + ": calls " + name
	}
	return ""
}

// decisionCache holds decisions of one policy set by input key. It is dropped with its set, so
// a reload never serves an old decision. When full, entries are evicted at random (Go's map
// iteration order), which needs no bookkeeping on a hit.
type decisionCache struct {
	ttl time.Duration // 0: entries live as long as the set

	mu sync.Mutex
	m  map[string]cachedDecision
}

// cachedDecision is a decision and when it was made.
type cachedDecision struct {
	Decision
	at time.Time
}

func (c *decisionCache) get(key []byte) (Decision, bool) {
	c.mu.Lock()
	d, ok := c.m[string(key)] // the compiler looks this up without copying key
	c.mu.Unlock()
	if ok && c.ttl > 0 && time.Since(d.at) > c.ttl {
		return Decision{}, false
	}
	return d.Decision, ok
}

func (c *decisionCache) put(key []byte, d Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedDecision, 64)
	}
	for k := range c.m {
		if len(c.m) < decisionCacheSize {
			break
		}
		delete(c.m, k)
	}
	c.m[string(key)] = cachedDecision{Decision: d, at: time.Now()}
}

// DecideCached is Decide for an input whose decision may be reused for an equal key. key must
// determine the whole input except input.time: the caller passes, for example, the input's
// JSON without its time member. The engine reuses a decision only for a policy set that is
// cacheable (no rule reads the input as a whole or by a computed key, and no rule calls a
// nondeterministic or clock-reading built-in; checked when the set loads) and only while that
// set is current: a reload starts an empty cache. When some rule reads input.time, a decision
// is reused for at most one second, so a time-dependent rule (a grant's expiry) takes effect
// at most a second late. Failed decisions are never cached. An empty key decides without the
// cache. key is copied only when a decision is stored.
//
// The returned Decision's Reasons and Obligations may be shared with other callers: do not
// modify them.
func (e *Engine) DecideCached(ctx context.Context, key []byte, input any) (Decision, error) {
	set := e.current()
	if set == nil || set.cache == nil || len(key) == 0 {
		return e.Decide(ctx, input)
	}
	if d, ok := set.cache.get(key); ok {
		return d, nil
	}
	d, err := e.decideWith(ctx, set, input)
	if err == nil {
		set.cache.put(key, d)
	}
	return d, err
}

// Bounds on the batches (Visible, Consentable) one policy set remembers: a batch's key is a
// hash, but its result holds a path per entry shown, so both the count and the bytes are bounded.
// A result larger than a quarter of batchCacheBytes is not kept.
const (
	batchCacheEntries = 256
	batchCacheBytes   = 4 << 20
)

// batchEntryOverhead approximates what a cached batch costs per path besides the path's bytes
// (its map slot and string header).
const batchEntryOverhead = 48

// batchKey identifies a batch input: the query, and a SHA-256 over the input's JSON without its
// top-level time member (see batchKeyOf), with the length of what was hashed.
type batchKey struct {
	query string
	sum   [sha256.Size]byte
	n     int
}

// batchKeyOf returns the cache key of a JSON batch input for query, and the bytes of its time
// member's value (nil when it has none), which a cached result may only answer for when they
// are valid JSON (the rest of the input is byte for byte one that was decided). ok is false
// when the input is not JSON this can key (a map, a document the scan cannot read, a time
// member given twice): it is then decided without the cache.
func batchKeyOf(query string, input any) (key batchKey, timeValue []byte, ok bool) {
	var doc []byte
	switch x := input.(type) {
	case json.RawMessage:
		doc = x
	case []byte:
		doc = x
	default:
		return batchKey{}, nil, false
	}
	start, valStart, end, found, ok := timeMember(doc)
	if !ok {
		return batchKey{}, nil, false
	}
	h := sha256.New()
	var head [9]byte // whether there is a time member, and where it was cut out
	if found {
		head[0] = 1
		binary.BigEndian.PutUint64(head[1:], uint64(start))
		timeValue = doc[valStart:end]
	} else {
		start, end = len(doc), len(doc)
	}
	h.Write(head[:])
	h.Write(doc[:start])
	h.Write(doc[end:])
	key = batchKey{query: query, n: start + len(doc) - end}
	h.Sum(key.sum[:0])
	return key, timeValue, true
}

// batchCache holds batch results of one policy set by input key, dropped with its set (a reload
// never serves an old result). When full, entries are evicted at random.
type batchCache struct {
	ttl time.Duration // 0: entries live as long as the set

	mu    sync.Mutex
	m     map[batchKey]cachedBatch
	bytes int // the sizes of the entries in m
}

// cachedBatch is a batch result, its approximate size in bytes and when it was made.
type cachedBatch struct {
	paths map[string]bool
	size  int
	at    time.Time
}

// get returns a copy of the result for key, if there is one young enough.
func (c *batchCache) get(key batchKey) (map[string]bool, bool) {
	c.mu.Lock()
	b, ok := c.m[key]
	c.mu.Unlock()
	if !ok || (c.ttl > 0 && time.Since(b.at) > c.ttl) {
		return nil, false
	}
	return maps.Clone(b.paths), true
}

// put keeps a copy of paths, the result for key, evicting others to stay within bounds.
func (c *batchCache) put(key batchKey, paths map[string]bool) {
	size := 64
	for p := range paths {
		size += len(p) + batchEntryOverhead
	}
	if size > batchCacheBytes/4 {
		return
	}
	kept := cachedBatch{paths: maps.Clone(paths), size: size, at: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[batchKey]cachedBatch, 16)
	}
	if old, ok := c.m[key]; ok {
		c.bytes -= old.size
		delete(c.m, key)
	}
	for k, b := range c.m {
		if len(c.m) < batchCacheEntries && c.bytes+size <= batchCacheBytes {
			break
		}
		c.bytes -= b.size
		delete(c.m, k)
	}
	c.m[key] = kept
	c.bytes += size
}
