// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// CodePermissionDenied is the code of every denial the engine makes itself (no policy, an
// evaluation error, an undefined or malformed decision) and of a policy denial without a code.
const CodePermissionDenied = "PERMISSION_DENIED"

// Reasons the engine gives when it denies on its own. They never carry policy file names or
// error text, which go to the returned error for the caller's log.
const (
	reasonNoPolicy   = "no policy is loaded"
	reasonBadInput   = "the policy input is not a JSON object"
	reasonEvalFailed = "policy evaluation failed"
	reasonUndefined  = "the policy decision is undefined"
	reasonWrongShape = "the policy decision is malformed"
)

// defaultDebounce is how long Watch waits after the last change, unless WithReloadDebounce.
const defaultDebounce = 100 * time.Millisecond

// Errors returned (wrapped) by Decide, Visible and Explain next to their fail-closed result.
var (
	errNoPolicy  = errors.New("no policy is loaded")
	errUndefined = errors.New("the policy result is undefined")
)

// Decision is data.fsbroker.authz.decision for one request.
type Decision struct {
	// Allow is true only when the policy allowed the request.
	Allow bool `json:"allow"`
	// Code is the refusal code, such as PERMISSION_DENIED or QUOTA_EXCEEDED; a denial always
	// has one (PERMISSION_DENIED when the policy gave none). An allowing policy may set one too.
	Code string `json:"code,omitempty"`
	// Reasons are the policy's reasons, in the order it gave them (sorted, for a set).
	Reasons []string `json:"reasons,omitempty"`
	// Obligations are what the policy requires of the broker when it allows (for example a
	// size limit), as JSON values: nil when there are none.
	Obligations map[string]any `json:"obligations,omitempty"`
	// Revision is the revision of the policy set that decided ("" when none was loaded).
	Revision string `json:"revision"`
}

// deny is the fail-closed decision.
func deny(revision, reason string) Decision {
	return Decision{Allow: false, Code: CodePermissionDenied, Reasons: []string{reason}, Revision: revision}
}

// Option configures an Engine.
type Option func(*Engine)

// WithLogger sets the operational logger (default: none). Loads, reloads and their failures are
// logged at info and error level; print() output of policies at debug level, and print() calls
// are compiled in only when the logger is at debug level.
func WithLogger(l hclog.Logger) Option {
	return func(e *Engine) {
		if l != nil {
			e.logger = l
		}
	}
}

// WithRunTests sets whether a policy set's *_test.rego tests must pass before it is used, at
// New and on every reload (default true). Without, the test files of a directory or file system
// are not even parsed (they still count in the revision): the embedded default set, whose tests
// run in fsbroker's own test suite, loads without paying for them.
func WithRunTests(run bool) Option {
	return func(e *Engine) { e.runTests = run }
}

// WithReloadDebounce sets how long Watch waits after the last change before it reloads
// (default 100 ms); d <= 0 keeps the default.
func WithReloadDebounce(d time.Duration) Option {
	return func(e *Engine) {
		if d > 0 {
			e.debounce = d
		}
	}
}

// Engine decides requests with the current policy set. It is safe for concurrent use: the
// prepared queries of a set are shared by every goroutine, and a reload swaps the whole set
// atomically.
type Engine struct {
	src      Source
	logger   hclog.Logger
	runTests bool
	debounce time.Duration

	set      atomic.Pointer[policySet]
	reloadMu sync.Mutex // one reload at a time
	failing  bool       // the last reload failed; guarded by reloadMu
	// remoteDigest is the sha256 of the bundle last activated from a bundle
	// server; guarded by reloadMu.
	remoteDigest string
	watching     atomic.Int32 // running Watch loops whose watches are set up
	// sessions are the converted session parts of the broker's inputs (Decider.Decide).
	sessions sessionParts
}

