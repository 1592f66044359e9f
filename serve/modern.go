// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/fsbroker/fsbroker/audit"
	"github.com/fsbroker/fsbroker/broker/consent"
	"github.com/fsbroker/fsbroker/broker/corridor"
	"github.com/fsbroker/fsbroker/broker/errcode"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
)

// Protocol revision 2026-07-28 (docs/serve.md, "Protocol 2026-07-28") has
// no initialize: every request says in its params' _meta which revision it
// speaks, who the client is and what it can do, and the session serves it
// on its own, beside any initialize-based session on the same stream (the
// revision's versioning page calls such a server dual-era). What the host
// is asked for (its roots, the person's consent) comes back in an
// InputRequiredResult, and the host retries the request with the answers
// (modern_inputs.go).

// ModernVersions are the protocol versions fsbroker serve serves per
// request, without initialize.
var ModernVersions = []string{modern.Version}

// supportedVersionList is every version fsbroker serve serves, the ones
// without initialize first: server/discover's supportedVersions and the
// supported list of UnsupportedProtocolVersionError.
func supportedVersionList() []string { return slices.Concat(ModernVersions, SupportedVersions) }

// modernOnlyMethods are the methods no initialize-based revision has: one
// sent without the per-request _meta is a request of a modern client that
// left it out.
var modernOnlyMethods = map[string]bool{"server/discover": true, "subscriptions/listen": true}

// The JSON pointers of the per-request members, for data.errors.
var (
	pointerProtocolVersion    = metaPointer(modern.MetaProtocolVersion)
	pointerClientInfo         = metaPointer(modern.MetaClientInfo)
	pointerClientCapabilities = metaPointer(modern.MetaClientCapabilities)
)

// metaPointer is the JSON pointer of the _meta member key in a request's
// params ("/" in the key escaped as "~1").
func metaPointer(key string) string { return "/_meta/" + strings.ReplaceAll(key, "/", "~1") }

// routeModern says how the session serves req. A request whose _meta names
// protocol 2026-07-28 is served on its own, as that revision says
// (isModern). Else a session that answered initialize serves it as it
// negotiated, whatever its _meta holds, and so does one that did not for a
// request that names an initialize-based version or none (NOT_INITIALIZED
// for any method but initialize). A request before any initialize that
// names another version is UnsupportedProtocolVersionError (-32022, with
// the versions served); one that names it as anything but a string, or
// carries the other per-request members (or is server/discover) without
// it, is -32602 (basic/index: a request missing a required field is
// malformed).
func (s *Session) routeModern(req *jsonrpc.Message) (meta modern.RequestMeta, isModern bool, err error) {
	if req.Method == "initialize" {
		return meta, false, nil
	}
	meta = modern.ReadRequestMeta(req.Params)
	var version string
	named := len(meta.ProtocolVersion) > 0 && meta.ProtocolVersion[0] == '"' && json.Unmarshal(meta.ProtocolVersion, &version) == nil
	if named && version == modern.Version {
		return meta, true, nil
	}
	if s.isInitialized() {
		return meta, false, nil
	}
	switch {
	case meta.ProtocolVersion != nil && !named:
		return meta, false, rpcError(invalidParam(pointerProtocolVersion, modern.MetaProtocolVersion+" must be a string"))
	case named && slices.Contains(SupportedVersions, version):
		return meta, false, nil
	case named:
		return meta, false, &jsonrpc.Error{Code: modern.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version",
			Data: map[string]any{"supported": supportedVersionList(), "requested": version}}
	case meta.Has() || modernOnlyMethods[req.Method]:
		return meta, false, rpcError(invalidParam(pointerProtocolVersion, modern.MetaProtocolVersion+" is required in params._meta"))
	}
	return meta, false, nil
}

