// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWitnessSeesAnAuditKeyReplaced: the whole trail is deleted and the audit key replaced (the
// broker creates a fresh audit.key when it finds none), the checkpoint key kept; a new broker
// writes a new trail. The witness saw the old trail's segments, signed with the checkpoint key
// the verifier trusts: verify against it must not say the new trail is whole with nothing
// missing. It reports the lines under the audit key not given as unknown_key.
func TestWitnessSeesAnAuditKeyReplaced(t *testing.T) {
	old := newTestKeys(t)
	dir := t.TempDir()
	witness := filepath.Join(t.TempDir(), "witness.log")
	w := old.open(t, dir, WithWitness(openWitness(t, "file:"+witness)), WithCheckpointEvery(4))
	for i := range 10 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The attack: every file of the trail deleted, a new audit key, the checkpoint key kept.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	nu := newTestKeys(t)
	nu.priv = old.priv
	w = nu.open(t, dir, WithWitness(openWitness(t, "file:"+witness)), WithCheckpointEvery(4))
	for i := range 3 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep := verifyWitnessed(t, dir, nu.verifyKeys(), witness)
	if rep.OK {
		t.Fatalf("verify against the witness says the trail is whole, though the witness saw %d line(s) of a trail under the same checkpoint key that is gone: %+v",
			rep.Witness.OtherTrails, rep.Witness)
	}
	if rep.Problem.Kind != ProblemUnknownKey || rep.Problem.MACKeyID != MACKeyID(old.mac) {
		t.Fatalf("problem %+v, want unknown_key naming the old audit key %s", rep.Problem, MACKeyID(old.mac))
	}
	// Given the old key too, the old segment is found missing.
	both := VerifyKeys{MAC: [][]byte{nu.mac, old.mac}, Checkpoint: nu.verifyKeys().Checkpoint}
	if rep := verifyWitnessed(t, dir, both, witness); rep.OK || rep.Problem.Kind != ProblemRemoved {
		t.Fatalf("with the old key: %+v", rep)
	}
}
