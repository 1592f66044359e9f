// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package modern holds the members of MCP protocol revision 2026-07-28 that
// both of fsbroker's roles read and write: fsbroker wrap (between a host and
// a server on that revision) and fsbroker serve (the server a host on that
// revision calls). The revision calls itself and its successors "modern"
// (basic/versioning): it has no initialize handshake, every request carries
// its protocol version, client capabilities and client identity in its
// params' _meta, every result names its resultType, and a server asks the
// client for roots or elicitation inside an InputRequiredResult that the
// client answers by retrying the request with inputResponses and the
// requestState it was given (basic/patterns/mrtr).
package modern

import (
	"encoding/json"
	"strings"

	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// Version is protocol revision 2026-07-28.
const Version = "2026-07-28"

// The _meta members of a request and of a result (basic/index, _meta).
const (
	// MetaProtocolVersion names the request's protocol version (required).
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaClientInfo is the client's name and version (optional).
	MetaClientInfo = "io.modelcontextprotocol/clientInfo"
	// MetaClientCapabilities is the client's capabilities for this request
	// (required).
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// MetaServerInfo is the server's name and version in a result's _meta.
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
	// MetaSubscriptionID is, in the _meta of a notification sent on a
	// subscriptions/listen stream and of that request's final result, the
	// JSON-RPC id of the subscriptions/listen request
	// (basic/patterns/subscriptions).
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// The resultType of a result (basic/index, ResultType).
const (
	// ResultTypeComplete is an ordinary result.
	ResultTypeComplete = "complete"
	// ResultTypeInputRequired is an InputRequiredResult.
	ResultTypeInputRequired = "input_required"
)

// The members of a request's params that carry a retry's inputs, and of an
// InputRequiredResult (basic/patterns/mrtr).
const (
	ParamInputResponses = "inputResponses"
	ParamRequestState   = "requestState"
	ResultInputRequests = "inputRequests"
)

// The error codes the revision defines (basic/index, Error Codes).
const (
	// CodeMissingRequiredClientCapability: the request needs a client
	// capability it did not declare.
	CodeMissingRequiredClientCapability = -32021
	// CodeUnsupportedProtocolVersion: the server does not serve the
	// request's protocol version; data lists the versions it does.
	CodeUnsupportedProtocolVersion = -32022
)

// RequestMeta is the per-request protocol members of a request's
// params._meta, each as sent (nil when absent).
type RequestMeta struct {
	ProtocolVersion    json.RawMessage
	ClientInfo         json.RawMessage
	ClientCapabilities json.RawMessage
}

// Has reports whether any of the members is present: the request was
// written for a modern revision.
func (m RequestMeta) Has() bool {
	return m.ProtocolVersion != nil || m.ClientInfo != nil || m.ClientCapabilities != nil
}

// ReadRequestMeta returns the per-request protocol members of a request's
// params: none when the params or their _meta are not objects. Members are
// matched by their exact names.
func ReadRequestMeta(params json.RawMessage) RequestMeta {
	if withoutMeta(params) {
		return RequestMeta{}
	}
	return decodeRequestMeta(params)
}

// decodeRequestMeta is ReadRequestMeta by decoding the params.
func decodeRequestMeta(params json.RawMessage) RequestMeta {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta, &meta) != nil {
		return RequestMeta{}
	}
	return RequestMeta{ProtocolVersion: meta[MetaProtocolVersion], ClientInfo: meta[MetaClientInfo],
		ClientCapabilities: meta[MetaClientCapabilities]}
}

// withoutMeta reports, by a scan, that params (valid JSON, as a decoded
// message's are) are an object with no member encoding/json would take for
// _meta, whose name it matches without regard to case: every name plain
// ASCII without escapes, none "_meta" in any case. Then ReadRequestMeta
// has nothing to return and need not decode the params, as every request
// of the earlier revisions has them. False when the scan cannot tell.
func withoutMeta(params json.RawMessage) bool {
	s := jsonx.ScanObject(params)
	for s.Next() {
		name := s.Member().Name
		for _, c := range name {
			if c == '\\' || c >= 0x80 {
				return false
			}
		}
		if strings.EqualFold(string(name[1:len(name)-1]), "_meta") {
			return false
		}
	}
	_, closed := s.End()
	return closed
}

// ProtocolVersion returns the protocol version a request's params._meta
// names, or "" when it names none (or not as a string).
func ProtocolVersion(params json.RawMessage) string {
	var v string
	if json.Unmarshal(ReadRequestMeta(params).ProtocolVersion, &v) != nil {
		return ""
	}
	return v
}
