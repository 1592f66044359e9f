// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// encodeInput encodes a policy input for the engine, and returns with it the decision cache's
// key: the encoding of every member but time, which appendInput writes last, so the key is the
// document's beginning and costs nothing to make. Two inputs with the same key differ at most
// in their time: a cached decision may answer for either (DecideCached). An input that cannot
// be encoded (params that are not JSON) is the document null, which the policy denies, with no
// key.
func encodeInput(in *decision.Input) (doc json.RawMessage, key []byte) {
	b, err := appendUntimed(make([]byte, 0, 1024+320*len(in.Entries)), in) // an entry is about 250 bytes
	if err != nil {
		return json.RawMessage("null"), nil
	}
	untimed := len(b)
	b = appendTime(b, in.Time)
	return b, b[:untimed:untimed]
}

// appendUntimed appends in's JSON encoding up to its last member, time, which appendTime then
// writes: together, byte for byte what json.Marshal writes for a decision.Input
// (TestInputEncodingMatchesMarshal), without its reflection. Every request's input is encoded,
// and a listing's batch holds an entry per listed name.
func appendUntimed(b []byte, in *decision.Input) (_ []byte, err error) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(in.Version), 10)
	b = jsonx.AppendStringMember(b, "method", in.Method)
	b = jsonx.AppendStringMember(b, "operation", in.Operation)
	b = append(b, `,"server":{"id":`...)
	b = jsonx.AppendString(b, in.Server.ID)
	b = jsonx.AppendStringMember(b, "name", in.Server.Name)
	b = jsonx.AppendStringMember(b, "version", in.Server.Version)
	b = append(b, `,"pinned":`...)
	b = strconv.AppendBool(b, in.Server.Pinned)
	b = append(b, `},"session":{"id":`...)
	b = jsonx.AppendString(b, in.Session.ID)
	b = jsonx.AppendStringMember(b, "protocolVersion", in.Session.ProtocolVersion)
	b = jsonx.AppendStringMember(b, "transport", in.Session.Transport)
	b = append(b, '}')
	if in.FrontEnd != nil {
		b = append(b, `,"frontEnd":{"name":`...)
		b = jsonx.AppendString(b, in.FrontEnd.Name)
		b = jsonx.AppendStringMember(b, "tool", in.FrontEnd.Tool)
		b = append(b, '}')
	}
	b = appendPaths(b, in)
	if len(in.Entries) > 0 {
		b = append(b, `,"entries":[`...)
		for i := range in.Entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInputPath(b, &in.Entries[i])
		}
		b = append(b, ']')
	}
	if len(in.Params) > 0 {
		b = append(b, `,"params":`...)
		if b, err = jsonx.AppendRawMessage(b, in.Params); err != nil {
			return nil, fmt.Errorf("policy input params: %w", err)
		}
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, in.Bytes, 10)
	b = append(b, `,"grants":`...)
	if in.Grants == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, g := range in.Grants {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"access":`...)
			b = jsonx.AppendString(b, g.Access)
			b = jsonx.AppendStringMember(b, "path", g.Path)
			b = jsonx.AppendStringMember(b, "granted", g.Granted)
			b = jsonx.AppendStringMember(b, "expires", g.Expires)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":{"bytesWrittenToday":`...)
	b = strconv.AppendInt(b, in.Usage.BytesWrittenToday, 10)
	b = append(b, `,"watches":`...)
	b = strconv.AppendInt(b, int64(in.Usage.Watches), 10)
	return append(b, '}'), nil
}

// appendTime appends the input's last member, time, and closes the document.
func appendTime(b []byte, t decision.InputTime) []byte {
	b = append(b, `,"time":{"rfc3339":`...)
	b = jsonx.AppendString(b, t.RFC3339)
	b = append(b, `,"unixNano":`...)
	b = strconv.AppendInt(b, t.UnixNano, 10)
	return append(b, '}', '}')
}

// appendPaths appends in's members path and newPath, those it has, as json.Marshal writes them.
func appendPaths(b []byte, in *decision.Input) []byte {
	if in.Path != nil {
		b = append(b, `,"path":`...)
		b = appendInputPath(b, in.Path)
	}
	if in.NewPath != nil {
		b = append(b, `,"newPath":`...)
		b = appendInputPath(b, in.NewPath)
	}
	return b
}

// appendInputPath appends p's JSON encoding to b, as json.Marshal writes it.
func appendInputPath(b []byte, p *decision.InputPath) []byte {
	b = append(b, `{"requested":`...)
	b = jsonx.AppendString(b, p.Requested)
	b = jsonx.AppendStringMember(b, "canonical", p.Canonical)
	b = jsonx.AppendStringMember(b, "root", p.Root)
	b = jsonx.AppendStringMember(b, "mount", p.Mount)
	b = jsonx.AppendStringMember(b, "relative", p.Relative)
	b = jsonx.AppendStringMember(b, "mountPath", p.MountPath)
	b = append(b, `,"writable":`...)
	b = strconv.AppendBool(b, p.Writable)
	b = append(b, `,"exists":`...)
	b = strconv.AppendBool(b, p.Exists)
	b = jsonx.AppendStringMember(b, "type", p.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, p.Size, 10)
	b = append(b, `,"nlink":`...)
	b = strconv.AppendUint(b, p.Nlink, 10)
	b = append(b, `,"hidden":`...)
	b = strconv.AppendBool(b, p.Hidden)
	return append(b, '}')
}
