// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fsbroker/fsbroker/internal/testlog"
	"github.com/fsbroker/fsbroker/serve"
)

// The official Go SDK's client (mcp.Client over mcp.CommandTransport) as
// the host of a real fsbroker serve: it lists the tools and sends
// serveInteropCalls (serve_interop_test.go) with the SDK's own calls, each
// reply decoded into the SDK's types (content items by their type); the
// structuredContent of each tool's success satisfies the outputSchema the
// server lists (the SDK's client does not check it, so the test does, with
// the JSON Schema draft the schema names). The client has the roots
// capability (the SDK's default) and answers roots/list from its own roots.
func TestServeInteropGoSDK(t *testing.T) {
	t.Parallel()
	tr := newServeInteropTree(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	var rootsListed atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "fsbroker-interop-go-host", Version: "1.0.0"}, nil)
	for _, r := range tr.hostRoots() {
		client.AddRoots(&mcp.Root{URI: r.URI, Name: r.Name})
	}
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				rootsListed.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	cmd := exec.Command(brokerBin, tr.serveArgs()...)
	cmd.Env = brokerEnv()
	var stderr testlog.Lines
	cmd.Stderr = &stderr
	// The SDK probes with server/discover and would take 2026-07-28, which
	// asks for roots inside InputRequiredResults (TestServeModernGoSDK);
	// this table holds the 2025-11-25 session, roots/list requests and all.
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\nfsbroker's log:\n%s", err, stderr.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("fsbroker's log:\n%s", stderr.String())
		}
	}()
	if info := session.InitializeResult(); info == nil || info.ServerInfo == nil || info.ServerInfo.Name != "fsbroker" || info.Capabilities.Tools == nil {
		t.Errorf("initialize result %+v: want fsbroker's, with the tools capability", info)
	} else {
		t.Logf("protocol version %s", info.ProtocolVersion)
	}

	var got serveInteropOutcome
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if err := remarshal(tools.Tools, &got.Tools); err != nil {
		t.Fatal(err)
	}
	spec := serveInteropSpec(t, tr)
	for i, call := range spec["calls"].([]any) {
		c := call.(map[string]any)
		reply, err := goSDKSend(ctx, session, c["method"].(string), c["params"].(map[string]any))
		if err != nil {
			t.Fatalf("row %d (%s): %v", i, c["method"], err)
		}
		got.Replies = append(got.Replies, reply)
	}
	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("fsbroker serve exited with status %d after the client closed, want 0", code)
	}
	got.RootsListed = int(rootsListed.Load())
	checkServeInterop(t, "Go SDK", tr, &got, validateStructured)
}

// TestServeInteropGoSDKElicit: the Go SDK's mcp.Client as the host of
// fsbroker serve run without --consent and without pre-approved roots
// (serveInteropElicitRuns): its ElicitationHandler (which makes it declare
// elicitation) answers fsbroker's consent question, accepting with every
// boolean field of the form true, or declining; it declares the roots
// capability and answers roots/list with the operator's roots.
func TestServeInteropGoSDKElicit(t *testing.T) {
	t.Parallel()
	tr := newServeInteropTree(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, run := range serveInteropElicitRuns("go") {
		var asked atomic.Int32
		client := mcp.NewClient(&mcp.Implementation{Name: run.client, Version: "1.0.0"}, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				if !run.accept {
					return &mcp.ElicitResult{Action: "decline"}, nil
				}
				return acceptEveryField(ctx, req)
			},
		})
		for _, r := range tr.hostRoots() {
			client.AddRoots(&mcp.Root{URI: r.URI, Name: r.Name})
		}
		cmd := exec.Command(brokerBin, tr.elicitArgs()...)
		cmd.Env = brokerEnv()
		// No controlling terminal: no consent prompt can open one.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		var stderr testlog.Lines
		cmd.Stderr = &stderr
		session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("%s: connect: %v\nfsbroker's log:\n%s", run.client, err, stderr.String())
		}
		params := tr.expand(t, serveInteropElicitCall.params()).(map[string]any)
		reply, err := goSDKSend(ctx, session, "tools/call", params)
		if err != nil {
			t.Fatalf("%s: %v", run.client, err)
		}
		if err := session.Close(); err != nil {
			t.Errorf("%s: close: %v", run.client, err)
		}
		checkServeInteropElicit(t, "Go SDK", tr, run, serveInteropElicitOutcome{Reply: reply, Elicitations: int(asked.Load())})
		if t.Failed() {
			t.Fatalf("fsbroker's log:\n%s", stderr.String())
		}
	}
}

// goSDKSend sends one request with the Go SDK's call for its method and
// returns the reply as {"result": ...} (the SDK's typed result, encoded
// again) or {"error": {"code", "message"}}; any other failure of the call
// is an error.
func goSDKSend(ctx context.Context, s *mcp.ClientSession, method string, params map[string]any) (json.RawMessage, error) {
	var (
		result any
		err    error
	)
	switch method {
	case "tools/call":
		result, err = goSDKCall(params, func(p *mcp.CallToolParams) (any, error) { return s.CallTool(ctx, p) })
	case "resources/list":
		result, err = goSDKCall(params, func(p *mcp.ListResourcesParams) (any, error) { return s.ListResources(ctx, p) })
	case "resources/templates/list":
		result, err = goSDKCall(params, func(p *mcp.ListResourceTemplatesParams) (any, error) { return s.ListResourceTemplates(ctx, p) })
	case "resources/read":
		result, err = goSDKCall(params, func(p *mcp.ReadResourceParams) (any, error) { return s.ReadResource(ctx, p) })
	case "resources/subscribe":
		result, err = goSDKCall(params, func(p *mcp.SubscribeParams) (any, error) { return map[string]any{}, s.Subscribe(ctx, p) })
	default:
		return nil, fmt.Errorf("no Go SDK call for %s", method)
	}
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &wire):
		return json.Marshal(map[string]any{"error": map[string]any{"code": wire.Code, "message": wire.Message}})
	case err != nil:
		return nil, err
	}
	return json.Marshal(map[string]any{"result": result})
}

// goSDKCall decodes params into the SDK's params type P and makes the call.
func goSDKCall[P any](params map[string]any, call func(*P) (any, error)) (any, error) {
	var p P
	if err := remarshal(params, &p); err != nil {
		return nil, err
	}
	return call(&p)
}

// remarshal converts from into to through JSON.
func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// validateStructured validates structured content against a tool's
// outputSchema; a tool with an outputSchema must give structured content.
func validateStructured(tool string, schema, structured any) error {
	if schema == nil {
		return nil
	}
	if structured == nil {
		return fmt.Errorf("%s has an outputSchema but its result has no structuredContent", tool)
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + tool + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("%s's outputSchema: %w", tool, err)
	}
	b, err = json.Marshal(structured)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// TestServeInteropValidateStructured: the check of structured content
// against an outputSchema refuses what the schema does not allow.
func TestServeInteropValidateStructured(t *testing.T) {
	defs, err := serve.Tools()
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	for _, d := range defs {
		if d.Name == serve.ToolReadTextFile {
			if err := json.Unmarshal(d.OutputSchema, &schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := validateStructured(serve.ToolReadTextFile, schema, map[string]any{"content": "text"}); err != nil {
		t.Errorf("a valid result refused: %v", err)
	}
	for _, bad := range []any{nil, map[string]any{}, map[string]any{"content": 5}, map[string]any{"content": "x", "more": 1}} {
		if err := validateStructured(serve.ToolReadTextFile, schema, bad); err == nil {
			t.Errorf("structuredContent %v accepted", bad)
		}
	}
}
