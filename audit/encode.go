// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"strconv"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// appendJSON appends r's JSON encoding to b: byte for byte what json.Marshal
// writes for a Record (TestAppendJSONMatchesMarshal, FuzzAppendJSON), without
// its reflection, since two records are written for every request.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = appendField(b, "time", r.Time, false)
	b = appendField(b, "kind", string(r.Kind), false)
	b = appendField(b, "segment", r.Segment, true)
	b = appendField(b, "prevSegment", r.PrevSegment, true)
	b = appendField(b, "keyId", r.KeyID, true)
	b = appendField(b, "macKeyId", r.MACKeyID, true)
	b = appendField(b, "server", r.Server, true)
	b = appendField(b, "protocolVersion", r.ProtocolVersion, true)
	b = appendField(b, "transport", r.Transport, true)
	b = appendField(b, "sessionId", r.SessionID, true)
	b = appendField(b, "decisionId", r.DecisionID, true)
	b = appendField(b, "method", r.Method, true)
	b = appendField(b, "operation", r.Operation, true)
	b = appendField(b, "tool", r.Tool, true)
	b = appendField(b, "argsDigest", r.ArgsDigest, true)
	b = appendStrings(b, "paths", r.Paths)
	if r.Allow != nil {
		b = append(b, `,"allow":`...)
		b = strconv.AppendBool(b, *r.Allow)
	}
	b = appendField(b, "code", r.Code, true)
	b = appendStrings(b, "reasons", r.Reasons)
	b = appendField(b, "policyRevision", r.PolicyRevision, true)
	b = appendInt(b, "latencyUs", r.LatencyUs)
	b = appendField(b, "outcome", r.Outcome, true)
	b = appendInt(b, "bytes", r.Bytes)
	b = appendInt(b, "durationUs", r.DurationUs)
	b = appendInt(b, "errno", int64(r.Errno))
	b = appendField(b, "detail", r.Detail, true)
	if len(r.Removed) > 0 {
		b = append(b, `,"removed":[`...)
		for i, s := range r.Removed {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"segment":`...)
			b = jsonx.AppendString(b, s.Segment)
			b = append(b, `,"lastSeq":`...)
			b = strconv.AppendUint(b, s.LastSeq, 10)
			b = append(b, `,"lastMac":`...)
			b = jsonx.AppendString(b, s.LastMAC)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendField(b, "prev", r.Prev, false)
	b = appendField(b, "mac", r.Mac, true)
	return append(b, '}')
}

// appendField appends ,"name":"value", or nothing for an empty value when
// omitEmpty.
func appendField(b []byte, name, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	return jsonx.AppendStringMember(b, name, value)
}

// appendInt appends ,"name":n, or nothing for 0 (omitempty).
func appendInt(b []byte, name string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(jsonx.AppendName(b, name), n, 10)
}

// appendStrings appends ,"name":[...], or nothing for no strings
// (omitempty).
func appendStrings(b []byte, name string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(jsonx.AppendName(b, name), '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonx.AppendString(b, s)
	}
	return append(b, ']')
}
