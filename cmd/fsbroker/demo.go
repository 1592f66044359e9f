// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/fsbroker/fsbroker/broker/transport/child"
	"github.com/fsbroker/fsbroker/cmd/internal/exampleserver"
)

// exampleServerCommand is a hidden command: `fsbroker __example-server
// [-script NAME] [-http ADDR]` is the example server's raw, scripted mode
// (cmd/internal/exampleserver, what `example-server -script NAME` runs),
// built into fsbroker so that `fsbroker demo` has a server process to start
// when no example-server executable sits next to fsbroker (`go run
// ./cmd/fsbroker demo`). It is not for people: the usage text and help leave
// it out.
const exampleServerCommand = "__example-server"

// newExampleServerCommand returns the hidden exampleServerCommand. It takes
// the example server's own flags, Go style (-script NAME), as
// example-server does: they are parsed here, not by cobra.
func newExampleServerCommand() *cobra.Command {
	return &cobra.Command{
		Use:                exampleServerCommand,
		Short:              "the example MCP server's scripted mode (the demo's server)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExampleServer(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// runExampleServer runs the hidden exampleServerCommand.
func runExampleServer(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("fsbroker "+exampleServerCommand, flag.ContinueOnError)
	flags.SetOutput(stderr)
	script := flags.String("script", exampleserver.DemoScript, "the script `NAME`")
	httpAddr := flags.String("http", "", "serve Streamable HTTP at /mcp on `ADDR` instead of stdio")
	if err := flags.Parse(args); err != nil {
		return &configError{msg: err.Error()}
	}
	if flags.NArg() > 0 {
		return configErrorf("%s takes no arguments, got %q", exampleServerCommand, flags.Args())
	}
	return exampleserver.Run(ctx, exampleserver.Config{Script: *script, HTTPAddr: *httpAddr,
		In: stdin, Out: stdout, Report: stderr})
}

const demoLong = `A guided session on built-in defaults, to see what fsbroker does before configuring it. The
demo makes a small project in DIR (a read-only root, with a secret .env, and a writable scratch
root), starts the project's example MCP server as a separate process and serves it exactly as
fsbroker connect does, on the built-in policies, with consent answered by the auto provider.
The server asks for files: it lists its roots, asks for consent, reads, writes, watches, and
tries what the policies refuse (a write in the read-only root, the secret, a path climbing out
of its root); it prints one line per request with fsbroker's answer. Then the demo prints the
session's audit trail and verifies it.

With --serve, fsbroker plays the other role, the filesystem MCP server a host runs: the demo
starts fsbroker serve on the same project as a separate process and plays the host, calling its
tools (the reference filesystem server's) with the same allowed and refused requests, one line
per call with the result or the refusal; then the audit trail as above.

Every line the demo prints fits in 100 columns. With --dir DIR, the files, state and audit
trail stay in DIR to look at (fsbroker audit query --state-dir DIR/state); without it, the demo
works in a new temporary directory and removes it at the end.`

// newDemoCommand returns `fsbroker demo`.
func newDemoCommand() *cobra.Command {
	var (
		dir        string
		serverLine string
		serveRole  bool
	)
	c := &cobra.Command{
		Use:   "demo [flags]",
		Short: "a guided session on built-in defaults: decisions and the audit trail",
		Long:  demoLong,
		Example: `  # In a new temporary directory
  fsbroker demo

  # Keep the demo's files and trail, and read the trail again
  fsbroker demo --dir /tmp/fsbroker-demo
  fsbroker audit query --state-dir /tmp/fsbroker-demo/state --decision deny

  # fsbroker as the filesystem MCP server, the demo as the host calling its tools
  fsbroker demo --serve`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serveRole {
				if cmd.Flags().Changed("server") {
					return configErrorf("--server names the example server, which --serve does not start: give one or the other")
				}
				return runDemoServe(cmd.Context(), dir, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return runDemo(cmd.Context(), dir, serverLine, cmd.Flags().Changed("server"), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "`DIR` for the demo's files, state and audit trail, kept (default: a new temporary directory, removed at the end)")
	c.Flags().StringVar(&serverLine, "server", "", "the example server `COMMAND` line, split at spaces, to which \"-script demo\" is added "+
		"(default: example-server next to this fsbroker, as make build puts it in bin/, else this fsbroker itself)")
	c.Flags().BoolVar(&serveRole, "serve", false, "fsbroker as the filesystem MCP server (fsbroker serve, a separate process) and the demo as the host calling its tools")
	return c
}

// runDemo runs `fsbroker demo`: a guided session on built-in defaults. The
// project's example MCP server runs its demo script as a separate process,
// started and served on its stdin and stdout exactly as `fsbroker connect`
// does; the server prints one line per request with the broker's answer;
// then the session's audit trail is shown and verified.
func runDemo(ctx context.Context, dir, serverLine string, serverGiven bool, stdout, stderr io.Writer) error {
	argv, err := demoServerCommand(serverLine, serverGiven)
	if err != nil {
		return err
	}
	ws, err := newDemoWorkspace(dir, stdout, stderr)
	if err != nil {
		return err
	}
	defer ws.cleanup()
	dir, kept, project, scratch, state := ws.dir, ws.kept, ws.project, ws.scratch, ws.state
	stdout, stderr = ws.stdout, ws.stderr

	o, _, err := parseOptions("connect", []string{"--root", project, "--root", scratch + ":rw",
		"--state-dir", state, "--log-level", "error", "--max-write-bytes", "1024", "--consent", "auto"})
	if err != nil {
		return err
	}
	s, cfg, err := configure(o, stderr)
	if err != nil {
		return err
	}
	// The server's stderr is its report: package child logs each line of it
	// at Info, and this logger writes those lines to the demo's output.
	report := &serverReport{Logger: s.log.Named("server"), out: stdout}
	cfg.Consent = &demoConsent{Provider: cfg.Consent, report: report}
	if err := s.open(cfg); err != nil {
		return err
	}
	defer s.close()

	fmt.Fprintf(stdout, "fsbroker demo: the project's example MCP server asks fsbroker for files.\n")
	fmt.Fprintf(stdout, "  in %s: %s\n", dir, demoDirNote(kept))
	fmt.Fprintf(stdout, "  roots: project (read-only), scratch (writable), neither pre-approved; built-in policies\n")
	fmt.Fprintf(stdout, "  consent answered by the auto provider, which approves what the server asks for and the\n")
	fmt.Fprintf(stdout, "  policy lets be granted (the default is a prompt on your terminal); audit trail in state/audit\n")
	proc, err := child.Start(argv[0], argv[1:], report)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return configErrorf("demo server command %q: %v", argv[0], err)
		}
		return fmt.Errorf("start the demo server: %w", err)
	}
	s.proc = proc
	fmt.Fprintf(stdout, "  server: %s, pid %d: a separate process, which fsbroker (pid %d) started and serves "+
		"on its stdin and stdout as fsbroker connect does\n\n", strings.Join(argv, " "), proc.PID(), os.Getpid())
	if err := s.serveProcess(ctx, proc); err != nil {
		return err
	}
	s.close() // flush the trail and its last checkpoint before reading it

	fmt.Fprintf(stdout, "\nThe audit trail (paths under %s; fsbroker audit query --state-dir %s shows it whole):\n\n",
		dir, state)
	if err := printDemoTrail(ctx, stdout, filepath.Join(state, "audit"), dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nIs it intact? (fsbroker audit verify --state-dir %s)\n\n", state)
	return execute(ctx, []string{"audit", "verify", "--state-dir", state}, nil, stdout, stderr)
}

// demoWorkspace is what both demos start from: their output wrapped to
// demoWidth, and the demo's directory with the example server's workspace
// seeded in it (exampleserver.SeedDemo) and the state directory's path.
type demoWorkspace struct {
	stdout, stderr          io.Writer
	dir                     string
	kept                    bool // dir was given (--dir), not made
	project, scratch, state string
	cleanup                 func() // removes a directory the demo made
}

// newDemoWorkspace makes the demo's workspace in dir when given (kept),
// else in a new temporary directory that cleanup removes (saying on stderr
// when it cannot).
func newDemoWorkspace(dir string, stdout, stderr io.Writer) (*demoWorkspace, error) {
	ws := &demoWorkspace{stdout: &wrapWriter{w: stdout, width: demoWidth}, stderr: &wrapWriter{w: stderr, width: demoWidth},
		dir: dir, kept: dir != "", cleanup: func() {}}
	if !ws.kept {
		d, err := os.MkdirTemp("", "fsbroker-demo-")
		if err != nil {
			return nil, fmt.Errorf("demo directory: %w", err)
		}
		ws.dir = d
		ws.cleanup = func() {
			if err := os.RemoveAll(d); err != nil {
				fmt.Fprintf(ws.stderr, "fsbroker: demo: cannot remove its temporary directory: %v\n", err)
			}
		}
	}
	var err error
	if ws.project, ws.scratch, err = exampleserver.SeedDemo(ws.dir); err != nil {
		ws.cleanup()
		return nil, err
	}
	ws.state = filepath.Join(ws.dir, "state")
	return ws, nil
}

// demoDirNote says what becomes of the demo's directory.
func demoDirNote(kept bool) string {
	if kept {
		return "the directory you gave, kept"
	}
	return "a temporary directory, removed at the end (--dir DIR keeps one)"
}

// demoServerCommand returns the command line of the demo's server: the
// --server line when given, else example-server next to this executable
// (make build puts both in bin/), else this executable's hidden
// exampleServerCommand; -script demo is added.
func demoServerCommand(line string, given bool) ([]string, error) {
	script := []string{"-script", exampleserver.DemoScript}
	if given {
		argv := strings.Fields(line)
		if len(argv) == 0 {
			return nil, configErrorf("--server: empty command line")
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return nil, configErrorf("--server %q: %v", line, err)
		}
		return append(argv, script...), nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the fsbroker executable, to start the demo server: %w", err)
	}
	name := "example-server"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if sibling := filepath.Join(filepath.Dir(self), name); isRegularFile(sibling) {
		return append([]string{sibling}, script...), nil
	}
	return append([]string{self, exampleServerCommand}, script...), nil
}

// isRegularFile reports whether path names a regular file (links followed).
func isRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// serverReport is the logger the demo gives its server's process. Package
// child logs each line the server writes to stderr at Info: those lines are
// the server's report (one per request), and go to out as they are, as they
// come. Everything else goes to the broker's log.
type serverReport struct {
	hclog.Logger
	mu      sync.Mutex
	out     io.Writer
	consent []string // why paths were not approvable, for the next files/consent lines
}

// Info writes msg, one of the server's stderr lines, to the demo's output;
// a files/consent line is followed by why paths were not approvable.
func (r *serverReport) Info(msg string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.out, msg)
	if len(r.consent) > 0 && strings.Contains(msg, " files/consent ") {
		fmt.Fprintln(r.out, r.consent[0])
		r.consent = r.consent[1:]
	}
}

// explainNextConsent has why follow the server's next files/consent line.
func (r *serverReport) explainNextConsent(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.consent = append(r.consent, why)
}

// serveProcess serves the server process proc until the session ends, then
// stops it, as runConnect does (serveChild); a server that fails is an error.
func (s *setup) serveProcess(ctx context.Context, proc *child.Process) error {
	serveErr, exitedOnItsOwn := s.serveChild(ctx, proc)
	switch {
	case serveErr != nil:
		return serveErr
	case ctx.Err() != nil:
		return fmt.Errorf("demo interrupted: %w", ctx.Err())
	case !exitedOnItsOwn || proc.ExitCode() != 0:
		return fmt.Errorf("the demo server failed (%s)", proc.ExitDescription())
	}
	return nil
}
