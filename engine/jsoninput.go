// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/internal/jsonx"
	"github.com/fsbroker/fsbroker/schema"
	"github.com/open-policy-agent/opa/v1/ast"
)

// maxJSONDepth is the deepest nesting parseJSONObject accepts, as encoding/json.
const maxJSONDepth = 10000

// termSlab is how many terms parseJSONObject allocates at a time.
const termSlab = 256

// parseJSONObject parses one JSON document, which must be an object, straight into an AST value,
// with the meaning OPA's own JSON decoding gives it (util.UnmarshalJSON then
// ast.InterfaceToValue): numbers are kept exact, invalid UTF-8 and lone surrogates in strings
// become U+FFFD, a key given twice keeps its last value, and anything but white space after the
// document is an error.
//
// It is the broker's path (the engine gets the input as JSON bytes) and about 2.5 times as fast
// as that pair, with half the allocations: one pass, no intermediate map[string]any, terms
// allocated in slabs, the input schema's property names shared, and every string without
// escapes a substring of one copy of the document. So a value taken from the input keeps the
// whole document alive: copy it (strings.Clone) before keeping it beyond the evaluation.
func parseJSONObject(data []byte) (ast.Value, error) {
	p := jsonParser{s: string(data)}
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] != '{' {
		v, err := p.value(0)
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("input is %s, want an object", ast.ValueName(v))
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.errorf("invalid character %q after top-level value", p.s[p.pos])
	}
	return v, nil
}

// jsonParser is the state of parseJSONObject.
type jsonParser struct {
	s     string
	pos   int
	terms []ast.Term // the current slab
	// The members of the objects and the elements of the arrays being parsed, innermost last:
	// ast.NewObject copies its pairs, so they are passed from here; an array keeps its slice,
	// so it gets a copy of exactly its length.
	pairs [][2]*ast.Term
	elems []*ast.Term
}

// term returns a new term holding v, from the current slab.
func (p *jsonParser) term(v ast.Value) *ast.Term {
	if len(p.terms) == 0 {
		// About one term per eight bytes of JSON: a slab is not much larger than a small document.
		p.terms = make([]ast.Term, min(termSlab, len(p.s)/8+16))
	}
	t := &p.terms[0]
	p.terms = p.terms[1:]
	t.Value = v
	return t
}

// key returns the term of an object key: the shared one of a property name of the input schema
// (a batch of 1,000 entries repeats each of a dozen names 1,000 times), else a new one.
func (p *jsonParser) key(k string) *ast.Term {
	if t, ok := inputKeys()[k]; ok {
		return t
	}
	return p.term(ast.String(k))
}

// inputKeys holds a term for every property name in the input schema (policy-input.json), shared
// by every parsed input: OPA never modifies a term of a value (it shares interned terms the same
// way).
var inputKeys = sync.OnceValue(func() map[string]*ast.Term {
	keys := map[string]*ast.Term{}
	data, err := fs.ReadFile(schema.Files(), schema.PolicyInputFile)
	if err != nil {
		return keys // not shared: only slower
	}
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return keys
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if props, ok := v.(map[string]any); ok && k == "properties" {
					for name := range props {
						keys[name] = ast.StringTerm(name)
					}
				}
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	return keys
})

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON input at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

// errJSONEnd is the error for a document that ends too soon.
var errJSONEnd = errors.New("JSON input: unexpected end of input")

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at p.pos (white space before it skipped) at nesting depth.
func (p *jsonParser) value(depth int) (ast.Value, error) {
	p.skipSpace()
	if p.pos >= len(p.s) {
		return nil, errJSONEnd
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return ast.String(s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", ast.Boolean(true))
	case c == 'f':
		return p.literal("false", ast.Boolean(false))
	case c == 'n':
		return p.literal("null", ast.Null{})
	default:
		return nil, p.errorf("invalid character %q looking for beginning of value", c)
	}
}

func (p *jsonParser) literal(word string, v ast.Value) (ast.Value, error) {
	if len(p.s)-p.pos < len(word) || p.s[p.pos:p.pos+len(word)] != word {
		return nil, p.errorf("invalid literal, want %s", word)
	}
	p.pos += len(word)
	return v, nil
}

func (p *jsonParser) object(depth int) (ast.Value, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("exceeded max depth")
	}
	p.pos++ // {
	base := len(p.pairs)
	defer func() {
		clear(p.pairs[base:])
		p.pairs = p.pairs[:base]
	}()
	var index map[string]int // the position of each key in p.pairs[base:], once there are many
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		return ast.NewObject(), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil, errJSONEnd
		}
		if p.s[p.pos] != '"' {
			return nil, p.errorf("invalid character %q looking for beginning of object key string", p.s[p.pos])
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil, errJSONEnd
		}
		if p.s[p.pos] != ':' {
			return nil, p.errorf("invalid character %q after object key", p.s[p.pos])
		}
		p.pos++
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		index = p.setPair(base, index, k, p.term(v))
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil, errJSONEnd
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return ast.NewObject(p.pairs[base:]...), nil
		default:
			return nil, p.errorf("invalid character %q after object key:value pair", p.s[p.pos])
		}
	}
}

