// Package jsonscan steps over JSON text without decoding it: whitespace, a
// string, a whole value. It checks only what it needs to find where each
// ends, so callers either validate the text first or fall back to a full
// decoder when a scan fails.
package jsonscan

import (
	"bytes"
	"encoding/json"
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index just past the JSON string starting at i.
func SkipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's hex digits are plain bytes
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// SkipValue returns the index just past the JSON value starting at i.
func SkipValue(b []byte, i int) (int, bool) {
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
	default: // a number, true, false or null
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
			b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i, i > start
	}
}

// Unquote returns the value of the JSON string quoted (its quotes included):
// the bytes between the quotes when there is no escape, else what
// encoding/json decodes. ok is false when quoted is not a valid string.
func Unquote(quoted []byte) (s string, ok bool) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1]), true
	}
	return s, json.Unmarshal(quoted, &s) == nil
}
