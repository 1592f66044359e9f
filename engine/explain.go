// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Explain evaluates the decision for one input, like Decide, and also returns the rules that
// matched, for `fsbroker eval`: one line per rule whose body succeeded, in the order they
// succeeded, as "file:line: rule", where rule is what it produced, for example
//
//	authz.rego:14: data.fsbroker.authz.deny contains "hidden files are not served"
//	authz.rego:30: data.fsbroker.authz.allow = false (default)
//
// Functions are left out; values longer than 200 characters are cut. It is slower than Decide
// (evaluation is traced) and meant for people, not the request path.
func (e *Engine) Explain(ctx context.Context, input any) (Decision, []string, error) {
	set := e.current()
	if set == nil {
		return deny("", reasonNoPolicy), nil, fmt.Errorf("engine: %w", errNoPolicy)
	}
	if err := ctx.Err(); err != nil {
		return deny(set.revision, reasonEvalFailed), nil, fmt.Errorf("engine: %w", err)
	}
	v, err := inputValue(input)
	if err != nil {
		return deny(set.revision, reasonBadInput), nil, fmt.Errorf("engine: decision input: %w", err)
	}
	tr := &ruleTracer{seen: map[string]bool{}}
	rs, err := eval(ctx, set.decision, v, rego.EvalQueryTracer(tr))
	d, err := set.decisionOf(rs, err)
	return d, tr.lines, err
}

// maxExplainedValue is the longest rule or value text Explain shows.
const maxExplainedValue = 200

// ruleTracer records the rules whose bodies succeed during one evaluation.
type ruleTracer struct {
	seen  map[string]bool
	lines []string
}

var _ topdown.QueryTracer = (*ruleTracer)(nil)

// Enabled implements topdown.QueryTracer.
func (*ruleTracer) Enabled() bool { return true }

// Config implements topdown.QueryTracer: bindings are read with Event.Plug, so locals need not
// be copied into every event.
func (*ruleTracer) Config() topdown.TraceConfig { return topdown.TraceConfig{} }

// TraceEvent implements topdown.QueryTracer.
func (t *ruleTracer) TraceEvent(ev topdown.Event) {
	if ev.Op != topdown.ExitOp {
		return
	}
	rule, ok := ev.Node.(*ast.Rule)
	if !ok || len(rule.Head.Args) > 0 {
		return
	}
	line := describeRule(rule, &ev)
	if !t.seen[line] {
		t.seen[line] = true
		t.lines = append(t.lines, line)
	}
}

// describeRule renders a rule that succeeded with the values bound in ev.
func describeRule(rule *ast.Rule, ev *topdown.Event) string {
	var b strings.Builder
	if loc := rule.Location; loc != nil {
		fmt.Fprintf(&b, "%s:%d: ", loc.File, loc.Row)
	}
	ref := rule.Head.Ref()
	if rule.Module != nil && rule.Module.Package != nil {
		ref = rule.Module.Package.Path.Extend(ref)
	}
	plugged := make(ast.Ref, len(ref))
	for i, term := range ref {
		plugged[i] = ev.Plug(term)
	}
	b.WriteString(cut(plugged.String(), maxExplainedValue))
	switch {
	case rule.Head.RuleKind() == ast.MultiValue && rule.Head.Key != nil:
		b.WriteString(" contains ")
		b.WriteString(cut(ev.Plug(rule.Head.Key).String(), maxExplainedValue))
	case rule.Head.Value != nil:
		b.WriteString(" = ")
		b.WriteString(cut(ev.Plug(rule.Head.Value).String(), maxExplainedValue))
	}
	if rule.Default {
		b.WriteString(" (default)")
	}
	return b.String()
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && (s[i]&0xC0) == 0x80 {
		i--
	}
	return s[:i] + "…"
}
