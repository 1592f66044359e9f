// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"encoding/base64"
	"strconv"

	"github.com/fsbroker/fsbroker/internal/jsonx"
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
		b = jsonx.AppendString(b, r.data)
	}
	b = append(b, `,"encoding":`...)
	b = jsonx.AppendString(b, r.encoding)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.size, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.offset, 10)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, int64(len(r.data)), 10)
	b = append(b, `,"eof":`...)
	b = strconv.AppendBool(b, r.eof)
	b = append(b, `,"mimeType":`...)
	b = jsonx.AppendString(b, r.mimeType)
	b = append(b, `,"etag":`...)
	b = jsonx.AppendString(b, r.etag)
	return append(b, '}')
}

// MarshalJSON encodes the reply as AppendJSON does, for any encoder other
// than the connection's.
func (r *readReply) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }
