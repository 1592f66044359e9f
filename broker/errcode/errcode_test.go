// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package errcode

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// TestRPCNumbers holds the table of docs/protocol.md section 4.
func TestRPCNumbers(t *testing.T) {
	want := map[Code]int{
		FileNotFound:        -32001,
		PermissionDenied:    -32002,
		InvalidPath:         -32003,
		IOError:             -32004,
		Timeout:             -32005,
		ConcurrencyConflict: -32006,
		QuotaExceeded:       -32007,
		InvalidParams:       -32602,
		NotInitialized:      -32600,
	}
	if len(Codes()) != len(want) {
		t.Fatalf("Codes() has %d codes, want %d", len(Codes()), len(want))
	}
	for _, c := range Codes() {
		if c.RPC() != want[c] {
			t.Errorf("%s.RPC() = %d, want %d", c, c.RPC(), want[c])
		}
	}
	if Code("SOMETHING_ELSE").RPC() != -32603 {
		t.Error("an unknown code must map to the internal error")
	}
}

func TestErrorWrapsAndCarriesDetails(t *testing.T) {
	cause := fs.ErrExist
	err := fmt.Errorf("create: %w", Wrap(IOError, "the file exists", cause).With("errno", "EEXIST"))
	if Of(err) != IOError {
		t.Errorf("Of = %q, want IO_ERROR", Of(err))
	}
	if !errors.Is(err, fs.ErrExist) {
		t.Error("the cause is not reachable with errors.Is")
	}
	var e *Error
	if !errors.As(err, &e) || e.Details["errno"] != "EEXIST" || e.Reason != "the file exists" {
		t.Errorf("details lost: %+v", e)
	}
	if Of(errors.New("plain")) != "" {
		t.Error("a plain error has no code")
	}
	if got := New(PermissionDenied, "outside the roots").Error(); got != "PERMISSION_DENIED: outside the roots" {
		t.Errorf("Error() = %q", got)
	}
}
