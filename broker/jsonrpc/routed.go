// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package jsonrpc

import "context"

// A RoutedStream is a Stream whose messages travel on more than one channel,
// as in MCP's Streamable HTTP transport: the reply to a request goes back on
// the HTTP exchange that carried the request, and so may the requests and
// notifications this side sends while it handles that request; the rest go
// on the session's own event stream. A Conn over a RoutedStream writes every
// message through WriteRouted, naming the peer's request it belongs to.
type RoutedStream interface {
	Stream
	// WriteRouted sends msg, which belongs to the peer's request id: its
	// reply when reply is true, else a request or notification sent while
	// handling it (id zero: sent while handling none). An error ends the
	// connection, as Write's does.
	WriteRouted(msg []byte, id ID, reply bool) error
}

// handledRequestKey is the context key of the peer's request a handler's
// context belongs to (set only over a RoutedStream).
type handledRequestKey struct{}

// handledRequest returns the id of the peer's request whose handler ctx
// belongs to, or the zero ID.
func handledRequest(ctx context.Context) ID {
	id, _ := ctx.Value(handledRequestKey{}).(ID)
	return id
}
