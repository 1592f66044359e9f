// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/roots"
	"github.com/fsbroker/fsbroker/broker/transport/child"
)

const stdioLong = `Serve one MCP server on this process's stdin and stdout: fsbroker plays the MCP client,
sends initialize, and answers the server's roots/list and files/* requests (files/read,
files/write, files/list, files/create, files/delete, files/rename, files/watch, files/consent)
within the roots, the consent and the policies, recording each decision in the audit trail.
stdout carries only protocol messages; the log goes to stderr. The session ends when the input
closes, or on SIGINT or SIGTERM.

Use stdio when something else holds the server's pipes (a launcher, a test); connect starts the
server itself.`

const stdioExample = `  # One read-only and one writable root, the server on this process's stdio
  fsbroker stdio --root ~/project --root ~/scratch:rw

  # The settings in a config file (roots, consent, policies, audit), the log as JSON
  fsbroker stdio --config ~/.config/fsbroker/fsbroker.yaml --log-format json`

// newStdioCommand returns `fsbroker stdio`.
func newStdioCommand() *cobra.Command {
	var o *options
	c := &cobra.Command{
		Use:     "stdio",
		Short:   "serve one MCP server on this process's stdin and stdout",
		Long:    stdioLong,
		Example: stdioExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.markSet(cmd.Flags())
			return runStdio(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o = registerSessionFlags(c.Flags(), "stdio")
	return c
}

// runStdio serves one server on this process's stdin and stdout.
func runStdio(ctx context.Context, o *options, stdin io.Reader, stdout, stderr io.Writer) error {
	s, err := prepare(o, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.rt.Confine(nil, false); err != nil {
		return err
	}
	in, out := pollableStdio(stdin, stdout)
	stream := jsonrpc.NewLineStream(in, out, o.maxMessageBytes)
	s.log.Info("serving on stdio", "roots", s.rt.Roots().Len())
	err = s.serve(ctx, stream)
	_ = stream.Close()
	return err
}

const connectLong = `Start CMD as an MCP server, a child process, and serve it over its stdin and stdout: fsbroker
plays the MCP client and answers the server's roots/list and files/* requests within the roots,
the consent and the policies. The server's stderr goes to fsbroker's log (stderr). The session
ends when the server exits (fsbroker then exits 0, or 1 when the server failed); when fsbroker
is stopped (SIGINT, SIGTERM) it closes the server's stdin, then sends SIGTERM, then SIGKILL,
waiting --shutdown-timeout between steps.

The server command comes after "--", which is required: every word after it is the server's.

With --url (or remote.url in the config file), serve the remote MCP server at URL over
Streamable HTTP instead (--ca, --header; see docs/remote.md).`

const connectExample = `  # The project's example server, with one read-only root
  fsbroker connect --root ~/project -- example-server

  # A server from npm, a writable root, consent asked on this terminal
  fsbroker connect --root ~/notes:rw --consent prompt -- npx -y some-mcp-server

  # A remote server over Streamable HTTP, its token from the environment
  fsbroker connect --root ~/project --url https://mcp.example.com/mcp \
    --header "Authorization: Bearer $TOKEN"`

// newConnectCommand returns `fsbroker connect`.
func newConnectCommand() *cobra.Command {
	var o *options
	c := &cobra.Command{
		Use:         "connect [flags] -- CMD [ARGS...]",
		Short:       "start an MCP server as a child process and serve it (or a remote one: --url)",
		Long:        connectLong,
		Example:     connectExample,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{serverCommandAnnotation: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.markSet(cmd.Flags())
			rest, err := serverCommand(cmd, args)
			if err != nil {
				return err
			}
			return runConnect(cmd.Context(), o, rest, cmd.ErrOrStderr())
		},
	}
	c.Flags().SetInterspersed(false)
	o = registerSessionFlags(c.Flags(), "connect")
	return c
}

// serverCommand returns the server command of connect or wrap: the
// arguments after "--", which must come first.
func serverCommand(cmd *cobra.Command, args []string) ([]string, error) {
	if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
		return nil, configErrorf("%s: put \"--\" before the server command, as in: fsbroker %s --root DIR -- %s",
			cmd.Name(), cmd.Name(), strings.Join(args, " "))
	}
	return args, nil
}

// runConnect starts the server command as a child process and serves it.
func runConnect(ctx context.Context, o *options, rest []string, stderr io.Writer) error {
	if len(rest) == 0 || o.remoteURL != "" {
		return runRemote(ctx, o, rest, stderr) // a remote server over Streamable HTTP
	}
	s, err := prepare(o, stderr, serverCommandCheck(rest))
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.rt.Confine(rest, false); err != nil {
		return err
	}
	proc, err := s.startServer(rest)
	if err != nil {
		return err
	}

	serveErr, exitedOnItsOwn := s.serveChild(ctx, proc)
	s.log.Info("server stopped", "status", proc.ExitDescription())
	if serveErr != nil {
		return serveErr
	}
	if exitedOnItsOwn && proc.ExitCode() != 0 {
		s.log.Error("server exited with a failure", "status", proc.ExitDescription())
		return errAlreadyLogged
	}
	return nil
}

// serveChild serves the session with a started server (connect, demo) until
// it ends, then stops the server: a server that ended the session itself gets
// a moment to exit on its own, one whose process is gone has what is left of
// its output read. It returns the session's error and whether the server
// exited on its own (not stopped by fsbroker).
func (s *setup) serveChild(ctx context.Context, proc *child.Process) (serveErr error, exitedOnItsOwn bool) {
	o := s.opts
	stream := jsonrpc.NewLineStream(proc.Stdout(), s.serverInput(proc), o.maxMessageBytes)
	sessionCtx, endSession := context.WithCancel(ctx)
	defer endSession()
	served := make(chan error, 1)
	go func() { served <- s.serve(sessionCtx, stream) }()

	select {
	case serveErr = <-served:
	case <-proc.Exited():
		// The server is gone. Its output ends once every process holding it
		// has exited; read what is left, then close it ourselves.
		select {
		case serveErr = <-served:
		case <-time.After(o.shutdownTimeout):
			_ = proc.Stdout().Close()
			serveErr = <-served
		}
	}
	if serveErr == nil && ctx.Err() == nil {
		waitCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		_ = proc.Wait(waitCtx)
		cancel()
	}
	exitedOnItsOwn = proc.ExitCode() != -1 || isExited(proc)
	proc.Stop(o.shutdownTimeout) // also waits until its stderr is all logged
	return serveErr, exitedOnItsOwn
}

func isExited(p *child.Process) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// serve runs one session over stream until it ends, keeping its roots in step
// with the config file.
func (s *setup) serve(ctx context.Context, stream jsonrpc.Stream) error {
	return s.serveView(ctx, stream, nil)
}

// serveView is serve with the session's roots seen through view (wrap: the
// operator's roots narrowed by the host's; nil: as they are) and extra
// session options after the others.
func (s *setup) serveView(ctx context.Context, stream jsonrpc.Stream, view func(func() *roots.Set) func() *roots.Set,
	extra ...broker.Option) error {
	sess, err := s.rt.NewSession(stream, view, extra...)
	if err != nil {
		return err
	}
	err = s.rt.Serve(ctx, sess)
	var verr *broker.VersionError
	switch {
	case errors.As(err, &verr):
		s.log.Error("closing the session: the server's protocol version is not supported",
			"got", verr.Got, "supported", broker.SupportedVersions())
		return errAlreadyLogged
	case err != nil:
		if status, exited := s.serverExited(); exited {
			// The server's end of the pipes closed because it exited: that is
			// what a person can act on, not the broken pipe it left. What it
			// said on stderr comes first.
			s.proc.StderrLogged(s.opts.shutdownTimeout)
			stage := "before answering initialize"
			if sess.Server().ProtocolVersion != "" {
				stage = "during the session"
			}
			s.log.Error(fmt.Sprintf("the server exited (%s) %s; what it wrote to stderr, if anything, is above (fsbroker.server)", status, stage))
			s.log.Debug("the session's error", "error", err)
			return errAlreadyLogged
		}
		s.log.Error("session failed", "error", err)
		return errAlreadyLogged
	}
	s.log.Info("session ended")
	return nil
}

// serverInput is the server process's stdin as a session writes to it: a
// write that fails because the server exited says so, and how ("the server
// exited (status 1)"), instead of the broken pipe it left.
func (s *setup) serverInput(proc *child.Process) io.WriteCloser {
	return exitAwareWriter{WriteCloser: proc.Stdin(), exited: s.serverExited}
}

// exitAwareWriter is serverInput's writer.
type exitAwareWriter struct {
	io.WriteCloser
	exited func() (status string, exited bool)
}

func (w exitAwareWriter) Write(b []byte) (int, error) {
	n, err := w.WriteCloser.Write(b)
	if err != nil {
		if status, exited := w.exited(); exited {
			return n, &serverExitedError{status: status, err: err}
		}
	}
	return n, err
}

// serverExitedError is a write to a server that had exited.
type serverExitedError struct {
	status string
	err    error
}

func (e *serverExitedError) Error() string { return "the server exited (" + e.status + ")" }
func (e *serverExitedError) Unwrap() error { return e.err }

// serverExited reports, for a session with a server process fsbroker
// started, whether that process has exited, and how ("status 3", "signal:
// killed"). A session whose stream broke ends as its server exits: the
// process is waited for up to the shutdown timeout.
func (s *setup) serverExited() (status string, exited bool) {
	p := s.proc
	if p == nil {
		return "", false
	}
	select {
	case <-p.Exited():
	case <-time.After(s.opts.shutdownTimeout):
		return "", false
	}
	if code := p.ExitCode(); code >= 0 {
		return fmt.Sprintf("status %d", code), true
	}
	return p.ExitDescription(), true
}

// serverCommandCheck is what prepare checks for a server command, before it
// loads the policies: the program can be found and run.
func serverCommandCheck(argv []string) func(*setup) error {
	return func(*setup) error {
		if _, err := exec.LookPath(argv[0]); err != nil {
			return configErrorf("server command %q: %v", argv[0], err)
		}
		return nil
	}
}

// startServer starts the server command (connect, wrap); a command that
// cannot be started (not found, not executable) is a usage error.
func (s *setup) startServer(argv []string) (*child.Process, error) {
	name, args, err := s.rt.ServerCommand(argv)
	if err != nil {
		return nil, err
	}
	proc, err := child.Start(name, args, s.log.Named("server"))
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, configErrorf("server command %q: %v", argv[0], err)
		}
		return nil, err
	}
	s.log.Info("started server", "command", argv[0], "pid", proc.PID(), "roots", s.rt.Roots().Len())
	s.proc = proc
	return proc, nil
}
