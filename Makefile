# fsbroker: every developer and CI task. `make test` is the one test command
# (README, .ci/run).

GO       ?= go
BIN      ?= bin
FUZZTIME ?= 15s
# -buildvcs=auto stamps the commit into the binary (fsbroker version) when
# built in a checkout, even where GOFLAGS turns it off.
BUILDFLAGS ?= -buildvcs=auto
# How long make test fuzzes each target (make fuzz: FUZZTIME).
TEST_FUZZTIME ?= 3s

# Every fuzz target as DIR:NAME, found in the _test.go files.
FUZZ_TARGETS = $(shell grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|/[^/]*:func |:|')

.PHONY: demo-sdk all build test bench bench-e2e fuzz lint demo clean

all: lint test

## build: the fsbroker binary and the example MCP server, in bin/
build:
	$(GO) build $(BUILDFLAGS) -o $(BIN)/fsbroker ./cmd/fsbroker
	$(GO) build $(BUILDFLAGS) -o $(BIN)/example-server ./cmd/example-server

## test: every test (unit, integration over real pipes and subprocesses,
## interoperability, fuzz seed corpora), with the race detector, then each
## fuzz target for TEST_FUZZTIME (3s)
test:
	$(GO) test -race -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

## bench: the Go micro-benchmarks, with allocations, then the end-to-end
## comparison (bench-e2e)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...
	@$(MAKE) --no-print-directory bench-e2e

## bench-e2e: cmd/fsbench drives fsbroker, the raw baseline (cmd/fsbaseline)
## and the reference TypeScript server over stdio, side by side, and prints
## the table and DESIGN.md's budgets (about two minutes). The TypeScript server
## is installed into a cache directory outside the repo when missing
## (bench/install-ts-server.sh), and skipped, saying why, when it cannot be.
## BENCHFLAGS: more fsbench flags (-format markdown|json, -duration 5s, ...)
BENCHFLAGS ?=
bench-e2e:
	$(GO) build $(BUILDFLAGS) -o $(BIN)/fsbroker ./cmd/fsbroker
	$(GO) build -o $(BIN)/fsbaseline ./cmd/fsbaseline
	$(GO) build -o $(BIN)/fsbench ./cmd/fsbench
	@sh bench/install-ts-server.sh >/dev/null || true
	$(BIN)/fsbench $(BENCHFLAGS)

## fuzz: each fuzz target for FUZZTIME (default 15s); crashers land in testdata/
## (minimizing is kept short: targets that write files would otherwise spend
## the whole budget minimizing). Go 1.26's fuzz coordinator can fail a run
## with a bare "context deadline exceeded" as -fuzztime ends, with no failing
## input (golang/go#75804, fixed in Go 1.27): such a run is reported and not
## counted as a failure; any run that wrote a failing input, or failed
## otherwise, fails.
fuzz:
	@set -e; out=$$(mktemp); trap 'rm -f "$$out"' EXIT; for t in $(FUZZ_TARGETS); do \
		pkg=./$${t%%:*}; name=$${t##*:}; corpus=$$pkg/testdata/fuzz/$$name; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		before=$$(ls $$corpus 2>/dev/null | wc -l); \
		status=0; $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1x $$pkg \
			> "$$out" 2>&1 || status=$$?; \
		cat "$$out"; \
		if [ $$status -ne 0 ]; then \
			after=$$(ls $$corpus 2>/dev/null | wc -l); \
			if [ "$$after" = "$$before" ] && grep -qx '    context deadline exceeded' "$$out" \
				&& [ $$(grep -c -- '--- FAIL' "$$out") -eq 1 ]; then \
				echo "fuzz $$name: the fuzz coordinator's own deadline race (golang/go#75804), no failing input: not a failure"; \
			else \
				exit $$status; \
			fi; \
		fi; \
	done

## lint: go vet, gofmt, and a cross-compile for linux (64 and 32 bits), darwin and windows
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	GOOS=linux   GOARCH=amd64 $(GO) build ./...
	GOOS=linux   GOARCH=386   $(GO) build ./...
	GOOS=darwin  GOARCH=arm64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) build ./...

## demo: a guided session on built-in defaults: the example MCP server
## (bin/example-server -script demo), a separate process under fsbroker, sends
## files/* requests that are allowed and denied, one line each; then the audit
## trail and its verification
demo: build
	$(BIN)/fsbroker demo

## demo-sdk: fsbroker serves the example MCP server (official Go SDK), which
## lists its roots and exits; the session is in the log
demo-sdk: build
	$(BIN)/fsbroker connect --root . --log-level debug -- $(BIN)/example-server -exit-after-roots

clean:
	rm -rf $(BIN)