// New loads src with the library (policies.Library, each package of it unless src defines that
// package), compiles it in strict mode and type-checks it against the policy input schema
// (schema/policy-input.json: a reference such as input.path.canonicl is an error naming file
// and line), runs its tests when WithRunTests (the default), and prepares the queries
// data.fsbroker.authz.decision, .visible and .consentable once (data.fsbroker.derived's for
// the two the set does not define). The set must define data.fsbroker.authz.decision. A set
// that fails any of these is returned as a *LoadError.
func New(ctx context.Context, src Source, opts ...Option) (*Engine, error) {
	e := &Engine{
		src:      src,
		logger:   hclog.NewNullLogger(),
		runTests: true,
		debounce: defaultDebounce,
	}
	for _, o := range opts {
		o(e)
	}
	start := time.Now()
	if src.Remote != nil {
		return e, e.startRemote(ctx, start)
	}
	set, err := build(ctx, src, e.loadOptions())
	if err != nil {
		return nil, err
	}
	e.set.Store(set)
	e.logLoaded("policies loaded", set, time.Since(start))
	return e, nil
}

// startRemote loads the persisted copy of a remote bundle, if any. Without one the engine
// starts empty and denies everything until Watch activates the first bundle; a persisted copy
// that no longer loads is logged and left aside the same way (only ctx ending is an error).
func (e *Engine) startRemote(ctx context.Context, start time.Time) error {
	if err := e.src.check(); err != nil {
		return err
	}
	set, err := e.src.Remote.loadPersisted(ctx, e.loadOptions())
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		e.logger.Error("the persisted policy bundle does not load; denying every request until the bundle server answers",
			"source", e.src.String(), "error", err)
	case set == nil:
		e.logger.Warn("no policy bundle yet; denying every request until the bundle server answers",
			"source", e.src.String())
	default:
		e.set.Store(set)
		e.logLoaded("persisted policy bundle loaded", set, time.Since(start))
	}
	return nil
}

// loadOptions are the options build needs.
func (e *Engine) loadOptions() loadOptions {
	return loadOptions{runTests: e.runTests, logger: e.logger}
}

// logLoaded logs a newly current set.
func (e *Engine) logLoaded(msg string, set *policySet, took time.Duration) {
	e.logger.Info(msg, "source", e.src.String(), "revision", set.revision,
		"modules", set.modules, "test_files", set.tests, "took", took)
	if !set.hasVisible {
		e.logger.Info("no rule defines "+visibleQuery+": listings and watch events show the entries whose read the decision allows",
			"revision", set.revision, "query", set.visibleRef)
	}
	if !set.hasConsent {
		e.logger.Info("no rule defines "+consentQuery+": files/consent may grant what the decision allows once granted",
			"revision", set.revision, "query", set.consentRef)
	}
}

// current is the current policy set, or nil.
func (e *Engine) current() *policySet {
	if e == nil {
		return nil
	}
	return e.set.Load()
}

// Revision is the current policy set's revision: the hex sha256 over the sorted names and
// contents of its files for a directory or file system, the manifest's revision for a bundle
// (the bundle file's sha256 when the manifest has none).
func (e *Engine) Revision() string {
	if set := e.current(); set != nil {
		return set.revision
	}
	return ""
}

// Decide evaluates data.fsbroker.authz.decision for one input: the policy input document
// (schema/policy-input.json) as a map[string]any, a json.RawMessage or []byte, or an ast.Value.
// The input is not validated against the schema here.
//
// Decide never fails open. When no policy is loaded, the input is not an object, evaluation
// fails (built-in errors included: they are fatal), or the decision is undefined or not
// {allow: bool, code?: string, reasons?: set or array of strings, obligations?: object} with
// no other key, it returns a denial with code PERMISSION_DENIED and a generic reason, together
// with the error for the caller to log. A policy denial without a code gets PERMISSION_DENIED.
// The Decision's Obligations may be shared with other decisions of the set: do not modify them.
func (e *Engine) Decide(ctx context.Context, input any) (Decision, error) {
	return e.decideWith(ctx, e.current(), input)
}

// decideWith is Decide with a given policy set (nil: none is loaded).
func (e *Engine) decideWith(ctx context.Context, set *policySet, input any) (Decision, error) {
	if set == nil {
		return deny("", reasonNoPolicy), fmt.Errorf("engine: %w", errNoPolicy)
	}
	if err := ctx.Err(); err != nil {
		return deny(set.revision, reasonEvalFailed), fmt.Errorf("engine: %w", err)
	}
	v, err := inputValue(input)
	if err != nil {
		return deny(set.revision, reasonBadInput), fmt.Errorf("engine: decision input: %w", err)
	}
	rs, err := evalWith(ctx, set.decision, &set.rules, v)
	return set.decisionOf(rs, err)
}

