// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fsbroker/fsbroker/broker/decision"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// The broker's decision input as OPA values, without JSON in between.
//
// A request's input has a part that is the same for every request of a session until it
// changes (the server, the session, the front end and the grants: with 20 grants most of the
// document) and a part of its own (method, operation, paths, params, bytes, usage, time). The
// first is converted to OPA values once per change and kept (sessionParts); a decision builds
// only the second, and the decision cache's key is the first part's generation and the second
// part (requestKey). Before, every decision encoded the whole input as JSON and parsed it back.

// maxSessionParts bounds the session parts an Engine keeps; past it, one is dropped at random.
const maxSessionParts = 256

// sessionPart is the converted per-session part of an input: what it was made from, its OPA
// values and its generation, a number no other sessionPart of the process has. It never
// changes once made: a change of any of its fields makes a new one.
type sessionPart struct {
	gen      uint64
	server   decision.InputServer
	session  decision.InputSession
	frontEnd *decision.InputFrontEnd
	grants   []decision.InputGrant // nil for a JSON null

	serverTerm, sessionTerm, frontEndTerm, grantsTerm *ast.Term
	grantsByPathTerm                                  *ast.Term // the grants' index (facts.go); nil for null grants

	usage atomic.Pointer[usageValue] // the last usage term made for the session
}

// sessionGen numbers the sessionParts of the process.
var sessionGen atomic.Uint64

// sessionParts keeps the converted session parts of an Engine, by session and server id.
type sessionParts struct {
	mu sync.Mutex
	m  map[sessionPartKey]*sessionPart
}

// sessionPartKey is what sessionParts finds a session's part by.
type sessionPartKey struct{ session, server string }

// of returns the converted session part of in: the one kept for its session and server when it
// was made from the same values, else a new one, which replaces it.
func (s *sessionParts) of(in *decision.Input) *sessionPart {
	key := sessionPartKey{in.Session.ID, in.Server.ID}
	s.mu.Lock()
	p := s.m[key]
	s.mu.Unlock()
	if p != nil && p.matches(in) {
		return p
	}
	p = newSessionPart(in)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[sessionPartKey]*sessionPart)
	}
	for k := range s.m {
		if len(s.m) < maxSessionParts {
			break
		}
		delete(s.m, k)
	}
	s.m[key] = p
	s.mu.Unlock()
	return p
}

// matches reports whether p was made from in's server, session, front end and grants.
func (p *sessionPart) matches(in *decision.Input) bool {
	if p.server != in.Server || p.session != in.Session || (p.grants == nil) != (in.Grants == nil) ||
		!slices.Equal(p.grants, in.Grants) {
		return false
	}
	if p.frontEnd == nil || in.FrontEnd == nil {
		return p.frontEnd == in.FrontEnd
	}
	return *p.frontEnd == *in.FrontEnd
}

// newSessionPart converts in's per-session part.
func newSessionPart(in *decision.Input) *sessionPart {
	n := names()
	p := &sessionPart{gen: sessionGen.Add(1), server: in.Server, session: in.Session}
	p.serverTerm = objectTerm(
		member(n.id, stringTerm(in.Server.ID)),
		member(n.name, stringTerm(in.Server.Name)),
		member(n.version, stringTerm(in.Server.Version)),
		member(n.pinned, ast.InternedTerm(in.Server.Pinned)))
	p.sessionTerm = objectTerm(
		member(n.id, stringTerm(in.Session.ID)),
		member(n.protocolVersion, stringTerm(in.Session.ProtocolVersion)),
		member(n.transport, stringTerm(in.Session.Transport)))
	if in.FrontEnd != nil {
		fe := *in.FrontEnd
		p.frontEnd = &fe
		p.frontEndTerm = objectTerm(member(n.name, stringTerm(fe.Name)), member(n.tool, stringTerm(fe.Tool)))
	}
	if in.Grants == nil {
		p.grantsTerm = ast.NullTerm()
		return p
	}
	p.grants = slices.Clone(in.Grants)
	if p.grants == nil {
		p.grants = []decision.InputGrant{}
	}
	grants := make([]*ast.Term, len(p.grants))
	for i, g := range p.grants {
		grants[i] = objectTerm(
			member(n.access, stringTerm(g.Access)),
			member(n.path, stringTerm(g.Path)),
			member(n.granted, stringTerm(g.Granted)),
			member(n.expires, stringTerm(g.Expires)))
	}
	p.grantsTerm = ast.ArrayTerm(grants...)
	p.grantsByPathTerm = grantIndex(p.grantsTerm.Value.(*ast.Array))
	return p
}

