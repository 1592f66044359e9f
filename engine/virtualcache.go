// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// ruleCache is the cache of rule values (OPA's "virtual cache") of one evaluation: OPA keeps
// each rule's value there the first time an evaluation computes it, so that a rule read twice is
// computed once. OPA's own cache is a tree with a hash map per level, made anew for every
// evaluation: about 75 allocations of a decision's 430 with the built-in set. This one keeps
// the same frames and answers in flat slices and one map, reused from one evaluation to the
// next (ruleCachePool), so that an evaluation allocates nothing for it once the slices have
// grown.
//
// The entries of all frames are in one slice, in the order they were put; index maps a ref's
// hash to its latest entry, and each entry links to the previous one of the same hash. Only the
// top frame is visible (a frame pushed for a `with` starts empty, as in OPA's cache).
type ruleCache struct {
	entries []ruleCacheEntry
	// refs holds the entries' refs, one after the other: OPA may reuse the slice of a ref it
	// passes once the call returns, so the terms are copied.
	refs   []*ast.Term
	index  map[int]int32
	frames []int32 // the first entry of each frame
	seeds  int32   // the first frame's first entries are the pool's seeds
	from   *ruleCachePool
}

// ruleCacheEntry is one ref's value; value nil means the ref is undefined.
type ruleCacheEntry struct {
	hash           int
	refStart       int32
	refLen         int32
	previous       int32 // the previous entry with the same hash, or -1
	value          *ast.Term
	undefinedValue bool
}

var _ topdown.VirtualCache = (*ruleCache)(nil)

// Bounds above which a cache is dropped after its evaluation instead of being reused, so that
// one huge evaluation does not keep its memory in a pool.
const (
	ruleCacheMaxEntries = 1 << 12
	ruleCacheMaxRefs    = 1 << 14
)

// ruleCachePool keeps the caches of finished evaluations for the next ones, each holding the
// same seeds: values of rules every evaluation would compute alike (see constantRules), put in
// the first frame before an evaluation starts.
type ruleCachePool struct {
	seedRefs   []ast.Ref
	seedValues []*ast.Term // nil: the rule is undefined
	pool       sync.Pool
}

// unseededRules is the pool of the evaluations that get no seeds.
var unseededRules ruleCachePool

// get is a cache for one evaluation, holding p's seeds in its one frame; release it after the
// evaluation.
func (p *ruleCachePool) get() *ruleCache {
	if c, ok := p.pool.Get().(*ruleCache); ok {
		return c
	}
	c := &ruleCache{index: make(map[int]int32), from: p}
	c.Push()
	for i, ref := range p.seedRefs {
		c.Put(ref, p.seedValues[i])
	}
	c.seeds = int32(len(c.entries))
	return c
}

// release empties c down to its seeds and keeps it for another evaluation: the caller no
// longer uses it, nor does OPA once the evaluation returned.
func (c *ruleCache) release() {
	if len(c.entries) > ruleCacheMaxEntries || len(c.refs) > ruleCacheMaxRefs {
		return
	}
	c.truncate(c.seeds)
	c.frames = c.frames[:1]
	c.from.pool.Put(c)
}

// Push implements topdown.VirtualCache: a new, empty frame.
func (c *ruleCache) Push() {
	c.frames = append(c.frames, int32(len(c.entries)))
}

// Pop implements topdown.VirtualCache: the top frame and its entries are dropped.
func (c *ruleCache) Pop() {
	top := len(c.frames) - 1
	c.truncate(c.frames[top])
	c.frames = c.frames[:top]
}

// truncate drops the entries from start on, the last first.
func (c *ruleCache) truncate(start int32) {
	for i := int32(len(c.entries)) - 1; i >= start; i-- {
		e := &c.entries[i]
		if e.previous >= 0 {
			c.index[e.hash] = e.previous
		} else {
			delete(c.index, e.hash)
		}
	}
	refStart := int32(len(c.refs))
	if int(start) < len(c.entries) {
		refStart = c.entries[start].refStart
	}
	clear(c.entries[start:])
	clear(c.refs[refStart:])
	c.entries, c.refs = c.entries[:start], c.refs[:refStart]
}

// find is the entry of ref in the top frame, or -1.
func (c *ruleCache) find(ref ast.Ref, hash int) int32 {
	i, ok := c.index[hash]
	if !ok {
		return -1
	}
	start := c.frames[len(c.frames)-1]
	for ; i >= start; i = c.entries[i].previous {
		e := &c.entries[i]
		if int(e.refLen) == len(ref) && ast.Ref(c.refs[e.refStart:e.refStart+e.refLen]).Equal(ref) {
			return i
		}
	}
	return -1
}

// Get implements topdown.VirtualCache: (value, false) for a ref with a value, (nil, true) for
// one recorded as undefined, (nil, false) for one not recorded in the top frame.
func (c *ruleCache) Get(ref ast.Ref) (*ast.Term, bool) {
	i := c.find(ref, ref.Hash())
	if i < 0 {
		return nil, false
	}
	e := &c.entries[i]
	if e.undefinedValue {
		return nil, true
	}
	return e.value, false
}

// Put implements topdown.VirtualCache: value nil records ref as undefined.
func (c *ruleCache) Put(ref ast.Ref, value *ast.Term) {
	hash := ref.Hash()
	if i := c.find(ref, hash); i >= 0 { // as OPA's cache: once undefined, it stays so
		if value != nil {
			c.entries[i].value = value
		} else {
			c.entries[i].undefinedValue = true
		}
		return
	}
	previous, ok := c.index[hash]
	if !ok {
		previous = -1
	}
	c.entries = append(c.entries, ruleCacheEntry{
		hash:           hash,
		refStart:       int32(len(c.refs)),
		refLen:         int32(len(ref)),
		previous:       previous,
		value:          value,
		undefinedValue: value == nil,
	})
	c.refs = append(c.refs, ref...)
	c.index[hash] = int32(len(c.entries) - 1)
}

// Keys implements topdown.VirtualCache: the refs of the top frame that have a value (even if
// recorded undefined since, as OPA's cache).
func (c *ruleCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.entries[c.frames[len(c.frames)-1]:] {
		if e.value != nil {
			keys = append(keys, ast.Ref(c.refs[e.refStart:e.refStart+e.refLen]).Copy())
		}
	}
	return keys
}
