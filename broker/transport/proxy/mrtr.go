// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/modern"
	"github.com/fsbroker/fsbroker/internal/jsonx"
)

// Multi round-trip requests (protocol revision 2026-07-28): a server asks
// for roots, elicitation or sampling by answering tools/call, resources/read
// or prompts/get with an InputRequiredResult, and the client retries the
// request with inputResponses (and the requestState it was given). The
// Router answers the roots/list among inputRequests itself, through the
// broker session (the same pipeline as a server's roots/list), and passes
// the rest to the host under a requestState of its own: the host never sees
// a roots/list, and on its retry the server gets its own requestState back,
// the host's answers to what the host was asked, and the broker's roots.
// Nothing else a host puts in inputResponses or requestState reaches the
// server, so a host can neither answer roots/list itself nor replay a state.

const (
	// stateTTL is how long the host may take to retry after an
	// InputRequiredResult (a person may be answering a form meanwhile).
	stateTTL = 10 * time.Minute
	// maxStates bounds the InputRequiredResults awaiting the host's retry;
	// past it the oldest is forgotten (its retry then reaches the server
	// without inputs, and the server asks again).
	maxStates = 1024
	// maxStateBytes bounds the bytes those states hold (the servers'
	// requestStates, each up to --max-message-bytes); past it the oldest are
	// forgotten too.
	maxStateBytes = 64 << 20
	// maxBrokerRounds bounds how often the Router retries a request itself
	// for a server that asks for nothing but roots, again and again.
	maxBrokerRounds = 3
	// rootsAnswerTimeout bounds the wait for the session's roots/list answer.
	rootsAnswerTimeout = 30 * time.Second
	// stateTokenPrefix starts the requestState the host is given.
	stateTokenPrefix = "fsbroker-wrap-state-"
)

// pendingInputs is an InputRequiredResult passed to the host, awaiting its
// retry.
type pendingInputs struct {
	method      string
	target      string           // the tool's or prompt's name, or the resource's URI: the retry must name it too
	serverState *json.RawMessage // the server's requestState (nil: it gave none)
	hostKeys    []string         // the inputRequests passed to the host
	brokerKeys  []string         // the roots/list inputRequests the broker answers
	expires     time.Time
	size        int // the bytes it holds, counted in Router.stateBytes
}

// bytes is what a kept state counts toward maxStateBytes.
func (p *pendingInputs) bytes() int {
	n := len(p.method) + len(p.target)
	if p.serverState != nil {
		n += len(*p.serverState)
	}
	for _, k := range p.hostKeys {
		n += len(k)
	}
	for _, k := range p.brokerKeys {
		n += len(k)
	}
	return n
}

// newStateToken returns a fresh requestState for the host.
func newStateToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return stateTokenPrefix + hex.EncodeToString(b[:])
}

// requestTarget is what a retry must name as its original did: the tool's
// or the prompt's name, or the resource's URI (as JSON text).
func requestTarget(params map[string]json.RawMessage) string {
	for _, k := range []string{"name", "uri"} {
		if v, ok := params[k]; ok {
			return string(v)
		}
	}
	return ""
}

// splitInputRequests returns the keys of the inputRequests the broker
// answers (roots/list) and those the host does, each sorted. A request is
// the broker's when any of its members named "method", in any case, names
// roots/list: whichever of them a host reads, it is never asked roots/list.
func splitInputRequests(requests map[string]json.RawMessage) (brokerKeys, hostKeys []string) {
	for _, k := range slices.Sorted(maps.Keys(requests)) {
		if anyMemberIs(requests[k], "method", func(m string) bool { return broker.CanonicalMethod(m) == "roots/list" }) {
			brokerKeys = append(brokerKeys, k)
		} else {
			hostKeys = append(hostKeys, k)
		}
	}
	return brokerKeys, hostKeys
}

// isInputRequired reports whether a result may be read as an
// InputRequiredResult: any of its members named "resultType", in any case,
// is "input_required".
func isInputRequired(result json.RawMessage) bool {
	return anyMemberIs(result, "resultType", func(v string) bool { return v == modern.ResultTypeInputRequired })
}