// neverCancelled is the cancellation of every evaluation under a context that cannot be
// cancelled: nothing ever cancels it.
var neverCancelled = topdown.NewCancel()

// eval evaluates a prepared query for one input, extra options (a tracer) included.
//
// Cancellation goes through context.AfterFunc instead of the goroutine OPA otherwise starts for
// every evaluation to watch ctx: nothing at all for a context that cannot be cancelled, a
// callback for one that can. A panic in evaluation is returned as an error, so the caller still
// fails closed.
func eval(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value, opts ...rego.EvalOption) (rs rego.ResultSet, err error) {
	return evalWith(ctx, pq, &unseededRules, input, opts...)
}

// evalWith is eval with the rules' cache taken from rules, which may hold seeds.
func evalWith(ctx context.Context, pq rego.PreparedEvalQuery, rules *ruleCachePool, input ast.Value, opts ...rego.EvalOption) (rs rego.ResultSet, err error) {
	defer func() {
		if r := recover(); r != nil {
			rs, err = nil, fmt.Errorf("evaluation panicked: %v", r)
		}
	}()
	cancel := neverCancelled
	if ctx.Done() != nil {
		cancel = topdown.NewCancel()
		stop := context.AfterFunc(ctx, cancel.Cancel)
		defer stop()
	}
	cache := rules.get()
	defer cache.release()
	opts = append(opts, rego.EvalParsedInput(input), rego.EvalExternalCancel(cancel), rego.EvalMetrics(metrics.NoOp()),
		rego.EvalVirtualCache(cache))
	return pq.Eval(ctx, opts...)
}

// decisionOf turns an evaluation of set's decision query into a Decision, failing closed.
func (set *policySet) decisionOf(rs rego.ResultSet, err error) (Decision, error) {
	revision := set.revision
	if err != nil {
		return deny(revision, reasonEvalFailed),
			fmt.Errorf("engine: evaluate %s (revision %s): %w", decisionQuery, revision, err)
	}
	val, ok := resultValue(rs)
	if !ok {
		return deny(revision, reasonUndefined),
			fmt.Errorf("engine: %s (revision %s): %w", decisionQuery, revision, errUndefined)
	}
	d, err := parseDecision(val, &set.obligations)
	if err != nil {
		return deny(revision, reasonWrongShape),
			fmt.Errorf("engine: %s (revision %s): %w", decisionQuery, revision, err)
	}
	d.Revision = revision
	if !d.Allow && d.Code == "" {
		d.Code = CodePermissionDenied
	}
	return d, nil
}

// Visible evaluates data.fsbroker.authz.visible for a batch (input.operation "visible" and
// input.entries) and returns the mountPaths that may be shown; an entry that is not in the map
// is hidden. For a set that does not define visible it evaluates data.fsbroker.derived.visible
// (policies/lib/derived.rego): the entries whose read the decision allows. On any failure (no policy, an evaluation error, an undefined result, a result that
// is not a set or array of strings) nothing is visible: the map is empty and the error says why.
func (e *Engine) Visible(ctx context.Context, input any) (map[string]bool, error) {
	set := e.current()
	if set == nil {
		return map[string]bool{}, fmt.Errorf("engine: %w", errNoPolicy)
	}
	return evalPathSet(ctx, set, set.visible, set.visibleRef, input)
}

// Consentable evaluates data.fsbroker.authz.consentable for a files/consent request
// (input.operation "consent", the requested paths in input.entries, the access asked in
// input.params.access) and returns the mountPaths that may be granted. For a set that does
// not define consentable it evaluates data.fsbroker.derived.consentable: the paths on which
// the decision would allow that access once granted. On any failure nothing may be granted,
// as for Visible.
func (e *Engine) Consentable(ctx context.Context, input any) (map[string]bool, error) {
	set := e.current()
	if set == nil {
		return map[string]bool{}, fmt.Errorf("engine: %w", errNoPolicy)
	}
	return evalPathSet(ctx, set, set.consent, set.consentRef, input)
}

