// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fsbroker/fsbroker/broker/decision"
)

// A batch's input (a listing page, a batch of watch events, the paths of a files/consent, a
// directory's entries) as OPA values, without JSON in between: the request's part as
// requestValue builds it (the session part converted once per change), and input.entries built
// here, each entry with the facts the hide rules look up instead of computing them for every
// entry (below). Before, Decider.Visible, Consentable and Carried encoded the whole batch as JSON
// and the engine parsed it back, about 1.5 us an entry.

// Facts the engine adds to each entry of input.entries (schema/policy-input.json describes them;
// a given value is replaced, and an entry it cannot compute them for has none):
//
//   - lowerSlashRelative: "/" + lower(relative), what the secrets patterns are matched against
//     (secrets.rego);
//   - joinedMountPath: mount and relative joined by "/", one trailing slash cut (the mount itself
//     for an empty relative), what the entry's mountPath must be (confinement.rego): exactly the
//     rule's trim_suffix(concat("/", [mount, relative]), "/");
//
// and to the input, input.entryFacts: true when every entry has them. A rule that reads a fact
// computes it itself when input.entryFacts is absent (an input a test builds), and hides an
// entry without it when it is there.
const (
	factLowerSlashRelative = "lowerSlashRelative"
	factJoinedMountPath    = "joinedMountPath"
	factEntryFacts         = "entryFacts"
)

// entryFactNames are the names of the facts of an entry.
var entryFactNames = [...]string{factLowerSlashRelative, factJoinedMountPath}

// batchNames are the terms of the member names batchValue writes besides requestValue's.
type batchNames struct {
	entries, entryFacts, lowerSlashRelative, joinedMountPath *ast.Term
}

// batchMemberNames are the batch's member names' terms.
var batchMemberNames = sync.OnceValue(func() *batchNames {
	return &batchNames{entries: inputKey("entries"), entryFacts: inputKey(factEntryFacts),
		lowerSlashRelative: inputKey(factLowerSlashRelative), joinedMountPath: inputKey(factJoinedMountPath)}
})

// entryFactValues are the facts of an entry whose mount and relative are those given, as
// strings.
func entryFactValues(mount, relative string) (lowerSlashRelative, joinedMountPath string) {
	// trim_suffix(concat("/", [mount, relative]), "/"), as the confinement rule writes it: one
	// trailing slash off (for an empty relative the slash the join added, not the mount's own).
	joined := strings.TrimSuffix(mount+"/"+relative, "/")
	return "/" + strings.ToLower(relative), joined
}

// entryFactsBeside is entryFactValues for an entry whose mountPath is given: where a fact is
// the same string as mountPath or a part of it (the common case: mountPath is mount + "/" +
// relative, in lower case), it is that part rather than a new string.
func entryFactsBeside(mount, relative, mountPath string) (lowerSlashRelative, joinedMountPath string) {
	joined := relative != "" && strings.HasSuffix(mountPath, relative) &&
		len(mountPath) == len(mount)+1+len(relative) && mountPath[len(mount)] == '/' && strings.HasPrefix(mountPath, mount)
	if !joined || strings.HasSuffix(relative, "/") || strings.ToLower(relative) != relative {
		return entryFactValues(mount, relative)
	}
	return mountPath[len(mount):], mountPath
}

// batchValue builds in, which has entries, as an OPA object with its session part p: the value
// parsedWithFacts gives encodeInput's document (TestBatchValueMatchesParse). ok is false for an
// input requestValue does not build (params that are not JSON), which the caller then encodes.
func batchValue(p *sessionPart, in *decision.Input) (_ ast.Object, ok bool) {
	return batchValueWith(p, in, allEntryMembers)
}

// batchValueWith is batchValue with each entry's members limited to members (its policy set's
// entryMembers).
func batchValueWith(p *sessionPart, in *decision.Input, members entryMembers) (_ ast.Object, ok bool) {
	head := *in
	head.Entries = nil
	v, ok := requestValue(p, &head)
	if !ok {
		return nil, false
	}
	obj := v.(ast.Object)
	if len(in.Entries) > 0 { // encodeInput leaves out an empty entries
		n := batchMemberNames()
		obj.Insert(n.entries, entriesTerm(in.Entries, members))
		obj.Insert(n.entryFacts, ast.InternedTerm(true))
	}
	return obj, true
}

