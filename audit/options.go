// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SyncMode says when the writer fsyncs a segment; see the package documentation for what each
// mode can lose on a power failure.
type SyncMode int

const (
	// SyncBatch, the default, fsyncs in the background within about 10 ms of a write.
	SyncBatch SyncMode = iota
	// SyncAlways makes Append wait for the fsync of the group commit that holds its record.
	SyncAlways
	// SyncNone never fsyncs.
	SyncNone
)

// syncModeNames are the configuration names of the sync modes, by value.
var syncModeNames = []string{"batch", "always", "none"}

// String returns the mode's configuration name: batch, always or none.
func (m SyncMode) String() string {
	if m < 0 || int(m) >= len(syncModeNames) {
		return fmt.Sprintf("SyncMode(%d)", int(m))
	}
	return syncModeNames[m]
}

// ParseSyncMode parses a configuration name (batch, always, none; "" is batch).
func ParseSyncMode(s string) (SyncMode, error) {
	if s == "" {
		return SyncBatch, nil
	}
	i := slices.Index(syncModeNames, s)
	if i < 0 {
		return 0, fmt.Errorf("audit: unknown sync mode %.32q (want batch, always or none)", s)
	}
	return SyncMode(i), nil
}

// Defaults of the writer's options.
const (
	DefaultMaxSegmentBytes    = 64 << 20
	DefaultMaxSegmentAge      = 24 * time.Hour
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = 5 * time.Second
	// batchSyncInterval is the shortest time between two background fsyncs in SyncBatch mode;
	// a write is fsynced within this plus one fsync's duration.
	batchSyncInterval = 5 * time.Millisecond
)

// Option configures a [Writer].
type Option func(*config)

// config is what the options set.
type config struct {
	sync         SyncMode
	maxBytes     int64
	key          []byte
	keyFile      string
	ckptKey      ed25519.PrivateKey
	ckptKeyFile  string
	stateDir     string
	ckptEvery    int
	ckptInterval time.Duration
	maxAge       time.Duration
	keepAge      time.Duration // retention: 0 for no age limit
	keepBytes    int64         // retention: 0 for no size limit
	witnesses    []Witness
	witnessWait  time.Duration // each delivery to a witness
	log          hclog.Logger
}

// WithSync sets the sync mode (default [SyncBatch]).
func WithSync(m SyncMode) Option { return func(c *config) { c.sync = m } }

// WithMaxSegmentBytes rotates to a new segment once the current one holds at least n bytes
// (default [DefaultMaxSegmentBytes]).
func WithMaxSegmentBytes(n int64) Option { return func(c *config) { c.maxBytes = n } }

// WithMaxSegmentAge rotates to a new segment once the current one is older than d (default
// [DefaultMaxSegmentAge], 24 hours): on the next append, or in the background when the segment
// holds records and no append comes. A segment holding only its header is not rotated while
// idle, so an idle broker does not leave a file a day.
func WithMaxSegmentAge(d time.Duration) Option { return func(c *config) { c.maxAge = d } }

// WithRetention deletes the oldest closed segments of the log directory, of any writer, until
// none is older than maxAge (by its last write) and all of them together hold at most maxBytes
// (checkpoint files included). Zero means no limit; the default is no retention. It is applied
// when the writer opens and after every rotation, in the background; a segment that a live
// writer is appending to is never deleted. Before deleting, the writer appends a retention
// record naming what it deletes, so that [Verify] does not take the cut for tampering; see the
// package documentation.
func WithRetention(maxAge time.Duration, maxBytes int64) Option {
	return func(c *config) { c.keepAge, c.keepBytes = maxAge, maxBytes }
}

// WithKey gives the audit (HMAC) key directly, for example from configuration or the
// environment; it must be [KeySize] bytes. It takes precedence over a key file, and
// [Writer.Reopen] does not change it.
func WithKey(key []byte) Option { return func(c *config) { c.key = slices.Clone(key) } }

// WithKeyFile names the audit key file, loaded or created by [LoadOrCreateKey] (default
// <stateDir>/audit.key). [Writer.Reopen] reads it again: a new key there is a key rotation.
func WithKeyFile(path string) Option { return func(c *config) { c.keyFile = path } }

// WithCheckpointKey gives the ed25519 checkpoint key directly. It takes precedence over a key
// file, and [Writer.Reopen] does not change it.
func WithCheckpointKey(priv ed25519.PrivateKey) Option {
	return func(c *config) { c.ckptKey = slices.Clone(priv) }
}

// WithCheckpointKeyFile names the checkpoint key file, loaded or created by
// [LoadOrCreateCheckpointKey] (default <stateDir>/audit-checkpoint.key). [Writer.Reopen] reads
// it again: a new key there is a key rotation.
func WithCheckpointKeyFile(path string) Option { return func(c *config) { c.ckptKeyFile = path } }

// WithStateDir sets the directory where the key files are kept unless named otherwise.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// WithCheckpointEvery writes a checkpoint after every n records (default
// [DefaultCheckpointEvery]).
func WithCheckpointEvery(n int) Option { return func(c *config) { c.ckptEvery = n } }

// WithCheckpointInterval writes a checkpoint every d while records are being appended (default
// [DefaultCheckpointInterval]).
func WithCheckpointInterval(d time.Duration) Option {
	return func(c *config) { c.ckptInterval = d }
}

// WithWitness sends the witness statements of the trail to wit (repeatable: every witness gets
// every statement): when a segment starts, at every checkpoint and for every segment retention
// deletes. Delivery is asynchronous, one goroutine per witness: an append never waits for a
// witness, and a witness that fails or does not answer within the witness timeout is logged
// and counted ([Writer.WitnessStats]), never an error of the trail. The writer closes wit when
// it closes (or when Open fails).
func WithWitness(wit Witness) Option {
	return func(c *config) { c.witnesses = append(c.witnesses, wit) }
}

// WithWitnessTimeout bounds each delivery to a witness (default [DefaultWitnessTimeout]), and
// how long Close waits for the last statements to be delivered.
func WithWitnessTimeout(d time.Duration) Option { return func(c *config) { c.witnessWait = d } }

// WithLogger sets the logger of what the writer does in the background: witness failures and
// recoveries. Default: no logging.
func WithLogger(log hclog.Logger) Option { return func(c *config) { c.log = log } }

// keyPath returns the audit key file, "" when the key is given directly or no file is named.
func (c *config) keyPath() string {
	switch {
	case c.key != nil:
		return ""
	case c.keyFile != "":
		return c.keyFile
	case c.stateDir != "":
		return filepath.Join(c.stateDir, DefaultKeyFile)
	}
	return ""
}

// checkpointKeyPath returns the checkpoint key file, "" when the key is given directly or no
// file is named.
func (c *config) checkpointKeyPath() string {
	switch {
	case c.ckptKey != nil:
		return ""
	case c.ckptKeyFile != "":
		return c.ckptKeyFile
	case c.stateDir != "":
		return filepath.Join(c.stateDir, DefaultCheckpointKeyFile)
	}
	return ""
}
