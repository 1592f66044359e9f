package broker

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// readReply is the result of files/read. It encodes itself (AppendJSON) so
// that the content goes from the bytes read straight into the reply, once,
// without a string copy or encoding/json's reflection; the bytes are those
// json.Marshal would write for the same fields (TestReadReplyMatchesEncodingJSON).
type readReply struct {
	data     []byte // the content, raw; encoded as encoding says
	encoding string // "utf-8" or "base64"
	size     int64
	offset   int64
	eof      bool
	mimeType string
	etag     string
}

// AppendJSON implements jsonrpc.ResultAppender.
func (r *readReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"content":`...)
	if r.encoding == "base64" {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, r.data)
		b = append(b, '"')
	} else {
		b = appendJSONString(b, r.data)
	}
	b = append(b, `,"encoding":`...)
	b = appendJSONString(b, []byte(r.encoding))
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.size, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.offset, 10)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, int64(len(r.data)), 10)
	b = append(b, `,"eof":`...)
	b = strconv.AppendBool(b, r.eof)
	b = append(b, `,"mimeType":`...)
	b = appendJSONString(b, []byte(r.mimeType))
	b = append(b, `,"etag":`...)
	b = appendJSONString(b, []byte(r.etag))
	return append(b, '}')
}

// MarshalJSON encodes the reply as AppendJSON does, for any encoder other
// than the connection's.
func (r *readReply) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// jsonSafe tells the ASCII bytes a JSON string holds as they are, with the
// escaping encoding/json does by default: not the quote, the backslash,
// control characters, nor <, > and & (HTML).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes a Go string: invalid UTF-8 becomes U+FFFD, and
// U+2028 and U+2029 are escaped as well.
func appendJSONString(b, s []byte) []byte {
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
		r, size := utf8.DecodeRune(s[i:])
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