// entriesTerm is input.entries for entries, with their facts, each entry with the members in
// members only. Terms the entries share (their root and mount, the type names) are made once;
// an entry's requested and joinedMountPath are its mountPath's term when they are the same
// string.
func entriesTerm(entries []decision.InputPath, members entryMembers) *ast.Term {
	keys := entryMemberKeys()
	elems := make([]*ast.Term, len(entries))
	// One slab for each entry's own terms: the entry, requested, canonical, relative, mountPath
	// and the two facts.
	const perEntry = 7
	slab := make([]ast.Term, perEntry*len(entries))
	var root, mount, typ lastTerm // the terms entries share
	var picked [len(entryMemberNames)][2]*ast.Term
	for i := range entries {
		e := &entries[i]
		terms := slab[perEntry*i : perEntry*(i+1) : perEntry*(i+1)]
		relative, mountPath := jsonString(e.Relative), jsonString(e.MountPath)
		lowerRel, joined := entryFactsBeside(jsonString(e.Mount), relative, mountPath)
		str := func(j int, s string) *ast.Term {
			terms[j].Value = ast.String(s)
			return &terms[j]
		}
		mountPathTerm := str(0, mountPath)
		requested := mountPathTerm
		if r := jsonString(e.Requested); r != mountPath {
			requested = str(1, r)
		}
		joinedTerm := mountPathTerm
		if joined != mountPath {
			joinedTerm = str(2, joined)
		}
		pairs := picked[:0]
		for rest := members; rest != 0; rest &= rest - 1 { // each member's bit, in order
			i := bits.TrailingZeros16(uint16(rest))
			var v *ast.Term
			switch entryMembers(1) << i {
			case memberRequested:
				v = requested
			case memberCanonical:
				v = str(4, jsonString(e.Canonical))
			case memberRoot:
				v = root.of(e.Root)
			case memberMount:
				v = mount.of(e.Mount)
			case memberRelative:
				v = str(5, relative)
			case memberMountPath:
				v = mountPathTerm
			case memberWritable:
				v = ast.InternedTerm(e.Writable)
			case memberExists:
				v = ast.InternedTerm(e.Exists)
			case memberType:
				v = typ.of(e.Type)
			case memberSize:
				v = intTerm(e.Size)
			case memberNlink:
				v = numberTerm(strconv.FormatUint(e.Nlink, 10))
			case memberHidden:
				v = ast.InternedTerm(e.Hidden)
			case memberLowerSlashRelative:
				v = str(6, lowerRel)
			case memberJoinedMountPath:
				v = joinedTerm
			}
			pairs = append(pairs, member(keys[i], v))
		}
		terms[3].Value = ast.NewObject(pairs...) // it copies the pairs: picked is reused
		elems[i] = &terms[3]
	}
	return ast.ArrayTerm(elems...)
}

// lastTerm is the last string a member of a batch's entries had, and its term: entries of a
// batch mostly share their root, mount and type.
type lastTerm struct {
	s string
	t *ast.Term
}

// of returns the term of s (as stringTerm makes it): the last one when it is s's, else a new
// one, kept.
func (last *lastTerm) of(s string) *ast.Term {
	if last.t == nil || last.s != s {
		*last = lastTerm{s: s, t: stringTerm(s)}
	}
	return last.t
}

// addEntryFacts adds the entry facts to the entries of doc, an input document it may change,
// and input.entryFacts when every entry has them; given facts are replaced, or dropped where
// they cannot be computed.
func addEntryFacts(doc ast.Object) ast.Object {
	bn := batchMemberNames()
	all := false
	if t := doc.Get(bn.entries); t != nil {
		if entries, ok := t.Value.(*ast.Array); ok {
			all = true
			for i := range entries.Len() {
				if !addFactsToEntry(entries.Elem(i)) {
					all = false
				}
			}
		}
	}
	if all {
		doc.Insert(bn.entryFacts, ast.InternedTerm(true))
		return doc
	}
	return without(doc, factEntryFacts)
}

