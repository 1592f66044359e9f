// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// The serve section (docs/protocol.md section 8): cases in which the runner plays the MCP host
// against a filesystem MCP server command (fsbroker serve, the reference server
// @modelcontextprotocol/server-filesystem, or any other), over the server's stdin and stdout.
// A case of this section has a host member ([Host]); the runner then sends initialize itself,
// and the steps call the server's tools with tools/call.

// Tags of the serve section.
const (
	// TagDropIn marks a case of the drop-in contract: tool names, arguments and their defaults,
	// result texts and structuredContent, errors. The reference server passes every one.
	TagDropIn = "s8-drop-in"
	// TagEnforce marks a case of what a policy-enforcing server adds: secrets refused and
	// hidden, read-only roots, paths outside the roots (absolute, .., links) refused.
	TagEnforce = "s8-enforce"
	// TagReferenceFails marks a case the reference server is expected to fail, because it does
	// not enforce what the case checks. Every other case of the section, it passes.
	TagReferenceFails = "reference-fails"
)

// PlaceholderDirs stands, in a server command template, for the case's root directories, one
// argument each, with nothing to say which are read-only (the reference server's command line).
// When a serve case's command template holds none of the placeholders, {dirs} is appended.
const PlaceholderDirs = "{dirs}"

// hostName is the clientInfo.name the runner declares when it plays the host.
const hostName = "fsbroker-conformance-host"

// Host is the runner's side of the initialize exchange when it plays the host against a
// filesystem MCP server: the initialize request it sends, and what the result must hold.
type Host struct {
	// ProtocolVersion is the version the runner asks for; default [DefaultVersion].
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Capabilities are the host's capabilities; default none ({}).
	Capabilities any `json:"capabilities,omitempty"`
	// ClientInfo is the host's name and version; default {name: fsbroker-conformance-host}.
	ClientInfo any `json:"clientInfo,omitempty"`
	// Expect is matched against the server's initialize result.
	Expect any `json:"expect,omitempty"`
}

// PlaysHost reports whether the runner plays the host in the case (the serve section), rather
// than the MCP server a broker serves.
func (c *Case) PlaysHost() bool { return c.Host != nil }

// checkHost enforces what the schema does not for a case of the serve section: the runner
// sends initialize itself, so the steps of the broker's handshake have nothing to wait for.
func (c *Case) checkHost() error {
	if c.Host == nil {
		return nil
	}
	if c.Initialize != nil {
		return fmt.Errorf("host and initialize exclude each other: the runner plays the host, or the server a broker serves")
	}
	for i := range c.Steps {
		if c.Steps[i].AwaitInitialize != nil || c.Steps[i].AnswerInitialize != nil {
			return fmt.Errorf("step %d: awaitInitialize and answerInitialize belong to cases that play the server, not the host", i+1)
		}
	}
	return nil
}

// BySection returns the cases of the serve section (those that play the host) when serve is
// true, else the others, in their order.
func BySection(cases []*Case, serve bool) []*Case {
	var out []*Case
	for _, c := range cases {
		if c.PlaysHost() == serve {
			out = append(out, c)
		}
	}
	return out
}

// ServeSuite loads the embedded serve section: the cases under cases/serve, which play the host
// against a filesystem MCP server.
func ServeSuite() ([]*Case, error) {
	cases, err := LoadCases(embedded, "cases")
	if err != nil {
		return nil, err
	}
	return BySection(cases, true), nil
}

// command returns the command template of the case: the server's when the runner plays the
// host, else the broker's.
func (r *Runner) command(c *Case) []string {
	if c.PlaysHost() {
		return r.Server
	}
	return r.Broker
}

// serveTemplate is the server command template with {dirs} appended when it holds no
// placeholder.
func serveTemplate(template []string) []string {
	for _, a := range template {
		switch a {
		case PlaceholderRoots, PlaceholderState, PlaceholderConsent, PlaceholderFlags, PlaceholderDirs:
			return template
		}
	}
	return append(slices.Clip(template), PlaceholderDirs)
}

// hostHandshake plays the host's side of initialize: the request (its id the next number), the
// server's result matched against the case's expectation, then notifications/initialized.
func (cr *caseRun) hostHandshake() bool {
	h := cr.c.Host
	var caps any = map[string]any{}
	if h.Capabilities != nil {
		caps = h.Capabilities
	}
	var info any = map[string]any{"name": hostName, "version": "1.0.0"}
	if h.ClientInfo != nil {
		info = h.ClientInfo
	}
	params, err := cr.v.subst(map[string]any{
		"protocolVersion": orDefault(h.ProtocolVersion, DefaultVersion),
		"capabilities":    caps,
		"clientInfo":      info,
	})
	if err != nil {
		cr.failf("initialize: %v", err)
		return false
	}
	cr.nextID++
	id := json.Number(fmt.Sprint(cr.nextID))
	if err := cr.s.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}); err != nil {
		cr.failf("initialize: %v", err)
		return false
	}
	// checkReply expands the expectation's references; none given, any result will do.
	if why := cr.checkReply("initialize", "initialize", id, &Expect{Result: h.Expect}, true); why != "" {
		cr.failf("%s", why)
		return false
	}
	if err := cr.s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		cr.failf("notifications/initialized: %v", err)
		return false
	}
	cr.ready = true
	return true
}

// summarize writes, for each tag of [Runner.Summary], how many of the cases carrying it passed:
// "s8-enforce: 4 of 12 passed" (skipped cases are not counted).
func (r *Runner) summarize(out io.Writer, results []*Result) {
	for _, tag := range r.Summary {
		passed, ran := 0, 0
		for _, res := range results {
			if res.Skipped != "" || !slices.Contains(res.Case.Tags, tag) {
				continue
			}
			ran++
			if res.Passed() {
				passed++
			}
		}
		fmt.Fprintf(out, "%s: %d of %d passed\n", tag, passed, ran)
	}
}
