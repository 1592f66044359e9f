package broker

import "encoding/json"

// withoutMember returns the JSON object raw without its members named key
// (compared after unescaping, so "cont\u0065nt" is "content"), by scanning
// rather than decoding: a skipped value is never unescaped or copied. ok is
// false when raw is not an object the scan can follow; the caller then
// decodes raw whole.
func withoutMember(raw []byte, key string) (rest []byte, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	out := make([]byte, 0, 256)
	out = append(out, '{')
	i++
	first := true
	for {
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == '}' {
			return append(out, '}'), true
		}
		if !first {
			if i >= len(raw) || raw[i] != ',' {
				return nil, false
			}
			i = skipSpace(raw, i+1)
		}
		keyStart := i
		keyEnd, ok := skipString(raw, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		valEnd, ok := skipValue(raw, skipSpace(raw, i+1))
		if !ok {
			return nil, false
		}
		var name string
		if err := json.Unmarshal(raw[keyStart:keyEnd], &name); err != nil {
			return nil, false
		}
		if name != key {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, raw[keyStart:valEnd]...)
		}
		i, first = valEnd, false
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) (int, bool) {
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

// skipValue returns the index just past the JSON value starting at i.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
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
