// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fsbroker/fsbroker/broker"
	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/broker/transport/proxy"
)

const wrapLong = `Sit between an MCP host (on this process's stdin and stdout) and the MCP server CMD, started as
a child process: every message passes both ways unchanged, except that the host's initialize
gets the roots capability and the server's roots/list and files/* requests are answered by
fsbroker (the host never sees them). The host's own roots narrow the operator's. fsbroker exits
with the server's exit status. A host's MCP config runs it in place of the server: see
docs/hosts.md and docs/wrap.md.

For a server that does its own file I/O, wrap controls the roots it is told, not the files it
opens (docs/hosts.md says what each mode controls).

The server command comes after "--", which is required: every word after it is the server's.
With --url, wrap a remote server over Streamable HTTP instead.`

const wrapExample = `  # In a host's MCP config: the reference filesystem server, one root
  fsbroker wrap --server-id files --root ~/project \
    -- npx -y @modelcontextprotocol/server-filesystem ~/project

  # A remote server, for a host that speaks only stdio
  fsbroker wrap --root ~/project --url https://mcp.example.com/mcp`

// newWrapCommand returns `fsbroker wrap`.
func newWrapCommand() *cobra.Command {
	var o *options
	c := &cobra.Command{
		Use:         "wrap [flags] -- CMD [ARGS...]",
		Short:       "sit between an MCP host (this process's stdio) and the server it starts",
		Long:        wrapLong,
		Example:     wrapExample,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{serverCommandAnnotation: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.markSet(cmd.Flags())
			rest, err := serverCommand(cmd, args)
			if err != nil {
				return err
			}
			return runWrap(cmd.Context(), o, rest, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().SetInterspersed(false)
	o = registerSessionFlags(c.Flags(), "wrap")
	return c
}

// runWrap sits between an MCP host (this process's stdin and stdout) and the
// server command, started as a child process: messages pass both ways
// unchanged, but the server's roots/list and files/* are answered here (see
// broker/transport/proxy). fsbroker exits with the server's exit status.
func runWrap(ctx context.Context, o *options, rest []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(rest) > 0 && o.remoteURL != "" {
		return configErrorf("wrap serves either a server command (after --) or a remote server (--url), not both")
	}
	if len(rest) == 0 && o.remoteURL == "" {
		return configErrorf("wrap needs the server command after --, as in: fsbroker wrap --root DIR -- CMD ARGS, or a remote server: --url URL")
	}
	if len(rest) == 0 {
		return wrapRemote(ctx, o, stdin, stdout, stderr)
	}
	s, err := prepare(o, stderr, serverCommandCheck(rest))
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.rt.Confine(rest, true); err != nil {
		return err
	}
	proc, err := s.startServer(rest)
	if err != nil {
		return err
	}

	hostIn, hostOut := pollableStdio(stdin, stdout)
	hostStream := jsonrpc.NewLineStream(hostIn, hostOut, o.maxMessageBytes)
	serverStream := jsonrpc.NewLineStream(proc.Stdout(), s.serverInput(proc), o.maxMessageBytes)
	session := func(ctx context.Context, stream jsonrpc.Stream, view proxy.View, id string) error {
		return s.serveView(ctx, stream, view, broker.WithTransport("wrap"), broker.WithStatelessVersion(), broker.WithSessionID(id))
	}
	router := proxy.New(hostStream, serverStream, session, proxy.WithLogger(s.log.Named("wrap")),
		proxy.WithForwardAudit(s.rt.AuditSink(), o.serverID))
	routed := make(chan error, 1)
	go func() { routed <- router.Run(ctx) }()

	// The router runs until the server's output ends. When the host closes
	// its input, the server is stopped as connect stops it (stdin closed,
	// then SIGTERM, then SIGKILL); a process the server left holding its
	// output does not keep fsbroker waiting past the shutdown timeout.
	var (
		routeErr  error
		hostDone  = router.HostDone()
		exited    = proc.Exited()
		outLeft   <-chan time.Time
		weStopped bool
	)
	stop := func() {
		if !weStopped {
			weStopped = true
			go proc.Stop(o.shutdownTimeout)
		}
	}
loop:
	for {
		select {
		case routeErr = <-routed:
			break loop
		case <-hostDone:
			hostDone = nil
			s.log.Info("the host closed the connection; stopping the server")
			stop()
		case <-exited:
			exited = nil
			outLeft = time.After(o.shutdownTimeout)
		case <-outLeft:
			outLeft = nil
			_ = proc.Stdout().Close()
		}
	}
	// A server that ended the session itself gets a moment to exit on its own.
	if routeErr == nil && ctx.Err() == nil && !weStopped {
		waitCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		_ = proc.Wait(waitCtx)
		cancel()
	}
	exitedOnItsOwn := !weStopped && isExited(proc)
	proc.Stop(o.shutdownTimeout) // waits for a stop already under way
	s.log.Info("server stopped", "status", proc.ExitDescription())
	if routeErr != nil {
		if !errors.Is(routeErr, errAlreadyLogged) {
			s.log.Error("wrap failed", "error", routeErr)
		}
		return errAlreadyLogged
	}
	switch code := proc.ExitCode(); {
	case code > 0:
		s.log.Info("exiting with the server's exit status", "status", code)
		return &exitCodeError{code: code}
	case code < 0 && exitedOnItsOwn:
		s.log.Error("the server was ended by a signal", "status", proc.ExitDescription())
		return errAlreadyLogged
	}
	return nil
}

// wrapRemote is wrap in front of a remote server (--url, or the config's
// remote.url): the host on this process's stdio, the server over Streamable
// HTTP. It ends when the host closes its input or the remote session ends.
func wrapRemote(ctx context.Context, o *options, stdin io.Reader, stdout, stderr io.Writer) error {
	s, err := prepare(o, stderr, remoteCheck)
	if err != nil {
		return err
	}
	defer s.close()
	serverStream := s.remote
	if err := s.rt.Confine(nil, true); err != nil {
		return err
	}
	s.log.Info("wrapping a remote server", "url", serverStream.URL(), "roots", s.rt.Roots().Len())
	hostIn, hostOut := pollableStdio(stdin, stdout)
	hostStream := jsonrpc.NewLineStream(hostIn, hostOut, o.maxMessageBytes)
	session := func(ctx context.Context, stream jsonrpc.Stream, view proxy.View, id string) error {
		return s.serveView(ctx, stream, view, broker.WithTransport("http"), broker.WithStatelessVersion(), broker.WithSessionID(id))
	}
	router := proxy.New(hostStream, serverStream, session, proxy.WithLogger(s.log.Named("wrap")),
		proxy.WithForwardAudit(s.rt.AuditSink(), o.serverID))
	routed := make(chan error, 1)
	go func() { routed <- router.Run(ctx) }()
	var routeErr error
	select {
	case routeErr = <-routed:
	case <-router.HostDone():
		s.log.Info("the host closed the connection; ending the remote session")
		_ = serverStream.Close() // DELETE, and the router's reads end
		routeErr = <-routed
	case <-ctx.Done():
		_ = serverStream.Close()
		routeErr = <-routed
	}
	_ = serverStream.Close()
	if routeErr != nil && ctx.Err() == nil {
		if !errors.Is(routeErr, errAlreadyLogged) {
			s.log.Error("wrap failed", "error", routeErr)
		}
		return errAlreadyLogged
	}
	return nil
}
