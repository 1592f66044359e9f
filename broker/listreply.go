// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package broker

import (
	"strconv"
	"time"

	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// listReply is the result of files/list. It encodes the corridor's entries
// itself (AppendJSON), in one pass and without a second slice of them; the
// bytes are those json.Marshal writes for the same fields
// (TestListReplyMatchesEncodingJSON): per entry its path, name, type, size
// and modification time (RFC 3339, UTC), then the next page's cursor when
// there is one.
type listReply struct {
	entries    []corridor.ListEntry
	nextCursor string
}

// AppendJSON implements jsonrpc.ResultAppender.
func (r *listReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"entries":[`...)
	for i, e := range r.entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"path":`...)
		b = jsonx.AppendString(b, e.Path)
		b = jsonx.AppendStringMember(b, "name", e.Name)
		b = jsonx.AppendStringMember(b, "type", e.Type)
		b = jsonx.AppendName(b, "size")
		b = strconv.AppendInt(b, e.Size, 10)
		// A time in RFC 3339 holds nothing a JSON string escapes.
		b = append(jsonx.AppendName(b, "modified"), '"')
		b = e.Modified.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	b = append(b, ']')
	if r.nextCursor != "" {
		b = jsonx.AppendStringMember(b, "nextCursor", r.nextCursor)
	}
	return append(b, '}')
}

// MarshalJSON encodes the reply as AppendJSON does, for any encoder other
// than the connection's.
func (r *listReply) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }
