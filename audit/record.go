// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"slices"
	"time"

	"github.com/fsbroker/fsbroker/schema"
)

// Version is the record format version written in every record's v member.
const Version = 1

// TimeLayout is the layout of a record's time member: RFC 3339 in UTC with nanoseconds, always
// nine fraction digits so that records sort as text.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// MaxDetail is the longest detail member, in bytes, that Append accepts.
const MaxDetail = 1024

// Kind is the type of a record.
type Kind string

// The kinds of records. Callers append the first ten; the writer itself writes
// KindSegmentStart, KindCheckpoint and KindRetention, and a KindKeyRotation record naming the
// new key ids when [Writer.Reopen] finds a changed key file (a caller's key_rotation record
// names no key: it is an annotation, not a change of key).
const (
	KindSessionStart       Kind = "session_start"
	KindSessionEnd         Kind = "session_end"
	KindDecision           Kind = "decision"
	KindOutcome            Kind = "outcome"
	KindConsent            Kind = "consent"
	KindGrant              Kind = "grant"
	KindPolicyReload       Kind = "policy_reload"
	KindPolicyReloadFailed Kind = "policy_reload_failed"
	KindKeyRotation        Kind = "key_rotation"
	// KindForward is a request the host sent through to the server under fsbroker wrap: its
	// method, the tool's name for tools/call and the [ArgumentsDigest] of its arguments, never
	// their content. Its id is in DecisionID; the outcome record of the reply repeats it.
	KindForward      Kind = "forward"
	KindSegmentStart Kind = "segment_start"
	KindCheckpoint   Kind = "checkpoint"
	KindRetention    Kind = "retention"
)

// callerKinds are the kinds Append accepts.
var callerKinds = []Kind{
	KindSessionStart, KindSessionEnd, KindDecision, KindOutcome, KindConsent, KindGrant,
	KindPolicyReload, KindPolicyReloadFailed, KindKeyRotation, KindForward,
}

// ErrInvalidRecord is returned, wrapped, by Append for a record it will not write: an unknown
// or writer-only kind, an over-long detail, negative bytes, a line over 1 MiB (longer than
// Verify reads), a decision without decisionId or allow, an outcome without outcome, or a
// forward without decisionId or method (the members the schema requires). Such a refusal is not a failure of the trail.
var ErrInvalidRecord = errors.New("audit: invalid record")