// usageTerm is input.usage for u: the one last made for p's session when u is the same (the
// counters change with writes and watches only), else a new one, kept for the next.
func (p *sessionPart) usageTerm(u decision.InputUsage) *ast.Term {
	if last := p.usage.Load(); last != nil && last.usage == u {
		return last.term
	}
	n := names()
	t := objectTerm(member(n.bytesWrittenToday, intTerm(u.BytesWrittenToday)), member(n.watches, intTerm(int64(u.Watches))))
	p.usage.Store(&usageValue{usage: u, term: t})
	return t
}

// usageValue is a usage and its term.
type usageValue struct {
	usage decision.InputUsage
	term  *ast.Term
}

// requestKey appends the decision cache's key of in, whose session part is p, to b: p's
// generation, then every member of in that is not in p, but time, as encodeInput writes
// them (params as sent, behind their length). Two inputs with the same key are the same input
// but for their time.
func requestKey(b []byte, p *sessionPart, in *decision.Input) []byte {
	b = binary.BigEndian.AppendUint64(b, p.gen)
	b = binary.AppendUvarint(b, uint64(len(in.Params)))
	b = append(b, in.Params...)
	b = strconv.AppendInt(b, int64(in.Version), 10)
	b = jsonx.AppendStringMember(b, "method", in.Method)
	b = jsonx.AppendStringMember(b, "operation", in.Operation)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, in.Bytes, 10)
	b = append(b, `,"usage":`...)
	b = strconv.AppendInt(b, in.Usage.BytesWrittenToday, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(in.Usage.Watches), 10)
	return appendPaths(b, in)
}

// requestValue builds in's whole input as an OPA object with its session part p: the value
// parseJSONObject gives encodeInput's document, with the engine's facts (facts.go) added
// (TestRequestValueMatchesParse). ok is false for an input it does not build (entries, which
// the broker never sends to Decide, or params that are not JSON), which the caller then encodes
// and parses as before.
func requestValue(p *sessionPart, in *decision.Input) (_ ast.Value, ok bool) {
	if len(in.Entries) > 0 || (len(in.Params) > 0 && !json.Valid(in.Params)) {
		return nil, false
	}
	n := names()
	pairs := make([][2]*ast.Term, 0, 15)
	pairs = append(pairs,
		member(n.version, intTerm(int64(in.Version))),
		member(n.method, stringTerm(in.Method)),
		member(n.operation, stringTerm(in.Operation)),
		member(n.server, p.serverTerm),
		member(n.session, p.sessionTerm))
	if p.frontEndTerm != nil {
		pairs = append(pairs, member(n.frontEnd, p.frontEndTerm))
	}
	if in.Path != nil {
		pairs = append(pairs, member(n.path, pathTerm(in.Path)))
	}
	if in.NewPath != nil {
		pairs = append(pairs, member(n.newPath, pathTerm(in.NewPath)))
	}
	if len(in.Params) > 0 {
		params, err := parseJSONValue(in.Params)
		if err != nil {
			return nil, false
		}
		pairs = append(pairs, member(n.params, ast.NewTerm(params)))
	}
	pairs = append(pairs,
		member(n.bytes, intTerm(in.Bytes)),
		member(n.grants, p.grantsTerm),
		member(n.usage, p.usageTerm(in.Usage)),
		member(n.time, objectTerm(member(n.rfc3339, stringTerm(in.Time.RFC3339)), member(n.unixNano, intTerm(in.Time.UnixNano)))))
	if p.grantsByPathTerm != nil {
		pairs = append(pairs, member(n.grantsByPath, p.grantsByPathTerm))
	}
	return ast.NewObject(pairs...), true
}

// pathTerm is one path of the input, with its facts (facts.go).
func pathTerm(p *decision.InputPath) *ast.Term {
	n := names()
	mountPath := jsonString(p.MountPath)
	return objectTerm(
		member(n.ancestors, ancestorsTerm(mountPath)),
		member(n.requested, stringTerm(p.Requested)),
		member(n.canonical, stringTerm(p.Canonical)),
		member(n.root, stringTerm(p.Root)),
		member(n.mount, stringTerm(p.Mount)),
		member(n.relative, stringTerm(p.Relative)),
		member(n.mountPath, ast.StringTerm(mountPath)),
		member(n.writable, ast.InternedTerm(p.Writable)),
		member(n.exists, ast.InternedTerm(p.Exists)),
		member(n.typ, stringTerm(p.Type)),
		member(n.size, intTerm(p.Size)),
		member(n.nlink, numberTerm(strconv.FormatUint(p.Nlink, 10))),
		member(n.hidden, ast.InternedTerm(p.Hidden)))
}

