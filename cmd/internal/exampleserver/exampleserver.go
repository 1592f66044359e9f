// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package exampleserver is the raw, scripted mode of the project's example
// MCP server. The example server's default mode is built on the official Go
// SDK, which cannot send requests of its own such as files/read; this mode is
// JSON-RPC written by hand, so that it can: once the client (fsbroker) has
// initialized the session, it sends the client a script of roots/list and
// files/* requests, one at a time, and writes one human-readable line per
// request, with the client's answer, to a report writer (and one line per
// change event the client sends).
//
// It speaks newline-delimited JSON-RPC on stdio, or serves MCP's Streamable
// HTTP transport (protocol revision 2025-11-25) at /mcp, by hand with
// net/http (see Run). cmd/example-server runs it for -script NAME, and
// `fsbroker demo` starts it as a separate process under the broker (as
// cmd/example-server, or as the fsbroker binary itself when no example-server
// executable sits next to it).
package exampleserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultEventWait is how long Run waits, after a step that expects one, for
// the client's change event before it goes on without it.
const DefaultEventWait = 5 * time.Second

// ServerName is the name the scripted server declares in its initialize
// result (serverInfo.name); the broker's audit trail shows it.
const ServerName = "example-server"

// Step is one request of a script.
type Step struct {
	// Method is the request's method (roots/list, files/read, ...).
	Method string
	// Params are the request's params; nil sends none.
	Params map[string]any
	// AwaitEvent makes the server wait, once the request has succeeded, for
	// a notifications/files/changed from the client (a watch's report of the
	// change the request made) before the next step, up to Config.EventWait.
	AwaitEvent bool
}

// DemoScript is the name of the guided session of `fsbroker demo`.
const DemoScript = "demo"

// demoSteps is the demo script: the roots, consent (narrowed by the
// policy), then each built-in rule allowing or refusing once. It expects the
// workspace SeedDemo makes: a read-only root mounted as project and a
// writable one mounted as scratch.
var demoSteps = []Step{
	{Method: "roots/list"},
	// Before anyone consented (refused unless the roots are pre-approved).
	{Method: "files/read", Params: map[string]any{"path": "project/src/main.go"}},
	// Read consent: the policy narrows it to project (.env is a secret, /etc
	// is outside every root).
	{Method: "files/consent", Params: map[string]any{"message": "to index your code",
		"requestedPaths": []string{"project", "project/.env", "/etc"}}},
	// Write consent: scratch only (project is a read-only root).
	{Method: "files/consent", Params: map[string]any{"message": "to save notes", "access": "write",
		"requestedPaths": []string{"project/README.md", "scratch"}}},
	{Method: "files/list", Params: map[string]any{"path": "project"}},
	{Method: "files/read", Params: map[string]any{"path": "project/src/main.go"}},
	{Method: "files/read", Params: map[string]any{"path": "project/.env"}},
	{Method: "files/write", Params: map[string]any{"path": "project/README.md", "content": "pwned"}},
	{Method: "files/watch", Params: map[string]any{"path": "scratch", "recursive": true}},
	{Method: "files/write", Params: map[string]any{"path": "scratch/notes.md", "content": "# Notes\n"}, AwaitEvent: true},
	{Method: "files/read", Params: map[string]any{"path": "project/../../etc/passwd"}},
	{Method: "files/write", Params: map[string]any{"path": "scratch/big.bin", "content": strings.Repeat("x", 2048)}},
}

// Scripts returns the names of the scripts Run can play.
func Scripts() []string { return []string{DemoScript} }

// Script returns a copy of the named script's steps.
func Script(name string) ([]Step, error) {
	switch name {
	case DemoScript:
		return append([]Step(nil), demoSteps...), nil
	}
	return nil, fmt.Errorf("unknown script %q (known: %s)", name, strings.Join(Scripts(), ", "))
}

// DemoFiles are the sample files SeedDemo writes, by path relative to its
// directory. project/.env stands for a secret that no server may read.
var DemoFiles = map[string]string{
	"project/README.md":   "# Demo project\n",
	"project/src/main.go": "package main\n\nfunc main() {}\n",
	"project/.env":        "API_TOKEN=not-for-servers\n",
}

