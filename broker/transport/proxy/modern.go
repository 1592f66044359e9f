// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import "encoding/json"

// Members of protocol revision 2026-07-28 the Router reads and writes.
const (
	// metaProtocolVersionKey is the _meta member of a request that names its protocol version.
	metaProtocolVersionKey = "io.modelcontextprotocol/protocolVersion"
	// metaClientCapabilitiesKey is the _meta member of a request with the client's capabilities.
	metaClientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
	// resultTypeInputRequired is the resultType of an InputRequiredResult.
	resultTypeInputRequired = "input_required"
)

// metaProtocolVersion returns the protocol version a request's params._meta
// names (revision 2026-07-28 and later), or "".
func metaProtocolVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	if json.Unmarshal(p.Meta[metaProtocolVersionKey], &v) != nil {
		return ""
	}
	return v
}
