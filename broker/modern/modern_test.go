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