// addFactsToEntry adds the entry facts to the entry t, and reports whether it could; where it
// could not (it is not an object with a string mount and relative), it removes given ones.
func addFactsToEntry(t *ast.Term) bool {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return false
	}
	mount, ok1 := stringAt(obj, "mount")
	relative, ok2 := stringAt(obj, "relative")
	if !ok1 || !ok2 {
		t.Value = without(obj, entryFactNames[:]...)
		return false
	}
	bn := batchMemberNames()
	lowerRel, joined := entryFactValues(mount, relative)
	obj.Insert(bn.lowerSlashRelative, ast.StringTerm(lowerRel))
	obj.Insert(bn.joinedMountPath, ast.StringTerm(joined))
	return true
}

// without is obj without the members named, obj itself when it has none of them.
func without(obj ast.Object, names ...string) ast.Object {
	has := false
	for _, name := range names {
		if obj.Get(inputKey(name)) != nil {
			has = true
		}
	}
	if !has {
		return obj
	}
	pairs := make([][2]*ast.Term, 0, obj.Len())
	obj.Foreach(func(k, v *ast.Term) {
		if s, ok := k.Value.(ast.String); !ok || !containsString(names, string(s)) {
			pairs = append(pairs, [2]*ast.Term{k, v})
		}
	})
	return ast.NewObject(pairs...)
}

// containsString reports whether s is one of list.
func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// brokerBatchInput is the input of a batch query for in: built as OPA values (batchValueWith, each
// entry with members only), or, for an input batchValue does not build, encoded (encodeInput,
// every member) and parsed by the engine.
func brokerBatchInput(p *sessionPart, in *decision.Input, members entryMembers) any {
	if v, ok := batchValueWith(p, in, members); ok {
		return v
	}
	doc, _ := encodeInput(in)
	return doc
}

// batchValueKey is the batch cache's key of in, a batch whose session part is p, for query: a
// SHA-256 over p's generation, the request's own part but its time (requestKey) and every entry,
// each field behind its length. It differs from every key of a JSON input (batchKeyOf), whose
// hashed bytes start with 0 or 1.
func batchValueKey(query string, p *sessionPart, in *decision.Input) batchKey {
	// The bytes are hashed a few kilobytes at a time as they are written: the same key as one
	// buffer of them all, without a buffer the size of the batch (160 bytes an entry).
	const flushAt = 4 << 10
	h := sha256.New()
	n := 0
	b := make([]byte, 0, min(512+160*len(in.Entries), flushAt+512))
	flush := func() {
		h.Write(b)
		n += len(b)
		b = b[:0]
	}
	b = append(b, 0xff)
	head := *in
	head.Entries = nil
	b = requestKey(b, p, &head)
	b = binary.AppendUvarint(b, uint64(len(in.Entries)))
	for i := range in.Entries {
		if len(b) >= flushAt {
			flush()
		}
		b = appendEntryKey(b, &in.Entries[i])
	}
	flush()
	key := batchKey{query: query, n: n}
	h.Sum(key.sum[:0])
	return key
}

// appendEntryKey appends the key bytes of entry e to b: every field, each string behind its
// length.
func appendEntryKey(b []byte, e *decision.InputPath) []byte {
	for _, s := range [...]string{e.Requested, e.Canonical, e.Root, e.Mount, e.Relative, e.MountPath, e.Type} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var flags byte
	for j, f := range [...]bool{e.Writable, e.Exists, e.Hidden} {
		if f {
			flags |= 1 << j
		}
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, e.Size)
	return binary.AppendUvarint(b, e.Nlink)
}

// decideBatch evaluates the current set's visible (or, with consent, consentable) for the
// broker's batch in: from the batch cache when it holds the batch, else built as OPA values and
// evaluated, the result kept (evalPathSet).
func (e *Engine) decideBatch(ctx context.Context, in *decision.Input, consent bool) (map[string]bool, error) {
	set := e.current()
	if set == nil {
		return map[string]bool{}, fmt.Errorf("engine: %w", errNoPolicy)
	}
	pq, query := set.visible, set.visibleRef
	if consent {
		pq, query = set.consent, set.consentRef
	}
	part := e.sessions.of(in)
	var key *batchKey
	if set.batches != nil {
		k := batchValueKey(query, part, in)
		if paths, ok := set.batches.get(k); ok {
			return paths, nil // before the input is built
		}
		key = &k
	}
	return evalPathSetKeyed(ctx, set, pq, query, brokerBatchInput(part, in, set.entryMembers), key, false)
}