// modernRequest is what the session knows of one request of protocol
// 2026-07-28 from its _meta: who sends it and what its client declared.
type modernRequest struct {
	// caller is the host: the pinned identity, else the request's
	// clientInfo.name (Tool is set per method).
	caller corridor.Caller
	// declaresRoots: the request's clientCapabilities declare roots; the
	// host is asked for them before anything is served.
	declaresRoots bool
	// elicitsForms: they declare elicitation with form mode; a consent
	// question goes to the host.
	elicitsForms bool
}

// modernRequestOf checks the per-request members of a request of protocol
// 2026-07-28 and returns what they say. clientCapabilities must be an
// object (a required member: -32602 without it); clientInfo, when present,
// an object with a string name. Without an identity pinned by the operator,
// clientInfo.name is the host's identity for grants, quotas, policies and
// the trail, so a request without it is refused (-32602): fsbroker keeps no
// grants for nobody.
func (s *Session) modernRequestOf(meta modern.RequestMeta) (modernRequest, error) {
	var caps map[string]json.RawMessage
	if json.Unmarshal(meta.ClientCapabilities, &caps) != nil || caps == nil {
		return modernRequest{}, rpcError(invalidParam(pointerClientCapabilities,
			modern.MetaClientCapabilities+" is required in params._meta, an object"))
	}
	var info struct {
		Name    *string `json:"name"`
		Version *string `json:"version"`
	}
	if meta.ClientInfo != nil {
		if json.Unmarshal(meta.ClientInfo, &info) != nil || info.Name == nil {
			return modernRequest{}, rpcError(invalidParam(pointerClientInfo,
				modern.MetaClientInfo+" must be an object with a string name"))
		}
	}
	caller := corridor.Caller{ID: s.cfg.PinnedID, Pinned: true, SessionID: s.id, ProtocolVersion: modern.Version,
		Transport: s.cfg.Transport, FrontEnd: FrontEnd}
	if info.Name != nil {
		caller.Name = *info.Name
	}
	if info.Version != nil {
		caller.Version = *info.Version
	}
	if caller.ID == "" {
		if caller.Name == "" {
			return modernRequest{}, rpcError(invalidParam(pointerClientInfo, "fsbroker serve keeps consent grants per client: "+
				"send "+modern.MetaClientInfo+" with a name, or have the operator pin one (--client-id)"))
		}
		caller.ID, caller.Pinned = caller.Name, false
	}
	return modernRequest{caller: caller, declaresRoots: capabilityDeclared(caps["roots"]),
		elicitsForms: consent.CapabilitiesElicitForms(meta.ClientCapabilities)}, nil
}

