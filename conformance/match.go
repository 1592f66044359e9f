// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The fill pattern: a file of size N in a fixture, and ${fill:N}, hold the first N bytes of
// this line repeated.
const fillPattern = "abcdefghijklmnopqrstuvwxyz0123456789\n"

// fill returns n bytes of the fill pattern.
func fill(n int) string {
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		rest := n - b.Len()
		if rest >= len(fillPattern) {
			b.WriteString(fillPattern)
		} else {
			b.WriteString(fillPattern[:rest])
		}
	}
	return b.String()
}

// vars holds what ${...} references resolve to: fixed names (area, state) and what named steps
// captured.
type vars struct {
	fixed    map[string]string
	captured map[string]any
}

func newVars() *vars {
	return &vars{fixed: map[string]string{}, captured: map[string]any{}}
}

// maxExpand bounds what one ${fill:N} or ${repeat:N:...} may produce (64 MiB).
const maxExpand = 64 << 20

// expand resolves every ${...} in s. A string that is exactly one reference to a captured
// non-string value (${r1.result.size}) becomes that value. "$${" stands for a literal "${".
func (v *vars) expand(s string) (any, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	if strings.HasPrefix(s, "${") && strings.Index(s, "}") == len(s)-1 && !strings.Contains(s[2:], "${") {
		return v.resolve(s[2 : len(s)-1])
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i])
			b.WriteString("{")
			s = s[i+2:]
			continue
		}
		j := strings.Index(s[i:], "}")
		if j < 0 {
			return nil, fmt.Errorf("unterminated ${ in %.80q", s)
		}
		b.WriteString(s[:i])
		val, err := v.resolve(s[i+2 : i+j])
		if err != nil {
			return nil, err
		}
		switch x := val.(type) {
		case string:
			b.WriteString(x)
		default:
			js, _ := json.Marshal(x)
			b.Write(js)
		}
		s = s[i+j+1:]
	}
}

