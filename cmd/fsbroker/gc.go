// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"runtime/debug"
)

// Garbage collector defaults for a broker session (tuneGC).
const (
	// gcPercent lets the heap grow to five times what is live before a
	// collection: the broker's live heap is small (about 3 MB after
	// start), so Go's default of 100 collected every 3 MB allocated, that
	// is every few 64 KiB reads, and the collector took a quarter of the
	// CPU (docs/performance.md).
	gcPercent = 400
	// memoryLimit is the soft limit on the Go runtime's memory: past it the
	// collector runs as often as needed, whatever gcPercent says, so the
	// process stays within DESIGN.md's 64 MiB of RSS (about 23 MiB of it is
	// the binary's own pages and the runtime's outside the heap: with 40 MiB
	// a 1 GiB chunked write peaked at 62.5-64.6 MiB, with 36 MiB at 58.6-59.6,
	// its CPU the same within noise; docs/performance.md).
	memoryLimit = 36 << 20
)

// tuneGC sets the collector's defaults (gcPercent, memoryLimit) for a broker
// session (prepare), unless the operator set GOGC or GOMEMLIMIT, which then
// apply as usual. The limit is soft: a request whose data alone is larger
// (a 16 MiB read, a 32 MiB message) still succeeds, while the collector runs
// more often, at most about half the CPU, until it is done. Other commands
// (audit verify over a large trail, say) keep Go's defaults.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