// handleModern answers one request of protocol 2026-07-28: server/discover,
// tools/list, tools/call, the resources methods of the revision and
// subscriptions/listen (modern_listen.go; resources/subscribe and
// unsubscribe are gone from it, and so are ping and logging): any other
// method is -32601. Every result names its
// resultType and fsbroker in its _meta.
func (s *Session) handleModern(ctx context.Context, req *jsonrpc.Message, meta modern.RequestMeta) (any, error) {
	rq, err := s.modernRequestOf(meta)
	if err != nil {
		return nil, err
	}
	s.startModern(ctx, rq.caller)
	switch req.Method {
	case "server/discover":
		return s.completeResult(map[string]any{"supportedVersions": supportedVersionList(),
			"capabilities": map[string]any{"tools": map[string]any{}, "resources": s.modernResourcesCapability()}}, cacheStatic)
	case "tools/list":
		return s.completeResult(ToolsListResult(), cacheStatic)
	case "tools/call":
		return s.modernCallTool(ctx, rq, req.Params)
	case MethodResourcesList, MethodResourceTemplatesList, MethodResourcesRead:
		return s.modernResources(ctx, rq, req.Method, req.Params)
	case MethodSubscriptionsListen:
		return s.modernListen(ctx, rq, req)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
}

// startModern records the session's start at its first request of
// protocol 2026-07-28, when no initialize came before it, under that
// request's caller (its end is recorded under the same one).
func (s *Session) startModern(ctx context.Context, caller corridor.Caller) {
	s.mu.Lock()
	first := !s.initialized && s.modernStart == nil
	if first {
		s.modernStart = &caller
	}
	s.mu.Unlock()
	if first {
		s.log.Info("a host on protocol "+modern.Version, "name", caller.Name)
		s.cfg.Corridor.RecordSession(ctx, caller, audit.KindSessionStart, "fsbroker serve (protocol "+modern.Version+")")
	}
}

// modernResourcesCapability is the resources capability server/discover
// declares: subscribe (resourceSubscriptions on subscriptions/listen) when
// the corridor serves watches; no listChanged (nothing watches every root
// for new files), so that the notifications a listen may ask for are the
// updates of its resources alone.
func (s *Session) modernResourcesCapability() map[string]any {
	if s.cfg.Corridor.Watches() {
		return map[string]any{"subscribe": true}
	}
	return map[string]any{}
}

// modernStarted is the caller the session's start was recorded under by
// startModern, or nil.
func (s *Session) modernStarted() *corridor.Caller {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modernStart
}

// modernCallTool runs a tools/call of protocol 2026-07-28: decoded and
// validated as on earlier revisions (a refusal before the corridor is the
// same recorded JSON-RPC error), then run with the host's inputs
// (runWithInputs), under a requestState bound to the tool and a digest of
// its arguments.
func (s *Session) modernCallTool(ctx context.Context, rq modernRequest, params json.RawMessage) (any, error) {
	name, args, rawArgs, err := DecodeToolCall(params)
	caller := rq.caller
	caller.Tool = name
	if err != nil {
		return nil, s.refuseCall(ctx, caller, err)
	}
	binding := StateBinding{Principal: principalOf(caller), Method: "tools/call", Target: name, Arguments: sha256.Sum256(rawArgs)}
	path, _ := corridor.NamedPaths(rawArgs) // for the record of a refused retry
	return s.runWithInputs(ctx, rq, caller, binding, params, path, func(ctx context.Context) (any, error) {
		res, err := s.runTool(ctx, caller, args, rawArgs)
		if err != nil {
			res = ErrorResult(refusalText(err))
		}
		return s.completeResult(res, cacheNone)
	})
}

// modernResources answers the resources methods of protocol 2026-07-28.
// resources/read runs with the host's inputs, as tools/call does, under a
// requestState bound to its URI. resources/list cannot ask the host for
// anything (the revision allows an InputRequiredResult on tools/call,
// resources/read and prompts/get only): a host that declares roots gets an
// empty listing (its roots are not known in this request, and nothing is
// accessible until they are), and a listing that needs consent gets it
// from the operator's provider only (the elicit provider's fallback), never
// through the host. Errors are those of earlier revisions, except that
// -32002, which the revision forbids, is -32602 (data.code still says
// FILE_NOT_FOUND or PERMISSION_DENIED).
func (s *Session) modernResources(ctx context.Context, rq modernRequest, method string, params json.RawMessage) (any, error) {
	caller := rq.caller
	caller.Tool = method
	p, err := decodeResourceParams(method, params)
	if err != nil {
		return nil, modernError(s.refuseResource(ctx, caller, p.URI, err))
	}
	switch method {
	case MethodResourceTemplatesList:
		if p.Cursor != "" {
			return nil, modernError(s.refuseResource(ctx, caller, "", invalidCursor()))
		}
		return s.completeResult(resourceTemplatesResult(), cacheStatic)
	case MethodResourcesList:
		if rq.declaresRoots {
			s.log.Info("resources/list of a host that declares roots lists nothing: protocol " + modern.Version +
				" cannot ask it for them there")
			return s.completeResult(listResourcesResult{Resources: []resource{}}, cachePrivate)
		}
		s.awaitHostRoots(ctx)
		res, err := s.listResources(consent.WithElicitor(ctx, cannotAsk{}), caller, p.Cursor, withoutRetryMembers(params))
		if err != nil {
			return nil, modernError(err)
		}
		return s.completeResult(res, cachePrivate)
	}
	binding := StateBinding{Principal: principalOf(caller), Method: method, Target: p.URI, Arguments: sha256.Sum256([]byte(p.URI))}
	readParams := withoutRetryMembers(params)
	return s.runWithInputs(ctx, rq, caller, binding, params, p.URI, func(ctx context.Context) (any, error) {
		res, err := s.readResource(ctx, caller, p.URI, readParams)
		if err != nil {
			return nil, modernError(err)
		}
		return s.completeResult(res, cachePrivate)
	})
}

// modernError is err as protocol 2026-07-28 may send it: -32002 (resource
// not found on earlier revisions, and fsbroker's PERMISSION_DENIED) is a
// code the revision forbids, so such an error is -32602 with the same
// message and data.
func modernError(err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == CodeResourceNotFound {
		changed := *rpcErr
		changed.Code = jsonrpc.CodeInvalidParams
		return &changed
	}
	return err
}

// caching is what a result of protocol 2026-07-28 says about caching it
// (CacheableResult: ttlMs and cacheScope).
type caching struct {
	ttlMs int64
	scope string // "" for a result that is not cacheable
}

var (
	// cacheNone: a result that is not a CacheableResult (tools/call).
	cacheNone = caching{}
	// cacheStatic: what no request changes (server/discover, tools/list,
	// resources/templates/list): an hour, for anyone.
	cacheStatic = caching{ttlMs: 3_600_000, scope: "public"}
	// cachePrivate: what depends on the files and the host (resources/list
	// and read): stale at once, for this host only.
	cachePrivate = caching{ttlMs: 0, scope: "private"}
)

// completeResult is result (an object) as protocol 2026-07-28 sends it:
// with resultType "complete", fsbroker named in its _meta
// (io.modelcontextprotocol/serverInfo), and ttlMs and cacheScope when c
// says it is cacheable.
func (s *Session) completeResult(result any, c caching) (json.RawMessage, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, errors.New("serve: a result is not an object")
	}
	members["resultType"] = mustJSON(modern.ResultTypeComplete)
	members["_meta"] = s.resultMeta()
	if c.scope != "" {
		members["ttlMs"] = mustJSON(c.ttlMs)
		members["cacheScope"] = mustJSON(c.scope)
	}
	return json.Marshal(members)
}

