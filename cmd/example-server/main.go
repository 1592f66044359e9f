// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Command example-server is the project's example MCP server, in two modes.
//
// By default it is a small MCP server written with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). Run it under fsbroker:
//
//	fsbroker connect --root . -- go run ./cmd/example-server
//
// Once the session is initialized it asks the client (fsbroker) for its roots
// and prints them to stderr, which fsbroker writes to its log; whenever the
// client says the roots changed, it lists and prints them again. With
// -exit-after-roots it exits once it has printed the roots the first time.
//
// With -script NAME it is a raw MCP server instead (JSON-RPC by hand, see
// cmd/internal/exampleserver), because the SDK cannot send requests such as
// files/read: once initialized, it sends the client the script's roots/list
// and files/* requests one at a time and prints one line per request, with
// the client's answer, to stderr (one line per change event too), then exits.
// The demo script (-script demo) is the guided session of `fsbroker demo`; it
// expects a read-only root mounted as project and a writable one as scratch:
//
//	fsbroker connect --consent auto --root project --root scratch:rw -- example-server -script demo
//
// With -http ADDR either mode serves MCP's Streamable HTTP instead of stdio,
// at /mcp on ADDR (host:port; port 0 picks a free one), and prints
// "listening on URL" to stderr first. The SDK mode serves through the SDK's
// StreamableHTTPHandler; the raw mode serves one session by hand (protocol
// 2025-11-25) and exits once the client ends it (DELETE):
//
//	example-server -script demo -http 127.0.0.1:0 &
//	fsbroker connect --consent auto --root project --root scratch:rw --url http://127.0.0.1:PORT/mcp
//
// It is the peer of the project's interoperability tests and of make demo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fsbroker/fsbroker/cmd/internal/exampleserver"
)

func main() {
	exitAfterRoots := flag.Bool("exit-after-roots", false, "exit once the roots have been listed")
	httpAddr := flag.String("http", "", "serve over Streamable HTTP at /mcp on `ADDR` (host:port) instead of stdio")
	script := flag.String("script", "", "be a raw MCP server that sends the client the requests of the script `NAME` ("+
		strings.Join(exampleserver.Scripts(), ", ")+") and prints each answer to stderr")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "example-server: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	var err error
	if *script != "" {
		if *exitAfterRoots {
			fmt.Fprintln(os.Stderr, "example-server: -exit-after-roots is for the SDK mode, not -script")
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = exampleserver.Run(ctx, exampleserver.Config{Script: *script, HTTPAddr: *httpAddr,
			In: os.Stdin, Out: os.Stdout, Report: os.Stderr})
		stop()
	} else {
		err = run(context.Background(), os.Stderr, *exitAfterRoots, *httpAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example-server:", err)
		os.Exit(1)
	}
}

// run is the SDK mode: it lists the client's roots once initialized and
// whenever they change, and prints them to out.
func run(ctx context.Context, out io.Writer, exitAfterRoots bool, httpAddr string) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	report := func(what string, ss *mcp.ServerSession) {
		// Not on the handler's goroutine: the SDK delivers the reply to
		// ListRoots on the same connection the notification came in on.
		go func() {
			res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{})
			if err != nil {
				fmt.Fprintf(out, "%s: roots/list failed: %v\n", what, err)
				return
			}
			parts := make([]string, 0, len(res.Roots))
			for _, r := range res.Roots {
				parts = append(parts, fmt.Sprintf("%s (%s)", r.URI, r.Name))
			}
			fmt.Fprintf(out, "%s: %d roots: %s\n", what, len(res.Roots), strings.Join(parts, ", "))
			if exitAfterRoots {
				stop()
			}
		}()
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "fsbroker-example-server", Version: "1.0.0"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			report("initialized", req.Session)
		},
		RootsListChangedHandler: func(_ context.Context, req *mcp.RootsListChangedRequest) {
			report("roots changed", req.Session)
		},
	})
	if httpAddr != "" {
		return serveHTTP(ctx, server, httpAddr, out)
	}
	err := server.Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil {
		return nil // stopped on purpose (-exit-after-roots)
	}
	return err
}

// serveHTTP serves server over Streamable HTTP at /mcp on addr until ctx
// ends.
func serveHTTP(ctx context.Context, server *mcp.Server, addr string, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "listening on http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close() // event streams never end on their own: no graceful wait
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