// objectTerm is an object of pairs.
func objectTerm(pairs ...[2]*ast.Term) *ast.Term { return ast.NewTerm(ast.NewObject(pairs...)) }

// inputKey is the term of a member name of the input: the one shared by every input (inputKeys).
func inputKey(name string) *ast.Term {
	if t, ok := inputKeys()[name]; ok {
		return t
	}
	return ast.StringTerm(name)
}

// memberNames are the terms of the member names requestValue writes (inputKey's), looked up
// once rather than once per member and decision.
type memberNames struct {
	version, method, operation, server, session, frontEnd, path, newPath, params, bytes, grants,
	grantsByPath, usage, time, requested, canonical, root, mount, relative, mountPath, writable,
	exists, typ, size, nlink, hidden, ancestors, bytesWrittenToday, watches, rfc3339, unixNano,
	id, name, pinned, protocolVersion, transport, tool, access, granted, expires *ast.Term
}

// names are the member names' terms.
var names = sync.OnceValue(func() *memberNames {
	return &memberNames{
		version: inputKey("version"), method: inputKey("method"), operation: inputKey("operation"),
		server: inputKey("server"), session: inputKey("session"), frontEnd: inputKey("frontEnd"),
		path: inputKey("path"), newPath: inputKey("newPath"), params: inputKey("params"),
		bytes: inputKey("bytes"), grants: inputKey("grants"), grantsByPath: inputKey(factGrantsByPath),
		usage: inputKey("usage"), time: inputKey("time"), requested: inputKey("requested"),
		canonical: inputKey("canonical"), root: inputKey("root"), mount: inputKey("mount"),
		relative: inputKey("relative"), mountPath: inputKey("mountPath"), writable: inputKey("writable"),
		exists: inputKey("exists"), typ: inputKey("type"), size: inputKey("size"), nlink: inputKey("nlink"),
		hidden: inputKey("hidden"), ancestors: inputKey(factAncestors),
		bytesWrittenToday: inputKey("bytesWrittenToday"), watches: inputKey("watches"),
		rfc3339: inputKey("rfc3339"), unixNano: inputKey("unixNano"), id: inputKey("id"),
		name: inputKey("name"), pinned: inputKey("pinned"), protocolVersion: inputKey("protocolVersion"),
		transport: inputKey("transport"), tool: inputKey("tool"), access: inputKey("access"),
		granted: inputKey("granted"), expires: inputKey("expires"),
	}
})

// member is a pair of key and value.
func member(key, value *ast.Term) [2]*ast.Term { return [2]*ast.Term{key, value} }

// stringTerm is s as a string term, as the input's JSON parses to (jsonString).
func stringTerm(s string) *ast.Term { return ast.StringTerm(jsonString(s)) }

// intTerm is n as a number term, as the input's JSON parses to.
func intTerm(n int64) *ast.Term { return numberTerm(strconv.FormatInt(n, 10)) }

// jsonString is s as it comes out of encoding it to JSON and back: each byte of it that is not
// part of valid UTF-8 becomes U+FFFD (a file name on Linux can be any bytes).
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// numberTerm is the number whose JSON text is text, as parseJSONObject makes it.
func numberTerm(text string) *ast.Term {
	if t := ast.InternedIntNumberTermFromString(text); t != nil {
		return t
	}
	return ast.NumberTerm(json.Number(text))
}

// decideInput is DecideCached for the broker's input in, built without JSON: its session part is
// converted once per change (sessionParts), and the decision cache is keyed on that part's
// generation and the rest of the input but its time (requestKey), so a cached decision costs
// neither building nor evaluating. An input with entries (which the broker never sends here)
// takes DecideCached's way: encoded as JSON, keyed on all of it.
func (e *Engine) decideInput(ctx context.Context, in *decision.Input) (Decision, error) {
	set := e.current()
	if set == nil || len(in.Entries) > 0 {
		doc, key := encodeInput(in)
		return e.DecideCached(ctx, key, doc)
	}
	part := e.sessions.of(in)
	var buf [512]byte
	key := requestKey(buf[:0], part, in)
	if set.cache != nil {
		if d, ok := set.cache.get(key); ok {
			return d, nil
		}
	}
	var input any
	if v, ok := requestValue(part, in); ok {
		input = v
	} else {
		input, _ = encodeInput(in)
	}
	d, err := e.decideWith(ctx, set, input)
	if err == nil && set.cache != nil {
		set.cache.put(key, d)
	}
	return d, err
}