// anyMemberIs reports whether the object obj has a member named name, in any
// case (encoding/json matches names so), whose value is a string for which
// match is true; every occurrence counts (a reader may take the first or the
// last of a repeated name). Not an object: false.
func anyMemberIs(obj json.RawMessage, name string, match func(string) bool) bool {
	scan := jsonx.ScanObject(obj)
	for scan.Next() {
		m := scan.Member()
		member, ok := jsonx.Unquote(m.Name)
		if !ok || !strings.EqualFold(member, name) {
			continue
		}
		if v, ok := jsonx.Unquote(m.Value); ok && match(v) {
			return true
		}
	}
	return false
}

// dropCaseVariants deletes from an InputRequiredResult the members whose
// names differ from resultType, inputRequests or requestState in case only:
// a host that matches names without case could read them in place of the
// members the Router read.
func dropCaseVariants(res map[string]json.RawMessage) {
	for name := range res {
		for _, exact := range []string{"resultType", modern.ResultInputRequests, modern.ParamRequestState} {
			if name != exact && strings.EqualFold(name, exact) {
				delete(res, name)
			}
		}
	}
}

// inputRequired takes the server's InputRequiredResult answering the host's
// request req (raw is the reply as the server wrote it): its roots/list
// requests are answered by the broker, by retrying the request itself when
// the host is asked nothing, else on the host's retry. Only a tools/call,
// resources/read or prompts/get with object params can be retried: the
// InputRequiredResult of any other request (the Router kept no params) gets
// the host an error reply instead.
func (r *Router) inputRequired(req inFlight, wire jsonrpc.ID, raw []byte, result json.RawMessage) {
	if req.params == nil {
		r.log.Warn("the server answered a request that cannot be retried with an InputRequiredResult; the host gets an error",
			"method", shortMethod(req.method))
		r.writeHost(mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: req.id, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInternalError, Message: "the server answered " + shortMethod(req.method) +
				" with an InputRequiredResult; only tools/call, resources/read and prompts/get with object params may be retried"}}))
		return
	}
	var res map[string]json.RawMessage
	var requests map[string]json.RawMessage
	if json.Unmarshal(result, &res) != nil || json.Unmarshal(res[modern.ResultInputRequests], &requests) != nil || len(requests) == 0 {
		// Nothing to answer; the host's retry (it may retry at once) gets the
		// server's requestState back through a state of the Router's all the same.
		requests = map[string]json.RawMessage{}
		if res == nil {
			r.writeHost(withID(raw, wire, req.id))
			return
		}
	}
	dropCaseVariants(res)
	brokerKeys, hostKeys := splitInputRequests(requests)
	var serverState *json.RawMessage
	if st, ok := res[modern.ParamRequestState]; ok {
		serverState = &st
	}
	if len(brokerKeys) > 0 {
		r.startStatelessSession(res["_meta"])
	}
	if len(brokerKeys) > 0 && len(hostKeys) == 0 {
		r.retryWithRoots(req, brokerKeys, serverState)
		return
	}
	p := &pendingInputs{method: req.method, target: requestTarget(req.params), serverState: serverState,
		hostKeys: hostKeys, brokerKeys: brokerKeys, expires: time.Now().Add(stateTTL)}
	p.size = p.bytes()
	token := newStateToken()
	r.mu.Lock()
	r.states[token] = p
	r.stateBytes += p.size
	r.stateOrder = append(r.stateOrder, token)
	r.pruneStates()
	r.mu.Unlock()
	if _, had := res[modern.ResultInputRequests]; had || len(hostKeys) > 0 {
		forHost := make(map[string]json.RawMessage, len(hostKeys))
		for _, k := range hostKeys {
			forHost[k] = requests[k]
		}
		res[modern.ResultInputRequests] = mustMarshal(forHost)
	}
	res[modern.ParamRequestState] = mustMarshal(token)
	if len(brokerKeys) > 0 {
		r.log.Debug("an InputRequiredResult's roots/list is the broker's; the rest goes to the host", "roots", len(brokerKeys), "host", len(hostKeys))
	}
	out := withMember(raw, "result", mustMarshal(res))
	r.writeHost(withMember(out, "id", json.RawMessage(req.id)))
}

// pruneStates forgets expired states, then the oldest while more than
// maxStates are kept or they hold more than maxStateBytes; r.mu is held.
func (r *Router) pruneStates() {
	now := time.Now()
	keep := r.stateOrder[:0]
	for _, tok := range r.stateOrder {
		p, ok := r.states[tok]
		if !ok {
			continue
		}
		if now.After(p.expires) {
			r.forgetState(tok)
			continue
		}
		keep = append(keep, tok)
	}
	for len(keep) > maxStates || (len(keep) > 1 && r.stateBytes > maxStateBytes) {
		r.forgetState(keep[0])
		keep = keep[1:]
	}
	r.stateOrder = keep
}