// linearKeys is how many keys an object may have before setPair looks them up in a map.
const linearKeys = 32

// setPair adds key k with value v to the object whose pairs start at p.pairs[base]; a key
// already there takes the new value (the last one wins, as in encoding/json). Objects of the
// policy input are small, and a linear scan is cheaper than a map for them; past linearKeys
// keys, index (made here) holds each key's position.
func (p *jsonParser) setPair(base int, index map[string]int, k string, v *ast.Term) map[string]int {
	pairs := p.pairs[base:]
	if index == nil {
		for i := range pairs {
			if string(pairs[i][0].Value.(ast.String)) == k {
				pairs[i][1] = v
				return nil
			}
		}
		if len(pairs) < linearKeys {
			p.pairs = append(p.pairs, [2]*ast.Term{p.key(k), v})
			return nil
		}
		index = make(map[string]int, 2*len(pairs))
		for i, kv := range pairs {
			index[string(kv[0].Value.(ast.String))] = i
		}
	}
	if i, ok := index[k]; ok {
		pairs[i][1] = v
		return index
	}
	index[k] = len(pairs)
	p.pairs = append(p.pairs, [2]*ast.Term{p.key(k), v})
	return index
}

func (p *jsonParser) array(depth int) (ast.Value, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("exceeded max depth")
	}
	p.pos++ // [
	base := len(p.elems)
	defer func() {
		clear(p.elems[base:])
		p.elems = p.elems[:base]
	}()
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		return ast.NewArray(), nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.elems = append(p.elems, p.term(v))
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil, errJSONEnd
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return ast.NewArray(slices.Clone(p.elems[base:])...), nil
		default:
			return nil, p.errorf("invalid character %q after array element", p.s[p.pos])
		}
	}
}

// str parses the string at p.pos. A string without escapes that is valid UTF-8 is a substring
// of the document; any other is decoded by encoding/json, for its exact rules.
func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++ // "
	plain := true
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			if plain {
				return p.s[start+1 : p.pos-1], nil
			}
			var s string
			if err := json.Unmarshal([]byte(p.s[start:p.pos]), &s); err != nil {
				return "", fmt.Errorf("JSON input at offset %d: %w", start, err)
			}
			return s, nil
		case c == '\\':
			plain = false
			p.pos += 2 // the escaped character is never the closing quote
		case c < 0x20:
			return "", p.errorf("invalid character %q in string literal", c)
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false // encoding/json makes it U+FFFD
			}
			p.pos += size
		}
	}
	return "", errJSONEnd
}

// number parses the number at p.pos, which must follow JSON's grammar, as OPA keeps a JSON
// number: its text.
func (p *jsonParser) number() (ast.Value, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos >= len(p.s):
		return nil, errJSONEnd
	case p.s[p.pos] == '0':
		p.pos++
	case p.s[p.pos] >= '1' && p.s[p.pos] <= '9':
		p.digits()
	default:
		return nil, p.errorf("invalid character %q in numeric literal", p.s[p.pos])
	}
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.numberError()
		}
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.numberError()
		}
	}
	text := p.s[start:p.pos]
	if t := ast.InternedIntNumberTermFromString(text); t != nil {
		return t.Value, nil
	}
	n, err := ast.NumberChecked(text)
	if err != nil {
		return nil, fmt.Errorf("JSON input at offset %d: %w", start, err)
	}
	return n, nil
}

// digits skips decimal digits and returns how many.
func (p *jsonParser) digits() int {
	n := 0
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

func (p *jsonParser) numberError() error {
	if p.pos >= len(p.s) {
		return errJSONEnd
	}
	return p.errorf("invalid character %q in numeric literal", p.s[p.pos])
}

// timeMember finds the top-level member "time" of a JSON object document: the span
// doc[start:end] from its key to the end of its value, and its value doc[valStart:end]. found is
// false when there is no such member (the key written with escapes does not count: it is then
// part of the rest). ok is false when the document is not an object this scan can read, or has
// more than one such member. The scan checks the document's structure (strings, brackets,
// separators), not its every value: the caller parses what it relies on.
func timeMember(doc []byte) (start, valStart, end int, found, ok bool) {
	s := jsonx.ScanObject(doc)
	for s.Next() {
		m := s.Member()
		if string(m.Name) != `"time"` {
			continue
		}
		if found {
			return 0, 0, 0, false, false
		}
		start, valStart, end, found = m.Start, m.ValueStart, m.End, true
	}
	if objectEnd, closed := s.End(); !closed || jsonx.SkipSpace(doc, objectEnd) != len(doc) {
		return 0, 0, 0, false, false
	}
	return start, valStart, end, found, true
}

// validJSONValue reports whether b is exactly one JSON value (white space around it allowed).
func validJSONValue(b []byte) bool {
	_, err := parseJSONValue(b)
	return err == nil
}

// parseJSONValue parses b, exactly one JSON value of any kind (white space around it allowed),
// as parseJSONObject parses a document.
func parseJSONValue(b []byte) (ast.Value, error) {
	p := jsonParser{s: string(b)}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.errorf("invalid character %q after top-level value", p.s[p.pos])
	}
	return v, nil
}