// resultMeta is the _meta of every result of protocol 2026-07-28.
func (s *Session) resultMeta() json.RawMessage {
	return mustJSON(map[string]any{modern.MetaServerInfo: map[string]string{"name": "fsbroker", "version": s.cfg.Version}})
}

// mustJSON encodes v, which always encodes (strings, numbers and maps of
// them).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("serve: encode " + err.Error())
	}
	return b
}

// withoutRetryMembers returns params without inputResponses and
// requestState: the params the corridor (the policy input) sees of a
// request that may be a retry. Params that are not an object are returned
// as they are.
func withoutRetryMembers(params json.RawMessage) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal(params, &members) != nil || members == nil {
		return params
	}
	_, hasResponses := members[modern.ParamInputResponses]
	_, hasState := members[modern.ParamRequestState]
	if !hasResponses && !hasState {
		return params
	}
	delete(members, modern.ParamInputResponses)
	delete(members, modern.ParamRequestState)
	return mustJSON(members)
}

// refuse records a request of caller refused before the corridor
// (Corridor.Refuse) and returns its JSON-RPC error, with the record's
// decision id.
func (s *Session) refuse(ctx context.Context, caller corridor.Caller, method, path string, refusal *errcode.Error) error {
	recorded := s.cfg.Corridor.Refuse(ctx, caller, method, path, "", refusal)
	var e *errcode.Error
	if errors.As(recorded, &e) {
		return rpcError(e)
	}
	return recorded
}
