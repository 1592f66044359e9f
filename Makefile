# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# fsbroker: every developer and CI task. `make test` is the one test command
# (README, .ci/run).

GO       ?= go
BIN      ?= bin
FUZZTIME ?= 15s
# -buildvcs=auto stamps the commit into the binary (fsbroker version) when
# built in a checkout, even where GOFLAGS turns it off.
BUILDFLAGS ?= -buildvcs=auto
# The binaries are built without cgo, as the releases are: a static binary,
# and Landlock's all-threads helper (psx, for --sandbox) then uses the Go
# runtime's own call instead of wrapping every pthread_create, which cost the
# broker about 5 MiB of resident memory. The tests keep cgo (-race needs it).
BUILDENV ?= CGO_ENABLED=0
# How long make test fuzzes each target (make fuzz: FUZZTIME).
TEST_FUZZTIME ?= 3s

# Every fuzz target as DIR:NAME, found in the _test.go files.
FUZZ_TARGETS = $(shell grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|/[^/]*:func |:|')

.PHONY: demo-sdk all build test bench bench-e2e fuzz lint demo clean \
	release release-linux-amd64 release-check release-tools \
	build-fsbroker man completions package-docs

all: lint test

## build: the fsbroker binary and the example MCP server, in bin/
build:
	$(BUILDENV) $(GO) build $(BUILDFLAGS) -o $(BIN)/fsbroker ./cmd/fsbroker
	$(BUILDENV) $(GO) build $(BUILDFLAGS) -o $(BIN)/example-server ./cmd/example-server

# build-fsbroker: the fsbroker binary alone, for the targets that run it
build-fsbroker:
	$(BUILDENV) $(GO) build $(BUILDFLAGS) -o $(BIN)/fsbroker ./cmd/fsbroker

## man: the man pages of every command, generated from the command tree
## (fsbroker __man), into MANDIR (bin/man): fsbroker.1, fsbroker-connect.1,
## fsbroker-audit-verify.1, ...; read one with man -l. Dated by the commit
## the binary is built from. Not committed.
MANDIR ?= $(BIN)/man
man: build-fsbroker
	rm -rf $(MANDIR)
	$(BIN)/fsbroker __man $(MANDIR)

## completions: the shell completion scripts (fsbroker completion SHELL)
## into COMPLETIONSDIR (bin/completions): fsbroker.bash, _fsbroker (zsh) and
## fsbroker.fish. Not committed.
COMPLETIONSDIR ?= $(BIN)/completions
completions: build-fsbroker
	rm -rf $(COMPLETIONSDIR)
	mkdir -p $(COMPLETIONSDIR)
	$(BIN)/fsbroker completion bash > $(COMPLETIONSDIR)/fsbroker.bash
	$(BIN)/fsbroker completion zsh > $(COMPLETIONSDIR)/_fsbroker
	$(BIN)/fsbroker completion fish > $(COMPLETIONSDIR)/fsbroker.fish

## package-docs: the man pages, compressed (gzip -n: no name or time in them,
## so that they are the same at every build), and the completion scripts,
## into PACKAGE_DOCS (build/package-docs/man, .../completions): what the
## Linux packages install. GoReleaser's before hook (.goreleaser.yaml).
PACKAGE_DOCS ?= build/package-docs
package-docs:
	@$(MAKE) --no-print-directory man completions \
		BIN=$(PACKAGE_DOCS)/bin MANDIR=$(PACKAGE_DOCS)/man COMPLETIONSDIR=$(PACKAGE_DOCS)/completions
	gzip -n -9 -f $(PACKAGE_DOCS)/man/*.1

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

## bench-e2e: bench/fsbench drives fsbroker (stdio, and serve as the filesystem
## MCP server), the raw baseline (bench/fsbaseline), mark3labs/mcp-filesystem-server
## and the reference TypeScript server over stdio, side by side (with, in the
## serve reads and listings, the floor: fsbaseline --tools --from-memory,
## answering from memory what the harness allows any server), and prints the
## table, the first-touch table (every peer on paths never requested before)
## and the budgets of docs/performance.md (about seven minutes). The uncached
## decision's budget comes from engine's BenchmarkDecideFirstTouch, run first
## as docs/performance.md says (its output in $(BIN)/decide-first-touch.txt).
## fsbroker is built as make build builds it (without cgo). mark3labs' server
## (v0.11.1) is built from the Go module proxy in a module of its own
## (bench/peers/mark3labs), never in fsbroker's go.mod; the TypeScript server
## is installed into a cache directory outside the repo when missing
## (bench/install-ts-server.sh). Either is skipped, saying why, when it cannot be.
## BENCHFLAGS: more fsbench flags (-format markdown|json, -duration 5s, ...)
BENCHFLAGS ?=
bench-e2e:
	$(BUILDENV) $(GO) build $(BUILDFLAGS) -o $(BIN)/fsbroker ./cmd/fsbroker
	$(GO) build -o $(BIN)/fsbaseline ./bench/fsbaseline
	$(GO) build -o $(BIN)/fsbench ./bench/fsbench
	@rm -f $(BIN)/mcp-filesystem-server; cd bench/peers/mark3labs && GOWORK=off $(GO) build \
		-o $(abspath $(BIN))/mcp-filesystem-server github.com/mark3labs/mcp-filesystem-server \
		|| echo "bench: cannot build mark3labs/mcp-filesystem-server (bench/peers/mark3labs); it will be skipped" >&2
	@sh bench/install-ts-server.sh >/dev/null || true
	GOGC=400 GOMEMLIMIT=36MiB $(GO) test -run '^$$' -bench 'DecideFirstTouch$$' -benchtime 20000x -cpu 1 ./engine \
		> $(BIN)/decide-first-touch.txt 2>&1 || true
	@cat $(BIN)/decide-first-touch.txt
	$(BIN)/fsbench -decide $(BIN)/decide-first-touch.txt $(BENCHFLAGS)

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

## lint: gofmt, and go vet (which type-checks the tests too) for linux (64 and
## 32 bits), darwin and windows
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	GOOS=linux   GOARCH=386   $(GO) vet ./...
	GOOS=darwin  GOARCH=arm64 $(GO) vet ./...
	GOOS=windows GOARCH=amd64 $(GO) vet ./...

## release: the release of the commit checked out (HEAD; uncommitted changes
## are left out), into DIST (dist/): for linux/amd64, linux/arm64,
## darwin/amd64, darwin/arm64 (.tar.gz) and windows/amd64 (.zip) an archive
## of fsbroker, LICENSE and README.md; .deb and .rpm packages for both linux
## platforms; a CycloneDX SBOM of the Go modules in each binary; and a SHA-256
## checksums file of them all. GoReleaser (.goreleaser.yaml) builds it, with
## nfpm for the packages and cyclonedx-gomod for the SBOMs, in a fresh clone
## of the commit: the go command stamps the commit into the binary (it cannot
## in a git worktree, golang/go#58218), and the version is the one it stamps:
## the commit's tag (vX.Y.Z) or a Go pseudo-version of it. Reproducible: see
## release-check. docs/release.md has the details.
DIST ?= dist
release: release-tools
	@only=; $(RELEASE_FROM_COMMIT)

## release-linux-amd64: the same release for linux/amd64 alone (its archive,
## .deb, .rpm, SBOM and checksums file): what the tests build
release-linux-amd64: release-tools
	@only=linux-amd64; $(RELEASE_FROM_COMMIT)

## release-check: make release twice, the second time in another clone at
## another path and time, and compare the checksums files: every archive,
## package and SBOM must be the same byte for byte
release-check: release
	@set -e; again=$$(mktemp -d); trap 'rm -rf "$$again"' EXIT; \
	$(MAKE) --no-print-directory release DIST="$$again/dist"; \
	if diff $(DIST)/*_checksums.txt "$$again"/dist/*_checksums.txt; then \
		echo "release-check: both builds are the same byte for byte:"; cat $(DIST)/*_checksums.txt; \
	else \
		echo "release-check: the two builds differ (above)"; exit 1; \
	fi

## release-tools: the pinned release tools, installed with go install from
## the Go module proxy into RELEASE_TOOLS (~/.cache/fsbroker-release-tools),
## once per version. They are not in go.mod: their dependencies would join
## the module graph fsbroker is built from.
GORELEASER_VERSION      ?= v2.15.1
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
RELEASE_TOOLS   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/fsbroker-release-tools
GORELEASER      := $(RELEASE_TOOLS)/goreleaser-$(GORELEASER_VERSION)/goreleaser
CYCLONEDX_GOMOD := $(RELEASE_TOOLS)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)/cyclonedx-gomod
release-tools: $(GORELEASER) $(CYCLONEDX_GOMOD)
$(GORELEASER):
	GOBIN=$(@D) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)
$(CYCLONEDX_GOMOD):
	GOBIN=$(@D) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

# RELEASE_FROM_COMMIT runs GoReleaser in a fresh clone of HEAD, with
# FSBROKER_VERSION set to the version the go command stamps (read from a
# linux/amd64 build that shares GoReleaser's compiled packages), and moves the
# clone's dist/ to DIST. With only=linux-amd64, .goreleaser.yaml builds that
# platform alone.
RELEASE_FROM_COMMIT = set -e; \
	if [ "$$only" = linux-amd64 ]; then export FSBROKER_RELEASE_LINUX_AMD64_ONLY=1; \
	else unset FSBROKER_RELEASE_LINUX_AMD64_ONLY; fi; \
	dist="$(abspath $(DIST))"; \
	if [ -e "$$dist" ] && [ -n "$$(ls -A "$$dist")" ] && [ ! -f "$$dist/artifacts.json" ]; then \
		echo "release: DIST=$(DIST) holds something other than a release: not replacing it"; exit 1; \
	fi; \
	rev=$$(git rev-parse HEAD); \
	if [ -n "$$(git status --porcelain)" ]; then \
		echo "release: uncommitted changes are left out: releasing commit $$rev"; \
	fi; \
	work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	git clone --quiet --no-checkout . "$$work/src"; \
	git -C "$$work/src" checkout --quiet --detach "$$rev"; \
	cd "$$work/src"; \
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOAMD64=v1 $(GO) build -trimpath -buildvcs=true -ldflags='-s -w' \
		-o "$$work/version-probe" ./cmd/fsbroker; \
	version=$$($(GO) version -m "$$work/version-probe" | awk '$$1 == "mod" { print $$3 }'); \
	case $$version in \
		v*) echo "release: fsbroker $$version (commit $$rev)";; \
		*) echo "release: the go command stamped no version into the build ($$version)"; exit 1;; \
	esac; \
	PATH="$(dir $(CYCLONEDX_GOMOD)):$$PATH" FSBROKER_VERSION=$$version \
		$(GORELEASER) release --config .goreleaser.yaml --snapshot --clean; \
	rm -rf "$$dist"; mkdir -p "$$(dirname "$$dist")"; mv "$$work/src/dist" "$$dist"; \
	cd "$$dist"; echo "release: in $(DIST):"; \
	ls -l *_checksums.txt *.cdx.json *.tar.gz *.deb *.rpm $$(ls *.zip 2>/dev/null)

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

## clean: remove bin/, DIST (dist/) and PACKAGE_DOCS (build/package-docs)
clean:
	rm -rf $(BIN) $(DIST) $(PACKAGE_DOCS)
