// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonx

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index just past the JSON string starting at i: up
// to the first quote preceded by an even number of backslashes (a backslash
// escapes the byte after it; \uXXXX's hex digits are plain bytes). ok is
// false when there is no string at i or it does not end. Nothing else about
// the string is checked.
func SkipString(b []byte, i int) (end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for from := i + 1; ; {
		j := bytes.IndexByte(b[from:], '"')
		if j < 0 {
			return 0, false
		}
		q := from + j
		backslashes := 0
		for k := q - 1; k > i && b[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1, true
		}
		from = q + 1
	}
}

// SkipValue returns the index just past the JSON value starting at i: a
// string; an object or array with everything in it (its brackets counted,
// strings skipped, nothing else checked); or a number, true, false or null,
// taken to be the bytes up to the next separator or white space. ok is false
// when no value starts at i or it does not end.
func SkipValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := SkipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
			b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i, i > start
	}
}

// Unquote returns the value of the JSON string quoted (its quotes included),
// as encoding/json decodes it: the bytes between the quotes when they hold
// no escape, control character or invalid UTF-8, else what json.Unmarshal
// makes of it. ok is false when quoted is not a valid JSON string.
func Unquote(quoted []byte) (s string, ok bool) {
	inner, quotes, plain := plainInner(quoted)
	switch {
	case !quotes:
		return "", false
	case plain:
		return string(inner), true
	}
	return s, json.Unmarshal(quoted, &s) == nil
}

// UnquoteBytes is Unquote that returns the value as bytes: the bytes
// between the quotes themselves when they hold no escape, control character
// or invalid UTF-8 (nothing is allocated: a member name compared with
// switch string(name) costs no copy), else a decoded copy.
func UnquoteBytes(quoted []byte) (b []byte, ok bool) {
	inner, quotes, plain := plainInner(quoted)
	switch {
	case !quotes:
		return nil, false
	case plain:
		return inner, true
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// plainInner returns the bytes between the quotes of quoted, whether it
// starts and ends with a quote, and whether those bytes are the string's
// value as they stand (no escape, control character, inner quote or invalid
// UTF-8).
func plainInner(quoted []byte) (inner []byte, quotes, plain bool) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return nil, false, false
	}
	inner = quoted[1 : len(quoted)-1]
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return inner, true, false
		}
	}
	return inner, true, utf8.Valid(inner)
}

// Member is one member of a JSON object as it stands in the scanned
// document: its name (quotes and escapes included: Unquote decodes it), its
// value's text, and where they are.
type Member struct {
	Name       []byte // the quoted name, as written
	Value      []byte // the value's text, without the white space around it
	Start      int    // the index of the name's opening quote
	ValueStart int    // the index of the value's first byte
	End        int    // the index just past the value
}

// ObjectScanner steps through the members of a JSON object, top level only,
// without decoding anything: names are left quoted and a value is only
// skipped over (SkipValue), so a megabyte of content costs a search for
// quotes. It checks the object's structure (a brace, then names, colons,
// values and commas, then a brace), not its every value: callers validate
// the text first, parse what they rely on, or fall back to a full decoder
// when the scan fails. What follows the closing brace is not looked at (see
// End).
type ObjectScanner struct {
	doc    []byte
	pos    int // where the next member, or the end, is looked for
	state  scanState
	member Member
	end    int
}

// scanState is how far an ObjectScanner got.
type scanState uint8

const (
	scanStart   scanState = iota // nothing read
	scanMembers                  // inside the object, after a member
	scanClosed                   // past the closing brace
	scanFailed                   // stopped at text it cannot follow
)

// ScanObject returns a scanner of the object at the start of doc (white
// space before it allowed).
func ScanObject(doc []byte) ObjectScanner {
	return ObjectScanner{doc: doc}
}

// Next advances to the next member and reports whether there is one: false
// past the last member, and when the text is not an object the scan can
// follow (End tells which).
func (s *ObjectScanner) Next() bool {
	b := s.doc
	switch s.state {
	case scanStart:
		i := SkipSpace(b, 0)
		if i >= len(b) || b[i] != '{' {
			return s.fail()
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			s.end, s.state = i+1, scanClosed
			return false
		}
		s.pos = i
	case scanMembers:
		i := SkipSpace(b, s.pos)
		switch {
		case i >= len(b):
			return s.fail()
		case b[i] == '}':
			s.end, s.state = i+1, scanClosed
			return false
		case b[i] != ',':
			return s.fail()
		}
		s.pos = SkipSpace(b, i+1)
	default:
		return false
	}
	start := s.pos
	nameEnd, ok := SkipString(b, start)
	if !ok {
		return s.fail()
	}
	colon := SkipSpace(b, nameEnd)
	if colon >= len(b) || b[colon] != ':' {
		return s.fail()
	}
	valueStart := SkipSpace(b, colon+1)
	end, ok := SkipValue(b, valueStart)
	if !ok {
		return s.fail()
	}
	s.member = Member{Name: b[start:nameEnd], Value: b[valueStart:end], Start: start, ValueStart: valueStart, End: end}
	s.pos, s.state = end, scanMembers
	return true
}

// fail stops the scan at text it cannot follow.
func (s *ObjectScanner) fail() bool {
	s.state = scanFailed
	return false
}

// Member is the member Next advanced to.
func (s *ObjectScanner) Member() Member { return s.member }

// End returns the index just past the object's closing brace; ok is false
// until Next has returned false at that brace, so false after Next has
// stopped at text the scan cannot follow. A caller that wants nothing but
// white space after the object checks SkipSpace(doc, end) == len(doc).
func (s *ObjectScanner) End() (end int, ok bool) {
	return s.end, s.state == scanClosed
}
