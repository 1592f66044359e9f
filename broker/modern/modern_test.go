// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package modern

import (
	"encoding/json"
	"testing"
)

func TestReadRequestMeta(t *testing.T) {
	for _, c := range []struct {
		params  string
		version string
		has     bool
	}{
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`, "2026-07-28", true},
		{`{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"h"}}}`, "", true},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`, "", true},
		// Members are matched by their exact names.
		{`{"_meta":{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28"}}`, "", false},
		{`{"_meta":{"progressToken":1}}`, "", false},
		{`{"_meta":"2026-07-28"}`, "", false},
		{`{}`, "", false},
		{`[1]`, "", false},
		{``, "", false},
	} {
		if got := ProtocolVersion(json.RawMessage(c.params)); got != c.version {
			t.Errorf("ProtocolVersion(%s) = %q, want %q", c.params, got, c.version)
		}
		if got := ReadRequestMeta(json.RawMessage(c.params)).Has(); got != c.has {
			t.Errorf("ReadRequestMeta(%s).Has() = %v, want %v", c.params, got, c.has)
		}
	}
}

// FuzzWithoutMeta: params the scan finds without _meta have no request
// meta when decoded either (encoding/json matches _meta in any case), so
// ReadRequestMeta answers them without decoding, as it would by decoding.
func FuzzWithoutMeta(f *testing.F) {
	for _, seed := range []string{`{"name":"read_text_file","arguments":{"path":"/a"}}`, `{}`, `{"_META":{"a":1}}`,
		`{"_Meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `{"\u005fmeta":{}}`, `{"a":1,}`, `[1]`, ``,
		`{"a":{"_meta":{"io.modelcontextprotocol/clientInfo":{}}}}`, `{"a":1} {"_meta":{}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if withoutMeta(params) && decodeRequestMeta(params).Has() {
			t.Fatalf("%s: the scan finds no _meta, decoding finds %+v", params, decodeRequestMeta(params))
		}
	})
}

// TestWithoutMetaTakesTheCommonRequest: a request of the earlier revisions
// is told to have no _meta by the scan; one that has it, in any case or
// escaped, is decoded.
func TestWithoutMetaTakesTheCommonRequest(t *testing.T) {
	if !withoutMeta([]byte(`{"name":"read_text_file","arguments":{"path":"/a","_meta":1}}`)) {
		t.Error("a tools/call without _meta is decoded")
	}
	for _, p := range []string{`{"_meta":{}}`, `{"_META":{}}`, `{"\u005fmeta":{}}`, `[1]`, ``} {
		if withoutMeta([]byte(p)) {
			t.Errorf("withoutMeta(%s): true", p)
		}
	}
}