// SeedDemo makes the workspace the demo script expects under dir: the
// project directory with DemoFiles (to be served read-only, mounted as
// project) and an empty scratch directory (to be served writable, mounted as
// scratch). It returns both directories' paths.
func SeedDemo(dir string) (project, scratch string, err error) {
	project, scratch = filepath.Join(dir, "project"), filepath.Join(dir, "scratch")
	for name, content := range DemoFiles {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", "", fmt.Errorf("demo workspace: %w", err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", "", fmt.Errorf("demo workspace: %w", err)
		}
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", "", fmt.Errorf("demo workspace: %w", err)
	}
	return project, scratch, nil
}

// Config says what Run plays and where.
type Config struct {
	// Script is the name of the script to play (see Scripts).
	Script string
	// HTTPAddr, when set, makes Run serve Streamable HTTP at /mcp on this
	// host:port (port 0 picks a free one) instead of using In and Out.
	HTTPAddr string
	// In carries the client's messages on stdio, one JSON object a line.
	In io.Reader
	// Out carries the server's messages to the client on stdio.
	Out io.Writer
	// Report gets the human-readable lines: one per request with the
	// client's answer, one per change event, and a few about the session
	// (over HTTP, first "listening on URL"). Nil discards them.
	Report io.Writer
	// EventWait bounds the wait for a change event after a step that
	// expects one (DefaultEventWait when zero).
	EventWait time.Duration
}

// Run plays the script as an MCP server for one session.
//
// On stdio it answers the client's initialize, waits for
// notifications/initialized, sends the script's requests one at a time and
// returns once the last one is answered: the caller then exits, which ends
// the session (MCP's stdio transport has the server close its output).
//
// Over Streamable HTTP it listens on Config.HTTPAddr and serves one session
// at /mcp: POST initialize gets a JSON reply with an Mcp-Session-Id; the
// client's other messages (notifications, and its replies to the server's
// requests) get 202 Accepted; a request the client POSTs (ping) gets its
// reply as JSON; GET opens the event stream on which the server sends its own
// requests and notifications; DELETE ends the session. Once the script is
// done it keeps answering until the client ends the session (DELETE) or ctx
// ends, and then returns nil. Events are not numbered, so a broken event
// stream is not resumed (a client opens a fresh one).
//
// The requests, their answers and the client's change events are written to
// Config.Report as they happen.
func Run(ctx context.Context, c Config) error {
	steps, err := Script(c.Script)
	if err != nil {
		return err
	}
	report := c.Report
	if report == nil {
		report = io.Discard
	}
	wait := c.EventWait
	if wait <= 0 {
		wait = DefaultEventWait
	}
	if c.HTTPAddr == "" {
		if c.In == nil || c.Out == nil {
			return errors.New("exampleserver: stdio needs Config.In and Config.Out")
		}
		p := &peer{t: newStdioTransport(c.In, c.Out), report: report, eventWait: wait, transport: "stdio"}
		return p.play(ctx, c.Script, steps)
	}
	return runHTTP(ctx, c.HTTPAddr, report, wait, c.Script, steps)
}

// runHTTP serves the script over Streamable HTTP at /mcp on addr.
func runHTTP(ctx context.Context, addr string, report io.Writer, wait time.Duration, script string, steps []Step) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for Streamable HTTP: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := newHTTPTransport()
	mux := http.NewServeMux()
	mux.Handle("/mcp", t)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		served <- err
		cancel() // a server that stopped serving ends the script too
	}()
	fmt.Fprintf(report, "listening on http://%s/mcp\n", ln.Addr())

	p := &peer{t: t, report: report, eventWait: wait, transport: "Streamable HTTP"}
	err = p.play(ctx, script, steps)
	if err == nil {
		err = p.serveUntilEnd(ctx)
	}
	// The DELETE that ended the session has had its reply; the event
	// streams end with the session. Shutdown waits for both, briefly.
	shutdownCtx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(shutdownCtx)
	stop()
	_ = srv.Close()
	if serveErr := <-served; serveErr != nil {
		return fmt.Errorf("serve Streamable HTTP on %s: %w", ln.Addr(), serveErr)
	}
	return err
}