// forgetState removes the state of token and what it counted; r.mu is held.
func (r *Router) forgetState(token string) {
	if p, ok := r.states[token]; ok {
		r.stateBytes -= p.size
		delete(r.states, token)
	}
}

// retryWithRoots retries the host's request req itself, with the broker's
// roots for brokerKeys and the server's requestState: the host, asked
// nothing, gets the reply to the retry as the reply to its request.
func (r *Router) retryWithRoots(req inFlight, brokerKeys []string, serverState *json.RawMessage) {
	if req.rounds >= maxBrokerRounds {
		r.log.Warn("the server keeps asking for roots; the host's request fails", "method", shortMethod(req.method), "rounds", req.rounds)
		r.writeHost(mustMarshal(errorReply{JSONRPC: jsonrpc.Version, ID: req.id, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInternalError, Message: "the server asked for roots again after " + strconv.Itoa(req.rounds) + " answers"}}))
		return
	}
	params := maps.Clone(req.params)
	delete(params, modern.ParamRequestState)
	if serverState != nil {
		params[modern.ParamRequestState] = *serverState
	}
	params[modern.ParamInputResponses] = mustMarshal(r.brokerAnswers(brokerKeys))
	retry := inFlight{from: host, id: req.id, method: req.method, params: req.params, rounds: req.rounds + 1}
	msg := &jsonrpc.Message{Method: req.method, Params: mustMarshal(params)}
	if !r.recordForward(&retry, msg, "fsbroker's retry with the roots it serves") {
		return
	}
	r.mu.Lock()
	wire := r.toServer.assignFresh(retry)
	r.mu.Unlock()
	r.log.Debug("retrying the host's request with the broker's roots", "method", shortMethod(req.method), "id", string(wire))
	r.writeServer(mustMarshal(struct {
		request
		Params json.RawMessage `json:"params"`
	}{request{JSONRPC: jsonrpc.Version, ID: wire, Method: req.method}, msg.Params}))
}

// brokerAnswers returns the broker's answer to each roots/list key.
func (r *Router) brokerAnswers(keys []string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(keys))
	if len(keys) == 0 {
		return out
	}
	answer := r.rootsAnswer()
	for _, k := range keys {
		out[k] = answer
	}
	return out
}

// noRoots is the answer when the session cannot give one: fail closed.
var noRoots = json.RawMessage(`{"roots":[]}`)

// rootsAnswer asks the broker session for roots/list, as if the server had
// (the policy decides what is visible, and the request is audited), and
// returns its result, or no roots when it fails.
func (r *Router) rootsAnswer() json.RawMessage {
	reply := make(chan *jsonrpc.Message, 1)
	r.mu.Lock()
	if !r.sessionStarted || r.closing {
		r.mu.Unlock()
		r.log.Warn("no broker session to answer roots/list; the server is told no root")
		return noRoots
	}
	var id jsonrpc.ID
	for {
		r.sessionAsked++
		id = jsonrpc.StringID(idPrefix + "roots-" + strconv.FormatUint(r.sessionAsked, 10))
		if !r.atSession[id] {
			break
		}
	}
	r.fromRouter[id] = reply
	ctx := r.runCtx
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.fromRouter, id)
		r.mu.Unlock()
	}()
	select {
	case r.toSession <- mustMarshal(request{JSONRPC: jsonrpc.Version, ID: id, Method: "roots/list"}):
	case <-ctx.Done():
		return noRoots
	}
	t := time.NewTimer(rootsAnswerTimeout)
	defer t.Stop()
	select {
	case m := <-reply:
		if m.Error != nil || len(m.Result) == 0 {
			r.log.Warn("the broker session refused roots/list; the server is told no root", "error", m.Error)
			return noRoots
		}
		return m.Result
	case <-t.C:
		r.log.Warn("the broker session did not answer roots/list in time; the server is told no root")
	case <-ctx.Done():
	}
	return noRoots
}

// errNoRetryState says why a retry's inputs were taken out.
var errNoRetryState = errors.New("its requestState is not one fsbroker gave, or was used, expired or names another request")