// resolve evaluates one reference: area, state, fill:N, repeat:N:TEXT, b64:TEXT, b64fill:N,
// or step.path.to.value.
func (v *vars) resolve(ref string) (any, error) {
	if val, ok := v.fixed[ref]; ok {
		return val, nil
	}
	fn, arg, hasArg := strings.Cut(ref, ":")
	if hasArg {
		switch fn {
		case "fill", "b64fill":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > maxExpand {
				return nil, fmt.Errorf("${%s}: bad size", ref)
			}
			if fn == "b64fill" {
				return base64.StdEncoding.EncodeToString([]byte(fill(n))), nil
			}
			return fill(n), nil
		case "repeat":
			ns, text, _ := strings.Cut(arg, ":")
			n, err := strconv.Atoi(ns)
			if err != nil || n < 0 || n*len(text) > maxExpand {
				return nil, fmt.Errorf("${%s}: bad count", ref)
			}
			return strings.Repeat(text, n), nil
		case "b64":
			return base64.StdEncoding.EncodeToString([]byte(arg)), nil
		}
		return nil, fmt.Errorf("${%s}: unknown function %q", ref, fn)
	}
	parts := strings.Split(ref, ".")
	cur, ok := v.captured[parts[0]]
	if !ok {
		return nil, fmt.Errorf("${%s}: nothing captured as %q", ref, parts[0])
	}
	for _, p := range parts[1:] {
		switch x := cur.(type) {
		case map[string]any:
			if cur, ok = x[p]; !ok {
				return nil, fmt.Errorf("${%s}: no %q", ref, p)
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("${%s}: no index %q", ref, p)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("${%s}: %q is not inside an object or array", ref, p)
		}
	}
	return cur, nil
}

// subst returns a deep copy of x (a decoded JSON value) with every string expanded.
func (v *vars) subst(x any) (any, error) {
	switch t := x.(type) {
	case string:
		return v.expand(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ke, err := v.expand(k)
			if err != nil {
				return nil, err
			}
			ks, ok := ke.(string)
			if !ok {
				return nil, fmt.Errorf("key %q does not expand to a string", k)
			}
			if out[ks], err = v.subst(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			var err error
			if out[i], err = v.subst(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return x, nil
}

// str expands s and requires a string result.
func (v *vars) str(s string) (string, error) {
	x, err := v.expand(s)
	if err != nil {
		return "", err
	}
	if str, ok := x.(string); ok {
		return str, nil
	}
	js, _ := json.Marshal(x)
	return string(js), nil
}

// decodeJSON decodes b keeping numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return x, nil
}

// operators are the matcher's $-keys.
var operators = []string{"$regex", "$absent", "$any", "$type", "$exact", "$not", "$contains",
	"$len", "$gt", "$gte", "$lt", "$lte", "$anyOf"}

// operator returns the operator and its argument when want is a one-key $-object.
func operator(want any) (string, any, bool) {
	m, ok := want.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, false
	}
	for k, a := range m {
		if strings.HasPrefix(k, "$") {
			return k, a, true
		}
	}
	return "", nil, false
}

// Match reports how got (a decoded JSON value) differs from the matcher want, one line per
// difference, each naming the JSON pointer at which it was found (at is the pointer of got).
// Objects match as subsets (every key of want must match; got may hold more), arrays element by
// element with equal lengths, numbers by value, and a one-key object whose key starts with "$" is
// an operator: $regex (a Go regular expression a string must match), $absent (the key must be
// missing), $any (present, any value), $type (string, number, integer, boolean, object, array,
// null), $exact (equal, with no extra keys anywhere), $not (the matcher must fail), $contains
// (every listed matcher matches some element of an array), $len (length of an array, string or
// object), $gt/$gte/$lt/$lte (numbers), $anyOf (one of the listed matchers matches).
func Match(want, got any, at string) []string {
	var diffs []string
	match(want, got, at, &diffs)
	return diffs
}

func match(want, got any, at string, diffs *[]string) {
	add := func(format string, args ...any) {
		where := at
		if where == "" {
			where = "/"
		}
		*diffs = append(*diffs, where+": "+fmt.Sprintf(format, args...))
	}
	if op, arg, ok := operator(want); ok {
		matchOp(op, arg, got, at, diffs, add)
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			add("got %s, want an object matching %s", show(got), show(want))
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			wv := w[k]
			gv, present := g[k]
			op, _, isOp := operator(wv)
			switch {
			case isOp && op == "$absent":
				if present {
					add("%s is present (%s), want it absent", strconv.Quote(k), show(gv))
				}
			case !present:
				if !allowsMissing(wv) {
					add("%s is missing, want %s", strconv.Quote(k), show(wv))
				}
			default:
				match(wv, gv, at+"/"+escapePointer(k), diffs)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			add("got %s, want an array matching %s", show(got), show(want))
			return
		}
		if len(g) != len(w) {
			add("got %d elements %s, want %d matching %s", len(g), show(got), len(w), show(want))
			return
		}
		for i := range w {
			match(w[i], g[i], at+"/"+strconv.Itoa(i), diffs)
		}
	default:
		if !scalarEqual(want, got) {
			add("got %s, want %s", show(got), show(want))
		}
	}
}

// allowsMissing reports whether a matcher accepts a missing key: $absent, an $anyOf with such
// an alternative, or a $not of a matcher that does not.
func allowsMissing(want any) bool {
	op, arg, ok := operator(want)
	if !ok {
		return false
	}
	switch op {
	case "$absent":
		return true
	case "$anyOf":
		alts, _ := arg.([]any)
		return slices.ContainsFunc(alts, allowsMissing)
	case "$not":
		return !allowsMissing(arg)
	}
	return false
}

func matchOp(op string, arg, got any, at string, diffs *[]string, add func(string, ...any)) {
	switch op {
	case "$any":
	case "$absent":
		add("present (%s), want it absent", show(got))
	case "$regex":
		pat, _ := arg.(string)
		re, err := regexp.Compile(pat)
		if err != nil {
			add("bad $regex %q: %v", pat, err)
			return
		}
		s, ok := got.(string)
		if !ok || !re.MatchString(s) {
			add("got %s, want a string matching /%s/", show(got), pat)
		}
	case "$type":
		want, _ := arg.(string)
		if typeOf(got) != want && (want != "number" || typeOf(got) != "integer") {
			add("got %s (%s), want a %s", show(got), typeOf(got), want)
		}
	case "$exact":
		if !exactEqual(arg, got) {
			add("got %s, want exactly %s", show(got), show(arg))
		}
	case "$not":
		if len(Match(arg, got, at)) == 0 {
			add("got %s, which matches %s, want it not to", show(got), show(arg))
		}
	case "$contains":
		items, _ := arg.([]any)
		g, ok := got.([]any)
		if !ok {
			add("got %s, want an array", show(got))
			return
		}
		for _, it := range items {
			if !slices.ContainsFunc(g, func(e any) bool { return len(Match(it, e, "")) == 0 }) {
				add("no element matches %s in %s", show(it), show(got))
			}
		}
	case "$len":
		n := -1
		switch g := got.(type) {
		case []any:
			n = len(g)
		case string:
			n = len(g)
		case map[string]any:
			n = len(g)
		}
		if !scalarEqual(arg, json.Number(strconv.Itoa(n))) {
			add("got length %d (%s), want %s", n, show(got), show(arg))
		}
	case "$gt", "$gte", "$lt", "$lte":
		a, okA := number(arg)
		g, okG := number(got)
		if !okA || !okG {
			add("got %s, want a number %s %s", show(got), op[1:], show(arg))
			return
		}
		c := g.Cmp(a)
		ok := map[string]bool{"$gt": c > 0, "$gte": c >= 0, "$lt": c < 0, "$lte": c <= 0}[op]
		if !ok {
			add("got %s, want %s %s", show(got), op[1:], show(arg))
		}
	case "$anyOf":
		alts, _ := arg.([]any)
		if !slices.ContainsFunc(alts, func(a any) bool { return len(Match(a, got, at)) == 0 }) {
			add("got %s, want one of %s", show(got), show(arg))
		}
	default:
		add("unknown operator %s", op)
	}
}

// typeOf names a decoded JSON value's type; numbers without a fraction are "integer".
func typeOf(x any) string {
	switch t := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if f, ok := number(t); ok && f.IsInt() {
			return "integer"
		}
		return "number"
	case float64, int, int64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}

// number reads a JSON number (json.Number, float64 or int) exactly.
func number(x any) (*big.Float, bool) {
	var s string
	switch t := x.(type) {
	case json.Number:
		s = t.String()
	case float64:
		return big.NewFloat(t), true
	case int:
		return big.NewFloat(float64(t)), true
	case int64:
		return big.NewFloat(float64(t)), true
	default:
		return nil, false
	}
	f, _, err := big.ParseFloat(s, 10, 256, big.ToNearestEven)
	return f, err == nil
}

// scalarEqual compares two scalars; numbers by value.
func scalarEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa.Cmp(fb) == 0
	}
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// exactEqual compares two JSON values with no subset rule.
func exactEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !exactEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !exactEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return scalarEqual(a, b)
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// show renders a value for a message, cut at 300 bytes.
func show(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprintf("%v", x)
	}
	return clip(string(b), 300)
}

// clip cuts s to n bytes, saying how much was left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...(%d more bytes)", s[:n], len(s)-n)
}
