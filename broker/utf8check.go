// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/fsbroker/fsbroker/broker/errcode"
)

// pathMembers are the params members that hold paths.
var pathMembers = map[string]bool{"path": true, "oldPath": true, "newPath": true, "requestedPaths": true}

// checkText refuses params whose strings are not valid Unicode text: invalid
// UTF-8 bytes, or a \u escape of an unpaired UTF-16 surrogate. Go's JSON
// decoder would turn either into U+FFFD without a word, so a path with a bad
// byte would name another file (docs/protocol.md section 3: INVALID_PATH) and
// content would be changed. A path member gets INVALID_PATH, any other
// INVALID_PARAMS. Well-formed params (the usual case) cost one scan.
func checkText(params json.RawMessage) error {
	if textOK(params) {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(params, &members) == nil {
		for name, raw := range members {
			if textOK(raw) {
				continue
			}
			if pathMembers[name] {
				return errcode.New(errcode.InvalidPath, "a path is not valid UTF-8 text")
			}
			return errcode.New(errcode.InvalidParams, "params hold text that is not valid UTF-8").
				With("errors", []map[string]string{{"pointer": "/" + name, "message": "not valid UTF-8 text"}})
		}
	}
	return errcode.New(errcode.InvalidParams, "params hold text that is not valid UTF-8").
		With("errors", []map[string]string{{"pointer": "", "message": "not valid UTF-8 text"}})
}

// textOK reports whether raw JSON holds only valid UTF-8 and no \u escape of an unpaired
// surrogate.
func textOK(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		i++ // the escaped character
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			continue // malformed: the JSON decoder refuses it
		}
		i += 4
		switch {
		case r >= 0xD800 && r <= 0xDBFF: // a high surrogate must be followed by a low one
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
					continue
				}
			}
			return false
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		}
	}
	return true
}

// hex4 parses the four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
