// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"sync"
	"time"
)

// WitnessStats counts the deliveries to each witness, in the order they were given.
func (w *Writer) WitnessStats() []WitnessStats {
	stats := make([]WitnessStats, len(w.queues))
	for i, q := range w.queues {
		stats[i] = q.stats()
	}
	return stats
}

// announce signs ev under the keys in use and queues it for every witness, with w.mu held.
func (w *Writer) announce(ev WitnessEvent) {
	if len(w.queues) == 0 {
		return
	}
	ev.AuditKeyID = w.macKeyID
	ev.sign(w.keys.priv)
	for _, q := range w.queues {
		q.push(ev)
	}
}

// announceLast tells the witnesses that the segment holds its last record, with w.mu held.
func (w *Writer) announceLast() {
	w.announce(WitnessEvent{Kind: WitnessCheckpoint, Segment: w.segID, Seq: w.seq, MAC: w.lastMAC, Time: w.lastTime})
}

// closeWitnesses waits, up to the witness timeout, for the statements still waiting to be
// delivered, and closes the witnesses.
func (w *Writer) closeWitnesses() {
	deadline := time.Now().Add(w.cfg.witnessWait)
	var wg sync.WaitGroup
	for _, q := range w.queues {
		wg.Go(func() { q.close(deadline) })
	}
	wg.Wait()
}
