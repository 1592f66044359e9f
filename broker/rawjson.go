package broker

import "github.com/fsbroker/fsbroker/broker/internal/jsonscan"

// withoutMember returns the JSON object raw without its members named key
// (compared after unescaping, so "cont\u0065nt" is "content"), by scanning
// rather than decoding: a skipped value is never unescaped or copied. ok is
// false when raw is not an object the scan can follow; the caller then
// decodes raw whole.
func withoutMember(raw []byte, key string) (rest []byte, ok bool) {
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	out := make([]byte, 0, 256)
	out = append(out, '{')
	i++
	first := true
	for {
		i = jsonscan.SkipSpace(raw, i)
		if i < len(raw) && raw[i] == '}' {
			return append(out, '}'), true
		}
		if !first {
			if i >= len(raw) || raw[i] != ',' {
				return nil, false
			}
			i = jsonscan.SkipSpace(raw, i+1)
		}
		keyStart := i
		keyEnd, ok := jsonscan.SkipString(raw, i)
		if !ok {
			return nil, false
		}
		i = jsonscan.SkipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		valEnd, ok := jsonscan.SkipValue(raw, jsonscan.SkipSpace(raw, i+1))
		if !ok {
			return nil, false
		}
		name, ok := jsonscan.Unquote(raw[keyStart:keyEnd])
		if !ok {
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
