// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A witness keeps, outside the state directory, what a trail cannot prove about itself: how far
// each segment reached. The writer sends every witness a signed statement when a segment starts,
// at every checkpoint (so also when a session ends and when a segment is closed), and for every
// segment retention deletes; [Verify] with [AgainstWitness] then checks that the trail still holds
// everything the witness saw. See docs/audit.md for the line format.

// WitnessPrefix starts every witness statement, followed by a space and the format version
// ("fsbroker-witness v1 "): what to grep for in syslog, the journal or a witness file.
const WitnessPrefix = "fsbroker-witness"

// witnessVersion is the version of the witness line format.
const witnessVersion = "v1"

// DefaultWitnessTimeout is how long one delivery to a witness may take before it counts as
// failed ([WithWitnessTimeout]).
const DefaultWitnessTimeout = 2 * time.Second

// WitnessKind is what a witness statement says.
type WitnessKind string

const (
	// WitnessCheckpoint says that the segment holds the record Seq with the MAC (chain hash)
	// MAC, written at Time: its header when Seq is 0, else a checkpoint record.
	WitnessCheckpoint WitnessKind = "checkpoint"
	// WitnessRetention says that retention, in the writer of segment By, deleted the segment,
	// whose last record was Seq with MAC ("" when it held no readable record).
	WitnessRetention WitnessKind = "retention"
)

// WitnessEvent is one signed statement for a witness. Its text form, [WitnessEvent.Line], is
// what witnesses store and what [WitnessLog] reads back.
type WitnessEvent struct {
	// Kind is what the statement says.
	Kind WitnessKind
	// Segment is the segment's id: <start time>-<pid>-<random>, naming the broker process.
	Segment string
	// Seq and MAC are the record the statement is about (see Kind).
	Seq uint64
	MAC string
	// Time is the record's time (checkpoint), or when retention deleted the segment, in
	// [TimeLayout].
	Time string
	// By is, for a retention statement, the segment of the writer that deleted Segment.
	By string
	// AuditKeyID names the trail: the [MACKeyID] of its audit key.
	AuditKeyID string
	// KeyID names the checkpoint key that signed the statement ([KeyID]).
	KeyID string
	// Signature is the hex ed25519 signature, under the checkpoint key, of the line's text
	// before " sig=".
	Signature string
}

// Witness receives the writer's witness statements and keeps them outside the state directory
// (syslog, an append-only file, a log service). The writer calls Send from one goroutine per
// witness, never while a request waits: a Send that takes longer than the writer's witness
// timeout counts as a failure, and the writer goes on. Send should return when ctx ends. Close
// is called once, when the writer closes; it may be called while a Send is still running.
type Witness interface {
	// Send delivers one statement; an error counts as a failed delivery.
	Send(ctx context.Context, ev WitnessEvent) error
	// String names the witness in logs, as the configuration does (syslog, file:PATH).
	String() string
	// Close releases the witness.
	Close() error
}

// signedText returns the text the signature covers: the line up to " sig=".
func (e *WitnessEvent) signedText() string {
	var b strings.Builder
	b.WriteString(WitnessPrefix + " " + witnessVersion + " ")
	b.WriteString(string(e.Kind))
	b.WriteString(" segment=" + e.Segment)
	b.WriteString(" seq=" + strconv.FormatUint(e.Seq, 10))
	b.WriteString(" mac=" + orDash(e.MAC))
	b.WriteString(" time=" + e.Time)
	if e.Kind == WitnessRetention {
		b.WriteString(" by=" + e.By)
	}
	b.WriteString(" auditKey=" + e.AuditKeyID)
	b.WriteString(" key=" + e.KeyID)
	return b.String()
}

// Line returns the statement as one line of text, without a newline:
//
//	fsbroker-witness v1 checkpoint segment=ID seq=N mac=HEX time=T auditKey=ID key=ID sig=HEX
//	fsbroker-witness v1 retention segment=ID seq=N mac=HEX time=T by=ID auditKey=ID key=ID sig=HEX
func (e *WitnessEvent) Line() string { return e.signedText() + " sig=" + e.Signature }

// sign sets KeyID and Signature with priv.
func (e *WitnessEvent) sign(priv ed25519.PrivateKey) {
	e.KeyID = KeyID(priv.Public().(ed25519.PublicKey))
	e.Signature = hex.EncodeToString(ed25519.Sign(priv, []byte(e.signedText())))
}

