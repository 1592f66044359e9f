// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// checkpointFile is the content of <segment>.ckpt.
type checkpointFile struct {
	Segment string `json:"segment"`
	Seq     uint64 `json:"seq"`
	MAC     string `json:"mac"`
	Time    string `json:"time"`
	KeyID   string `json:"keyId"`
	// Signature is the hex ed25519 signature of checkpointMessage.
	Signature string `json:"signature"`
}

// checkpointMessage is what a checkpoint signs: "<seq>|<mac>|<time>".
func checkpointMessage(seq uint64, mac, t string) []byte {
	return []byte(strconv.FormatUint(seq, 10) + "|" + mac + "|" + t)
}

// checkpoint appends a checkpoint record unless the last record is one, and stores it, signed,
// in <segment>.ckpt, with w.mu held.
func (w *Writer) checkpoint() error {
	if w.lastKind != KindCheckpoint {
		if err := w.write(&Record{Kind: KindCheckpoint, KeyID: w.keyID}); err != nil {
			return err
		}
	}
	if w.covered {
		return nil
	}
	// The checkpointed record must be on disk before the signed .ckpt that
	// names it: else a power failure could leave a .ckpt naming a record the
	// segment lost, which verify would take for truncation.
	if w.cfg.sync != SyncNone {
		if err := w.f.Sync(); err != nil {
			w.broken = fmt.Errorf("fsync %s: %w", filepath.Base(w.f.Name()), err)
			return w.broken
		}
	}
	sig := ed25519.Sign(w.keys.priv, checkpointMessage(w.seq, w.lastMAC, w.lastTime))
	data, err := json.Marshal(checkpointFile{
		Segment: w.segID, Seq: w.seq, MAC: w.lastMAC, Time: w.lastTime, KeyID: w.keyID,
		Signature: hex.EncodeToString(sig),
	})
	if err != nil {
		return fmt.Errorf("audit: encode checkpoint: %w", err)
	}
	if err := w.replaceSidecar(w.segPath(w.segID)+checkpointExt, append(data, '\n')); err != nil {
		w.broken = err
		return err
	}
	w.covered = true
	w.announceLast()
	return nil
}

// maxAgeCheck is the longest time between two checks for an idle segment's age.
const maxAgeCheck = time.Minute

// checkpointLoop writes a checkpoint every interval while records arrive, and rotates a
// segment that holds records and grew older than the maximum age while no append came.
func (w *Writer) checkpointLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.cfg.ckptInterval)
	defer t.Stop()
	age := time.NewTicker(min(w.cfg.maxAge, maxAgeCheck))
	defer age.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.mu.Lock()
			if !w.closed && w.broken == nil && w.sinceCkpt > 0 {
				if err := w.checkpoint(); err != nil {
					w.failures.Add(1)
				}
			}
			w.mu.Unlock()
		case <-age.C:
			w.mu.Lock()
			if !w.closed && w.broken == nil && w.segRecords > 0 && time.Since(w.segStart) >= w.cfg.maxAge {
				if err := w.rotate(); err != nil {
					w.failures.Add(1)
				}
			}
			w.mu.Unlock()
		}
	}
}