// Record is one audit record. Append sets V, Seq, Time, Prev and Mac; the caller sets Kind and
// the members that kind needs. Optional members are omitted from the JSON when empty. A record
// never holds file content.
type Record struct {
	// V is the format version, [Version].
	V int `json:"v"`
	// Seq numbers the records of a segment: 0 for the header, then 1, 2, ...
	Seq uint64 `json:"seq"`
	// Time is when the record was appended, formatted with [TimeLayout].
	Time string `json:"time"`
	// Kind is the record's type.
	Kind Kind `json:"kind"`

	// Segment is the id of the segment (its file name without .jsonl); header only.
	Segment string `json:"segment,omitempty"`
	// PrevSegment is the id of the segment of the same writer this one follows; header only,
	// empty for a writer's first segment.
	PrevSegment string `json:"prevSegment,omitempty"`
	// KeyID identifies the ed25519 checkpoint public key ([KeyID]): in a header and a
	// checkpoint, the key the segment's checkpoints are signed with; in a key_rotation record
	// the writer wrote, the new key the next segment uses.
	KeyID string `json:"keyId,omitempty"`
	// MACKeyID identifies the audit key ([MACKeyID]): in a header, the key the segment is
	// chained under; in a key_rotation record the writer wrote, the new key the next segment is
	// chained under.
	MACKeyID string `json:"macKeyId,omitempty"`

	// Server names the MCP server of the session.
	Server string `json:"server,omitempty"`
	// ProtocolVersion is the MCP protocol version the session negotiated.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Transport is how the session is carried (stdio, child, http, ...).
	Transport string `json:"transport,omitempty"`
	// SessionID identifies the session.
	SessionID string `json:"sessionId,omitempty"`
	// DecisionID identifies a decision, or a forwarded request (a forward record); outcome
	// records repeat it.
	DecisionID string `json:"decisionId,omitempty"`
	// Method is the JSON-RPC method asked for.
	Method string `json:"method,omitempty"`
	// Operation is the policy operation (read, write, list, ...).
	Operation string `json:"operation,omitempty"`
	// Tool is the tool a forwarded tools/call names, or the fsbroker serve tool a
	// decision or outcome record serves.
	Tool string `json:"tool,omitempty"`
	// ArgsDigest is the [ArgumentsDigest] of a forwarded request's arguments (never their
	// content).
	ArgsDigest string `json:"argsDigest,omitempty"`
	// Paths are the canonical paths the request touches (never their content).
	Paths []string `json:"paths,omitempty"`
	// Allow is the decision; set it on every decision record (nil means absent).
	Allow *bool `json:"allow,omitempty"`
	// Code is the decision's or the error's code.
	Code string `json:"code,omitempty"`
	// Reasons are the policy's reasons for the decision.
	Reasons []string `json:"reasons,omitempty"`
	// PolicyRevision identifies the policy that decided.
	PolicyRevision string `json:"policyRevision,omitempty"`
	// LatencyUs is how long the decision took, in microseconds.
	LatencyUs int64 `json:"latencyUs,omitempty"`
	// Outcome is "ok" or the error code of the operation.
	Outcome string `json:"outcome,omitempty"`
	// Bytes counts the bytes the operation read or wrote.
	Bytes int64 `json:"bytes,omitempty"`
	// DurationUs is how long the operation took, in microseconds.
	DurationUs int64 `json:"durationUs,omitempty"`
	// Errno is the system error number of a failed operation.
	Errno int `json:"errno,omitempty"`
	// Detail is a short free-text explanation, at most [MaxDetail] bytes; never file content.
	Detail string `json:"detail,omitempty"`
	// Removed names the segments a retention record announces as deleted; retention only.
	Removed []RemovedSegment `json:"removed,omitempty"`

	// Prev is the hex MAC of the previous record; for a segment header, of the last record of
	// the previous segment, or "" at the start of a writer's chain.
	Prev string `json:"prev"`
	// Mac is the hex HMAC-SHA256 of the record's line without the mac member.
	Mac string `json:"mac,omitempty"`
}

// RemovedSegment is a segment that retention deleted, as a retention record names it: its id
// and its last record when it was deleted, the record its successor's header links to.
type RemovedSegment struct {
	// Segment is the deleted segment's id.
	Segment string `json:"segment"`
	// LastSeq is the seq of its last whole line.
	LastSeq uint64 `json:"lastSeq"`
	// LastMAC is the MAC that line claimed ("" when it held no whole record).
	LastMAC string `json:"lastMac"`
}

// Bool returns a pointer to b, for [Record.Allow].
func Bool(b bool) *bool { return &b }

// check reports whether a caller may append r.
func (r *Record) check() error {
	if !slices.Contains(callerKinds, r.Kind) {
		return fmt.Errorf("%w: kind %.32q", ErrInvalidRecord, r.Kind)
	}
	switch {
	case len(r.Detail) > MaxDetail:
		return fmt.Errorf("%w: detail of %d bytes (at most %d)", ErrInvalidRecord, len(r.Detail), MaxDetail)
	case r.Bytes < 0:
		return fmt.Errorf("%w: negative bytes", ErrInvalidRecord)
	case r.Kind == KindDecision && (r.DecisionID == "" || r.Allow == nil):
		return fmt.Errorf("%w: a decision needs decisionId and allow", ErrInvalidRecord)
	case r.Kind == KindOutcome && r.Outcome == "":
		return fmt.Errorf("%w: an outcome needs outcome", ErrInvalidRecord)
	case r.Kind == KindForward && (r.DecisionID == "" || r.Method == ""):
		return fmt.Errorf("%w: a forward needs decisionId and method", ErrInvalidRecord)
	}
	return nil
}

