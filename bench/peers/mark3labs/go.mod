// The mark3labs/mcp-filesystem-server peer of bench/fsbench, built from the
// Go module proxy by `make bench-e2e` and by bench/fsbench's tests. A module
// of its own, so that the peer's dependencies never join the graph fsbroker
// is built from.
module github.com/fsbroker/fsbroker/bench/peers/mark3labs

go 1.26.0

tool github.com/mark3labs/mcp-filesystem-server

require (
	github.com/djherbis/times v1.6.0 // indirect
	github.com/gabriel-vasile/mimetype v1.4.9 // indirect
	github.com/gobwas/glob v0.2.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mark3labs/mcp-filesystem-server v0.11.1 // indirect
	github.com/mark3labs/mcp-go v0.32.0 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/net v0.39.0 // indirect
	golang.org/x/sys v0.32.0 // indirect
)
