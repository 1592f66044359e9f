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
	p := &sessionPart{gen: sessionGen.Add(1), server: in.Server, session: in.Session}
	p.serverTerm = objectTerm(
		stringMember("id", in.Server.ID),
		stringMember("name", in.Server.Name),
		stringMember("version", in.Server.Version),
		boolMember("pinned", in.Server.Pinned))
	p.sessionTerm = objectTerm(
		stringMember("id", in.Session.ID),
		stringMember("protocolVersion", in.Session.ProtocolVersion),
		stringMember("transport", in.Session.Transport))
	if in.FrontEnd != nil {
		fe := *in.FrontEnd
		p.frontEnd = &fe
		p.frontEndTerm = objectTerm(stringMember("name", fe.Name), stringMember("tool", fe.Tool))
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
			stringMember("access", g.Access),
			stringMember("path", g.Path),
			stringMember("granted", g.Granted),
			stringMember("expires", g.Expires))
	}
	p.grantsTerm = ast.ArrayTerm(grants...)
	p.grantsByPathTerm = grantIndex(p.grantsTerm.Value.(*ast.Array))
	return p
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

// requestValue builds in's whole input as an OPA object with its session part p: the value
// parseJSONObject gives encodeInput's document, with the engine's facts (facts.go) added
// (TestRequestValueMatchesParse). ok is false for
// an input it does not build (entries, which the broker never sends to Decide, or params that
// are not JSON), which the caller then encodes and parses as before.
func requestValue(p *sessionPart, in *decision.Input) (_ ast.Value, ok bool) {
	if len(in.Entries) > 0 || (len(in.Params) > 0 && !json.Valid(in.Params)) {
		return nil, false
	}
	pairs := make([][2]*ast.Term, 0, 14)
	pairs = append(pairs,
		intMember("version", int64(in.Version)),
		stringMember("method", in.Method),
		stringMember("operation", in.Operation),
		[2]*ast.Term{inputKey("server"), p.serverTerm},
		[2]*ast.Term{inputKey("session"), p.sessionTerm})
	if p.frontEndTerm != nil {
		pairs = append(pairs, [2]*ast.Term{inputKey("frontEnd"), p.frontEndTerm})
	}
	if in.Path != nil {
		pairs = append(pairs, [2]*ast.Term{inputKey("path"), pathTerm(in.Path)})
	}
	if in.NewPath != nil {
		pairs = append(pairs, [2]*ast.Term{inputKey("newPath"), pathTerm(in.NewPath)})
	}
	if len(in.Params) > 0 {
		params, err := parseJSONValue(in.Params)
		if err != nil {
			return nil, false
		}
		pairs = append(pairs, [2]*ast.Term{inputKey("params"), ast.NewTerm(params)})
	}
	pairs = append(pairs,
		intMember("bytes", in.Bytes),
		[2]*ast.Term{inputKey("grants"), p.grantsTerm},
		[2]*ast.Term{inputKey("usage"), objectTerm(
			intMember("bytesWrittenToday", in.Usage.BytesWrittenToday),
			intMember("watches", int64(in.Usage.Watches)))},
		[2]*ast.Term{inputKey("time"), objectTerm(
			stringMember("rfc3339", in.Time.RFC3339),
			intMember("unixNano", in.Time.UnixNano))})
	if p.grantsByPathTerm != nil {
		pairs = append(pairs, [2]*ast.Term{inputKey(factGrantsByPath), p.grantsByPathTerm})
	}
	return ast.NewObject(pairs...), true
}

// pathTerm is one path of the input, with its facts (facts.go).
func pathTerm(p *decision.InputPath) *ast.Term {
	mountPath := jsonString(p.MountPath)
	return objectTerm(
		[2]*ast.Term{inputKey(factAncestors), ancestorsTerm(mountPath)},
		stringMember("requested", p.Requested),
		stringMember("canonical", p.Canonical),
		stringMember("root", p.Root),
		stringMember("mount", p.Mount),
		stringMember("relative", p.Relative),
		[2]*ast.Term{inputKey("mountPath"), ast.StringTerm(mountPath)},
		boolMember("writable", p.Writable),
		boolMember("exists", p.Exists),
		stringMember("type", p.Type),
		intMember("size", p.Size),
		[2]*ast.Term{inputKey("nlink"), numberTerm(strconv.FormatUint(p.Nlink, 10))},
		boolMember("hidden", p.Hidden))
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

func stringMember(name, s string) [2]*ast.Term {
	return [2]*ast.Term{inputKey(name), ast.StringTerm(jsonString(s))}
}

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

func boolMember(name string, v bool) [2]*ast.Term {
	return [2]*ast.Term{inputKey(name), ast.InternedTerm(v)}
}

func intMember(name string, n int64) [2]*ast.Term {
	return [2]*ast.Term{inputKey(name), numberTerm(strconv.FormatInt(n, 10))}
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
