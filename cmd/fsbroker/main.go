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
//
// Exit status: 0 clean session end, 1 runtime failure, 2 usage or
// configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses (PROTOCOL.md section 7).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usageText = `fsbroker: the MCP client-side filesystem broker.

Usage:
  fsbroker stdio   [flags]              serve one MCP server on this process's stdin/stdout
  fsbroker connect [flags] -- CMD ARGS  start an MCP server as a child process and serve it
  fsbroker wrap    [flags] -- CMD ARGS  sit between an MCP host (this process's stdio) and the server CMD
  fsbroker policy test [--verbose] [DIR] run the Rego tests with coverage (exit 3 compile error, 4 test failure)
  fsbroker policy check [DIR]           compile and type-check the policies (exit 3 on error)
  fsbroker eval --input FILE            the decision on one policy input, and the rules that matched
  fsbroker grants list|revoke|restore ...  consent grants, and blocks of pre-approved roots ("fsbroker help grants")
  fsbroker audit verify|query|tail|export|hash ...  check and read the audit trail ("fsbroker help audit")
  fsbroker conformance [--broker CMD]   run the conformance suite against a broker command ("fsbroker conformance -h")
  fsbroker demo [--dir DIR] [--server CMD]  a guided session on built-in defaults: decisions and the audit trail
  fsbroker version [--json]             print the version, commit, Go and OPA versions
  fsbroker help [COMMAND]               show help

Run "fsbroker help COMMAND" for a command's flags.
Exit status: 0 clean session end, 1 runtime failure, 2 usage or configuration error.
`

func main() {
	// A peer that closes its end of stdout must end the session through a
	// write error (logged), not kill the broker with SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status. ctx ends on
// SIGINT or SIGTERM, which stops a session gracefully.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "stdio":
		err = runStdio(ctx, rest, stdin, stdout, stderr)
	case "connect":
		err = runConnect(ctx, rest, stderr)
	case "wrap":
		err = runWrap(ctx, rest, stdin, stdout, stderr)
	case "policy":
		err = runPolicy(ctx, rest, stdout, stderr)
	case "eval":
		err = runEval(ctx, rest, stdout, stderr)
	case "grants":
		err = runGrants(ctx, rest, stdout, stderr)
	case "audit":
		err = runAudit(ctx, rest, stdout, stderr)
	case "demo":
		err = runDemo(ctx, rest, stdout, stderr)
	case "conformance":
		err = runConformance(ctx, rest, stdout, stderr)
	case exampleServerCommand: // hidden: the demo's server when example-server is missing (demo.go)
		err = runExampleServer(ctx, rest, stdin, stdout, stderr)
	case "version", "--version":
		err = runVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		err = runHelp(rest, stdout)
	default:
		err = configErrorf("unknown command %q (run \"fsbroker help\")", cmd)
	}
	return exitStatus(err, stderr)
}

// exitStatus maps a command's error to its exit status, printing it.
func exitStatus(err error, stderr io.Writer) int {
	var (
		cerr    *configError
		codeErr *exitCodeError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelpShown):
		return exitOK
	case errors.As(err, &codeErr):
		return codeErr.code
	case errors.As(err, &cerr):
		fmt.Fprintln(stderr, "fsbroker:", err)
		return exitUsage
	case errors.Is(err, errAlreadyLogged):
		return exitFailure
	default:
		fmt.Fprintln(stderr, "fsbroker:", err)
		return exitFailure
	}
}

var (
	// errHelpShown ends a command after -h printed its help.
	errHelpShown = errors.New("help shown")
	// errAlreadyLogged is a runtime failure whose reason is already in the log.
	errAlreadyLogged = errors.New("failure already logged")
)

func runHelp(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usageText)
		return nil
	}
	for _, g := range []*commandGroup{auditCommands, grantsCommands} {
		if args[0] == g.name {
			return g.help(args[1:], stdout)
		}
	}
	// Commands with flag sets of their own print them for -h.
	switch args[0] {
	case "conformance":
		return runConformance(context.Background(), []string{"-h"}, stdout, stdout)
	case "demo":
		return runDemo(context.Background(), []string{"-h"}, stdout, stdout)
	case "eval":
		return runEval(context.Background(), []string{"-h"}, stdout, stdout)
	case "policy":
		sub := "test"
		if len(args) > 1 {
			sub = args[1]
		}
		return runPolicy(context.Background(), []string{sub, "-h"}, stdout, stdout)
	}
	fs, _ := newFlagSet(args[0], stdout)
	if fs == nil {
		return configErrorf("unknown command %q (run \"fsbroker help\")", args[0])
	}
	fs.Usage()
	return nil
}