// evalPathSet evaluates a query whose result is a set of mountPaths, failing closed. For a
// cacheable set and a JSON input (the broker's), the result is kept by a hash of the whole input
// without its time (see batchKeyOf), as DecideCached keeps decisions: while the set is current,
// and for at most a second when a rule reads input.time. A batch is decided as a whole (a rule
// may look at every entry), so it is its whole input that is the key, never an entry.
func evalPathSet(ctx context.Context, set *policySet, pq rego.PreparedEvalQuery, query string, input any) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return map[string]bool{}, fmt.Errorf("engine: %w", err)
	}
	var key *batchKey
	lookup := false
	if set.batches != nil {
		if k, timeValue, ok := batchKeyOf(query, input); ok {
			key, lookup = &k, timeValue == nil || validJSONValue(timeValue)
		}
	}
	return evalPathSetKeyed(ctx, set, pq, query, input, key, lookup)
}

// evalPathSetKeyed is evalPathSet with the input's batch cache key given (nil: not cached);
// lookup is false to keep a result without looking one up.
func evalPathSetKeyed(ctx context.Context, set *policySet, pq rego.PreparedEvalQuery, query string, input any, key *batchKey, lookup bool) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return map[string]bool{}, fmt.Errorf("engine: %w", err)
	}
	if key != nil && lookup {
		if paths, ok := set.batches.get(*key); ok {
			return paths, nil
		}
	}
	v, err := inputValue(input)
	if err != nil {
		return map[string]bool{}, fmt.Errorf("engine: %s input: %w", query, err)
	}
	rs, err := eval(ctx, pq, v)
	if err != nil {
		return map[string]bool{}, fmt.Errorf("engine: evaluate %s (revision %s): %w", query, set.revision, err)
	}
	val, ok := resultValue(rs)
	if !ok {
		return map[string]bool{}, fmt.Errorf("engine: %s (revision %s): %w", query, set.revision, errUndefined)
	}
	paths, err := parseVisible(val)
	if err != nil {
		return map[string]bool{}, fmt.Errorf("engine: %s (revision %s): %w", query, set.revision, err)
	}
	if key != nil {
		set.batches.put(*key, paths)
	}
	return paths, nil
}

// inputValue converts an input document to an AST object, with the engine's facts added
// (addFacts). JSON (the broker's batches, fsbroker eval) is parsed straight into AST values (see
// parseJSONObject); a map (tests) is converted whole. An ast.Object is taken as it is: the
// broker's own decision input is built with its facts (requestValue).
func inputValue(input any) (ast.Value, error) {
	switch x := input.(type) {
	case nil:
		return nil, errors.New("no input")
	case ast.Object:
		return x, nil
	case map[string]any:
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return nil, err
		}
		return addFacts(v.(ast.Object)), nil
	case json.RawMessage:
		return parsedWithFacts(bytes.TrimSpace(x))
	case []byte:
		return parsedWithFacts(bytes.TrimSpace(x))
	}
	v, err := ast.InterfaceToValue(input)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(ast.Object); !ok {
		return nil, fmt.Errorf("input is %s, want an object", ast.ValueName(v))
	}
	return v, nil
}

// parsedWithFacts is parseJSONObject with the engine's facts added.
func parsedWithFacts(doc []byte) (ast.Value, error) {
	v, err := parseJSONObject(doc)
	if err != nil {
		return nil, err
	}
	return addFacts(v.(ast.Object)), nil
}

// resultValue is the value of a single-expression query, and false when it is undefined.
func resultValue(rs rego.ResultSet) (ast.Value, bool) {
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, false
	}
	v, ok := rs[0].Expressions[0].Value.(ast.Value)
	return v, ok
}

