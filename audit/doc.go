// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package audit keeps fsbroker's tamper-evident audit trail: the record of every session,
// decision and outcome, written as JSON lines, chained with keyed MACs and checkpointed with
// ed25519 signatures, and the verifier that proves a trail intact or names its first bad record.
//
// # Records
//
// A [Record] is one JSON object on one line. Every record carries the format version (v, 1), a
// sequence number (seq), the time (RFC 3339, UTC, nanoseconds), its kind, the MAC of the
// previous record (prev) and its own MAC (mac): the hex HMAC-SHA256, under the audit key, of
// the record's bytes without the mac member. The writer always puts mac last, so the MAC covers
// exactly the line's bytes up to the `,"mac":` member, closed with `}`; a verifier needs no
// JSON canonicalization of its own, and any change of any byte is detected. Kind-specific
// fields are a flat set of optional members; the schema is [RecordSchema]. A record never holds
// file content: callers put paths, codes and counts in it, never data.
//
// # Segments
//
// Each [Writer] (one per broker process) writes its own segment files in the log directory,
// named <startTime>-<pid>-<random>.jsonl, so no two processes ever append to one file. The
// first line of a segment is a header (kind segment_start, seq 0) naming the segment, the
// segment of the same writer it follows (after a rotation) and the key ids; its prev is the MAC
// of the last record of that previous segment, so the chain continues across a writer's
// segments. The records that follow are numbered from 1; record 1's prev is the header's MAC.
//
// A writer rotates to a new segment when the current one is full ([WithMaxSegmentBytes]) or
// older than [WithMaxSegmentAge] (24 hours by default), and when [Writer.Reopen] asks, on
// SIGHUP, after a log shipper moved the segment away. While a segment is open its writer holds
// an flock on <segment>.lock, created before the segment and removed when it is closed. Reopen
// also reads the key files again: a changed key is announced by a key_rotation record, under
// the old key, naming the new key's id, at the end of the old segment, and the chain goes on in
// the new segment under the new key. [Verify] accepts a change of keys between a writer's
// segments there and nowhere else.
//
// Retention ([WithRetention]) deletes the oldest closed segments of the directory, of every
// writer, never one whose lock a live writer holds. Before deleting, the writer appends (and
// fsyncs) a retention record naming each segment with its last seq and MAC, and leaves a note,
// <segment>.prev, MACed under the audit key, beside each successor that stays, so that the
// account outlives the segment holding the record. Verify accepts a missing predecessor that
// one of them accounts for, and reports any other as removed. What was deleted is gone:
// retention keeps the rest of the chain verifiable, not the records it cut.
//
// # Checkpoints
//
// Every N records or T time, right after a session_end record, and when a segment is rotated or
// closed, the writer appends a checkpoint record and replaces <segment>.ckpt, beside the segment, with the checkpoint's seq,
// MAC and time signed by the ed25519 checkpoint key (temp file and rename, so it is either old
// or new). A segment that ends before its checkpointed record has been truncated; without the
// checkpoint a cut at a line boundary would be indistinguishable from a quiet writer. The
// public key is published beside the log as checkpoint.pub; when [Writer.Reopen] rotates the
// checkpoint key, the old public key is kept as checkpoint.pub.<keyid>, so that the checkpoints
// signed before still verify ([LoadPublishedKeys]).
//
// # Witnesses
//
// A trail cannot prove its own end: a writer's newest segment deleted with its checkpoint file
// looks like a quiet writer. With [WithWitness], the writer sends a signed statement
// ([WitnessEvent], one line of text) to witnesses outside the state directory (syslog, an
// append-only file: [WitnessSpec]) when a segment starts, at every checkpoint, and for every
// segment retention deletes. Delivery never holds up an append: each witness has a goroutine, a
// timeout ([WithWitnessTimeout]) and counts ([Writer.WitnessStats]); failures are logged
// ([WithLogger]) and retried. [Verify] with [AgainstWitness] and a [WitnessLog] of the lines
// read back checks that every segment the witness saw still holds the furthest record it saw,
// with the same MAC, or was deleted by retention after it, and names what is missing.
//
// # Durability
//
// [Writer.Append] returns once the record is written to the kernel (a crash of the broker
// loses nothing). The sync mode decides what a power failure can lose: [SyncBatch] fsyncs in
// the background within about 10 ms (up to the last 10 ms of records), [SyncAlways] makes
// Append wait for the fsync of the group commit that holds its record (nothing acknowledged is
// lost; concurrent appends share one fsync), and [SyncNone] never fsyncs (anything the kernel
// had not yet written back).
//
// # Failing closed
//
// If a record cannot be written, a segment cannot be rotated or a checkpoint cannot be stored,
// Append returns an error wrapping [ErrUnavailable] and counts the failure ([Writer.Failures]);
// the broker then refuses the request. The writer keeps refusing until an append succeeds
// again, which it does, after a write failure, in a fresh segment whose header continues the
// chain.
//
// The broker writes to a [Sink] (a Writer is one) through [Guarded], which gives every append
// its own deadline ([DefaultAppendTimeout]): an append the sink does not finish in time fails
// with [ErrTimeout], an [ErrUnavailable], and the appends after it fail at once until it
// returns. Guarded counts the failures ([Guarded.Stats]) and logs a run of them once, when it
// starts and when it ends.
//
// # Verifying
//
// [Verify] checks a segment file or a directory of segments: every MAC, every prev link, the
// continuity of seq, the links between a writer's segments and every checkpoint's signature
// and record. Its [Report] names the first bad record by file, line and seq, and the kind of
// problem: edited, removed, reordered, inserted, truncated, or torn (the last line of a
// segment is an unfinished write, as a killed broker leaves it: not tampering, and the intact
// prefix verifies).
//
// What it does not cover: without a witness, records after a segment's last checkpoint can be
// cut away at a line boundary unnoticed, and so can the newest segment of a writer as a whole,
// along with its checkpoint file; with one, the records after the last statement it received.
// Anyone holding the audit key and the checkpoint private key can rewrite the trail, and either
// key's holder can dress a deletion up as retention.
package audit
