// Command example-server is a small MCP server written with the official Go
// SDK (github.com/modelcontextprotocol/go-sdk). Run it under fsbroker:
//
//	fsbroker connect --root . -- go run ./cmd/example-server
//
// Once the session is initialized it asks the client (fsbroker) for its roots
// and prints them to stderr, which fsbroker writes to its log; whenever the
// client says the roots changed, it lists and prints them again. With
// -exit-after-roots it exits once it has printed the roots the first time.
//
// With -http ADDR it serves the same server over MCP's Streamable HTTP
// instead of stdio, through the SDK's StreamableHTTPHandler, at /mcp on ADDR
// (host:port; port 0 picks a free one), and prints "listening on URL" to
// stderr first:
//
//	example-server -http 127.0.0.1:0 &
//	fsbroker connect --root . --url http://127.0.0.1:PORT/mcp
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
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	exitAfterRoots := flag.Bool("exit-after-roots", false, "exit once the roots have been listed")
	httpAddr := flag.String("http", "", "serve over Streamable HTTP at /mcp on `ADDR` (host:port) instead of stdio")
	flag.Parse()
	if err := run(context.Background(), os.Stderr, *exitAfterRoots, *httpAddr); err != nil {
		fmt.Fprintln(os.Stderr, "example-server:", err)
		os.Exit(1)
	}
}

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