// parseDecision checks the shape of a decision and converts it; memo keeps the last obligations
// converted.
func parseDecision(v ast.Value, memo *obligationsMemo) (Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("the decision is %s, want an object", ast.ValueName(v))
	}
	var d Decision
	hasAllow := false
	err := obj.Iter(func(k, val *ast.Term) error {
		key, ok := k.Value.(ast.String)
		if !ok {
			return fmt.Errorf("the decision has a %s key, want string keys", ast.ValueName(k.Value))
		}
		switch key {
		case "allow":
			b, ok := val.Value.(ast.Boolean)
			if !ok {
				return fmt.Errorf("decision.allow is %s, want a boolean", ast.ValueName(val.Value))
			}
			d.Allow, hasAllow = bool(b), true
		case "code":
			s, ok := val.Value.(ast.String)
			if !ok {
				return fmt.Errorf("decision.code is %s, want a string", ast.ValueName(val.Value))
			}
			d.Code = string(s)
		case "reasons":
			reasons, err := stringList(val.Value)
			if err != nil {
				return fmt.Errorf("decision.reasons: %w", err)
			}
			d.Reasons = reasons
		case "obligations":
			o, ok := val.Value.(ast.Object)
			if !ok {
				return fmt.Errorf("decision.obligations is %s, want an object", ast.ValueName(val.Value))
			}
			if o.Len() == 0 {
				return nil
			}
			m, err := memo.convert(o)
			if err != nil {
				return fmt.Errorf("decision.obligations: %w", err)
			}
			d.Obligations = m
		default:
			return fmt.Errorf("the decision has an unknown key %.64q", string(key))
		}
		return nil
	})
	if err != nil {
		return Decision{}, err
	}
	if !hasAllow {
		return Decision{}, errors.New("the decision has no allow")
	}
	return d, nil
}

// stringList converts a set or array of strings (a set comes out sorted). The strings are
// copied, all into one allocation: a string of the input is a substring of the whole input
// document (parseJSONObject), which a result kept in a cache must not hold on to.
func stringList(v ast.Value) ([]string, error) {
	var list []ast.String
	add := func(t *ast.Term) error {
		s, ok := t.Value.(ast.String)
		if !ok {
			return fmt.Errorf("holds %s, want only strings", ast.ValueName(t.Value))
		}
		list = append(list, s)
		return nil
	}
	switch x := v.(type) {
	case ast.Set:
		list = make([]ast.String, 0, x.Len())
		if err := x.Iter(add); err != nil {
			return nil, err
		}
	case *ast.Array:
		list = make([]ast.String, 0, x.Len())
		for i := range x.Len() {
			if err := add(x.Elem(i)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("is %s, want a set or array of strings", ast.ValueName(v))
	}
	n := 0
	for _, s := range list {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range list {
		b.WriteString(string(s))
	}
	all := b.String()
	out := make([]string, len(list))
	for i, s := range list {
		out[i], all = all[:len(s)], all[len(s):]
	}
	return out, nil
}

// obligationsMemo keeps the Go form of the last obligations a policy set's decisions gave:
// the built-in set gives every read the same ({"maxReadBytes": ...}), and converting them was
// most of what reading a decision cost. Decisions share it (see Decide).
type obligationsMemo struct {
	last atomic.Pointer[convertedObligations]
}

// convertedObligations are obligations and their Go form.
type convertedObligations struct {
	value ast.Object
	m     map[string]any
}

// convert returns o as Go values, which hold nothing of the input document (detach).
func (memo *obligationsMemo) convert(o ast.Object) (map[string]any, error) {
	if last := memo.last.Load(); last != nil && last.value.Compare(o) == 0 {
		return last.m, nil
	}
	j, err := ast.JSON(o)
	if err != nil {
		return nil, err
	}
	m, _ := detach(j).(map[string]any)
	memo.last.Store(&convertedObligations{value: o, m: m})
	return m, nil
}

// detach copies every string in a JSON value (ast.JSON's output: maps, slices, strings and
// json.Number), so that it holds nothing of the input document.
func detach(v any) any {
	switch x := v.(type) {
	case string:
		return strings.Clone(x)
	case json.Number:
		return json.Number(strings.Clone(string(x)))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[strings.Clone(k)] = detach(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = detach(e)
		}
		return out
	}
	return v
}

// parseVisible converts the visible result, a set (or array) of strings.
func parseVisible(v ast.Value) (map[string]bool, error) {
	list, err := stringList(v)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[s] = true
	}
	return out, nil
}