// hostRetry passes on a request of the host's that carries inputResponses or
// requestState: a retry after an InputRequiredResult the Router passed on
// gets the server's requestState back, the host's answers to what it was
// asked and the broker's roots; anything else loses both members.
func (r *Router) hostRetry(msg *jsonrpc.Message, raw []byte) {
	var params map[string]json.RawMessage
	if json.Unmarshal(msg.Params, &params) != nil {
		r.forwardRequest(msg, raw)
		return
	}
	var token string
	_ = json.Unmarshal(params[modern.ParamRequestState], &token)
	r.mu.Lock()
	p, ok := r.states[token]
	r.forgetState(token) // a state is used once
	r.mu.Unlock()
	var hostAnswers map[string]json.RawMessage
	_ = json.Unmarshal(params[modern.ParamInputResponses], &hostAnswers)
	delete(params, modern.ParamRequestState)
	delete(params, modern.ParamInputResponses)
	if !ok || time.Now().After(p.expires) || p.method != msg.Method || p.target != requestTarget(params) {
		r.log.Warn("took inputResponses and requestState out of a request of the host's", "method", shortMethod(msg.Method), "why", errNoRetryState)
	} else {
		inputs := r.brokerAnswers(p.brokerKeys)
		for _, k := range p.hostKeys {
			if v, has := hostAnswers[k]; has {
				inputs[k] = v
			}
		}
		if len(inputs) > 0 {
			params[modern.ParamInputResponses] = mustMarshal(inputs)
		}
		if p.serverState != nil {
			params[modern.ParamRequestState] = *p.serverState
		}
	}
	msg.Params = mustMarshal(params)
	r.forwardRequest(msg, withMember(raw, "params", msg.Params))
}

// startStatelessSession starts the broker session for a server on protocol
// 2026-07-28 that answered no initialize (the host sent none): its identity
// is what the server's result _meta says, and no roots of a host's narrow
// the operator's (such a host cannot be asked for them).
func (r *Router) startStatelessSession(meta json.RawMessage) {
	r.mu.Lock()
	started := r.sessionStarted
	if !started && !r.initSeen {
		r.initSeen = true
		r.rootsKnown = true
		close(r.rootsReady)
	}
	r.mu.Unlock()
	if started {
		return
	}
	var m struct {
		ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
	}
	_ = json.Unmarshal(meta, &m)
	info := m.ServerInfo
	if len(info) == 0 || info[0] != '{' {
		info = json.RawMessage(`{"name":"","version":""}`)
	}
	r.log.Info("a server on protocol " + broker.StatelessVersion + " asked for roots; starting the broker session to answer")
	r.serverAnsweredInitialize(mustMarshal(map[string]json.RawMessage{
		"protocolVersion": mustMarshal(broker.StatelessVersion), "capabilities": json.RawMessage(`{}`), "serverInfo": info}))
}

// amendModernRequest adds the roots capability to a 2026-07-28 request's
// _meta clientCapabilities (the host's own members kept), as the host's
// initialize gets it on earlier revisions: the server may then ask for
// roots, and the broker answers. Requests of earlier revisions, and params
// it cannot amend, are not changed (changed is false).
func amendModernRequest(raw []byte, params json.RawMessage) (amended []byte, changed bool) {
	if modern.ProtocolVersion(params) == "" {
		return raw, false
	}
	var p map[string]json.RawMessage
	var meta map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p["_meta"], &meta) != nil {
		return raw, false
	}
	caps := map[string]json.RawMessage{}
	if c, ok := meta[modern.MetaClientCapabilities]; ok && json.Unmarshal(c, &caps) != nil {
		return raw, false
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	if _, ok := caps["roots"]; ok {
		return raw, false
	}
	caps["roots"] = json.RawMessage(`{}`)
	meta[modern.MetaClientCapabilities] = mustMarshal(caps)
	p["_meta"] = mustMarshal(meta)
	return withMember(raw, "params", mustMarshal(p)), true
}

// hasRetryMembers reports whether a request's params carry inputResponses or
// requestState.
func hasRetryMembers(params json.RawMessage) bool {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	_, a := p[modern.ParamInputResponses]
	_, b := p[modern.ParamRequestState]
	return a || b
}

// decodeParams is a request's params as members, or nil.
func decodeParams(params json.RawMessage) map[string]json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p
}
