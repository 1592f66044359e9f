// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command fsbroker is the MCP client-side filesystem broker: MCP servers send
// it roots/list and files/* requests, and it answers them within the roots,
// the consent and the policies the operator set.
//
// Usage:
//
//	fsbroker stdio   [flags]              one session on this process's stdin/stdout
//	fsbroker connect [flags] -- CMD ARGS  start an MCP server over stdio and serve it
//	fsbroker wrap    [flags] -- CMD ARGS  sit between an MCP host (stdio) and a server it starts
//	fsbroker policy test|check [DIR]      test or check a policy set (default: the built-in one)
//	fsbroker eval --input FILE            the decision on one policy input
//	fsbroker grants list|revoke|restore ...  consent grants, and blocks of pre-approved roots
//	fsbroker audit verify|query|tail|export|hash ...  check and read the audit trail
//	fsbroker conformance [--broker CMD]   run the conformance suite against a broker command
//	fsbroker demo [--dir DIR] [--server CMD]  a guided session on built-in defaults
//	fsbroker version [--json]             print the version, commit, Go and OPA versions
//	fsbroker completion bash|zsh|fish|powershell  a shell completion script
//	fsbroker help [COMMAND]               a command's description, flags and examples
//
// The command line is built with cobra (cli.go). Exit status: 0 clean
// session end, 1 runtime failure, 2 usage or configuration error; 3 and 4
// for the policy commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses (docs/protocol.md section 7).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	// A peer that closes its end of stdout must end the session through a
	// write error (logged), not kill the broker with SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
