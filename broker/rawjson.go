package broker

import "github.com/fsbroker/fsbroker/internal/jsonx"

// withoutMember returns the JSON object raw without its members named key
// (compared after unescaping, so "cont\u0065nt" is "content"), by scanning
// rather than decoding: a skipped value is never unescaped or copied. ok is
// false when raw is not an object the scan can follow; the caller then
// decodes raw whole.
func withoutMember(raw []byte, key string) (rest []byte, ok bool) {
	out := make([]byte, 0, 256)
	out = append(out, '{')
	s := jsonx.ScanObject(raw)
	for s.Next() {
		m := s.Member()
		name, ok := jsonx.Unquote(m.Name)
		if !ok {
			return nil, false
		}
		if name != key {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, raw[m.Start:m.End]...)
		}
	}
	if _, ok := s.End(); !ok {
		return nil, false
	}
	return append(out, '}'), true
}
