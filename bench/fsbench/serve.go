// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"
)

// serveStartRows is how many rows serve-start gives: the start to the
// initialize result, and to the first tools/call result.
const serveStartRows = 2

// runServeStarts measures, over cfg.starts children of tg in the serve
// workloads, the time from the process's start to its initialize result
// and to its first tools/call result: a read_text_file of a file this child
// has not read (so no cache answers it), sent as soon as the handshake is
// done, as a host does. All the children share a state directory that an
// unmeasured first start has set up, as a restart would.
func (b *bench) runServeStarts(tg *target, w workload) []*result {
	rows := []*result{
		{Workload: w.key + "-init", Title: "serve: start to the initialize result", Target: tg.name, PeakRSS: -1},
		{Workload: w.key + "-call", Title: "serve: start to the first tools/call result (a file not read before)", Target: tg.name, PeakRSS: -1},
	}
	fail := func(err error) []*result {
		for _, r := range rows {
			r.Skipped = "failed: " + err.Error()
		}
		return rows
	}
	root := b.rootOf(w)
	state, err := b.newState(tg)
	if err == nil {
		var c *child
		if c, _, err = b.start(tg, w, root, state); err == nil {
			err = c.close(5 * time.Second)
		}
	}
	if err != nil {
		return fail(err)
	}
	o := tg.proto(w, root).readOp(b.tree.firstFiles, 1<<10)
	init, call := &runStats{}, &runStats{}
	for i := range b.cfg.starts {
		c, took, err := b.start(tg, w, root, state)
		if err != nil {
			init.fail(err)
			call.fail(err)
			continue
		}
		init.lat = append(init.lat, took)
		watchdog := time.AfterFunc(b.cfg.timeout, c.kill)
		const id = 1
		err = c.send(o.req(nil, id, i))
		if err == nil {
			var result, rpcErr []byte
			var at time.Time
			if result, rpcErr, at, err = awaitReply(c, id); err == nil {
				if err = checkReply(o.check, result, rpcErr, true); err == nil {
					call.lat = append(call.lat, at.Sub(c.started))
				}
			}
		}
		watchdog.Stop()
		if err != nil {
			call.fail(fmt.Errorf("the first tools/call: %w", err))
		}
		rss := c.peakRSS()
		for _, r := range rows {
			r.PeakRSS = max(r.PeakRSS, rss)
		}
		if err := c.close(5 * time.Second); err != nil {
			call.fail(err)
		}
	}
	for n, st := range []*runStats{init, call} {
		rows[n].fill(st)
		rows[n].RPS = 0
	}
	return rows
}
