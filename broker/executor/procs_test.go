// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package executor_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// The helper programs (internal/writer, internal/swapper) are built once per
// test binary by helperproc, which removes them after the tests.
func TestMain(m *testing.M) { os.Exit(helperproc.Run(m, helperRoles)) }

// helperRoles are the roles this test binary plays as a helper process
// (helperproc); platform files add theirs in init.
var helperRoles = helperproc.Roles{}

// writerPath returns the built writer helper.
func writerPath(t *testing.T) string {
	return helperproc.Build(t, "github.com/fsbroker/fsbroker/broker/executor/internal/writer")
}

// The payload format of internal/writer.
const (
	payloadHeader = 32
	payloadMagic  = "FSBWRITE"
)

// payload builds what the writer writes for (seq, value, size).
func payload(seq uint64, value byte, size int) []byte {
	b := make([]byte, payloadHeader+size)
	copy(b, payloadMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(size))
	binary.LittleEndian.PutUint64(b[16:], seq)
	binary.LittleEndian.PutUint64(b[24:], uint64(value))
	for i := payloadHeader; i < len(b); i++ {
		b[i] = value
	}
	return b
}

// checkPayload reports whether b is one complete payload, and its sequence
// number and value.
func checkPayload(b []byte) (seq uint64, value byte, err error) {
	if len(b) < payloadHeader || string(b[:8]) != payloadMagic {
		return 0, 0, fmt.Errorf("%d bytes without a payload header", len(b))
	}
	size := binary.LittleEndian.Uint64(b[8:])
	seq = binary.LittleEndian.Uint64(b[16:])
	v := binary.LittleEndian.Uint64(b[24:])
	if v > 255 || uint64(len(b)-payloadHeader) != size {
		return 0, 0, fmt.Errorf("torn: header says %d bytes of %d, the file has %d", size, v, len(b)-payloadHeader)
	}
	value = byte(v)
	for j, c := range b[payloadHeader:] {
		if c != value {
			return 0, 0, fmt.Errorf("torn: byte %d is %#x in a version of %#x (seq %d)", j, c, value, seq)
		}
	}
	return seq, value, nil
}

// TestPayloadCheck: the checker itself tells complete versions from torn
// ones.
func TestPayloadCheck(t *testing.T) {
	good := payload(7, 0xC3, 1000)
	if seq, v, err := checkPayload(good); err != nil || seq != 7 || v != 0xC3 {
		t.Fatalf("good: %d %#x %v", seq, v, err)
	}
	mixed := append(payload(8, 'A', 1000)[:600], payload(9, 'B', 1000)[600:]...)
	short := payload(1, 'A', 1000)[:900]
	long := append(payload(1, 'A', 1000), 'A')
	for name, b := range map[string][]byte{"mixed": mixed, "short": short, "long": long, "empty": nil, "zeros": make([]byte, 1032)} {
		if _, _, err := checkPayload(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