// formatTime formats t for a record: t.UTC().Format(TimeLayout), written digit by digit for
// the years 0 to 9999 (every record's time is formatted, twice per request; the general
// formatter parses the layout each time). Other years take the general formatter.
func formatTime(t time.Time) string {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Format(TimeLayout)
	}
	hour, minute, sec := t.Clock()
	var b [len(TimeLayout)]byte
	put := func(at, width, v int) {
		for i := at + width - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, 4, year)
	b[4] = '-'
	put(5, 2, int(month))
	b[7] = '-'
	put(8, 2, day)
	b[10] = 'T'
	put(11, 2, hour)
	b[13] = ':'
	put(14, 2, minute)
	b[16] = ':'
	put(17, 2, sec)
	b[19] = '.'
	put(20, 9, t.Nanosecond())
	b[29] = 'Z'
	return string(b[:])
}

// macSuffixLen is the length of the closing `,"mac":"<64 hex>"}` of every line.
const macSuffixLen = len(`,"mac":"`) + sha256.Size*2 + len(`"}`)

// encodeLine encodes r (whose Mac must be empty) as one line ending in '\n', with its MAC under
// h (reset here) as the last member, and returns the line and the hex MAC.
func encodeLine(r *Record, h hash.Hash) ([]byte, string) {
	return appendLine(make([]byte, 0, 512+macSuffixLen), r, h)
}

// appendLine is encodeLine appending to dst: the record's JSON is written once, its MAC taken
// over it in place, and the closing brace replaced by the mac member.
func appendLine(dst []byte, r *Record, h hash.Hash) ([]byte, string) {
	start := len(dst)
	dst = r.appendJSON(dst)
	h.Reset()
	h.Write(dst[start:])
	var sum [sha256.Size]byte
	var mac [2 * sha256.Size]byte
	hex.Encode(mac[:], h.Sum(sum[:0]))
	dst = append(dst[:len(dst)-1], `,"mac":"`...)
	dst = append(dst, mac[:]...)
	dst = append(dst, "\"}\n"...)
	return dst, string(mac[:])
}

// splitLine splits a line (without its '\n') into the bytes its MAC covers and the hex MAC it
// claims; ok is false when the line does not end in a well-formed mac member.
func splitLine(line []byte) (body []byte, mac string, ok bool) {
	n := len(line)
	if n < macSuffixLen+2 {
		return nil, "", false
	}
	suffix := line[n-macSuffixLen:]
	if !bytes.HasPrefix(suffix, []byte(`,"mac":"`)) || !bytes.HasSuffix(suffix, []byte(`"}`)) {
		return nil, "", false
	}
	mac = string(suffix[len(`,"mac":"`) : len(suffix)-2])
	if _, err := hex.DecodeString(mac); err != nil {
		return nil, "", false
	}
	body = make([]byte, 0, n-macSuffixLen+1)
	body = append(body, line[:n-macSuffixLen]...)
	body = append(body, '}')
	return body, mac, true
}

// newMAC returns the HMAC-SHA256 of key.
func newMAC(key []byte) hash.Hash { return hmac.New(sha256.New, key) }

// macEqual compares a computed hex MAC with a claimed one in constant time.
func macEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// RecordSchema returns the JSON Schema (Draft 2020-12) of a record line, published as
// schema/audit-record.json. The caller owns the returned slice.
func RecordSchema() []byte {
	b, err := fs.ReadFile(schema.Files(), schema.AuditRecordFile)
	if err != nil {
		panic("audit: the embedded record schema is missing: " + err.Error()) // a build without it is broken
	}
	return b
}
