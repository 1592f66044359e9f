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
	node, dir := tsServerDeps.Installed(t)
	tsServeHostScript.once.Do(func() { tsServeHostScript.path, tsServeHostScript.err = tsCopyScript(dir, "serve-host.mjs") })
	if tsServeHostScript.err != nil {
		t.Fatalf("TypeScript host: %v", tsServeHostScript.err)
	}
	tr := newServeInteropTree(t)
	spec, err := json.Marshal(serveInteropSpec(t, tr))
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, tsServeHostScript.path, specFile)
	cmd.Env = brokerEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript host: %v\n%s", err, tsTail(stderr.String(), 4000))
	}
	var got struct {
		serveInteropOutcome
		ServerVersion struct {
			Name string `json:"name"`
		} `json:"serverVersion"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the TypeScript host printed %q: %v\n%s", out, err, tsTail(stderr.String(), 4000))
	}
	if got.ServerVersion.Name != "fsbroker" {
		t.Errorf("the SDK saw the server %q, want fsbroker", got.ServerVersion.Name)
	}
	checkServeInterop(t, "TypeScript SDK", tr, &got.serveInteropOutcome, nil)
	if t.Failed() {
		t.Logf("the TypeScript host's stderr (fsbroker's log):\n%s", tsTail(stderr.String(), 4000))
	}
}
