// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonx

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// jsonSafe tells the ASCII bytes a JSON string holds as they are, with the
// escaping encoding/json does by default: not the quote, the backslash,
// control characters, nor <, > and & (HTML).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string, escaped exactly as encoding/json
// escapes a Go string (so that what a hand-written encoder writes is
// byte for byte what json.Marshal would): HTML characters as \u003c and the
// like, invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped as well.
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		// A window of at most 4 bytes: converting it to a string costs no
		// allocation (the compiler uses a stack buffer).
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendName appends the start of an object member that follows another:
// a comma, name quoted, and a colon. name is written as it is: it must be
// a string that needs no escaping (the callers' are Go constants).
func AppendName(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// AppendStringMember appends the member ,"name":value, value escaped as
// AppendString does.
func AppendStringMember(b []byte, name, value string) []byte {
	return AppendString(AppendName(b, name), value)
}

// AppendRawMessage appends raw as json.Marshal writes a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped. raw must be valid
// JSON; else the error is json.Compact's.
func AppendRawMessage(b []byte, raw json.RawMessage) ([]byte, error) {
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	b = buf.Bytes()
	if !bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		return b, nil
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, b[start:])
	return append(b[:start], escaped.Bytes()...), nil
}
