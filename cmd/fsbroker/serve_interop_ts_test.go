// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// tsServeHostScript is the TypeScript host of fsbroker serve, copied next to
// its installed dependencies (those of testdata/ts-server), shared by the
// tests of one test process.
var tsServeHostScript struct {
	once sync.Once
	path string
	err  error
}

// tsServeHostOutcome is what serve-host.mjs printed.
type tsServeHostOutcome struct {
	serveInteropOutcome
	ServerVersion struct {
		Name string `json:"name"`
	} `json:"serverVersion"`
	Elicitations int `json:"elicitations"`
}

// runTSServeHost runs serve-host.mjs with spec (its members are the
// script's) and returns what it printed; without node and npm the test
// skips, unless FSBROKER_REQUIRE_INTEROP=1. The host has no controlling
// terminal (nor has fsbroker, its child), so no consent prompt can open one.
func runTSServeHost(t *testing.T, spec map[string]any) tsServeHostOutcome {
	t.Helper()
	node, dir := tsServerDeps.Installed(t)
	tsServeHostScript.once.Do(func() { tsServeHostScript.path, tsServeHostScript.err = tsCopyScript(dir, "serve-host.mjs") })
	if tsServeHostScript.err != nil {
		t.Fatalf("TypeScript host: %v", tsServeHostScript.err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, tsServeHostScript.path, specFile)
	cmd.Env = brokerEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript host: %v\n%s", err, tsTail(stderr.String(), 4000))
	}
	var got tsServeHostOutcome
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the TypeScript host printed %q: %v\n%s", out, err, tsTail(stderr.String(), 4000))
	}
	if got.ServerVersion.Name != "fsbroker" {
		t.Errorf("the SDK saw the server %q, want fsbroker", got.ServerVersion.Name)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the TypeScript host's stderr (fsbroker's log):\n%s", tsTail(stderr.String(), 4000))
		}
	})
	return got
}

// The official TypeScript SDK's Client (over StdioClientTransport, from
// testdata/ts-server/serve-host.mjs, the SDK pinned by its lock file) as the
// host of a real fsbroker serve: it lists the tools and sends
// serveInteropCalls (serve_interop_test.go) with the SDK's own calls; the SDK
// checks each tool's structuredContent against the outputSchema the server
// listed (a mismatch fails the call, and so its row). It declares the roots
// capability and answers roots/list from its own handler. Without node and
// npm the test skips, unless FSBROKER_REQUIRE_INTEROP=1.
func TestServeInteropTSSDK(t *testing.T) {
	t.Parallel()
	tr := newServeInteropTree(t)
	got := runTSServeHost(t, serveInteropSpec(t, tr))
	checkServeInterop(t, "TypeScript SDK", tr, &got.serveInteropOutcome, nil)
}

// TestServeInteropTSSDKElicit: the TypeScript SDK's Client as the host of
// fsbroker serve run without --consent and without pre-approved roots
// (serveInteropElicitRuns): it declares elicitation (form mode) and answers
// fsbroker's consent question from its handler for ElicitRequestSchema,
// accepting with every boolean field of the form true, or declining; it
// declares the roots capability and answers roots/list with the operator's
// roots.
func TestServeInteropTSSDKElicit(t *testing.T) {
	t.Parallel()
	tr := newServeInteropTree(t)
	for _, run := range serveInteropElicitRuns("ts") {
		elicit := "decline"
		if run.accept {
			elicit = "accept"
		}
		got := runTSServeHost(t, map[string]any{
			"command": append([]string{brokerBin}, tr.elicitArgs()...),
			"roots":   tr.hostRoots(),
			"calls":   []any{map[string]any{"method": "tools/call", "params": tr.expand(t, serveInteropElicitCall.params())}},
			"name":    run.client,
			"elicit":  elicit,
		})
		if len(got.Replies) != 1 {
			t.Fatalf("%s: %d replies, want 1", run.client, len(got.Replies))
		}
		checkServeInteropElicit(t, "TypeScript SDK", tr, run, serveInteropElicitOutcome{Reply: got.Replies[0], Elicitations: got.Elicitations})
	}
}
