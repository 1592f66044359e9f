// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"regexp"
	"strconv"
	"strings"
)

// This file matches paths against glob patterns as minimatch 10.2.6 does
// with the options the reference uses ({dot: true}, POSIX): a leading '#'
// is a comment (matches nothing), "" matches only "", leading '!'s negate,
// braces expand ({a,b}, {1..3}), '/' splits segments (runs of '/' are one),
// "**" as a whole segment matches any number of segments, and within a
// segment '*', '?', bracket classes (ranges, '!'/'^' negation, POSIX
// classes such as [:upper:]), backslash escapes and the extglobs +(a|b),
// *(a|b), ?(a|b) and @(a|b). The segment matching is compiled to Go regular
// expressions, which cannot express the negative extglob !(a|b): a segment
// holding one matches nothing (minimatch would match what the alternatives
// do not). No Go glob library has minimatch's semantics (doublestar has no
// negation, comments, extglobs or POSIX classes, and treats a trailing '/'
// and "**" differently), so this follows minimatch's own structure.

// globSegment is one compiled pattern segment: a globstar, a literal, or a
// regular expression.
type globSegment struct {
	globstar bool
	literal  string
	re       *regexp.Regexp
	never    bool // a segment that can match nothing (an invalid class, a !() extglob)
}

// Match reports whether path (a relative path, '/'-separated) matches
// pattern with minimatch's semantics and {dot: true}.
func Match(path, pattern string) bool {
	if strings.HasPrefix(pattern, "#") {
		return false
	}
	if pattern == "" {
		return path == ""
	}
	negate := false
	for strings.HasPrefix(pattern, "!") {
		negate = !negate
		pattern = pattern[1:]
	}
	file := splitSlashes(path)
	seen := map[string]bool{}
	for _, expanded := range expandBraces(pattern) {
		if seen[expanded] {
			continue
		}
		seen[expanded] = true
		segments := compileGlob(levelOneOptimize(splitSlashes(expanded)))
		if segments == nil {
			continue
		}
		if matchSegments(file, segments) {
			return !negate
		}
	}
	return negate
}

// splitSlashes is minimatch's slashSplit, JavaScript's p.split(/\/+/):
// "a//b" is ["a" "b"], "/a" is ["" "a"], "a/" is ["a" ""].
func splitSlashes(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		out = append(out, p[start:i])
		for i+1 < len(p) && p[i+1] == '/' {
			i++
		}
		start = i + 1
	}
	return append(out, p[start:])
}

// levelOneOptimize is minimatch's default pattern optimization: adjacent
// "**" become one, and "x/.." is removed (x not "..", "." or "**").
func levelOneOptimize(parts []string) []string {
	var set []string
	for _, part := range parts {
		var prev string
		if len(set) > 0 {
			prev = set[len(set)-1]
		}
		if part == "**" && prev == "**" {
			continue
		}
		if part == ".." && len(set) > 0 && prev != ".." && prev != "." && prev != "**" {
			set = set[:len(set)-1]
			continue
		}
		set = append(set, part)
	}
	if len(set) == 0 {
		return []string{""}
	}
	return set
}

// compileGlob compiles each segment; nil when one can never match (minimatch
// drops such a pattern from its set).
func compileGlob(parts []string) []globSegment {
	segments := make([]globSegment, len(parts))
	for n, part := range parts {
		segments[n] = compileSegment(part)
		if segments[n].never {
			return nil
		}
	}
	return segments
}

// compileSegment compiles one segment (minimatch's parse).
func compileSegment(part string) globSegment {
	if part == "**" {
		return globSegment{globstar: true}
	}
	if part == "" {
		return globSegment{}
	}
	src, magic, ok := segmentRegexp(part)
	if !ok {
		return globSegment{never: true}
	}
	if !magic {
		return globSegment{literal: unescapeGlob(part)}
	}
	re, err := regexp.Compile("^(?:" + src + ")$")
	if err != nil {
		return globSegment{never: true}
	}
	return globSegment{re: re}
}

// unescapeGlob removes the backslash escapes of a pattern without magic.
func unescapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// matches reports whether one file segment matches a non-globstar segment.
// With {dot: true} a magic segment never matches "." or "..".
func (s globSegment) matches(f string) bool {
	if s.re == nil {
		return f == s.literal
	}
	if f == "." || f == ".." {
		return false
	}
	return s.re.MatchString(f)
}