// orDash returns s, or "-" for "".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errNoWitnessLine is returned by parseWitnessLine for a line without [WitnessPrefix].
var errNoWitnessLine = errors.New("not a witness line")

// parseWitnessLine finds a witness statement in line (after a syslog header, say, or inside a
// JSON string: the statement holds no character JSON escapes) and parses it strictly. It
// returns the statement and the exact text its signature covers; errNoWitnessLine when the
// line holds none, another error for a line that names the prefix but is not a statement.
func parseWitnessLine(line []byte) (WitnessEvent, []byte, error) {
	i := bytes.Index(line, []byte(WitnessPrefix+" "))
	if i < 0 {
		return WitnessEvent{}, nil, errNoWitnessLine
	}
	rest := line[i:]
	sigAt := bytes.Index(rest, []byte(" sig="))
	if sigAt < 0 {
		return WitnessEvent{}, nil, errors.New("no signature (sig=)")
	}
	signed := rest[:sigAt]
	sig := rest[sigAt+len(" sig="):]
	if len(sig) < 2*ed25519.SignatureSize || !isLowerHex(string(sig[:2*ed25519.SignatureSize])) {
		return WitnessEvent{}, nil, errors.New("the signature is not 128 hex digits")
	}
	if len(sig) > 2*ed25519.SignatureSize && isHexDigit(sig[2*ed25519.SignatureSize]) {
		return WitnessEvent{}, nil, errors.New("the signature is longer than 128 hex digits")
	}
	ev := WitnessEvent{Signature: string(sig[:2*ed25519.SignatureSize])}
	fields := strings.Split(string(signed), " ")
	if len(fields) < 3 || fields[1] != witnessVersion {
		return WitnessEvent{}, nil, fmt.Errorf("unsupported version %.16q (this fsbroker reads %s)", field(fields, 1), witnessVersion)
	}
	ev.Kind = WitnessKind(fields[2])
	names := []string{"segment", "seq", "mac", "time", "auditKey", "key"}
	switch ev.Kind {
	case WitnessCheckpoint:
	case WitnessRetention:
		names = []string{"segment", "seq", "mac", "time", "by", "auditKey", "key"}
	default:
		return WitnessEvent{}, nil, fmt.Errorf("unknown statement %.32q", fields[2])
	}
	if len(fields) != 3+len(names) {
		return WitnessEvent{}, nil, fmt.Errorf("a %s statement has %d fields, want %d", ev.Kind, len(fields)-3, len(names))
	}
	for j, name := range names {
		v, ok := strings.CutPrefix(fields[3+j], name+"=")
		if !ok {
			return WitnessEvent{}, nil, fmt.Errorf("field %d is %.40q, want %s=", j+1, fields[3+j], name)
		}
		if err := ev.setField(name, v); err != nil {
			return WitnessEvent{}, nil, err
		}
	}
	if ev.Kind == WitnessCheckpoint && ev.MAC == "" {
		return WitnessEvent{}, nil, errors.New("a checkpoint statement without mac")
	}
	return ev, signed, nil
}

// setField sets the member name of a statement being parsed from its text v, checking its form.
func (e *WitnessEvent) setField(name, v string) error {
	bad := func(want string) error { return fmt.Errorf("%s=%.80q: want %s", name, v, want) }
	switch name {
	case "segment", "by":
		if !segmentIDPattern.MatchString(v) {
			return bad("a segment id")
		}
		if name == "by" {
			e.By = v
		} else {
			e.Segment = v
		}
	case "seq":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || strconv.FormatUint(n, 10) != v {
			return bad("a decimal number")
		}
		e.Seq = n
	case "mac":
		if v != "-" && (len(v) != 64 || !isLowerHex(v)) {
			return bad("64 hex digits")
		}
		if v != "-" {
			e.MAC = v
		}
	case "time":
		if _, err := time.Parse(TimeLayout, v); err != nil || len(v) != len(TimeLayout) {
			return bad("a time like " + TimeLayout)
		}
		e.Time = v
	case "auditKey", "key":
		if !isKeyID(v) {
			return bad("16 hex digits")
		}
		if name == "key" {
			e.KeyID = v
		} else {
			e.AuditKeyID = v
		}
	}
	return nil
}

// field returns fields[i], "" past the end.
func field(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

// isLowerHex reports whether s is non-empty and all lower-case hex digits.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// isHexDigit reports whether c is a lower-case hex digit.
func isHexDigit(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
