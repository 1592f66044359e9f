// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "time"

// promisedLatency is PROTOCOL.md's promise: a revocation (fsbroker grants
// revoke, or the console's button) reaches a running broker, and a record
// shows in the console's activity view, within a second.
const promisedLatency = time.Second

// latencyHops is how many waits for a CPU a change passes on its way (the
// broker or the console writing it, the console's or the broker's goroutine
// that notices it, the page's event loop, the test's own poll): each may be
// delayed by the machine's load, by up to the lateness watchScheduling
// measures while it travels.
const latencyHops = 4

// latencyBound is the bound a measured latency is held to: the promise,
// plus latencyHops times the worst scheduling lateness seen meanwhile. On an
// idle machine that lateness is a millisecond or so, and the bound is the
// promise; on a loaded CI runner (the race detector, a browser and other
// jobs on two cores) it grows by what the load was measured to cost, not
// by a guess. A mechanism that breaks the promise (a poll of more than a
// second) exceeds it whatever the load.
func latencyBound(lateness time.Duration) time.Duration {
	return promisedLatency + latencyHops*lateness
}

// watchScheduling measures, until the function it returns is called, how
// late this machine wakes a goroutine that sleeps 5 ms at a time, and
// returns the worst lateness seen.
func watchScheduling() (stop func() time.Duration) {
	const tick = 5 * time.Millisecond
	done := make(chan struct{})
	worst := make(chan time.Duration, 1)
	go func() {
		var late time.Duration
		for {
			select {
			case <-done:
				worst <- late
				return
			default:
			}
			asked := time.Now()
			time.Sleep(tick)
			late = max(late, time.Since(asked)-tick)
		}
	}()
	return func() time.Duration {
		close(done)
		return <-worst
	}
}