// segmentRegexp translates a segment into regular-expression source. magic
// is false when the segment is a plain string (after unescaping); ok is
// false when it can match nothing.
func segmentRegexp(part string) (src string, magic, ok bool) {
	var b strings.Builder
	runes := []rune(part)
	for i := 0; i < len(runes); i++ {
		c := runes[i]
		switch {
		case c == '\\':
			if i+1 < len(runes) {
				i++
				b.WriteString(regexp.QuoteMeta(string(runes[i])))
			} else {
				b.WriteString(`\\`)
			}
		case strings.ContainsRune("+@!*?", c) && i+1 < len(runes) && runes[i+1] == '(' && extglobClosed(runes, i+1):
			end, alternatives := extglobAlternatives(runes, i+1)
			if c == '!' {
				return "", true, false
			}
			var alts []string
			for _, alt := range alternatives {
				s, _, altOK := segmentRegexp(alt)
				if !altOK {
					return "", true, false
				}
				alts = append(alts, s)
			}
			group := "(?:" + strings.Join(alts, "|") + ")"
			switch c {
			case '+':
				group += "+"
			case '*':
				group += "*"
			case '?':
				group += "?"
			}
			b.WriteString(group)
			magic = true
			i = end
		case c == '*':
			for i+1 < len(runes) && runes[i+1] == '*' {
				i++
			}
			b.WriteString(`[^/]*`)
			magic = true
		case c == '?':
			b.WriteString(`[^/]`)
			magic = true
		case c == '[':
			class, consumed, classMagic := globClass(runes, i)
			if consumed == 0 {
				b.WriteString(`\[`)
				continue
			}
			if class == "" {
				return "", true, false
			}
			b.WriteString(class)
			magic = magic || classMagic
			i += consumed - 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if strings.Trim(part, "*") == "" {
		// minimatch's fast test for a segment of stars: any non-empty name.
		return `[^/]+`, true, true
	}
	return b.String(), magic, true
}

// extglobClosed reports whether the '(' at open has its ')'.
func extglobClosed(runes []rune, open int) bool {
	end, _ := extglobAlternatives(runes, open)
	return end >= 0
}

// extglobAlternatives finds the ')' closing the '(' at open and the
// top-level '|'-separated alternatives; end is -1 when there is none.
func extglobAlternatives(runes []rune, open int) (end int, alternatives []string) {
	depth := 0
	start := open + 1
	for i := open; i < len(runes); i++ {
		switch runes[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				alternatives = append(alternatives, string(runes[start:i]))
				return i, alternatives
			}
		case '|':
			if depth == 1 {
				alternatives = append(alternatives, string(runes[start:i]))
				start = i + 1
			}
		}
	}
	return -1, nil
}

// posixClasses are minimatch's POSIX bracket classes as Go class items; the
// bool marks the negated one ([:graph:] is "not Z and not C").
var posixClasses = []struct {
	name    string
	items   string
	negated bool
}{
	{"[:alnum:]", `\p{L}\p{Nl}\p{Nd}`, false},
	{"[:alpha:]", `\p{L}\p{Nl}`, false},
	{"[:ascii:]", `\x00-\x7f`, false},
	{"[:blank:]", `\p{Zs}\t`, false},
	{"[:cntrl:]", `\p{Cc}`, false},
	{"[:digit:]", `\p{Nd}`, false},
	{"[:graph:]", `\p{Z}\p{C}`, true},
	{"[:lower:]", `\p{Ll}`, false},
	{"[:print:]", `\p{C}`, false},
	{"[:punct:]", `\p{P}`, false},
	{"[:space:]", `\p{Z}\t\r\n\v\f`, false},
	{"[:upper:]", `\p{Lu}`, false},
	{"[:word:]", `\p{L}\p{Nl}\p{Nd}\p{Pc}`, false},
	{"[:xdigit:]", `A-Fa-f0-9`, false},
}

// globClass is minimatch's parseClass for the '[' at pos: the regular
// expression of the class, the runes it consumed (0: not a class, '[' is
// literal) and whether it is magic (a lone literal character is not). An
// empty expression with consumed > 0 is a class that matches nothing.
func globClass(runes []rune, pos int) (src string, consumed int, magic bool) {
	var ranges, negs []string
	i := pos + 1
	sawStart, escaping, negate := false, false, false
	endPos := pos
	var rangeStart rune
	hasRangeStart := false
	classEscape := func(r rune) string {
		if strings.ContainsRune(`[]\-^`, r) {
			return `\` + string(r)
		}
		return regexp.QuoteMeta(string(r))
	}
scan:
	for i < len(runes) {
		c := runes[i]
		if (c == '!' || c == '^') && i == pos+1 {
			negate = true
			i++
			continue
		}
		if c == ']' && sawStart && !escaping {
			endPos = i + 1
			break
		}
		sawStart = true
		if c == '\\' && !escaping {
			escaping = true
			i++
			continue
		}
		if c == '[' && !escaping {
			rest := string(runes[i:])
			for _, pc := range posixClasses {
				if strings.HasPrefix(rest, pc.name) {
					if hasRangeStart {
						return "", len(runes) - pos, true
					}
					i += len([]rune(pc.name))
					if pc.negated {
						negs = append(negs, pc.items)
					} else {
						ranges = append(ranges, pc.items)
					}
					continue scan
				}
			}
		}
		escaping = false
		if hasRangeStart {
			if c > rangeStart {
				ranges = append(ranges, classEscape(rangeStart)+"-"+classEscape(c))
			} else if c == rangeStart {
				ranges = append(ranges, classEscape(c))
			}
			hasRangeStart = false
			i++
			continue
		}
		if i+2 < len(runes) && runes[i+1] == '-' && runes[i+2] == ']' {
			ranges = append(ranges, classEscape(c), `\-`)
			i += 2
			continue
		}
		if i+1 < len(runes) && runes[i+1] == '-' {
			rangeStart, hasRangeStart = c, true
			i += 2
			continue
		}
		ranges = append(ranges, classEscape(c))
		i++
	}
	if endPos < i {
		return "", 0, false
	}
	if len(ranges) == 0 && len(negs) == 0 {
		return "", endPos - pos, true
	}
	if len(negs) == 0 && len(ranges) == 1 && !negate && len([]rune(strings.TrimPrefix(ranges[0], `\`))) == 1 {
		return ranges[0], endPos - pos, false
	}
	sranges := "[" + map[bool]string{true: "^", false: ""}[negate] + strings.Join(ranges, "") + "]"
	snegs := "[" + map[bool]string{true: "", false: "^"}[negate] + strings.Join(negs, "") + "]"
	switch {
	case len(ranges) > 0 && len(negs) > 0:
		return "(?:" + sranges + "|" + snegs + ")", endPos - pos, true
	case len(ranges) > 0:
		return sranges, endPos - pos, true
	}
	return snegs, endPos - pos, true
}

// matchSegments is minimatch's matchOne (not partial).
func matchSegments(file []string, pattern []globSegment) bool {
	for _, s := range pattern {
		if s.globstar {
			return matchGlobstar(file, pattern)
		}
	}
	return matchPlain(file, pattern, 0)
}

// matchPlain is minimatch's #matchOne: segment by segment from fileIndex;
// a file with one more, empty, last segment (a trailing '/') also matches.
func matchPlain(file []string, pattern []globSegment, fileIndex int) bool {
	fi, pi := fileIndex, 0
	for ; fi < len(file) && pi < len(pattern); fi, pi = fi+1, pi+1 {
		if pattern[pi].globstar || !pattern[pi].matches(file[fi]) {
			return false
		}
	}
	switch {
	case fi == len(file) && pi == len(pattern):
		return true
	case fi == len(file):
		return false
	case pi == len(pattern):
		return fi == len(file)-1 && file[fi] == ""
	}
	return false
}

// matchGlobstar is minimatch's #matchGlobstar (not partial, {dot: true}).
func matchGlobstar(file []string, pattern []globSegment) bool {
	firstgs, lastgs := -1, -1
	for n, s := range pattern {
		if s.globstar {
			if firstgs < 0 {
				firstgs = n
			}
			lastgs = n
		}
	}
	head, tail := pattern[:firstgs], pattern[lastgs+1:]
	var body []globSegment
	if lastgs > firstgs {
		body = pattern[firstgs+1 : lastgs]
	}
	fileIndex := 0
	if len(head) > 0 {
		end := min(len(head), len(file))
		if !matchPlain(file[:end], head, 0) {
			return false
		}
		fileIndex += len(head)
	}
	fileTailMatch := 0
	if len(tail) > 0 {
		if len(tail)+fileIndex > len(file) {
			return false
		}
		tailStart := len(file) - len(tail)
		if matchPlain(file, tail, tailStart) {
			fileTailMatch = len(tail)
		} else {
			if file[len(file)-1] != "" || fileIndex+len(tail) == len(file) {
				return false
			}
			tailStart--
			if !matchPlain(file, tail, tailStart) {
				return false
			}
			fileTailMatch = len(tail) + 1
		}
	}
	if len(body) == 0 {
		sawSome := fileTailMatch > 0
		for i := fileIndex; i < len(file)-fileTailMatch; i++ {
			sawSome = true
			if file[i] == "." || file[i] == ".." {
				return false
			}
		}
		return sawSome
	}
	// The body split at its globstars, each section with the last file
	// index it may start at.
	type section struct {
		parts []globSegment
		after int
	}
	sections := []section{{}}
	nonGlobstar := 0
	sums := []int{0}
	for _, s := range body {
		if s.globstar {
			sums = append(sums, nonGlobstar)
			sections = append(sections, section{})
			continue
		}
		sections[len(sections)-1].parts = append(sections[len(sections)-1].parts, s)
		nonGlobstar++
	}
	fileLength := len(file) - fileTailMatch
	k := len(sections) - 1
	for n := range sections {
		sections[n].after = fileLength - (sums[k] + len(sections[n].parts))
		k--
	}
	var walk func(fileIndex, bodyIndex, depth int, sawTail bool) (matched, stop bool)
	walk = func(fileIndex, bodyIndex, depth int, sawTail bool) (bool, bool) {
		if bodyIndex == len(sections) {
			for i := fileIndex; i < len(file); i++ {
				sawTail = true
				if file[i] == "." || file[i] == ".." {
					return false, false
				}
			}
			return sawTail, !sawTail
		}
		sec := sections[bodyIndex]
		for ; fileIndex <= sec.after; fileIndex++ {
			end := min(fileIndex+len(sec.parts), len(file))
			if matchPlain(file[:end], sec.parts, fileIndex) && depth < 200 {
				matched, stop := walk(fileIndex+len(sec.parts), bodyIndex+1, depth+1, sawTail)
				if matched || stop {
					return matched, stop
				}
			}
			if fileIndex < len(file) && (file[fileIndex] == "." || file[fileIndex] == "..") {
				return false, false
			}
		}
		return false, true
	}
	matched, _ := walk(fileIndex, 0, 0, fileTailMatch > 0)
	return matched
}

// expandBraces is the brace expansion minimatch applies first (the npm
// brace-expansion package): "{a,b}" alternatives (nested, each expanded),
// "{1..3}", "{a..c}" and "{1..9..2}" sequences; a brace pair with neither a
// comma nor a sequence stays literal, as do escaped braces.
func expandBraces(pattern string) []string {
	open := -1
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			pre, body, post := pattern[:open], pattern[open+1:i], pattern[i+1:]
			var options []string
			if seq, ok := braceSequence(body); ok {
				options = seq
			} else if alts := splitTopLevelCommas(body); len(alts) > 1 {
				for _, alt := range alts {
					options = append(options, expandBraces(alt)...)
				}
			} else {
				// Not an expansion: keep "{body}" literally, expand what follows.
				var out []string
				for _, rest := range expandBraces(post) {
					for _, inner := range expandBraces(body) {
						out = append(out, pre+"{"+inner+"}"+rest)
					}
				}
				return out
			}
			var out []string
			for _, rest := range expandBraces(post) {
				for _, o := range options {
					out = append(out, pre+o+rest)
				}
			}
			return out
		}
	}
	return []string{pattern}
}

// splitTopLevelCommas splits a brace body at its commas outside nested braces.
func splitTopLevelCommas(body string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, body[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, body[start:])
}

// braceSequence expands "x..y" and "x..y..step" with numbers or single
// letters.
func braceSequence(body string) ([]string, bool) {
	parts := strings.Split(body, "..")
	if len(parts) != 2 && len(parts) != 3 {
		return nil, false
	}
	step := 1
	if len(parts) == 3 {
		s, err := strconv.Atoi(parts[2])
		if err != nil {
			return nil, false
		}
		step = max(1, absInt(s))
	}
	from, errFrom := strconv.Atoi(parts[0])
	to, errTo := strconv.Atoi(parts[1])
	letters := false
	if errFrom != nil || errTo != nil {
		if len(parts[0]) != 1 || len(parts[1]) != 1 {
			return nil, false
		}
		from, to, letters = int(parts[0][0]), int(parts[1][0]), true
	}
	var out []string
	for v := from; ; {
		if letters {
			out = append(out, string(rune(v)))
		} else {
			out = append(out, strconv.Itoa(v))
		}
		if v == to || len(out) > 10000 {
			break
		}
		if from < to {
			v += step
			if v > to {
				break
			}
		} else {
			v -= step
			if v < to {
				break
			}
		}
	}
	return out, true
}

func absInt(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
