// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/fsbroker/fsbroker/broker/jsonrpc"
	"github.com/fsbroker/fsbroker/serve"
)

const serveLong = `Be the filesystem MCP server a host runs, on this process's stdin and stdout: a drop-in for
the reference server @modelcontextprotocol/server-filesystem, with its fourteen tools (the same
names, arguments and results). Every tool call goes through the broker's pipeline: the path is
canonicalized and confined to the roots, the policies decide (secrets, read-only roots, quotas,
per-client rules), the decision is recorded in the audit trail before anything is touched, and
writes are flock-guarded and atomic. A refused call is a tool result with isError whose text
starts with the code ("PERMISSION_DENIED: secrets: ..."). The host's clientInfo.name is its
identity for grants, quotas and the trail (--client-id, or --server-id, pins it; over --http the
identity is the bearer token's).

When the host declares the roots capability, its roots (roots/list, asked again on
notifications/roots/list_changed) only narrow the operator's: an operator root inside a host root
stays whole, one holding a host root is narrowed to that subtree, and an answer with nothing in
common (empty, disjoint, unreadable, an error, or none in time) leaves nothing accessible. A call
on a path no grant covers asks for consent: through the host's own UI (elicitation/create) when
the host declares elicitation and --consent is elicit (or, on stdio, not given), else the
configured provider; over --http, nobody unless --consent says who.
fsbroker grants list and revoke see and take back these grants as any other.

A path argument may be absolute (inside a root), a file:// URI, or mount-relative (the root's
base name first). stdout carries only protocol messages; the log goes to stderr. The session ends
when the input closes, or on SIGINT or SIGTERM. The files under the roots are also resources
(resources/list, read, subscribe), under the same pipeline. A host on protocol 2026-07-28, which
sends no initialize, is served on stdio and over --http (without HTTP sessions): its roots and the
consent question are asked inside InputRequiredResults, under a sealed, expiring requestState
(docs/serve.md).`

const serveExample = `  # In a host's config, instead of: npx -y @modelcontextprotocol/server-filesystem ~/project
  fsbroker serve --root ~/project

  # One read-only and one writable root, the trail in its own directory
  fsbroker serve --root ~/project --root ~/scratch:rw --audit ~/fsbroker-audit

  # Over Streamable HTTP at http://127.0.0.1:8931/mcp, one session per host (docs/serve.md);
  # hosts send Authorization: Bearer with the token fsbroker writes to <state-dir>/http-token
  fsbroker serve --root ~/project --http :8931`

// newServeCommand returns `fsbroker serve`.
func newServeCommand() *cobra.Command {
	var o *options
	var clientID string
	c := &cobra.Command{
		Use:     "serve",
		Short:   "be the filesystem MCP server a host runs, every tool call under policy and audit",
		Long:    serveLong,
		Example: serveExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.markSet(cmd.Flags())
			if o.set["client-id"] {
				if o.set["server-id"] && o.serverID != clientID {
					return configErrorf("--client-id %q and --server-id %q: they are one setting, give one", clientID, o.serverID)
				}
				o.serverID, o.set["server-id"] = clientID, true
			}
			if o.servesHTTP() {
				return runServeHTTP(cmd.Context(), o, cmd.ErrOrStderr())
			}
			return runServe(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o = registerSessionFlags(c.Flags(), "serve")
	c.Flags().StringVar(&clientID, "client-id", "", "pin the host's identity to `ID` for grants, quotas, per-client policy and the audit trail "+
		"(default: the clientInfo.name the host declares, which any host can claim); --server-id under the name protocol.md section 8 gives it")
	setFlagGroup(c.Flags(), flagsConsent, "client-id")
	return c
}

// runServe serves one host on this process's stdin and stdout.
func runServe(ctx context.Context, o *options, stdin io.Reader, stdout, stderr io.Writer) error {
	s, err := prepareServe(o, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	in, out := pollableStdio(stdin, stdout)
	stream := jsonrpc.NewLineStream(in, out, o.maxMessageBytes)
	defer stream.Close()
	sess, err := serve.NewSession(stream, serveConfig(s, "stdio"))
	if err != nil {
		return err
	}
	s.log.Info("serving the filesystem tools on stdio", "roots", s.rt.Roots().Len())
	return sess.Run(ctx)
}
