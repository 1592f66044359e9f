// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWitnessFileNeverFollowsAReplacement: a witness file replaced by a
// symbolic link, or by a FIFO, after the broker started is refused on the
// next statement (a failure the writer counts), never written through: the
// link's target gets nothing, and the FIFO does not block the statement.
func TestWitnessFileNeverFollowsAReplacement(t *testing.T) {
	dir := t.TempDir()
	path, elsewhere := filepath.Join(dir, "witness.log"), filepath.Join(dir, "elsewhere.txt")
	spec, err := ParseWitnessSpec("file:"+path, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := spec.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ev := WitnessEvent{Kind: WitnessCheckpoint, Segment: "s", Seq: 1, MAC: strings.Repeat("a", 64),
		Time: time.Now().UTC().Format(TimeLayout), AuditKeyID: "k", KeyID: "c", Signature: "00"}
	ctx := context.Background()
	if err := w.Send(ctx, ev); err != nil {
		t.Fatalf("a statement to the witness file: %v", err)
	}
	if err := os.WriteFile(elsewhere, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(ctx, ev); err == nil {
		t.Error("a statement went through a symbolic link put in the witness file's place")
	}
	if b, _ := os.ReadFile(elsewhere); len(b) != 0 {
		t.Errorf("the link's target got %q", b)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Send(ctx, ev) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a statement was written to a FIFO put in the witness file's place")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO in the witness file's place blocked the statement")
	}
}
