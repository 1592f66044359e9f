#!/bin/sh
# Copyright 2026 The fsbroker Authors
# SPDX-License-Identifier: Apache-2.0

# install-ts-server.sh: installs the reference TypeScript filesystem MCP server
# (npm @modelcontextprotocol/server-filesystem) that bench/fsbench compares
# fsbroker with, into a cache directory outside the repository, when it is
# missing or at another version. Prints the path of its entry point (what
# fsbench runs with node) on stdout; progress and failures go to stderr.
#
# Exit status 0 when the server is there; 1 when it cannot be installed
# (no npm, no registry): fsbench then skips that target and says so.
#
# Environment:
#   FSBENCH_CACHE       the cache directory (default $XDG_CACHE_HOME/fsbroker-bench,
#                       else ~/.cache/fsbroker-bench); fsbench looks in the same place
#   FSBENCH_TS_VERSION  the package version (default: the one pinned below)
set -eu

pkg=@modelcontextprotocol/server-filesystem
version=${FSBENCH_TS_VERSION:-2026.8.31}
cache=${FSBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fsbroker-bench}
dir=$cache/node_modules/$pkg
entry=$dir/dist/index.js

installed() {
	[ -f "$entry" ] && [ -f "$dir/package.json" ] &&
		grep -q "\"version\": *\"$version\"" "$dir/package.json"
}

if installed; then
	echo "$entry"
	exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "bench: node and npm are needed for the TypeScript server ($pkg); it will be skipped" >&2
	exit 1
fi
echo "bench: installing $pkg@$version into $cache" >&2
mkdir -p "$cache"
if ! npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2 || ! installed; then
	echo "bench: cannot install $pkg@$version into $cache; the TypeScript server will be skipped" >&2
	exit 1
fi
echo "$entry"
